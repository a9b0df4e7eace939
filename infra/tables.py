"""The Orders table and the Outbox table (with its stream and the sparse `pending` index)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra import constants as c


@dataclass(frozen=True)
class TablesProps:
    """Data tables. The defaults keep data: retained on stack deletion, deletion-protected."""

    # False (dev/test stacks only): `cdk destroy` deletes the tables and their data.
    retain_data: bool = True
    # None: the AWS-managed key (aws/dynamodb). Pass a key to use your own customer-managed key.
    encryption_key: kms.IKey | None = None


class OutboxTables(Construct):
    """Orders (the business state) and Outbox (the events to announce), both on-demand.

    Outbox rows are keyed by aggregate so all events of one aggregate share a partition, and the
    stream (NEW_IMAGE, all the publisher needs) keeps their order.
    """

    def __init__(self, scope: Construct, construct_id: str, props: TablesProps | None = None) -> None:
        super().__init__(scope, construct_id)
        props = props or TablesProps()
        self.orders_table = _table(
            self,
            "OrdersTable",
            props,
            partition_key=dynamodb.Attribute(name=c.ORDERS_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
        )
        self.outbox_table = _table(
            self,
            "OutboxTable",
            props,
            partition_key=dynamodb.Attribute(name=c.OUTBOX_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=c.OUTBOX_SORT_KEY, type=dynamodb.AttributeType.NUMBER),
            stream=dynamodb.StreamViewType.NEW_IMAGE,
        )
        # KEYS_ONLY: a sweeper needs the row's key (to claim it) and occurred_at (to measure age);
        # it reads the full row through the claim anyway, so projecting more only costs writes.
        self.outbox_table.add_global_secondary_index(
            index_name=c.PENDING_INDEX_NAME,
            partition_key=dynamodb.Attribute(
                name=c.PENDING_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.NUMBER
            ),
            sort_key=dynamodb.Attribute(name=c.PENDING_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )


def _table(
    scope: Construct,
    construct_id: str,
    props: TablesProps,
    *,
    partition_key: dynamodb.Attribute,
    sort_key: dynamodb.Attribute | None = None,
    stream: dynamodb.StreamViewType | None = None,
) -> dynamodb.Table:
    encryption = (
        dynamodb.TableEncryption.CUSTOMER_MANAGED
        if props.encryption_key is not None
        else dynamodb.TableEncryption.AWS_MANAGED
    )
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=partition_key,
        sort_key=sort_key,
        stream=stream,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        # Idempotency records (Orders) and finished outbox rows expire; pending rows never carry it.
        time_to_live_attribute=c.TTL_ATTRIBUTE,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        encryption=encryption,
        encryption_key=props.encryption_key,
        deletion_protection=props.retain_data,
        removal_policy=RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY,
    )

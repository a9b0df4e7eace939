"""The outbox table: where rows wait to be announced, with the stream and the index the outbox needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from outbox.model import (
    FAILED_INDEX_NAME,
    FAILED_INDEX_PARTITION_KEY,
    FAILED_INDEX_SORT_KEY,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
)
from outbox_cdk.errors import OutboxConstructError

# The publisher reads each row from the record's new image; these are the view types that carry one.
STREAM_VIEW_TYPES_WITH_NEW_IMAGES = frozenset({"NEW_IMAGE", "NEW_AND_OLD_IMAGES"})


@dataclass(frozen=True)
class DataTableProps:
    """What every data table of an outbox app shares. The defaults keep data: retained on stack
    deletion, deletion-protected."""

    # False (dev/test stacks only): `cdk destroy` deletes the table and its data.
    retain_data: bool = True
    # None: the AWS-managed key (aws/dynamodb). Pass a key to use your own customer-managed key.
    encryption_key: kms.IKey | None = None


def data_table_options(props: DataTableProps, *, ttl_attribute: str = TTL_ATTRIBUTE) -> dict[str, Any]:
    """The `dynamodb.Table` options of a data table: on demand, PITR, TTL on `ttl_attribute` (`expires_at` by
    default), encryption and retention as `props` say."""
    return {
        "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
        "time_to_live_attribute": ttl_attribute,
        "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        "encryption": (
            dynamodb.TableEncryption.CUSTOMER_MANAGED
            if props.encryption_key is not None
            else dynamodb.TableEncryption.AWS_MANAGED
        ),
        "encryption_key": props.encryption_key,
        "deletion_protection": props.retain_data,
        "removal_policy": RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY,
    }


class OutboxTable(dynamodb.Table):
    """A DynamoDB table for outbox rows: a `dynamodb.Table`, with the outbox's schema built in.

    - keys `aggregate_key` (partition) and `seq` (sort): all events of one aggregate share a partition;
    - a NEW_AND_OLD_IMAGES stream: the publisher reads each row from the record's new image, and compares
      old and new images to see another writer replace a slot's event (outbox_publisher.writer_contract);
    - the sparse `failed` index (`failed_shard`, `failed_at`, keys only): `failed_shard` exists only while a
      row is FAILED, so operators list failed rows (`outbox failed list`) without a scan;
    - TTL on `expires_at`, which the outbox sets on no row: it lets DynamoDB delete, for free, the PUBLISHED
      rows an earlier release kept (docs/deploy.md, "Upgrading");
    - point-in-time recovery, on-demand billing, encryption at rest, and by default retention and deletion
      protection.

    No index is written per event: the table holds only what is not out yet, and the sweeper reads it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: DataTableProps | None = None,
        *,
        table_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            table_name=table_name,
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.NUMBER),
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            **data_table_options(props or DataTableProps()),
        )
        add_failed_index(self)


class OutboxGlobalTable(dynamodb.TableV2):
    """The outbox table as a global table (`AWS::DynamoDB::GlobalTable`, version 2019.11.21): what
    `OutboxTable` is, in the home region, with a replica in each of `replica_regions`. Every replica has its
    own NEW_AND_OLD_IMAGES stream, carrying every write wherever it was made (the publisher of each region
    filters by `origin`: outbox_cdk.regions), and inherits the home table's PITR and deletion protection.

    Encryption: AWS's managed key in every region. A customer-managed key needs one key per region, which a
    stack in one region cannot create: refused (OutboxConstructError).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: DataTableProps | None = None,
        *,
        replica_regions: Sequence[str],
        table_name: str,
    ) -> None:
        props = props or DataTableProps()
        if props.encryption_key is not None:
            raise OutboxConstructError(
                "a multi-region outbox table cannot take a customer-managed key here: every replica region "
                "needs a key of its own, which this stack cannot create; use AWS's managed keys (the "
                "default) with regions"
            )
        super().__init__(
            scope,
            construct_id,
            table_name=table_name,
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.NUMBER),
            billing=dynamodb.Billing.on_demand(),
            dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=props.retain_data,
            removal_policy=RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY,
            replicas=[dynamodb.ReplicaTableProps(region=region) for region in replica_regions],
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=FAILED_INDEX_NAME,
                    partition_key=dynamodb.Attribute(
                        name=FAILED_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.NUMBER
                    ),
                    sort_key=dynamodb.Attribute(
                        name=FAILED_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING
                    ),
                    projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                )
            ],
        )


def add_failed_index(table: dynamodb.Table) -> None:
    """Add the sparse `failed` index the operations commands read to a table of yours (`OutboxTable` has
    it).

    Keyed on `failed_shard` (set by the library only while a row is FAILED) and `failed_at`, keys only: the
    commands read the few failed rows themselves, consistently, before acting on them. Without it the
    functions work as before; `outbox failed` says the index is missing.
    """
    table.add_global_secondary_index(
        index_name=FAILED_INDEX_NAME,
        partition_key=dynamodb.Attribute(name=FAILED_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.NUMBER),
        sort_key=dynamodb.Attribute(name=FAILED_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )


def check_outbox_table(table: dynamodb.ITable) -> None:
    """Refuse, at synth, a table the publisher could never work with.

    It must have a stream. For a table defined in this app (`Table` or `TableV2`), its keys must be the row
    contract's, with their types (`aggregate_key` a string, `seq` a number: the publishing paths address
    rows by them), and its stream must carry new images (the publisher reads each row from the record's new
    image). An imported table is taken on trust; the publisher refuses a record without a new image at
    run time.
    """
    if table.table_stream_arn is None:
        raise OutboxConstructError(
            "the outbox table has no stream: enable a NEW_IMAGE (or NEW_AND_OLD_IMAGES) stream, or import "
            "the table with its stream ARN (Table.from_table_attributes(..., table_stream_arn=...))"
        )
    properties = _properties(table)
    if properties is None:
        return  # imported: nothing to inspect
    view_type = _field(properties.get("streamSpecification"), "stream_view_type")
    if view_type not in STREAM_VIEW_TYPES_WITH_NEW_IMAGES:
        raise OutboxConstructError(
            f"the outbox table's stream is {view_type}: the publisher reads each row from the record's new "
            f"image, so the stream must be one of {', '.join(sorted(STREAM_VIEW_TYPES_WITH_NEW_IMAGES))}"
        )
    if view_type != "NEW_AND_OLD_IMAGES":
        Annotations.of(table).add_warning_v2(
            "outbox:stream-without-old-images",
            "the outbox table's stream has no old images: the publisher cannot see another writer replace a "
            "pending row's event (docs/contracts.md, 'Outbox row'); use a NEW_AND_OLD_IMAGES stream",
        )
    keys = {
        _field(key, "key_type"): _field(key, "attribute_name") for key in _listed(properties.get("keySchema"))
    }
    types = {
        _field(definition, "attribute_name"): _field(definition, "attribute_type")
        for definition in _listed(properties.get("attributeDefinitions"))
    }
    found = {role: (name, types.get(name)) for role, name in keys.items()}
    wanted = {"HASH": (PARTITION_KEY, "S"), "RANGE": (SORT_KEY, "N")}
    if found != wanted:
        raise OutboxConstructError(
            f"the outbox table's keys must be {PARTITION_KEY} (partition, string) and {SORT_KEY} (sort, "
            f"number), as the outbox row contract says; this table has {found}"
        )


def check_global_table(table: dynamodb.ITable, regions: Sequence[str]) -> None:
    """Refuse, at synth, a table of this app that an outbox across `regions` cannot span: it must be a global
    table (`TableV2`) with a replica in each region. An imported table (a replica region's) is taken on
    trust."""
    properties = _properties(table)
    if properties is None:
        return
    if isinstance(table.node.default_child, dynamodb.CfnTable):
        raise OutboxConstructError(
            "regions: the outbox table is a single-region table; an outbox across regions needs a global "
            "table (OutboxGlobalTable, or a TableV2 with a replica in each region)"
        )
    replicas = {_field(replica, "region") for replica in _listed(properties.get("replicas"))}
    missing = [region for region in regions if region not in replicas]
    if missing:
        raise OutboxConstructError(
            f"regions: the outbox table has no replica in {', '.join(missing)}; give it one in each region "
            f"({', '.join(regions)})"
        )


def _properties(table: dynamodb.ITable) -> dict[str, Any] | None:
    """The table's CloudFormation properties, or None for an imported table (nothing to inspect)."""
    cfn = table.node.default_child
    if cfn is None:
        return None
    if not isinstance(cfn, dynamodb.CfnTable | dynamodb.CfnGlobalTable):
        raise OutboxConstructError(
            f"cannot check the outbox table {table.node.path}: it is neither a Table nor a TableV2 of the app"
        )
    # The L1's properties as CloudFormation will get them: TableV2 sets some lazily, which its getters
    # cannot show before synth (`cfnProperties` is CfnResource's protected view of them).
    properties: dict[str, Any] = Stack.of(cfn).resolve(cfn._cfn_properties)
    return properties


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _field(value: Any, name: str) -> Any:
    """A field of a CloudFormation property: a jsii struct, or a plain mapping (snake or camel case)."""
    if value is None:
        return None
    if isinstance(value, dict):
        camel = name.split("_", maxsplit=1)[0] + "".join(part.title() for part in name.split("_")[1:])
        return value.get(name, value.get(camel))
    return getattr(value, name, None)

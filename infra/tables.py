"""The sample's own table: Orders (its business state). Its events wait in the `Outbox` construct's table."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from orders.repository import EXPIRES_AT as ORDERS_TTL_ATTRIBUTE
from orders.repository import PARTITION_KEY as ORDERS_PARTITION_KEY
from outbox_cdk.table import DataTableProps, data_table_options


class SampleTables(Construct):
    """Orders (partition key `pk`: orders and idempotency records, single-table)."""

    def __init__(self, scope: Construct, construct_id: str, props: DataTableProps | None = None) -> None:
        super().__init__(scope, construct_id)
        props = props or DataTableProps()
        self.orders_table = dynamodb.Table(
            self,
            "OrdersTable",
            partition_key=dynamodb.Attribute(name=ORDERS_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            **data_table_options(props, ttl_attribute=ORDERS_TTL_ATTRIBUTE),
        )

"""`OutboxReplica`: one replica region's part of a multi-region outbox, in that region's own stack.

The home region's `Outbox` (with `OutboxProps.regions`) creates the global table and its replicas. Each
replica region's stack holds an `OutboxReplica`: the same publisher (on the replica's stream), sweeper,
destinations (topic, bus), failure queues, alarms (the region alarms included), operator policy and stack
outputs as the home `Outbox`, over the replica of the global table. Deploy the home stack first: the replica
must exist before its stream can be read.

A replica's stream ARN is not known outside the home stack's region (`GetAtt StreamArn` there), and CDK's
`table.replica(region).table_stream_arn` is `<table arn>/stream/*`, which an event source mapping does not
take: an `AwsCustomResource` asks DynamoDB for it (`DescribeTable` -> `Table.LatestStreamArn`) at deploy time,
allowed that one call on that one table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from aws_cdk import Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.naming import outbox_name_for
from outbox_cdk.outbox import Outbox, OutboxProps
from outbox_cdk.provider_findings import acknowledge_sdk_call_provider
from outbox_cdk.regions import OutboxRegions

DESCRIBE_TABLE_ACTIONS = ("dynamodb:DescribeTable",)
_STREAM_ARN_PATH = "Table.LatestStreamArn"


@dataclass(frozen=True)
class OutboxReplicaProps:
    """A replica region's outbox: the home's `regions` and global table name (`Outbox.global_table_name`),
    and everything else the home `Outbox` takes for its own region (its destinations, queues, stream mapping,
    routes, sweeper, alarms, name, outputs prefix); `outbox.regions` and `outbox.table` are set here."""

    regions: OutboxRegions
    table_name: str
    outbox: OutboxProps = field(default_factory=OutboxProps)

    def __post_init__(self) -> None:
        if self.outbox.table is not None or self.outbox.table_props is not None:
            raise OutboxConstructError(
                "OutboxReplica reads the replica of the home region's global table (table_name): leave "
                "outbox.table and outbox.table_props unset"
            )
        if self.outbox.regions is not None and self.outbox.regions != self.regions:
            raise OutboxConstructError("OutboxReplica: outbox.regions differs from regions; pass it once")


class OutboxReplica(Construct):
    """A replica region's publisher, sweeper, destinations, failure queues, alarms, operator policy and stack
    outputs, over that region's replica of the outbox's global table (`outbox` holds them: an `Outbox`)."""

    def __init__(self, scope: Construct, construct_id: str, props: OutboxReplicaProps) -> None:
        super().__init__(scope, construct_id)
        regions = props.regions
        self.region = regions.region_of(self)
        if self.region == regions.home:
            raise OutboxConstructError(
                f"OutboxReplica is for a replica region's stack; {self.region} is the home region, whose "
                "stack holds the Outbox (OutboxProps(regions=...)) that creates the global table"
            )
        stack = Stack.of(self)
        table_arn = stack.format_arn(service="dynamodb", resource="table", resource_name=props.table_name)
        self.stream_lookup = cr.AwsCustomResource(
            self,
            "StreamArn",
            on_create=_describe_table(props.table_name),
            on_update=_describe_table(props.table_name),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=list(DESCRIBE_TABLE_ACTIONS), resources=[table_arn])]
            ),
            # The SDK bundled with the provider's runtime has DescribeTable: no download at deploy time.
            install_latest_aws_sdk=False,
        )
        acknowledge_sdk_call_provider(self.stream_lookup)
        self.table: dynamodb.ITable = dynamodb.Table.from_table_attributes(
            self,
            "Table",
            table_name=props.table_name,
            table_stream_arn=self.stream_lookup.get_response_field(_STREAM_ARN_PATH),
        )
        outbox_props = replace(props.outbox, table=self.table, regions=regions)
        if outbox_props.outbox_name is None:
            # Named as an Outbox in this construct's place would be, not after the inner construct's path.
            outbox_props = replace(outbox_props, outbox_name=outbox_name_for(self, None))
        self.outbox = Outbox(self, "Outbox", outbox_props)

    @property
    def writer_environment(self) -> Mapping[str, str]:
        """A writer function's environment in this region (`Outbox.writer_environment`: the table's name and
        ``OUTBOX_ORIGIN``, this region)."""
        return self.outbox.writer_environment


def _describe_table(table_name: str) -> cr.AwsSdkCall:
    return cr.AwsSdkCall(
        service="DynamoDB",
        action="describeTable",
        parameters={"TableName": table_name},
        # A new stream (the table or its replica recreated) is a new resource: the mapping follows it.
        physical_resource_id=cr.PhysicalResourceId.from_response(_STREAM_ARN_PATH),
        output_paths=[_STREAM_ARN_PATH],
    )

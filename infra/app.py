"""Builds the sample CDK app from context values: shared by app.py (cdk synth/deploy) and the tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from aws_cdk import App, Environment

from infra import constants as c
from infra.orders_api import OrdersApiSettings
from infra.replica_stack import OutboxReplicaStack
from infra.stack import OutboxStack, OutboxStackProps
from orders.event_schemas import SCHEMA_DIRECTORY
from outbox_cdk import constants as cdk
from outbox_cdk.destinations import DestinationsProps
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings
from outbox_cdk.nag import add_nag_checks
from outbox_cdk.outbox import OutboxProps
from outbox_cdk.payloads import PayloadStoreProps
from outbox_cdk.queues import FailureQueuesProps
from outbox_cdk.regions import OutboxRegions
from outbox_cdk.schema_registry import SchemaRegistryProps
from outbox_cdk.table import DataTableProps

# Context keys (`cdk deploy -c key=value`), documented in docs/deploy.md.
CTX_FIFO_TOPIC = "fifo_topic"
CTX_SAMPLE_CONSUMERS = "sample_consumers"
CTX_RETAIN_DATA = "retain_data"
CTX_EVENT_SOURCE = "event_source"
CTX_ALARM_TOPIC_ARN = "alarm_topic_arn"
CTX_API_RESERVED_CONCURRENCY = "api_reserved_concurrency"
CTX_KMS_KEY = "kms_key"
# `-c regions=us-east-1,us-west-2`: one outbox across these regions (home first), a stack per region.
CTX_REGIONS = "regions"

# `kms_key` values: AWS's own keys (each resource's default), or one customer-managed key for all of them.
KMS_KEY_AWS_MANAGED = "aws-managed"
KMS_KEY_CUSTOMER = "customer"

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _flag(app: App, key: str, default: bool) -> bool:
    value = app.node.try_get_context(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OutboxConstructError(f"context {key!r} must be true or false, got {value!r}")


def _optional_text(app: App, key: str) -> str | None:
    value = app.node.try_get_context(key)
    return str(value) if value not in (None, "") else None


def _reserved_concurrency(app: App) -> int | None:
    # "none" removes the reservation, for accounts whose concurrency quota is too small for one.
    value = _optional_text(app, CTX_API_RESERVED_CONCURRENCY)
    if value is None:
        return c.ORDERS_API_RESERVED_CONCURRENCY
    if value.lower() == "none":
        return None
    return int(value)


def _customer_managed_key(app: App) -> bool:
    value = _optional_text(app, CTX_KMS_KEY)
    if value is None:
        return False
    choice = value.strip().lower()
    if choice not in (KMS_KEY_AWS_MANAGED, KMS_KEY_CUSTOMER):
        raise OutboxConstructError(
            f"context {CTX_KMS_KEY!r} must be {KMS_KEY_AWS_MANAGED!r} (AWS's own keys, the default) or "
            f"{KMS_KEY_CUSTOMER!r} (one customer-managed key for every resource), got {value!r}"
        )
    return choice == KMS_KEY_CUSTOMER


def regions_from_context(app: App) -> OutboxRegions | None:
    """`-c regions=HOME,REPLICA,...`: the multi-region variant (docs/deploy.md, "Several regions")."""
    value = _optional_text(app, CTX_REGIONS)
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if len(names) < 2:
        raise OutboxConstructError(
            f"context {CTX_REGIONS!r} names the home region then at least one replica region, "
            f"comma-separated (us-east-1,us-west-2), got {value!r}"
        )
    return OutboxRegions(home=names[0], replicas=names[1:])


def props_from_context(app: App) -> OutboxStackProps:
    """Typed stack props from the few knobs the CLI exposes; everything else keeps its default."""
    api_defaults = OrdersApiSettings()
    retain_data = _flag(app, CTX_RETAIN_DATA, default=True)
    return OutboxStackProps(
        outbox=OutboxProps(
            table_props=DataTableProps(retain_data=retain_data),
            queues=FailureQueuesProps(retain_messages=retain_data),
            destinations=DestinationsProps(
                fifo_topic=_flag(app, CTX_FIFO_TOPIC, default=False),
                event_source=_optional_text(app, CTX_EVENT_SOURCE) or cdk.DEFAULT_EVENT_SOURCE,
            ),
            customer_managed_key=_customer_managed_key(app),
            # The Orders events' schemas, the files the Orders API's writer checks, for consumers to find.
            schema_registry=SchemaRegistryProps(directory=SCHEMA_DIRECTORY),
            # Events of any size from other writers of the outbox (the Orders API's bodies, at most 16 KB,
            # stay in their rows): the publisher and the sample consumers read the envelopes stored here.
            payloads=PayloadStoreProps(retain_data=retain_data),
        ),
        tables=DataTableProps(retain_data=retain_data),
        orders_api=OrdersApiSettings(
            function=FunctionSettings(
                memory_mb=api_defaults.function.memory_mb,
                timeout=api_defaults.function.timeout,
                reserved_concurrency=_reserved_concurrency(app),
            )
        ),
        alarm_topic_arn=_optional_text(app, CTX_ALARM_TOPIC_ARN),
        sample_consumers=_flag(app, CTX_SAMPLE_CONSUMERS, default=True),
    )


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> tuple[App, OutboxStack]:
    """The app with cdk-nag attached: ``app.synth()`` fails on any unacknowledged finding."""
    app = App(context=dict(context or {}), outdir=outdir)
    props = props_from_context(app)
    regions = regions_from_context(app)
    if regions is None:
        stack = OutboxStack(
            app,
            c.STACK_ID,
            props=props,
            description="Transactional outbox on DynamoDB Streams: Orders API, publisher, SNS/EventBridge",
        )
    else:
        stack = _multi_region(app, props, regions)
    add_nag_checks(app)
    return app, stack


def _multi_region(app: App, props: OutboxStackProps, regions: OutboxRegions) -> OutboxStack:
    """The home region's stack (the sample, its outbox table global) and one stack per replica region."""
    # A payload store's bucket is one region's (OutboxProps refuses it with regions): every event stays in
    # its row, as the Orders API's do.
    outbox = replace(props.outbox, regions=regions, payloads=None)
    home = OutboxStack(
        app,
        c.STACK_ID,
        props=replace(props, outbox=outbox),
        env=Environment(region=regions.home),
        description=f"Transactional outbox on DynamoDB Streams, home region {regions.home} of "
        f"{', '.join(regions.ring)}: Orders API, publisher, SNS/EventBridge",
    )
    table_name = home.outbox.global_table_name
    assert table_name is not None  # noqa: S101 - the home Outbox with regions names its global table
    # The table is the home stack's (its replicas included), the schema registry the home region's.
    replica_outbox = replace(outbox, table_props=None, schema_registry=None, alarm_topic=None)
    for region in regions.replicas:
        replica = OutboxReplicaStack(
            app,
            replica_stack_id(region),
            regions=regions,
            table_name=table_name,
            outbox=replica_outbox,
            env=Environment(region=region),
            description=f"Transactional outbox on DynamoDB Streams, replica region {region} of "
            f"{', '.join(regions.ring)}: publisher, sweeper, SNS/EventBridge",
        )
        # The replica's stream exists once the home stack has created the global table.
        replica.node.add_dependency(home)
    return home


def replica_stack_id(region: str) -> str:
    """The sample's stack in replica region `region`: `OutboxStack-us-west-2`."""
    return f"{c.STACK_ID}-{region}"

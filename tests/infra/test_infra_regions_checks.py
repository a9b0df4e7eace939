"""What a multi-region outbox refuses at synth, each with a message that says what to change."""

from __future__ import annotations

from typing import Any

import pytest

HOME, REPLICA = "us-east-1", "us-west-2"


def _regions(**overrides: Any) -> Any:
    from outbox_cdk import OutboxRegions

    return OutboxRegions(**{"home": HOME, "replicas": [REPLICA], **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"replicas": []}, "at least one replica region"),
        ({"replicas": [HOME]}, "must be distinct"),
        ({"replicas": [REPLICA, REPLICA]}, "must be distinct"),
        ({"home": "US East"}, "is not a region name"),
        ({"replicas": ["west"]}, "is not a region name"),
    ],
)
def test_regions_refuse_a_ring_that_cannot_be(overrides: dict[str, Any], message: str) -> None:
    from outbox_cdk import OutboxConstructError

    # Given regions with no replica, a repeated region, or a region that is no region's name
    # When they are built
    # Then they are refused, saying why
    with pytest.raises(OutboxConstructError, match=message):
        _regions(**overrides)


def test_the_takeover_time_must_outlast_three_sweeps_and_a_timeout() -> None:
    from aws_cdk import Duration

    from outbox_cdk import OutboxConstructError

    # Given a sweeper every 2 minutes with a 120 s timeout: 3 x 120 + 120 = 480 s
    regions = _regions(takeover_after=Duration.seconds(479))

    # When the takeover time is checked against it
    # Then 479 s is refused with the sum spelled out; 480 s is accepted
    with pytest.raises(OutboxConstructError, match=r"3 x the sweep schedule \(120 s\).*= 480 s"):
        regions.check_sweeper(Duration.minutes(2), Duration.seconds(120))
    _regions(takeover_after=Duration.seconds(480)).check_sweeper(Duration.minutes(2), Duration.seconds(120))


@pytest.mark.parametrize(
    ("stack_region", "props", "message"),
    [
        (None, {}, "has no concrete region"),
        ("eu-west-1", {}, "not one of this outbox's regions"),
        (REPLICA, {}, "use OutboxReplica there"),
        (HOME, {"customer_managed_key": True}, "customer-managed key is not supported with regions"),
        (HOME, {"payloads": "default"}, "payload store is not supported with regions"),
        (HOME, {"short_takeover": True}, "takeover_after is 60 s; it must be at least"),
    ],
)
def test_the_outbox_refuses_what_a_multi_region_outbox_cannot_do(
    stack_region: str | None, props: dict[str, Any], message: str
) -> None:
    from aws_cdk import App, Duration, Environment, Stack

    from outbox_cdk import Outbox, OutboxConstructError, OutboxProps
    from outbox_cdk.payloads import PayloadStoreProps

    # Given a stack in no region, in a region not in the ring, in a replica region (without OutboxReplica),
    # or an outbox with a customer-managed key, a payload store or a too short takeover time
    env = Environment(region=stack_region) if stack_region else None
    stack = Stack(App(), "Stack", env=env)
    short = props.pop("short_takeover", False)
    regions = _regions(takeover_after=Duration.seconds(60)) if short else _regions()
    if props.pop("payloads", None):
        props["payloads"] = PayloadStoreProps()

    # When the outbox is built
    # Then it is refused, saying what to change
    with pytest.raises(OutboxConstructError, match=message):
        Outbox(stack, "Outbox", OutboxProps(regions=regions, **props))


def test_the_home_outbox_creates_the_global_table_itself() -> None:
    from aws_cdk import App, Environment, Stack
    from aws_cdk import aws_dynamodb as dynamodb

    from outbox_cdk import Outbox, OutboxConstructError, OutboxProps, OutboxTable

    # Given a home-region stack with a table of its own
    stack = Stack(App(), "Stack", env=Environment(region=HOME))
    table: dynamodb.ITable = OutboxTable(stack, "Mine")

    # When an outbox with regions is given that table
    # Then it is refused: the global table is the outbox's
    with pytest.raises(OutboxConstructError, match="creates the global table itself"):
        Outbox(stack, "Outbox", OutboxProps(regions=_regions(), table=table))


def test_a_replica_construct_refuses_the_home_region_and_a_table_of_its_own() -> None:
    from aws_cdk import App, Environment, Stack

    from outbox_cdk import (
        DataTableProps,
        OutboxConstructError,
        OutboxProps,
        OutboxReplica,
        OutboxReplicaProps,
    )

    # Given the home region's stack, and replica props with table props
    stack = Stack(App(), "Stack", env=Environment(region=HOME))

    # When an OutboxReplica is built there, or the props are
    # Then each is refused, saying what to do instead
    with pytest.raises(OutboxConstructError, match="is the home region"):
        OutboxReplica(stack, "Outbox", OutboxReplicaProps(regions=_regions(), table_name="t-table"))
    with pytest.raises(OutboxConstructError, match=r"leave outbox\.table and outbox\.table_props unset"):
        OutboxReplicaProps(
            regions=_regions(), table_name="t-table", outbox=OutboxProps(table_props=DataTableProps())
        )


def test_the_sample_refuses_a_regions_context_without_a_replica() -> None:
    from aws_cdk import App

    from infra.app import regions_from_context
    from outbox_cdk import OutboxConstructError

    # Given `-c regions=us-east-1` (one region)
    # When the regions are read from the context
    # Then it is refused, with an example of what it takes
    with pytest.raises(OutboxConstructError, match="at least one replica region"):
        regions_from_context(App(context={"regions": HOME}))
    regions = regions_from_context(App(context={"regions": f" {HOME}, {REPLICA} "}))
    assert regions is not None
    assert regions.ring == (HOME, REPLICA)


def test_the_sample_refuses_regions_with_one_customer_managed_key() -> None:
    from infra.app import build_app
    from outbox_cdk import OutboxConstructError

    # Given `-c regions=... -c kms_key=customer`
    # When the app is built
    # Then it is refused before anything is synthesized: each replica region would need a key of its own
    with pytest.raises(OutboxConstructError, match="customer-managed key is not supported with regions"):
        build_app({"regions": f"{HOME},{REPLICA}", "kms_key": "customer"})


def test_a_sweeper_built_by_hand_must_have_the_timing_its_publisher_was_told() -> None:
    from aws_cdk import App, Duration, Environment, Stack
    from aws_cdk import aws_sns as sns

    from outbox_cdk import (
        OutboxConstructError,
        OutboxGlobalTable,
        OutboxPublisher,
        OutboxSweeper,
        PublisherSettings,
        SweeperSettings,
    )

    # Given a publisher with regions composed by hand, told the default sweeper timing (60 s, 120 s)
    stack = Stack(App(), "Stack", env=Environment(region=HOME))
    publisher = OutboxPublisher(
        stack,
        "Publisher",
        table=OutboxGlobalTable(stack, "Table", replica_regions=[REPLICA], table_name="t-table"),
        topic=sns.Topic(stack, "Topic"),
        settings=PublisherSettings(regions=_regions()),
    )

    # When a sweeper on another schedule is built from it
    # Then it is refused: both functions must count the region decisions in the same figures
    with pytest.raises(OutboxConstructError, match="must be this sweeper's schedule"):
        OutboxSweeper(
            stack, "Sweeper", publisher=publisher, settings=SweeperSettings(schedule=Duration.minutes(2))
        )


def test_a_publisher_with_regions_needs_a_global_table_with_a_replica_in_each_region() -> None:
    from aws_cdk import App, Environment, Stack
    from aws_cdk import aws_sns as sns

    from outbox_cdk import (
        OutboxConstructError,
        OutboxGlobalTable,
        OutboxPublisher,
        OutboxTable,
        PublisherSettings,
    )

    # Given a home-region stack with a single-region table, and one global table missing a region
    stack = Stack(App(), "Stack", env=Environment(region=HOME))
    topic = sns.Topic(stack, "Topic")
    single = OutboxTable(stack, "Single")
    partial = OutboxGlobalTable(stack, "Partial", replica_regions=["eu-west-1"], table_name="partial-table")
    settings = PublisherSettings(regions=_regions())

    # When a publisher with regions is built on either
    # Then each is refused, saying what the table lacks
    with pytest.raises(OutboxConstructError, match="single-region table"):
        OutboxPublisher(stack, "OnSingle", table=single, topic=topic, settings=settings)
    with pytest.raises(OutboxConstructError, match=f"no replica in {REPLICA}"):
        OutboxPublisher(stack, "OnPartial", table=partial, topic=topic, settings=settings)

"""The sweeper in the template: its function, its schedule, and what the construct refuses at synth."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from outbox.errors import ConfigurationError
from outbox_cdk import (
    FunctionSettings,
    OutboxConstructError,
    OutboxPublisher,
    OutboxSweeper,
    SweeperSettings,
    SweepSettings,
)
from tests.infra.template_queries import function_by_handler, only
from tests.infra.user_tables import own_table

SWEEPER_HANDLER = "outbox_sweeper.handler.handler"


def test_the_sweeper_runs_every_minute_without_retries(template: dict[str, Any]) -> None:
    # Given the sweeper function and its schedule
    sweeper_id, function = function_by_handler(template, SWEEPER_HANDLER)
    _, rule = only(template, "AWS::Events::Rule", "Sweeper")
    _, invoke_config = only(template, "AWS::Lambda::EventInvokeConfig")

    # When they are read
    props = function["Properties"]

    # Then the rule invokes it every minute; a failed run is not retried (the next run does it)
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert [target["Arn"] for target in rule["Properties"]["Targets"]] == [
        {"Fn::GetAtt": [sweeper_id, "Arn"]}
    ]
    assert rule["Properties"]["Targets"][0]["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0
    # and it is sized for a run of 500 rows, on the runtime and layer every function uses
    assert (props["MemorySize"], props["Timeout"], props["Runtime"]) == (512, 120, "python3.13")
    assert props["TracingConfig"] == {"Mode": "Active"}
    # and two overlapping runs are safe (each owns its leases), so no concurrency is reserved
    assert "ReservedConcurrentExecutions" not in props


def test_the_sweeper_has_the_publishers_environment_and_its_own_settings(template: dict[str, Any]) -> None:
    # Given the two functions' environments
    sweeper = function_by_handler(template, SWEEPER_HANDLER)[1]["Properties"]["Environment"]["Variables"]
    publisher = function_by_handler(template, "outbox_publisher.handler.handler")[1]["Properties"]
    publishing = publisher["Environment"]["Variables"]

    # Then the sweeper publishes with the publisher's settings, under its own service name, with the
    # documented sweep defaults
    assert {k: v for k, v in sweeper.items() if k in publishing and k != "POWERTOOLS_SERVICE_NAME"} == {
        k: v for k, v in publishing.items() if k != "POWERTOOLS_SERVICE_NAME"
    }
    assert sweeper["POWERTOOLS_SERVICE_NAME"] == "outbox-sweeper"
    assert {k: v for k, v in sweeper.items() if k not in publishing} == {
        "SWEEP_MAX_ROWS": "500",
        "SWEEP_BACKOFF_BASE_SECONDS": "30",
        "SWEEP_BACKOFF_MAX_SECONDS": "900",
        "SWEEP_MAX_ATTEMPTS": "100",
        "SWEEP_FAIL_AFTER_SECONDS": "86400",
    }


def _publisher(stack: Stack, *, with_index: bool = True) -> OutboxPublisher:
    topic = sns.Topic(stack, "Events", enforce_ssl=True)
    if with_index:
        return OutboxPublisher(stack, "Publisher", topic=topic)
    return OutboxPublisher(stack, "Publisher", table=own_table(stack), topic=topic)


def test_a_table_without_the_pending_index_is_refused() -> None:
    # Given a publisher on a table of the app that lacks the pending index
    publisher = _publisher(Stack(App(), "Probe"), with_index=False)

    # When a sweeper is added
    # Then the construct says what to add
    with pytest.raises(OutboxConstructError, match="add_pending_index"):
        OutboxSweeper(Stack.of(publisher), "Sweeper", publisher=publisher)


def test_a_table_whose_pending_index_lacks_an_attribute_the_sweeper_reads_is_refused() -> None:
    # Given a table with a keys-only `pending` index (an older layout)
    stack = Stack(App(), "Probe")
    table = own_table(stack)
    table.add_global_secondary_index(
        index_name="pending",
        partition_key=dynamodb.Attribute(name="pending_shard", type=dynamodb.AttributeType.NUMBER),
        sort_key=dynamodb.Attribute(name="occurred_at", type=dynamodb.AttributeType.STRING),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )
    publisher = OutboxPublisher(stack, "Publisher", table=table, topic=sns.Topic(stack, "Events"))

    # When a sweeper is added
    # Then it is refused, naming what the index must carry
    with pytest.raises(OutboxConstructError, match="next_attempt_at, predecessor_released_at"):
        OutboxSweeper(stack, "Sweeper", publisher=publisher)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (lambda: SweeperSettings(schedule=Duration.seconds(30)), "whole number of minutes"),
        (lambda: SweeperSettings(schedule=Duration.seconds(90)), "whole number of minutes"),
        (
            lambda: SweeperSettings(function=FunctionSettings(timeout=Duration.seconds(30))),
            "at least 60 s",
        ),
        (
            lambda: SweeperSettings(
                sweep=SweepSettings(backoff_base=timedelta(seconds=60), backoff_max=timedelta(seconds=30))
            ),
            "SWEEP_BACKOFF_MAX_SECONDS must be at least",
        ),
        (lambda: SweeperSettings(sweep=SweepSettings(max_rows=0)), "SWEEP_MAX_ROWS must be positive"),
    ],
)
def test_settings_the_sweeper_could_not_run_with_are_refused(settings: Any, message: str) -> None:
    # Given settings with one mistake
    # When they are built
    # Then the construct's or the sweeper's own check names it, before anything is synthesized
    with pytest.raises((OutboxConstructError, ConfigurationError), match=message):
        settings()


def test_the_sweep_settings_reach_the_function() -> None:
    # Given a sweeper every 5 minutes with 50 rows per run
    stack = Stack(App(), "Probe")
    publisher = _publisher(stack)
    settings = SweeperSettings(schedule=Duration.minutes(5), sweep=SweepSettings(max_rows=50))

    # When it is synthesized
    OutboxSweeper(stack, "Sweeper", publisher=publisher, settings=settings)
    template = Template.from_stack(stack).to_json()

    # Then the rule and the environment say so
    _, rule = only(template, "AWS::Events::Rule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    environment = function_by_handler(template, SWEEPER_HANDLER)[1]["Properties"]["Environment"]["Variables"]
    assert environment["SWEEP_MAX_ROWS"] == "50"

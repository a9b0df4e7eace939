"""The sweeper in the template: its function, its schedule, and what the construct refuses at synth."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
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
from outbox_cdk.constants import SCHEDULE_TARGETS_PER_RULE
from outbox_sweeper.config import MAX_SEGMENTS
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    only,
    resources,
    role_of,
    statements_of_role,
)
from tests.infra.user_tables import own_table

SWEEPER_HANDLER = "outbox_sweeper.handler.handler"


def test_the_sweeper_runs_every_minute_without_retries(template: dict[str, Any]) -> None:
    # Given the sweeper function and its schedule
    sweeper_id, function = function_by_handler(template, SWEEPER_HANDLER)
    _, rule = only(template, "AWS::Events::Rule", "OutboxSweeper")
    _, invoke_config = only(template, "AWS::Lambda::EventInvokeConfig")

    # When they are read
    props = function["Properties"]

    # Then the rule invokes it every minute for the table's one segment; a failed run is not retried (the next
    # run does it)
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert [target["Arn"] for target in rule["Properties"]["Targets"]] == [
        {"Fn::GetAtt": [sweeper_id, "Arn"]}
    ]
    assert [json.loads(target["Input"]) for target in rule["Properties"]["Targets"]] == [{"segment": 0}]
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
    assert sweeper["POWERTOOLS_SERVICE_NAME"] == "OutboxStack-Outbox-sweeper"
    assert {k: v for k, v in sweeper.items() if k not in publishing} == {
        "SWEEP_MAX_ROWS": "500",
        "SWEEP_SEGMENTS": "1",
        "SWEEP_BACKOFF_BASE_SECONDS": "30",
        "SWEEP_BACKOFF_MAX_SECONDS": "900",
        "SWEEP_MAX_ATTEMPTS": "100",
        "SWEEP_FAIL_AFTER_SECONDS": "86400",
    }


def _publisher(stack: Stack, *, own: bool = False) -> OutboxPublisher:
    topic = sns.Topic(stack, "Events", enforce_ssl=True)
    if own:
        return OutboxPublisher(stack, "Publisher", table=own_table(stack), topic=topic)
    return OutboxPublisher(stack, "Publisher", topic=topic)


def test_a_sweeper_on_a_users_table_without_any_index_synthesizes_and_scans_the_table() -> None:
    # Given a publisher on a table of the user's with no secondary index at all
    stack = Stack(App(), "Probe")
    publisher = _publisher(stack, own=True)

    # When a sweeper is added and the stack synthesized
    OutboxSweeper(stack, "Sweeper", publisher=publisher)
    template = Template.from_stack(stack).to_json()

    # Then it is accepted (the sweeper finds its work in the table itself) and may scan that table
    table_id, table = only(template, "AWS::DynamoDB::Table")
    assert "GlobalSecondaryIndexes" not in table["Properties"]
    _, function = function_by_handler(template, SWEEPER_HANDLER)
    granted = actions_by_resource(statements_of_role(template, role_of(function)))
    assert "dynamodb:Scan" in granted[f"GetAtt:{table_id}.Arn"]
    # and nothing of DynamoDB on any other resource of the table's than its ARN
    assert [resource for resource in granted if table_id in resource] == [f"GetAtt:{table_id}.Arn"]


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
        (lambda: SweeperSettings(sweep=SweepSettings(segments=0)), "SWEEP_SEGMENTS must be positive"),
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


def _schedules(segments: int) -> tuple[str, list[dict[str, Any]], dict[str, str]]:
    """The sweeper's id, its schedule rules and its environment, synthesized with `segments` segments."""
    stack = Stack(App(), "Probe")
    settings = SweeperSettings(sweep=SweepSettings(segments=segments))
    OutboxSweeper(stack, "Sweeper", publisher=_publisher(stack), settings=settings)
    template = Template.from_stack(stack).to_json()
    sweeper_id, function = function_by_handler(template, SWEEPER_HANDLER)
    rules = [rule["Properties"] for rule in resources(template, "AWS::Events::Rule").values()]
    return sweeper_id, rules, function["Properties"]["Environment"]["Variables"]


@pytest.mark.parametrize(
    "segments", [1, SCHEDULE_TARGETS_PER_RULE, SCHEDULE_TARGETS_PER_RULE + 2, MAX_SEGMENTS]
)
def test_each_segment_gets_its_own_schedule_target_and_the_rules_hold_as_many_as_eventbridge_allows(
    segments: int,
) -> None:
    # Given a sweeper whose table is swept in `segments` segments
    # When it is synthesized
    sweeper_id, rules, environment = _schedules(segments)

    # Then every segment 0..segments-1 is one target invoking the sweeper with `{"segment": n}`, each once
    targets = [target for rule in rules for target in rule["Targets"]]
    inputs = sorted((json.loads(target["Input"]) for target in targets), key=lambda given: given["segment"])
    assert inputs == [{"segment": segment} for segment in range(segments)]
    assert [target["Arn"] for target in targets] == [{"Fn::GetAtt": [sweeper_id, "Arn"]}] * segments
    assert [target["RetryPolicy"] for target in targets] == [{"MaximumRetryAttempts": 0}] * segments
    # and the rules are as few as EventBridge's targets per rule allow, all on the same schedule
    assert len(rules) == -(-segments // SCHEDULE_TARGETS_PER_RULE)
    assert all(len(rule["Targets"]) <= SCHEDULE_TARGETS_PER_RULE for rule in rules)
    assert {rule["ScheduleExpression"] for rule in rules} == {"rate(1 minute)"}
    # and each run knows how many segments there are
    assert environment["SWEEP_SEGMENTS"] == str(segments)


def test_seven_segments_take_two_rules_of_five_and_two_targets() -> None:
    # Given a sweeper with seven segments
    # When it is synthesized
    _, rules, _ = _schedules(7)

    # Then the first rule carries segments 0..4 and the second 5 and 6: EventBridge takes at most five
    # targets a rule (a quota that cannot be raised), so a rule of more would fail the deployment
    inputs = sorted([json.loads(target["Input"])["segment"] for target in rule["Targets"]] for rule in rules)
    assert inputs == [[0, 1, 2, 3, 4], [5, 6]]


def test_more_segments_than_the_schedule_can_carry_are_refused_naming_the_limit() -> None:
    # Given one segment more than the most the sweeper's schedule carries
    # When the settings are built (before anything is synthesized)
    # Then they are refused, saying the setting and its limit
    with pytest.raises(
        ConfigurationError, match=rf"SWEEP_SEGMENTS must be at most {MAX_SEGMENTS}, got {MAX_SEGMENTS + 1}"
    ):
        SweeperSettings(sweep=SweepSettings(segments=MAX_SEGMENTS + 1))

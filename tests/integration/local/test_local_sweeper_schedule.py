"""The sweeper's schedule in the local runtime: each of its targets invokes the sweeper with the target's own
input, `{"segment": n}`, so every segment of the table is swept by a run of its own, as EventBridge does.

The stack is the sample app's, synthesized with seven segments: two rules (EventBridge takes five targets a
rule), both to be read and run by the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox import outputs
from outbox.model import PARTITION_KEY, SWEEPER_CURSOR_KEY
from outbox_cdk.sweeper import SweeperSettings
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from outbox_local.schedules import Schedule
from outbox_sweeper.config import SweepSettings
from tests.support.synth import cdk_json_context

SEGMENTS = 7
# rate(1 minute) fires every 1/60 s at this speed-up, the most `outbox local up` accepts.
SPEEDUP = 3600


def _template(outdir: Path) -> Path:
    from aws_cdk import App

    from infra.constants import STACK_ID
    from infra.stack import OutboxStack, OutboxStackProps
    from outbox_cdk.nag import add_nag_checks
    from outbox_cdk.outbox import OutboxProps

    app = App(context=cdk_json_context(), outdir=str(outdir))
    settings = SweeperSettings(sweep=SweepSettings(segments=SEGMENTS))
    stack = OutboxStack(
        app, STACK_ID, props=OutboxStackProps(outbox=OutboxProps(sweeper=settings), sample_consumers=False)
    )
    add_nag_checks(app)
    app.synth()
    return outdir / f"{stack.stack_name}.template.json"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        template_path=_template(tmp_path / "cdk.out"),
        background=False,
        schedule_speedup=SPEEDUP,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    with LocalRuntime(options) as started:
        yield started


def _sweeper_schedules(runtime: LocalRuntime) -> list[Schedule]:
    assert runtime.schedules is not None
    sweeper = runtime.outputs[outputs.SWEEPER_FUNCTION_NAME]
    return [s for s in runtime.schedules.schedules if s.function_arn.endswith(f":function:{sweeper}")]


def test_each_sweeper_target_invokes_the_sweeper_for_its_own_segment(runtime: LocalRuntime) -> None:
    # Given the runtime running a stack whose sweeper sweeps seven segments, on two rules
    schedules = _sweeper_schedules(runtime)
    assert len({schedule.rule_name for schedule in schedules}) == 2
    assert sorted(schedule.target_input["segment"] for schedule in schedules) == list(range(SEGMENTS))

    # When the schedules come due and fire
    assert runtime.schedules is not None
    time.sleep(max(s.interval_s for s in schedules))
    runtime.schedules.tick()

    # Then each fired once, with its target's input, and the sweeper ran without an error
    firings = [(schedule.target_input, schedule.firings) for schedule in schedules]
    assert all(len(fired) == 1 and not fired[0].failed for _, fired in firings), firings
    # and each run swept the segment it was given: it saved its position under that segment, for that many
    # segments (a run given no segment would have saved segment 0's, of one segment, each time)
    dynamodb = runtime.client("dynamodb")
    cursors = dynamodb.query(
        TableName=runtime.outputs[outputs.OUTBOX_TABLE_NAME],
        KeyConditionExpression="#pk = :cursor",
        ExpressionAttributeNames={"#pk": PARTITION_KEY},
        ExpressionAttributeValues={":cursor": {"S": SWEEPER_CURSOR_KEY}},
        ConsistentRead=True,
    )["Items"]
    assert sorted(int(cursor["seq"]["N"]) for cursor in cursors) == list(range(SEGMENTS))
    assert {cursor["segments"]["N"] for cursor in cursors} == {str(SEGMENTS)}

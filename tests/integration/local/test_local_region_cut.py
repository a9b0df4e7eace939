"""A region cut off (`LocalRuntime.cut_region`), then restored: its functions are not invoked, its stream
mapping stops where it is (no record retried or discarded meanwhile), its schedules stop, and replication into
and out of it queues; restored, everything takes up where it was. Also on the control API and the CLI."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

from outbox_cli.main import main
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.invocation import REGION_CUT_ERROR
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime
from outbox_local.stacks import StackDefinition
from outbox_local.template import Template
from tests.integration.local.test_local_global_tables import global_table_template
from tests.support.local_templates import HANDLERS, options, template, write_template

EAST, WEST = "us-east-1", "us-west-2"


def client(runtime: LocalRuntime, service: str, region: str) -> Any:
    return boto3.client(service, endpoint_url=runtime.endpoint_url, region_name=region, **LOCAL_CREDENTIALS)


def west_stack(runtime: LocalRuntime, tmp_path: Path) -> dict[str, Any]:
    directory = tmp_path / "west"
    directory.mkdir()
    path = write_template(directory, template())
    deployed = runtime.create_stack(
        StackDefinition("West", Template.load(path), code_root=HANDLERS, region=WEST)
    )
    return deployed.outputs


def test_a_cut_region_runs_nothing_until_restored_then_takes_up_where_it_was(tmp_path: Path) -> None:
    with LocalRuntime(options(None)) as runtime:
        outputs = west_stack(runtime, tmp_path)
        dynamodb, sqs = client(runtime, "dynamodb", WEST), client(runtime, "sqs", WEST)
        runtime.cut_region(WEST)
        assert runtime.cut_regions == {WEST}
        dynamodb.put_item(TableName=outputs["TableName"], Item={"pk": {"S": "i-1"}, "behaviour": {"S": "ok"}})
        runtime.drain_streams()
        assert receive_all(sqs, outputs["DeliveredUrl"]) == []
        (mapping,) = runtime.stacks["West"].mappings
        assert mapping.stats().invocations == 0
        function = runtime.stacks["West"].provisioned.functions[0]
        result = runtime.invoke(function.arn, {})
        assert result.error_type == REGION_CUT_ERROR

        runtime.restore_region(WEST)
        runtime.drain_streams()
        # The function ran in its own region: its queue (in us-west-2) got the record.
        assert [m["Body"] for m in receive_all(sqs, outputs["DeliveredUrl"])] == ["i-1"]
        assert receive_all(sqs, outputs["OnFailureUrl"]) == []


def test_a_cut_region_gets_no_replicated_write_and_sends_none_until_restored(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template())
    with LocalRuntime(options(path)) as runtime:
        east, west = client(runtime, "dynamodb", EAST), client(runtime, "dynamodb", WEST)
        runtime.cut_region(WEST)
        east.put_item(TableName="outbox-global", Item={"aggregate_key": {"S": "A"}, "seq": {"N": "1"}})
        west.put_item(TableName="outbox-global", Item={"aggregate_key": {"S": "B"}, "seq": {"N": "1"}})
        runtime.drain_streams()
        assert west.scan(TableName="outbox-global")["Count"] == 1
        assert east.scan(TableName="outbox-global")["Count"] == 1
        runtime.restore_region(WEST)
        runtime.drain_streams()
        assert west.scan(TableName="outbox-global")["Count"] == 2
        assert east.scan(TableName="outbox-global")["Count"] == 2


def control(runtime: LocalRuntime, method: str, path: str, body: object = None) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{runtime.endpoint_url}/_outbox/{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_control_api_and_the_cli_cut_and_restore_a_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_template(tmp_path, global_table_template())
    with LocalRuntime(options(path)) as runtime:
        assert control(runtime, "GET", "regions") == (
            200,
            {"regions": [EAST, WEST], "cut": [], "replication_pending": 0},
        )
        assert control(runtime, "POST", "regions/cut", {"region": WEST})[1]["cut"] == [WEST]
        assert runtime.cut_regions == {WEST}
        assert control(runtime, "POST", "regions/cut", {"region": 3})[0] == 400
        assert control(runtime, "POST", "regions/restore", {"region": WEST})[1]["cut"] == []

        assert main(["local", "region", "cut", WEST, "--endpoint-url", runtime.endpoint_url]) == 0
        assert runtime.cut_regions == {WEST}
        assert "cut off: us-west-2" in capsys.readouterr().out
        assert main(["local", "regions", "--endpoint-url", runtime.endpoint_url]) == 0
        printed = capsys.readouterr().out
        assert "us-west-2  cut off" in printed
        assert "us-east-1  up" in printed
        assert main(["local", "region", "restore", WEST, "--endpoint-url", runtime.endpoint_url]) == 0
        assert runtime.cut_regions == frozenset()


def test_a_cut_region_stays_cut_across_a_restart(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template())
    with LocalRuntime(options(path, state_dir=tmp_path / "state")) as runtime:
        runtime.cut_region(WEST)
    with LocalRuntime(options(path, state_dir=tmp_path / "state")) as runtime:
        assert runtime.cut_regions == {WEST}


@pytest.mark.parametrize("region", ["", "not a region"])
def test_the_cli_refuses_what_is_not_a_region(region: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "region", "cut", region, "--endpoint-url", "http://127.0.0.1:9"])
    assert exited.value.code == 2


def test_a_schedule_of_a_cut_region_does_not_fire_and_fires_once_when_restored() -> None:
    from outbox_local.invocation import InvocationResult
    from outbox_local.schedules import ScheduleRunner

    now = [0.0]
    fired: list[str] = []
    cut = {WEST}

    def invoke(function_arn: str, _event: Any) -> InvocationResult:
        fired.append(function_arn)
        return InvocationResult()

    runner = ScheduleRunner(invoke, lambda: now[0], region=EAST, paused=lambda arn: arn.split(":")[3] in cut)
    west = f"arn:aws:lambda:{WEST}:123456789012:function:sweeper-west"
    east = f"arn:aws:lambda:{EAST}:123456789012:function:sweeper-east"
    runner.add("west", "arn:rule/west", "rate(1 minute)", west)
    runner.add("east", "arn:rule/east", "rate(1 minute)", east)
    now[0] = 180.0
    assert runner.tick() == 1
    assert fired == [east]
    cut.clear()
    assert runner.tick() == 1  # late: once, not three times
    assert fired == [east, west]

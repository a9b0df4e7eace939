"""A region cut off (`LocalRuntime.cut_region`), then restored: its functions are not invoked, its stream
mapping stops where it is (no record retried or discarded meanwhile), its schedules stop, and replication into
and out of it queues; restored, everything takes up where it was. Also on the control API and the CLI."""

from __future__ import annotations

import json
import time
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
        (mapping,) = runtime.stacks["us-west-2/West"].mappings
        assert mapping.stats().invocations == 0
        function = runtime.stacks["us-west-2/West"].provisioned.functions[0]
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
            {"regions": [EAST, WEST], "cut": [], "replication_pending": 0, "replication_lag_s": 1.0},
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

        assert main(["local", "regions", "--lag", "5", "--endpoint-url", runtime.endpoint_url]) == 0
        assert runtime.replication.lag_s == 5.0
        assert "lag 5 s" in capsys.readouterr().out
        for refused in ({"seconds": -1}, {"seconds": "5"}, {"seconds": 301}, {}):
            assert control(runtime, "POST", "regions/lag", refused)[0] == 400
        assert runtime.replication.lag_s == 5.0


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


def test_a_stack_of_another_region_has_its_metrics_and_alarms_in_its_region(tmp_path: Path) -> None:
    from tests.integration.local.test_local_function_metrics import emf_line, metrics_function

    body = template()
    body["Resources"]["PrintedFn"] = metrics_function("printed")
    directory = tmp_path / "west"
    directory.mkdir()
    with LocalRuntime(options(None)) as runtime:
        deployed = runtime.create_stack(
            StackDefinition(
                "West", Template.load(write_template(directory, body)), code_root=HANDLERS, region=WEST
            )
        )
        printed = next(spec for spec in deployed.provisioned.functions if spec.logical_id == "PrintedFn")
        runtime.invoke(printed.arn, {"lines": [emf_line(int(time.time() * 1000), Handed=3)]})
        for region, expected in ((WEST, 2), (EAST, 0)):  # two dimension sets
            listed = client(runtime, "cloudwatch", region).list_metrics(Namespace="Outbox")["Metrics"]
            assert len([metric for metric in listed if metric["MetricName"] == "Handed"]) == expected, region

        # The west stack's alarm (its on-failure queue not empty) is evaluated in us-west-2's CloudWatch.
        client(runtime, "sqs", WEST).send_message(QueueUrl=deployed.outputs["OnFailureUrl"], MessageBody="x")
        runtime.evaluate_alarms()
        (alarm,) = client(runtime, "cloudwatch", WEST).describe_alarms(AlarmTypes=["MetricAlarm"])[
            "MetricAlarms"
        ]
        assert alarm["StateValue"] == "ALARM"
        assert client(runtime, "cloudwatch", EAST).describe_alarms()["MetricAlarms"] == []


@pytest.mark.parametrize("lag", ["500", "-1", "1e3", "nan"])
def test_local_up_refuses_a_replication_lag_out_of_range(lag: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "up", "--replication-lag", lag])
    assert exited.value.code == 2


def test_local_up_passes_its_replication_lag_to_the_runtime() -> None:
    import argparse

    from outbox_cli.local import options as local_options
    from outbox_cli.main import build_parser

    arguments = build_parser().parse_args(["local", "up", "--no-stack", "--replication-lag", "0.5"])
    assert isinstance(arguments, argparse.Namespace)
    assert local_options(arguments, background=True).replication_lag_s == 0.5


def test_another_regions_alarm_states_are_kept_across_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with LocalRuntime(options(None, state_dir=state)) as runtime:
        outputs = west_stack(runtime, tmp_path)
        client(runtime, "sqs", WEST).send_message(QueueUrl=outputs["OnFailureUrl"], MessageBody="x")
        (transition,) = runtime.evaluate_alarms()
        assert transition.new == "ALARM"
    with LocalRuntime(options(None, state_dir=state)) as runtime:
        assert runtime.restored
        assert list(runtime.regional_alarms.states()[WEST].values()) == ["ALARM"]
        assert runtime.evaluate_alarms() == []  # nothing changed: nothing notified again

"""The runtime with its functions in worker processes (what `outbox local up` and the demo use): the HTTP API
serves concurrent requests in concurrent environments, a stream shard still gets one invocation at a time,
what a worker prints still reaches stdout, CloudWatch and the alarms, stopping the runtime leaves no process,
and the synthesized app runs end to end. What runs at the same time is proven with a rendezvous
(`tests.unit.local.rendezvous`), never by timing."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from outbox_cli import local
from outbox_cli.local import DEFAULT_MAX_ENVIRONMENTS
from outbox_cli.main import build_parser
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.integration.local.test_local_runtime import call, queue_bodies
from tests.support.local_templates import function, options, template, write_template
from tests.support.orders import place_body
from tests.support.synth import Synthesized
from tests.unit.local.rendezvous import Rendezvous

WAIT_S = 60.0
"""A safety net for wait_until_idle: the tests wait for the runtime to be idle, never for a time."""


def worker_template(**mapping_overrides: Any) -> dict[str, Any]:
    """The test template with its API and stream functions able to meet the test."""
    body = template(**mapping_overrides)
    body["Resources"]["ApiFn"]["Properties"]["Handler"] = "local_worker_handlers.api"
    body["Resources"]["StreamFn"]["Properties"]["Handler"] = "local_worker_handlers.stream"
    return body


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def name_of(runtime: LocalRuntime, logical_id: str) -> str:
    assert runtime.host is not None
    return runtime.host.find(logical_id).name


def cold_starts(runtime: LocalRuntime, logical_id: str) -> int:
    assert runtime.host is not None
    assert runtime.host.environments is not None
    return runtime.host.environments.cold_starts[name_of(runtime, logical_id)]


def test_the_http_api_serves_concurrent_requests_in_concurrent_environments(tmp_path: Path) -> None:
    # Given the runtime with its functions in worker processes
    path = write_template(tmp_path, worker_template())
    with LocalRuntime(options(path, max_environments=4)) as runtime, Rendezvous() as meeting:
        with ThreadPoolExecutor(4) as clients:
            # When four requests come at once
            answers = [
                clients.submit(call, runtime, "POST", "/items", {"port": meeting.port}) for _ in range(4)
            ]
            # Then all four are inside the function at the same time, each in an environment of its own
            pids = meeting.arrivals(4)
            meeting.release()
            results = [answer.result() for answer in answers]
        assert len(set(pids)) == 4
        assert all(status == 200 and body["calls"] == 1 for status, body in results)
        # and a request after them is served warm, by one of them
        status, body = call(runtime, "GET", "/echo")
        assert status == 200
        assert body["pid"] in pids
        assert cold_starts(runtime, "ApiFn") == 4


def test_the_stream_mapping_runs_one_invocation_of_a_shard_at_a_time(tmp_path: Path) -> None:
    # Given one record per batch, the mapping polling in the background, the function allowed 4 environments
    path = write_template(tmp_path, worker_template(BatchSize=1, MaximumBatchingWindowInSeconds=0))
    with LocalRuntime(options(path, background=True, max_environments=4)) as runtime, Rendezvous() as meeting:
        table, dynamodb = runtime.outputs["TableName"], runtime.client("dynamodb")
        # When the first record's invocation is held under way while nine more records are written
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "s-0"}, "port": {"N": str(meeting.port)}})
        meeting.arrivals(1)
        for index in range(1, 10):
            dynamodb.put_item(TableName=table, Item={"pk": {"S": f"s-{index}"}})
        meeting.release()
        assert runtime.wait_until_idle(WAIT_S)

        # Then every record was delivered, in shard order, and one environment was ever needed: an
        # environment starts only for an invocation that comes while the others are busy
        assert queue_bodies(runtime, runtime.outputs["DeliveredUrl"]) == [f"s-{index}" for index in range(10)]
        assert runtime.mappings[0].stats().invocations == 10
        assert cold_starts(runtime, "StreamFn") == 1


def test_what_a_worker_prints_reaches_stdout_cloudwatch_and_the_alarms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a function emitting Powertools EMF metrics, and an alarm on its metric
    body = template()
    counted = function("counted", {"POWERTOOLS_METRICS_NAMESPACE": "Outbox", "POWERTOOLS_SERVICE_NAME": "w"})
    counted["Properties"]["Handler"] = "local_metrics_handlers.counted"
    body["Resources"]["CountedFn"] = counted
    body["Resources"]["CountedAlarm"] = {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": "ItemsCounted",
            "MetricName": "ItemsCounted",
            "Namespace": "Outbox",
            "Dimensions": [{"Name": "service", "Value": "w"}],
            "Statistic": "Sum",
            "Period": 60,
            "EvaluationPeriods": 1,
            "Threshold": 0,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    }
    with LocalRuntime(options(write_template(tmp_path, body), max_environments=2)) as runtime:
        runtime.evaluate_alarms()

        # When it runs in a worker process
        assert runtime.invoke("CountedFn", {"values": [2, 3]}).payload == {"counted": 2}
        runtime.evaluate_alarms()

        # Then its EMF document reached this process's stdout, and CloudWatch, where the alarm saw it
        assert '"ItemsCounted":[2.0,3.0]' in capsys.readouterr().out.replace(" ", "")
        [alarm] = runtime.client("cloudwatch").describe_alarms(AlarmNames=["ItemsCounted"])["MetricAlarms"]
        assert alarm["StateValue"] == "ALARM"


def test_stopping_the_runtime_ends_every_environment_even_one_under_way(tmp_path: Path) -> None:
    # Given a runtime with an idle environment and one busy with a request under way
    runtime = LocalRuntime(options(write_template(tmp_path, worker_template()), max_environments=4))
    runtime.start()
    assert runtime.host is not None
    assert runtime.host.environments is not None
    environments = runtime.host.environments
    runtime.invoke("EnvFn", {})
    [idle] = environments.pids(name_of(runtime, "EnvFn"))
    answered: list[Any] = []
    with Rendezvous() as meeting:
        client = threading.Thread(
            target=lambda: answered.append(call(runtime, "POST", "/items", {"port": meeting.port}))
        )
        client.start()
        [busy] = meeting.arrivals(1)

        # When the runtime stops
        runtime.stop()
        client.join(WAIT_S)

    # Then neither process is left, and the request under way was answered (the function failed)
    assert not alive(idle)
    assert not alive(busy)
    assert answered == [(500, {"message": "Internal Server Error"})]


def test_stopping_the_runtime_does_not_wait_out_a_stream_invocation_under_way(tmp_path: Path) -> None:
    # Given a stream function with a 15-minute timeout, its invocation held under way by the poller's thread
    body = worker_template(BatchSize=1, MaximumBatchingWindowInSeconds=0)
    body["Resources"]["StreamFn"]["Properties"]["Timeout"] = 900
    runtime = LocalRuntime(options(write_template(tmp_path, body), background=True, max_environments=2))
    runtime.start()
    stopper = threading.Thread(target=runtime.stop)
    with Rendezvous() as meeting:
        table = runtime.outputs["TableName"]
        runtime.client("dynamodb").put_item(
            TableName=table, Item={"pk": {"S": "s-0"}, "port": {"N": str(meeting.port)}}
        )
        [busy] = meeting.arrivals(1)

        # When the runtime stops (Ctrl-C) while the invocation is still under way
        stopper.start()
        # (its process is gone once its connection to the meeting closes unreleased)
        meeting.departures()
        stopper.join(WAIT_S)
        stopped = not stopper.is_alive()
        meeting.release()  # a runtime that waited for the invocation can now finish stopping
        stopper.join()

    # Then it stopped without waiting for the function's timeout: the worker was ended, not waited for
    assert stopped
    assert not alive(busy)


def test_the_synthesized_apps_functions_run_in_workers_end_to_end(synthesized: Synthesized) -> None:
    # Given the sample app as `cdk synth` writes it, its functions in worker processes
    app_options = RuntimeOptions(
        template_path=synthesized.template_path,
        background=False,
        max_environments=2,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    with LocalRuntime(app_options) as runtime:
        # When six orders are placed at once over HTTP and the mappings run
        with ThreadPoolExecutor(6) as clients:
            placed = list(
                clients.map(
                    lambda i: call(runtime, "POST", "/orders", place_body(customer_id=f"c-{i}")), range(6)
                )
            )
        runtime.drain_streams()

        # Then each was accepted, and its event reached the topic's and the bus's subscriber queues
        assert [status for status, _ in placed] == [201] * 6
        events = {body["event_id"] for _, body in placed}
        sqs = runtime.client("sqs")
        on_topic = {
            json.loads(m["Body"])["event_id"]
            for m in receive_all(sqs, runtime.outputs["SampleTopicConsumerQueueUrl"])
        }
        on_bus = {
            json.loads(m["Body"])["detail"]["event_id"]
            for m in receive_all(sqs, runtime.outputs["SampleBusConsumerQueueUrl"])
        }
        assert on_topic == on_bus == events
        # and the order summary consumer, in its own environment, has a summary of each order
        summary = runtime.client("dynamodb").scan(TableName=runtime.outputs["OrderSummaryTableName"])
        orders = {item["order_id"]["S"] for item in summary["Items"] if "order_id" in item}
        assert orders == {body["order_id"] for _, body in placed}
    # and running the assets in workers wrote nothing into them that `cdk deploy` would ship
    assert not list(synthesized.outdir.glob("asset.*/**/__pycache__"))


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["local", "up"], DEFAULT_MAX_ENVIRONMENTS),
        (["local", "up", "--max-environments", "2"], 2),
        (["local", "up", "--in-process"], None),
        (["demo"], DEFAULT_MAX_ENVIRONMENTS),
    ],
    ids=["local-up", "local-up-capped", "local-up-in-process", "demo"],
)
def test_local_up_and_the_demo_run_functions_in_workers_unless_asked_otherwise(
    arguments: list[str], expected: int | None
) -> None:
    # Given the command line (a template named: the options are read without a cdk.out here), When the
    # runtime's options are read from it, Then workers unless --in-process
    parsed = build_parser().parse_args([*arguments, "--template", "cdk.out/OutboxStack.template.json"])
    assert local.options(parsed, background=True).max_environments == expected

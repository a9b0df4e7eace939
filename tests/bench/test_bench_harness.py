"""The benchmark's plumbing: canned HTTP answers real botocore calls, the doc is rendered from the JSON, the
cost figures are recomputable from it. No AWS, no moto, no timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from bench import (
    cost,
    deployment,
    end_to_end,
    latency,
    outage_figures,
    render_doc,
    runner,
)
from bench.canned_http import can
from bench.counting import CallCounter
from bench.deployment import Deployment
from bench.observability_figures import metrics_defined
from outbox_publisher.routing import Destination

RESULTS = Path(render_doc.RESULTS)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return loaded


def test_a_real_client_with_canned_http_builds_the_request_and_parses_a_success() -> None:
    # Given real SNS and EventBridge clients answered at before-send, and a call counter on them
    sns, events = can(boto3.client("sns")), can(boto3.client("events"))
    counter = CallCounter()
    counter.attach(sns)
    counter.attach(events)

    # When they publish
    batch = sns.publish_batch(
        TopicArn="arn:aws:sns:us-east-1:123456789012:t",
        PublishBatchRequestEntries=[{"Id": f"m{i}", "Message": "{}"} for i in range(3)],
    )
    put = events.put_events(Entries=[{"Source": "s", "DetailType": "d", "Detail": "{}"}] * 2)

    # Then each entry is answered as accepted, and each call counted once
    assert [entry["Id"] for entry in batch["Successful"]] == ["m0", "m1", "m2"]
    assert put["FailedEntryCount"] == 0
    assert len(put["Entries"]) == 2
    assert counter.counts == {("sns", "PublishBatch"): 1, ("events", "PutEvents"): 1}


def test_an_operation_without_a_canned_answer_fails_instead_of_being_measured() -> None:
    sqs = can(boto3.client("sqs"))
    with pytest.raises(NotImplementedError, match="SendMessage"):
        sqs.send_message(QueueUrl="https://sqs.us-east-1.amazonaws.com/123456789012/q", MessageBody="x")


def test_the_doc_shows_exactly_the_committed_results(results: dict[str, Any]) -> None:
    # Given docs/BENCHMARKS.md and bench/results.json as committed
    doc = render_doc.DOC.read_text(encoding="utf-8")

    # Then rendering the JSON into the doc changes nothing: `make bench` wrote both, or neither drifted
    assert render_doc.render(doc, results) == doc


def test_the_cost_figures_are_computed_from_the_measured_figures(results: dict[str, Any]) -> None:
    # Given the results' figures and the deployment they were costed for
    deployment = Deployment(**results["cost"]["deployment"])

    # Then the cost section is what the figures and bench.prices give today
    assert cost.compute(results["groups"], deployment) == results["cost"]


def test_a_group_that_measured_nothing_says_why_on_the_console(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the end-to-end measurement without its load script
    monkeypatch.setattr(end_to_end, "LOCAL_LOAD", tmp_path / "missing.py")

    # When that group alone is measured
    assert runner.main(["--only", "end_to_end"]) == 0

    # Then the console says that nothing was measured, and why, beside the table's bare title
    err = capsys.readouterr().err
    assert "end_to_end: nothing measured: bench/local_load.py is not there yet" in err


def test_canned_http_answers_the_settle_the_gate_and_the_sweeper_calls_with_nothing_found() -> None:
    # Given a real DynamoDB client answered at before-send
    dynamodb = can(boto3.client("dynamodb"))
    key = {"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}}

    # Then a settle succeeds, every predecessor is absent, and the table holds nothing
    assert "Attributes" not in dynamodb.delete_item(TableName="outbox", Key=key)
    found = dynamodb.batch_get_item(RequestItems={"outbox": {"Keys": [key], "ConsistentRead": True}})
    assert found["Responses"] == {"outbox": []}
    assert "Item" not in dynamodb.get_item(TableName="outbox", Key=key)
    assert dynamodb.scan(TableName="outbox", Limit=1000)["Items"] == []


def test_the_custom_metrics_are_read_from_the_emf_blobs_a_function_writes() -> None:
    # Given what an entry point writes: a log line, and an EMF blob defining two metrics on one dimension
    blob = {
        "_aws": {
            "Timestamp": 0,
            "CloudWatchMetrics": [
                {
                    "Namespace": "Outbox",
                    "Dimensions": [["service"]],
                    "Metrics": [{"Name": "A"}, {"Name": "B"}],
                }
            ],
        },
        "service": "outbox-publisher",
        "A": [1.0],
        "B": [2.0, 3.0],
    }
    output = (json.dumps({"message": "batch published"}) + "\n" + json.dumps(blob) + "\n").encode()

    # Then each name, with its namespace and dimension values, is one custom metric; the log line is none
    assert metrics_defined(output) == [
        "Outbox/service=outbox-publisher/A",
        "Outbox/service=outbox-publisher/B",
    ]


def test_lambdas_duration_is_cpu_at_its_vcpu_share_plus_every_calls_wait() -> None:
    # Given a record that costs 1 ms of CPU and makes one DeleteItem and a tenth of a PublishBatch
    calls = {"dynamodb.DeleteItem": 1.0, "sns.PublishBatch": 0.1}

    # When its duration is priced for 512 MB
    line = cost._duration(1000.0, calls, 512, "cpu.cost.test")

    # Then the wall time is the CPU at 512 / 1,769 of a vCPU plus the waits the latency constants assume
    waits_us = (latency.DYNAMODB_ITEM_CALL.ms + 0.1 * latency.SNS_CALL.ms) * 1000
    assert line.quantity == pytest.approx(0.5 * (1000.0 / (512 / 1769) + waits_us) / 1e6)
    assert latency.vcpu_share(1769) == latency.vcpu_share(3008) == 1.0


def test_our_row_updates_wait_as_one_round_trip_per_ten_and_the_other_calls_one_each() -> None:
    # Given a batch of 100 records: 100 settles, 10 PublishBatch, 1 BatchGetItem
    calls = {"dynamodb.DeleteItem": 100, "sns.PublishBatch": 10, "dynamodb.BatchGetItem": 1}

    # When their waits are counted / Then the settles, ten in flight at once, wait ten times; the rest each
    assert cost._round_trips(calls) == {
        "dynamodb.DeleteItem": 10,
        "sns.PublishBatch": 10,
        "dynamodb.BatchGetItem": 1,
    }
    assert cost._round_trips({"dynamodb.DeleteItem": 3}) == {"dynamodb.DeleteItem": 1}


def test_the_deployment_is_read_from_the_synthesized_template(tmp_path: Path) -> None:
    # Given a template with the publisher, its mapping, the sweeper on two schedule targets, and two alarms
    # of which one is the outbox monitoring construct's
    resources = {
        "Pub": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": deployment.PUBLISHER_HANDLER,
                "MemorySize": 512,
                "Architectures": ["arm64"],
            },
        },
        "Sweep": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Handler": deployment.SWEEPER_HANDLER, "MemorySize": 256},
        },
        "Map": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"FunctionName": {"Ref": "Pub"}, "BatchSize": 50},
        },
        "Rule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "ScheduleExpression": "rate(2 minutes)",
                "Targets": [
                    {"Arn": {"Fn::GetAtt": ["Sweep", "Arn"]}},
                    {"Arn": {"Fn::GetAtt": ["Sweep", "Arn"]}},
                ],
            },
        },
        "Mine": {"Type": "AWS::CloudWatch::Alarm", "Metadata": {"aws:cdk:path": "S/Monitoring/A/Resource"}},
        "Theirs": {"Type": "AWS::CloudWatch::Alarm", "Metadata": {"aws:cdk:path": "S/SampleConsumers/A"}},
    }
    template = tmp_path / "cdk.out" / "Stack.template.json"
    template.parent.mkdir()
    template.write_text(json.dumps({"Resources": resources}), encoding="utf-8")

    # Then the figures the cost needs come out of it
    read = deployment.deployed(template)
    assert (read.publisher_memory_mb, read.batch_size, read.sweeper_memory_mb) == (512, 50, 256)
    assert read.sweeper_runs_per_month == 2 * deployment.MINUTES_PER_MONTH // 2
    assert (read.alarms, read.dashboards) == (1, 0)


def test_the_outage_harness_refuses_the_down_destination_and_counts_every_copy_delivered() -> None:
    # When EventBridge is down for 20 s from the first write, over three waves of two events
    run = outage_figures.outage_run(Destination.EVENTBRIDGE, outage_s=20, aggregates=2, count=3)

    # Then its calls were refused while it lasted, and every event reached each destination exactly once
    assert run.refused > 0
    assert run.extra_copies(Destination.SNS) == [0] * 6
    assert run.extra_copies(Destination.EVENTBRIDGE) == [0] * 6
    assert run.handed_back == 0

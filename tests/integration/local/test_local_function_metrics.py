"""Function metrics reach CloudWatch: the EMF documents a hosted function prints are put into moto's
CloudWatch, as CloudWatch Logs extracts them on AWS (`outbox_local.emf_metrics`), and plain boto3
`get_metric_data` / `get_metric_statistics` on the local endpoint answer them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import function, options, template, write_template

pytestmark = pytest.mark.usefixtures("fresh_powertools_metrics")

SERVICE = "local-metrics"
WINDOW = timedelta(hours=1)


def metrics_function(handler: str) -> dict[str, Any]:
    """A template function running `local_metrics_handlers.<handler>`, configured as the outbox functions."""
    variables = {"POWERTOOLS_METRICS_NAMESPACE": "Outbox", "POWERTOOLS_SERVICE_NAME": SERVICE}
    resource = function(handler, variables)
    resource["Properties"]["Handler"] = f"local_metrics_handlers.{handler}"
    return resource


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    body = template()
    body["Resources"]["CountedFn"] = metrics_function("counted")
    body["Resources"]["PrintedFn"] = metrics_function("printed")
    with LocalRuntime(options(write_template(tmp_path, body))) as started:
        yield started


def statistics(
    runtime: LocalRuntime, name: str, dimensions: list[dict[str, str]], around: datetime | None = None
) -> tuple[float, float]:
    """(Sum, SampleCount) of a metric in namespace Outbox over the hour around `around` (default: now)."""
    moment = around or datetime.now(UTC)
    datapoints = runtime.client("cloudwatch").get_metric_statistics(
        Namespace="Outbox",
        MetricName=name,
        Dimensions=dimensions,
        StartTime=moment - WINDOW,
        EndTime=moment + WINDOW,
        Period=60,
        Statistics=["Sum", "SampleCount"],
    )["Datapoints"]
    return sum(point["Sum"] for point in datapoints), sum(point["SampleCount"] for point in datapoints)


def emf_line(timestamp_ms: int, **members: Any) -> str:
    """A hand-written EMF document: metric Handed (Count, high resolution) on two dimension sets."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [
                    {
                        "Namespace": "Outbox",
                        "Dimensions": [["service"], ["service", "stage"]],
                        "Metrics": [{"Name": "Handed", "Unit": "Count", "StorageResolution": 1}],
                    }
                ],
            },
            "service": SERVICE,
            "stage": "local",
            **members,
        }
    )


def test_powertools_metrics_of_a_hosted_function_reach_cloudwatch(
    runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a function that counts through Powertools Metrics (namespace Outbox, a service dimension)
    # When it is invoked twice
    assert runtime.invoke("CountedFn", {"values": [1, 2, 3]}).payload == {"counted": 3}
    assert runtime.invoke("CountedFn", {"values": [4]}).payload == {"counted": 1}

    # Then CloudWatch holds every value under the service dimension, as on AWS
    service = [{"Name": "service", "Value": SERVICE}]
    assert statistics(runtime, "ItemsCounted", service) == (10.0, 4.0)
    now = datetime.now(UTC)
    data = runtime.client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "counted",
                "MetricStat": {
                    "Metric": {"Namespace": "Outbox", "MetricName": "ItemsCounted", "Dimensions": service},
                    "Period": 60,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=now - WINDOW,
        EndTime=now + WINDOW,
    )["MetricDataResults"]
    assert sum(data[0]["Values"]) == 10.0
    (metric,) = runtime.client("cloudwatch").list_metrics(Namespace="Outbox")["Metrics"]
    assert metric["Dimensions"] == service

    # And the EMF lines still reached the process's stdout, as the function printed them
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [document["ItemsCounted"] for document in printed] == [[1.0, 2.0, 3.0], [4.0]]


def test_metrics_a_function_flushed_before_failing_are_kept(runtime: LocalRuntime) -> None:
    # Given a function whose Powertools decorator flushes its metrics even when it raises
    # When the invocation fails
    result = runtime.invoke("CountedFn", {"values": [5, 6], "fail": True})

    # Then the invocation failed, and its metrics reached CloudWatch (CloudWatch Logs reads them on AWS too)
    assert result.error_type == "RuntimeError"
    assert statistics(runtime, "ItemsCounted", [{"Name": "service", "Value": SERVICE}]) == (11.0, 2.0)


def test_malformed_emf_never_fails_an_invocation_and_valid_documents_still_count(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an invocation that prints a valid EMF document (one number, two dimension sets, an earlier
    # timestamp), two malformed ones and an ordinary line
    moment = (datetime.now(UTC) - timedelta(minutes=30)).replace(microsecond=0)
    lines = [
        emf_line(int(moment.timestamp() * 1000), Handed=7),
        '{"_aws": {"Timestamp": 1, "CloudWatchMetrics": [',  # cut short: not JSON
        emf_line(int(moment.timestamp() * 1000), Handed="seven"),  # the value is not a number
        "hello from the handler",
    ]

    # When the function runs
    with caplog.at_level(logging.WARNING, logger="outbox_local.metrics"):
        result = runtime.invoke("PrintedFn", {"lines": lines})

    # Then it succeeded, each malformed document was reported, and the valid one counts on each dimension set
    assert result.payload == {"printed": 4}
    warnings = [record.getMessage() for record in caplog.records if record.name == "outbox_local.metrics"]
    assert len(warnings) == 2
    assert all("malformed EMF document" in warning for warning in warnings)
    assert "'seven' is not a number" in warnings[1]
    service = {"Name": "service", "Value": SERVICE}
    staged = [service, {"Name": "stage", "Value": "local"}]
    listed = runtime.client("cloudwatch").list_metrics(Namespace="Outbox", MetricName="Handed")["Metrics"]
    assert sorted(len(metric["Dimensions"]) for metric in listed) == [1, 2]
    assert statistics(runtime, "Handed", staged, around=moment) == (7.0, 1.0)
    # (moto also counts the two-dimension datum under a [service] query: docs/local.md, "Where moto differs")


def test_a_cloudwatch_outage_never_fails_an_invocation(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given CloudWatch refusing PutMetricData (metrics go through the runtime's own client, which no armed
    # fault touches: refused here by hand)
    refused = []

    def refuse(**request: Any) -> None:
        refused.append(request)
        raise botocore.exceptions.ClientError(
            {"Error": {"Code": "InternalFailure", "Message": "unavailable"}}, "PutMetricData"
        )

    monkeypatch.setattr(runtime._internal_client("cloudwatch"), "put_metric_data", refuse)

    # When a function emits metrics
    with caplog.at_level(logging.WARNING, logger="outbox_local.metrics"):
        result = runtime.invoke("CountedFn", {"values": [1]})

    # Then the invocation succeeded, and the lost metrics were reported
    assert result.payload == {"counted": 1}
    assert [request["Namespace"] for request in refused] == ["Outbox"]
    assert any("were not put into CloudWatch" in record.getMessage() for record in caplog.records)

"""The benchmark's plumbing: canned HTTP answers real botocore calls, the doc is rendered from the JSON, the
cost figures are recomputable from it. No AWS, no moto, no timing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest

from bench import cost, cpu_figures, cpu_probe, end_to_end, render_doc, runner
from bench.canned_http import can
from bench.counting import CallCounter
from bench.deployment import Deployment
from bench.stubs import StubSns, stub_clients

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


@pytest.mark.parametrize("publisher", ["ours", "naive"])
def test_the_cpu_probe_counts_only_batches_the_publisher_published_whole(publisher: str) -> None:
    # Given the probe the instruction figures count, run plainly: each publisher on the stub batch, twice
    probe = [sys.executable, "-m", "bench.cpu_probe", publisher, "10", "2"]
    where = cpu_figures.probe_process()
    done = subprocess.run(probe, **where, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603
    # Then it ran to its end: every record published, or the probe would have failed
    assert done.returncode == 0, done.stderr


def test_the_cpu_probe_fails_when_the_publisher_hands_records_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given stub clients whose SNS refuses every entry
    class RefusingSns(StubSns):
        def publish_batch(
            self,
            *,
            TopicArn: str,  # noqa: N803 - boto3's names
            PublishBatchRequestEntries: Sequence[Mapping[str, Any]],  # noqa: N803
        ) -> dict[str, Any]:
            failed = [
                {"Id": entry["Id"], "Code": "InternalError", "SenderFault": False}
                for entry in PublishBatchRequestEntries
            ]
            return {"Successful": [], "Failed": failed}

    monkeypatch.setattr(cpu_probe, "stub_clients", lambda: {**stub_clients(), "sns": RefusingSns()})
    # When the probe runs our publisher, then it fails instead of counting a batch that was not published
    with pytest.raises(SystemExit, match="handed records back"):
        cpu_probe.run("ours", 10, 1)


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

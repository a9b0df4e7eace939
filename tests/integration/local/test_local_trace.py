"""One trace from the request to the consumer, on the sample app in the local runtime: the Orders API's
invocation header is saved on the row, forwarded by the publisher, and its trace id is on the consumer's log
line about the event; `outbox trace EVENT_ID` prints that chain (request -> row -> publish -> consumer)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from outbox_cli.main import main
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.orders import place_body
from tests.support.synth import Synthesized


@pytest.fixture
def app_runtime(synthesized: Synthesized) -> Iterator[LocalRuntime]:
    """The sample app with each function in a worker process of its own, as `outbox local up` runs it: its
    loggers are its own (in process, Powertools' loggers are shared with whatever created one of the same name
    earlier in the process, and write where that one did)."""
    options = RuntimeOptions(
        template_path=synthesized.template_path,
        background=False,
        max_environments=1,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    with LocalRuntime(options) as started:
        yield started


def test_the_requests_trace_id_arrives_at_the_consumers_log_line(
    app_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the sample app running locally, and an order placed over HTTP with a correlation id
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{app_runtime.api_url}/orders",
        data=json.dumps(place_body()).encode(),
        method="POST",
        headers={"content-type": "application/json", "X-Correlation-Id": "trace-test-1"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        event_id = json.loads(response.read())["event_id"]

    # When the publisher and the consumers have run
    app_runtime.drain_streams()
    capsys.readouterr()  # what the functions printed, in process

    # Then the event's chain starts at the request, whose invocation's trace id the row carries
    assert main(["trace", event_id, "--endpoint-url", app_runtime.endpoint_url, "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    request_trace_id = chain["request"]["trace_id"]
    assert (chain["request"]["method"], chain["request"]["path"], chain["request"]["status"]) == (
        "POST",
        "/orders",
        201,
    )
    assert chain["trace_id"] == request_trace_id
    assert chain["row"]["trace_header"].startswith(f"Root={request_trace_id};Parent=")
    assert chain["row"]["correlation_id"] == "trace-test-1"
    # And the publisher published it, in an invocation of its own trace
    (publish,) = chain["publish"]
    assert not publish["handed_back"]
    assert publish["trace_id"] != request_trace_id
    # And the order summary consumed it from the topic, the header in its message attributes, and its log
    # line about the event carries the request's trace id and correlation id (its own invocation's trace
    # id is Powertools' xray_trace_id)
    (summary,) = [delivery for delivery in chain["consumers"] if "OrderSummary" in delivery["function"]]
    assert summary["message_trace_header"] == chain["row"]["trace_header"]
    assert not summary["handed_back"]
    (line,) = summary["log"]
    assert (line["message"], line["trace_id"], line["correlation_id"]) == (
        "inbox applied",
        request_trace_id,
        "trace-test-1",
    )
    assert line["xray_trace_id"] == summary["trace_id"] != request_trace_id

    # And as text, one step a line
    assert main(["trace", event_id, "--endpoint-url", app_runtime.endpoint_url]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[1] == f"trace {request_trace_id}"
    assert [line.split()[0] for line in text[2:]] == ["request", "row", "publish", "consumer", "log"]

    # And an event the runtime has not seen is refused, with exit code 1
    unseen = "00000000-0000-4000-8000-000000000000"
    assert main(["trace", unseen, "--endpoint-url", app_runtime.endpoint_url]) == 1
    assert f"the runtime has seen no event {unseen}" in capsys.readouterr().err

"""outbox.xray: the subsegments a sampled invocation records, the documents sent, and what is never sent."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Generator
from typing import Any

import pytest

from outbox.errors import ConfigurationError
from outbox.xray import (
    MAX_DATAGRAM_BYTES,
    PROTOCOL_HEADER,
    STACK_FRAMES,
    UNRECORDED,
    Recorder,
    Subsegment,
    TraceContext,
    UdpEmitter,
    daemon_address,
)

ROOT = "1-5759e988-bd862e3fe1be46a994272793"
PARENT = "53995c3f42cd8ad8"
SAMPLED = {"_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=a87bd80c:0"}


def documents(sent: list[bytes]) -> list[dict[str, Any]]:
    for datagram in sent:
        assert datagram.startswith(PROTOCOL_HEADER)
    return [json.loads(datagram[len(PROTOCOL_HEADER) :]) for datagram in sent]


def recorder(environ: dict[str, str] | None = None) -> tuple[Recorder, list[bytes]]:
    sent: list[bytes] = []
    return Recorder(emit=sent.append, environ=SAMPLED if environ is None else environ), sent


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"Root={ROOT};Parent={PARENT};Sampled=1", TraceContext(ROOT, PARENT, "")),
        (f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=x:1", TraceContext(ROOT, PARENT, ";Lineage=x:1")),
        (f"Parent={PARENT}; Sampled=1; Root={ROOT}", TraceContext(ROOT, PARENT, "")),
        (f"Root={ROOT};Parent={PARENT};Sampled=0", None),
        (f"Root={ROOT};Parent={PARENT}", None),
        (f"Root={ROOT};Sampled=1", None),
        (f"Parent={PARENT};Sampled=1", None),
        ("", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_only_a_sampled_header_with_a_root_and_a_parent_is_traced(
    header: str | None, expected: TraceContext | None
) -> None:
    assert TraceContext.sampled(header) == expected


def test_the_header_passed_on_names_the_calling_subsegment_and_keeps_the_rest() -> None:
    context = TraceContext(ROOT, PARENT, ";Lineage=x:1")
    assert (
        context.header_for("0123456789abcdef") == f"Root={ROOT};Parent=0123456789abcdef;Sampled=1;Lineage=x:1"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("169.254.79.129:2000", ("169.254.79.129", 2000)),
        ("udp:169.254.79.129:2000 tcp:169.254.79.129:2000", ("169.254.79.129", 2000)),
        ("tcp:127.0.0.1:2001 udp:127.0.0.2:2002", ("127.0.0.2", 2002)),
        (None, ("127.0.0.1", 2000)),
        ("", ("127.0.0.1", 2000)),
    ],
)
def test_the_daemon_address_is_read_in_both_forms_lambda_sets(
    value: str | None, expected: tuple[str, int]
) -> None:
    assert daemon_address(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "localhost",
        "localhost:",
        ":2000",
        "host:port",
        "host:0",
        "host:65536",
        "host:\uff12\uff10\uff10\uff10",  # digits, but not ASCII ones
        "udp:a:1 udp:b:2",
        "a:1 b:2",
    ],
)
def test_a_malformed_daemon_address_is_a_configuration_error_at_start_up(value: str) -> None:
    with pytest.raises(ConfigurationError, match="AWS_XRAY_DAEMON_ADDRESS"):
        Recorder(environ={"AWS_XRAY_DAEMON_ADDRESS": value})


@pytest.mark.parametrize(
    "environ",
    [{}, {"_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=0"}],
    ids=["no header", "not sampled"],
)
def test_an_unsampled_invocation_records_and_sends_nothing(environ: dict[str, str]) -> None:
    traced, sent = recorder(environ)
    with traced.in_subsegment("## handler") as subsegment:
        assert subsegment is UNRECORDED
        subsegment.put_annotation("ColdStart", True)
        traced.put_annotation("destination", "sns")
        traced.put_metadata("ids", [1])
    assert traced.current() is None
    assert sent == []


def test_nested_subsegments_link_to_their_parent_and_the_outermost_to_the_invocation() -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler") as outer:
        outer.put_annotation("ColdStart", True)
        with traced.in_subsegment("## publish"):
            traced.put_annotation("destination", "sns")
            traced.put_metadata("event_ids", ["e-1"], namespace="publisher")
        assert traced.current() is outer
    assert traced.current() is None

    inner_doc, outer_doc = documents(sent)  # each sent as it closes: the inner one first
    assert outer_doc["parent_id"] == PARENT
    assert inner_doc["parent_id"] == outer_doc["id"]
    for doc, name in ((outer_doc, "## handler"), (inner_doc, "## publish")):
        assert doc["name"] == name
        assert doc["type"] == "subsegment"
        assert doc["trace_id"] == ROOT
        assert len(doc["id"]) == 16
        assert int(doc["id"], 16) >= 0
        assert 0 < doc["start_time"] <= doc["end_time"]
        assert doc["namespace"] == "local"
        assert doc["in_progress"] is False
        assert not {"error", "fault", "throttle", "cause", "http", "aws"} & doc.keys()
    assert outer_doc["annotations"] == {"ColdStart": True}
    assert inner_doc["annotations"] == {"destination": "sns"}
    assert inner_doc["metadata"] == {"publisher": {"event_ids": ["e-1"]}}
    assert (
        outer_doc["start_time"] <= inner_doc["start_time"] <= inner_doc["end_time"] <= outer_doc["end_time"]
    )


def test_annotations_x_ray_cannot_index_and_reserved_metadata_are_left_out() -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler") as subsegment:
        subsegment.put_annotation("has space", "x")
        subsegment.put_annotation("dash-ed", "x")
        subsegment.put_annotation("", "x")
        subsegment.put_annotation("é", "x")
        subsegment.put_annotation("a_list", [1])
        subsegment.put_annotation("ok_1", 1.5)
        subsegment.put_metadata("k", "v", namespace="AWS.reserved")
    (doc,) = documents(sent)
    assert doc["annotations"] == {"ok_1": 1.5}
    assert "metadata" not in doc


def test_invalid_characters_are_removed_from_a_name() -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## get(order)?"):
        pass
    assert documents(sent)[0]["name"] == "## getorder"


def test_an_exception_inside_a_subsegment_is_a_fault_with_its_type_and_stack_and_is_raised() -> None:
    traced, sent = recorder()

    def deep(depth: int) -> None:
        if depth == 0:
            raise ValueError("bad thing")
        deep(depth - 1)

    with pytest.raises(ValueError, match="bad thing"), traced.in_subsegment("## handler"):
        deep(STACK_FRAMES + 5)

    (doc,) = documents(sent)
    assert doc["fault"] is True
    assert "error" not in doc
    (exception,) = doc["cause"]["exceptions"]
    assert exception["type"] == "ValueError"
    assert "message" not in exception  # its text may quote the request: see outbox.xray_botocore's tests
    assert exception["remote"] is False
    assert len(exception["stack"]) == STACK_FRAMES
    assert exception["stack"][-1] == {
        "path": "test_xray.py",
        "line": exception["stack"][-1]["line"],
        "label": "deep",
    }
    assert doc["cause"]["working_directory"]
    assert traced.current() is None


@pytest.mark.parametrize(
    ("status", "flags"),
    [
        (200, set()),
        (400, {"error"}),
        (404, {"error"}),
        (429, {"error", "throttle"}),
        (500, {"fault"}),
        (503, {"fault"}),
    ],
)
def test_an_http_status_sets_the_flags_x_ray_defines(status: int, flags: set[str]) -> None:
    traced, sent = recorder()
    with traced.in_subsegment("dynamodb") as subsegment:
        assert isinstance(subsegment, Subsegment)
        subsegment.set_status(status)
        if status >= 400:
            subsegment.add_exception(RuntimeError("answered"), remote=True)
    (doc,) = documents(sent)
    assert doc["http"] == {"response": {"status": status}}
    assert {flag for flag in ("error", "throttle", "fault") if doc.get(flag)} == flags


def test_a_subsegment_opened_in_another_thread_belongs_to_the_invocation_not_to_this_threads() -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler"):

        def work() -> None:
            with traced.in_subsegment("## worker"):
                pass

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    worker_doc, handler_doc = documents(sent)
    assert worker_doc["name"] == "## worker"
    assert worker_doc["parent_id"] == PARENT
    assert handler_doc["parent_id"] == PARENT


def test_the_async_form_records_the_same_way() -> None:
    traced, sent = recorder()

    async def work() -> None:
        async with traced.in_subsegment_async("## async") as subsegment:
            subsegment.put_annotation("k", "v")

    asyncio.run(work())
    (doc,) = documents(sent)
    assert doc["name"] == "## async"
    assert doc["annotations"] == {"k": "v"}


def test_a_document_too_large_for_a_datagram_is_sent_without_its_metadata(
    caplog: pytest.LogCaptureFixture,
) -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler") as subsegment:
        subsegment.put_annotation("kept", "yes")
        subsegment.put_metadata("big", "x" * MAX_DATAGRAM_BYTES)
    (doc,) = documents(sent)
    assert len(sent[0]) <= MAX_DATAGRAM_BYTES
    assert doc["annotations"] == {"kept": "yes"}
    assert "metadata" not in doc


def test_a_document_too_large_even_without_metadata_is_not_sent_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    traced, sent = recorder()
    with (
        caplog.at_level(logging.WARNING, logger="outbox.xray"),
        traced.in_subsegment("## big") as subsegment,
    ):
        subsegment.put_annotation("huge", "x" * MAX_DATAGRAM_BYTES)
    assert sent == []
    assert "## big not sent: larger than one datagram or not JSON" in caplog.text
    assert "xxxx" not in caplog.text


def test_the_emitter_sends_one_datagram_per_subsegment_to_the_daemon_address() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(5)
        port = daemon.getsockname()[1]
        traced = Recorder(
            environ=SAMPLED | {"AWS_XRAY_DAEMON_ADDRESS": f"udp:127.0.0.1:{port} tcp:127.0.0.1:{port}"}
        )
        with traced.in_subsegment("## one"):
            pass
        with traced.in_subsegment("## two"):
            pass
        received = [daemon.recv(MAX_DATAGRAM_BYTES + 1), daemon.recv(MAX_DATAGRAM_BYTES + 1)]
    assert [doc["name"] for doc in documents(received)] == ["## one", "## two"]


def test_a_datagram_that_cannot_be_sent_is_logged_and_never_fails_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    emit = UdpEmitter(("256.256.256.256", 2000))  # no such address: sendto raises an OSError
    with caplog.at_level(logging.WARNING, logger="outbox.xray"):
        emit(PROTOCOL_HEADER + b"{}")
    assert "X-Ray subsegment not sent: gaierror" in caplog.text


def test_only_botocore_can_be_patched() -> None:
    traced, _ = recorder()
    with pytest.raises(ConfigurationError, match="botocore only"):
        traced.patch(["botocore", "requests"])


def _circular() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    "value",
    [_circular(), {("a", "b"): 1}, float("nan"), [float("inf")]],
    ids=["circular", "keys json cannot write", "nan", "infinity"],
)
def test_metadata_json_cannot_write_is_left_out_and_never_fails_the_caller(value: Any) -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler") as subsegment:
        subsegment.put_annotation("kept", "yes")
        subsegment.put_metadata("bad", value)
    (datagram,) = sent
    doc = json.loads(datagram[len(PROTOCOL_HEADER) :], parse_constant=pytest.fail)  # NaN is not JSON
    assert doc["annotations"] == {"kept": "yes"}
    assert "metadata" not in doc
    assert traced.current() is None


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_an_annotation_json_cannot_write_is_left_out(value: float) -> None:
    traced, sent = recorder()
    with traced.in_subsegment("## handler") as subsegment:
        subsegment.put_annotation("ratio", value)
    (doc,) = documents(sent)
    assert "annotations" not in doc


def test_a_datagram_of_the_largest_size_allowed_reaches_the_daemon(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(5)
        emit = UdpEmitter(daemon.getsockname())
        with caplog.at_level(logging.WARNING, logger="outbox.xray"):
            emit(b"x" * MAX_DATAGRAM_BYTES)
        assert "not sent" not in caplog.text
        assert len(daemon.recv(MAX_DATAGRAM_BYTES + 1)) == MAX_DATAGRAM_BYTES


NEXT_ROOT = "1-5759e989-0123456789abcdef01234567"
NEXT_PARENT = "0f0f0f0f0f0f0f0f"


def test_each_invocation_of_a_warm_process_is_recorded_in_its_own_trace() -> None:
    environ = dict(SAMPLED)
    traced, sent = recorder(environ)
    with traced.in_subsegment("## first"):
        pass
    environ["_X_AMZN_TRACE_ID"] = f"Root={NEXT_ROOT};Parent={NEXT_PARENT};Sampled=1"
    with traced.in_subsegment("## second"):
        pass
    first, second = documents(sent)
    assert (first["trace_id"], first["parent_id"]) == (ROOT, PARENT)
    assert (second["trace_id"], second["parent_id"]) == (NEXT_ROOT, NEXT_PARENT)


def test_a_subsegment_left_open_by_an_earlier_invocation_is_not_the_parent_of_the_next_ones() -> None:
    environ = dict(SAMPLED)
    traced, sent = recorder(environ)

    def pages() -> Generator[int, None, None]:
        with traced.in_subsegment("## pages"):
            yield 1
            yield 2

    # The next invocation in another trace, in the same trace (its own segment: a caller's trace header
    # passed on to two invocations), and unsampled.
    for root, parent, sampled in ((NEXT_ROOT, NEXT_PARENT, 1), (ROOT, NEXT_PARENT, 1), (ROOT, PARENT, 0)):
        environ["_X_AMZN_TRACE_ID"] = SAMPLED["_X_AMZN_TRACE_ID"]
        left_open = pages()
        next(left_open)  # suspended inside its subsegment, and kept (a cache, a module global)
        environ["_X_AMZN_TRACE_ID"] = f"Root={root};Parent={parent};Sampled={sampled}"
        sent.clear()
        with traced.in_subsegment("## handler") as subsegment:
            assert (subsegment is UNRECORDED) == (not sampled)
        assert traced.current() is None  # nothing kept from an earlier invocation: the stack does not grow
        if sampled:
            (handler,) = documents(sent)
            assert (handler["trace_id"], handler["parent_id"]) == (root, parent)
        else:
            assert sent == []
        left_open.close()
        pages_doc = documents(sent)[-1]  # still sent, in the trace it belongs to
        assert (pages_doc["name"], pages_doc["trace_id"], pages_doc["parent_id"]) == (
            "## pages",
            ROOT,
            PARENT,
        )


def test_a_traced_generator_closed_before_its_end_is_not_a_fault() -> None:
    traced, sent = recorder()

    def pages() -> Generator[int, None, None]:
        with traced.in_subsegment("## pages"):
            yield 1
            yield 2

    for page in pages():  # the caller stops early: Python closes the generator (GeneratorExit)
        assert page == 1
        break
    (doc,) = documents(sent)
    assert not {"fault", "error", "cause"} & doc.keys()
    assert traced.current() is None


def test_concurrent_tasks_each_record_under_their_own_subsegment() -> None:
    traced, sent = recorder()

    async def task(name: str, before: float, after: float) -> None:
        async with traced.in_subsegment_async(f"## {name}"):
            await asyncio.sleep(before)
            with traced.in_subsegment(f"## {name} call"):
                pass
            await asyncio.sleep(after)

    async def handler() -> None:
        with traced.in_subsegment("## handler"):
            # a opens, b opens, a calls, a closes, b calls, b closes: their lives overlap.
            await asyncio.gather(task("a", 0, 0.02), task("b", 0.01, 0.02))

    asyncio.run(handler())
    docs = documents(sent)
    names = {doc["id"]: doc["name"] for doc in docs}
    assert {doc["name"]: names.get(doc["parent_id"], doc["parent_id"]) for doc in docs} == {
        "## a call": "## a",
        "## b call": "## b",
        "## a": "## handler",
        "## b": "## handler",
        "## handler": PARENT,
    }
    assert traced.current() is None

"""outbox_tracing: when tracing is on (Powertools' rule); a disabled tracer records nothing.
What a traced invocation sends: tests/integration/publisher/test_publisher_tracing.py."""

from __future__ import annotations

import socket
from typing import Any

import pytest

import outbox_tracing as tracing
from tests.support.lambda_context import FakeLambdaContext

LAMBDA = {"LAMBDA_TASK_ROOT": "/var/task"}


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        (LAMBDA, True),
        (LAMBDA | {"POWERTOOLS_TRACE_DISABLED": "false"}, True),
        (LAMBDA | {"POWERTOOLS_TRACE_DISABLED": " TRUE "}, False),
        (LAMBDA | {"POWERTOOLS_TRACE_DISABLED": "1"}, False),
        (LAMBDA | {"AWS_SAM_LOCAL": "true"}, False),
        (LAMBDA | {"AWS_CHALICE_CLI_MODE": "true"}, False),
        ({"LAMBDA_TASK_ROOT": ""}, False),
        ({}, False),
    ],
)
def test_tracing_is_on_in_lambda_unless_disabled_or_emulated(environ: dict[str, str], on: bool) -> None:
    assert tracing.tracing_on(environ) is on


def test_a_disabled_tracer_records_nothing_in_a_sampled_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(0.2)
        monkeypatch.setenv("AWS_XRAY_DAEMON_ADDRESS", f"127.0.0.1:{daemon.getsockname()[1]}")
        monkeypatch.setenv(
            "_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
        )
        monkeypatch.setenv("LAMBDA_TASK_ROOT", "/var/task")
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        tracer = tracing.tracer("test")

        @tracer.capture_method
        def fail() -> None:
            raise ValueError("the request's text")

        @tracer.capture_lambda_handler
        def handler(event: Any, context: Any) -> str:
            tracer.put_annotation("k", "v")
            tracer.put_metadata("k", "v")
            with pytest.raises(ValueError, match="request"):
                fail()
            return "done"

        assert handler({}, FakeLambdaContext()) == "done"
        assert tracer.disabled
        assert isinstance(tracer.provider, tracing.NoTracing)
        with pytest.raises(TimeoutError):
            daemon.recv(65536)


class _Entity:
    def __init__(self, cause: Any, metadata: dict[str, dict[str, Any]]) -> None:
        self.cause, self.metadata = cause, metadata


class _Throwable:
    def __init__(self, message: str | None) -> None:
        if message is not None:
            self.message = message


def test_the_emitter_sends_exceptions_by_type_and_an_aws_errors_code_and_nothing_else_changed() -> None:
    sent: list[Any] = []

    class Inner:
        def send_entity(self, entity: Any) -> None:
            sent.append(entity)

        def set_daemon_address(self, address: str | None) -> None:
            sent.append(address)

    emitter = tracing.TypesOnly(Inner())
    text, aws, none = (
        _Throwable("invalid literal: 'secret'"),
        _Throwable(
            "An error occurred (ResourceNotFoundException) when calling the GetItem operation: 'secret'"
        ),
        _Throwable(None),
    )
    entity = _Entity(
        {"exceptions": [text, aws, none]}, {"svc": {"f error": KeyError("secret"), "event_ids": ["e-1"]}}
    )
    emitter.send_entity(entity)
    emitter.send_entity(_Entity("a1b2c3", {}))  # an exception a subsegment under it recorded: its id
    emitter.set_daemon_address("127.0.0.1:3000")
    assert sent[0] is entity
    assert not hasattr(text, "message")
    assert aws.message == "ResourceNotFoundException"
    assert not hasattr(none, "message")
    assert entity.metadata == {"svc": {"f error": "KeyError", "event_ids": ["e-1"]}}
    assert sent[1].cause == "a1b2c3"
    assert sent[2] == "127.0.0.1:3000"


def test_an_entity_the_emitter_cannot_read_is_dropped_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[Any] = []

    class Inner:
        def send_entity(self, entity: Any) -> None:
            sent.append(entity)

    tracing.TypesOnly(Inner()).send_entity(_Entity({"exceptions": [_Throwable("x")]}, None))  # type: ignore[arg-type]
    assert sent == []
    assert "not sent" in caplog.text

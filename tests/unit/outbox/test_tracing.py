"""outbox.tracing: a disabled tracer records nothing and builds no recorder, even in a sampled invocation."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aws_lambda_powertools import Tracer

from outbox import tracing
from outbox.xray import Recorder
from tests.support.lambda_context import FakeLambdaContext


def test_a_disabled_tracer_records_nothing_in_a_sampled_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tracer, "_config", dict(Tracer._default_config))  # Powertools' shared config
    tracing.recorder.cache_clear()
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

        @tracer.capture_lambda_handler
        def handler(event: Any, context: Any) -> str:
            tracer.put_annotation("k", "v")
            return "done"

        assert handler({}, FakeLambdaContext()) == "done"
        assert tracer.disabled
        assert not isinstance(tracer.provider, Recorder)
        assert tracing.recorder.cache_info().currsize == 0
        with pytest.raises(TimeoutError):
            daemon.recv(65536)

"""The runtime fixtures: a local runtime on the hand-written template of tests/support/local_templates.py, one
on the synthesized sample app, and the runtime's moto server alone."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aws_lambda_powertools import Metrics

from outbox_local.aws_server import LocalAwsServer
from outbox_local.faults import FaultInjector
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.local_templates import options, template, write_template
from tests.support.synth import Synthesized


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(options(write_template(tmp_path, template()))) as started:
        yield started


@pytest.fixture
def app_runtime(synthesized: Synthesized) -> Iterator[LocalRuntime]:
    """The sample app as `cdk synth` wrote it, driven step by step (`drain_streams`), metrics off."""
    app_options = RuntimeOptions(
        template_path=synthesized.template_path,
        background=False,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    with LocalRuntime(app_options) as started:
        yield started


@pytest.fixture
def fresh_powertools_metrics() -> None:
    """Powertools keeps one metric set for the whole process (class-level, shared by every `Metrics`), and
    hosted functions use the process's Powertools. A function run with POWERTOOLS_METRICS_DISABLED (the
    demo's) never flushes it, so what an earlier test left would be flushed by the next function: tests that
    count metrics start from an empty set."""
    Metrics().clear_metrics()


@pytest.fixture
def endpoint() -> Iterator[str]:
    """The runtime's moto server on a free port, emptied first (moto's state is process-wide)."""
    server = LocalAwsServer(FaultInjector())
    server.start()
    try:
        reset = urllib.request.Request(f"{server.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(reset, timeout=10):  # noqa: S310 - our own loopback server
            pass
        yield server.endpoint_url
    finally:
        server.stop()

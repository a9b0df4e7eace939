"""The runtime fixtures: a local runtime on the hand-written template of tests/support/local_templates.py, and
one on the synthesized sample app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aws_lambda_powertools import Metrics

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

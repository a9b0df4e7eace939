"""One synthesis of the real app (with cdk-nag) per test session; every infra test reads it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Synthesized:
    app: Any  # aws_cdk.App (typed loosely: importing aws_cdk at collection time starts Node)
    stack: Any
    template: dict[str, Any]
    outdir: Path

    @property
    def validation_report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


def cdk_json_context() -> dict[str, Any]:
    """The same context the CDK CLI passes from cdk.json, so tests see the template `cdk synth` writes."""
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return context


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from sample_stack.app import build_app
    from sample_stack.constants import STACK_ID

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app(cdk_json_context(), outdir=str(outdir))
    # cdk-nag runs here: an unacknowledged finding makes synth raise and every infra test error.
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name(STACK_ID).template
    return Synthesized(app=app, stack=stack, template=template, outdir=outdir)


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.template

"""The sample app synthesized once per test session (per worker), as `cdk synth` would write it.

The same context the CDK CLI passes (cdk.json's, plus asset metadata, which the local runtime reads to
find each function's code), cdk-nag attached: an unacknowledged finding makes the synthesis raise.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the CDK CLI adds to cdk.json's context: asset paths in each resource's metadata.
CLI_CONTEXT = {"aws:cdk:enable-asset-metadata": True}

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass(frozen=True)
class Synthesized:
    app: Any  # aws_cdk.App (typed loosely: importing aws_cdk at collection time starts Node)
    stack: Any
    template: dict[str, Any]
    outdir: Path

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{self.stack.stack_name}.template.json"

    @property
    def validation_report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


def cdk_json_context() -> dict[str, Any]:
    """The same context the CDK CLI passes from cdk.json, so tests see the template `cdk synth` writes."""
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return {**context, **CLI_CONTEXT}


def synthesize(outdir: Path) -> Synthesized:
    from infra.app import build_app
    from infra.constants import STACK_ID

    app, stack = build_app(cdk_json_context(), outdir=str(outdir))
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name(STACK_ID).template
    return Synthesized(app=app, stack=stack, template=template, outdir=outdir)

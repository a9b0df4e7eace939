"""The sample app synthesized once per test session (per worker), as `cdk synth` would write it.

The same context the CDK CLI passes (cdk.json's, plus asset metadata, which the local runtime reads to
find each function's code), cdk-nag attached: an unacknowledged finding makes the synthesis raise.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the CDK CLI adds to cdk.json's context: asset paths in each resource's metadata.
CLI_CONTEXT = {"aws:cdk:enable-asset-metadata": True}

# jsii prints Node 20's end-of-life banner when aws_cdk starts Node, unless told that Node 20 is known here.
JSII_SILENCE_NODE_EOL = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
os.environ.setdefault(JSII_SILENCE_NODE_EOL, "20")

CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"


def cli_environment() -> dict[str, str]:
    """The environment the tests run the real CDK CLI in, as the Makefile does: this venv's python3 first
    on PATH, offline (no telemetry, no version check, no AWS credentials or region: the CLI would otherwise
    ask AWS for the account), and nothing that would hide a banner the user would see."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key != JSII_SILENCE_NODE_EOL and not key.startswith("AWS_")
    }
    bin_dir = str(Path(sys.executable).parent)
    environment["PATH"] = os.pathsep.join([bin_dir, environment.get("PATH", "")])
    environment["CDK_DISABLE_CLI_TELEMETRY"] = "1"
    environment["CDK_DISABLE_VERSION_CHECK"] = "1"
    return environment


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


# `cdk synth -c kms_key=customer`: one customer-managed key for every table, queue, topic, log group, the bus.
CUSTOMER_KEY_CONTEXT = {"kms_key": "customer"}


def synthesize(outdir: Path, context: dict[str, Any] | None = None) -> Synthesized:
    """The sample app as `cdk synth` writes it, with `context` (`-c key=value`) over cdk.json's."""
    from infra.app import build_app
    from infra.constants import STACK_ID

    app, stack = build_app({**cdk_json_context(), **(context or {})}, outdir=str(outdir))
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name(STACK_ID).template
    return Synthesized(app=app, stack=stack, template=template, outdir=outdir)

"""The stacks of a cloud assembly (what `cdk synth` writes into cdk.out): each stack's name, template and
region, read from its `manifest.json`, in an order that creates every stack after the stacks it depends on.

What `outbox local up --all-stacks` starts: an app deployed to several regions (a home region's stack holding
a global table, a replica region's stack reading its replica) runs in one runtime, each stack in the region
its environment names (`aws://<account>/<region>`; an environment-agnostic stack, `unknown-region`, in the
runtime's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outbox_local.errors import TemplateError

__all__ = ["AssemblyStack", "assembly_stacks"]

_STACK_TYPE = "aws:cloudformation:stack"
_NO_REGION = "unknown-region"


@dataclass(frozen=True)
class AssemblyStack:
    name: str
    template_path: Path
    region: str | None
    """The region its environment names; None: environment-agnostic (the runtime's)."""


def assembly_stacks(cdk_out: Path) -> list[AssemblyStack]:
    """Every stack of the assembly, each after the stacks it depends on (else in the manifest's order)."""
    manifest_path = cdk_out / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise TemplateError(
            f"no manifest.json in {cdk_out}: run `cdk synth` (or `make synth`) first"
        ) from error
    except ValueError as error:
        raise TemplateError(f"{manifest_path} is not JSON: {error}") from error
    artifacts: dict[str, Any] = manifest.get("artifacts") or {}
    stacks = {key: artifact for key, artifact in artifacts.items() if artifact.get("type") == _STACK_TYPE}
    if not stacks:
        raise TemplateError(f"{manifest_path} names no stack: run `cdk synth` (or `make synth`) first")
    ordered: list[str] = []

    def visit(key: str, path: tuple[str, ...]) -> None:
        if key in ordered:
            return
        if key in path:
            raise TemplateError(
                f"{manifest_path}: the stacks depend on each other in a cycle: {' -> '.join(path)}"
            )
        for dependency in stacks[key].get("dependencies") or []:
            if dependency in stacks:
                visit(dependency, (*path, key))
        ordered.append(key)

    for key in stacks:
        visit(key, ())
    return [_stack(cdk_out, key, stacks[key]) for key in ordered]


def _stack(cdk_out: Path, key: str, artifact: dict[str, Any]) -> AssemblyStack:
    properties = artifact.get("properties") or {}
    template = properties.get("templateFile")
    if not isinstance(template, str):
        raise TemplateError(f"stack {key} of {cdk_out}/manifest.json names no templateFile")
    environment = str(artifact.get("environment") or "")
    region = environment.rsplit("/", 1)[-1] if environment.startswith("aws://") else _NO_REGION
    return AssemblyStack(
        name=str(properties.get("stackName") or key),
        template_path=cdk_out / template,
        region=None if region == _NO_REGION else region,
    )

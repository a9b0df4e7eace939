"""A synthesized cloud assembly with one function's code changed, as a second `cdk synth` after an edit would
write it: the function's asset under a new hash (a new directory, a new S3 key), the template naming it, and
the template's own asset under its new hash. `cdk deploy --app <assembly>` then uploads the new code and
template (cdk-assets skips an object whose key exists) and the stack is updated, with no second synthesis."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def with_changed_code(
    assembly: Path, into: Path, stack: str, function_logical_id: str, edit: Callable[[Path], object]
) -> Path:
    """A copy of `assembly` at `into` where `edit(code_dir)` changed the code of one function of `stack`."""
    shutil.copytree(assembly, into)
    template_path = into / f"{stack}.template.json"
    assets_path = into / f"{stack}.assets.json"
    template: dict[str, Any] = json.loads(template_path.read_text())
    assets: dict[str, Any] = json.loads(assets_path.read_text())
    function = template["Resources"][function_logical_id]
    old_hash = str(function["Metadata"]["aws:asset:path"]).removeprefix("asset.")
    code = into / f"asset.{old_hash}"
    new_code = into / f"asset.{old_hash}.changed"
    shutil.copytree(code, new_code)
    edit(new_code)
    new_hash = _tree_hash(new_code)
    new_code.rename(into / f"asset.{new_hash}")
    function["Metadata"]["aws:asset:path"] = f"asset.{new_hash}"
    function["Properties"]["Code"]["S3Key"] = f"{new_hash}.zip"
    assets["files"][new_hash] = _moved(assets["files"][old_hash], f"asset.{new_hash}", f"{new_hash}.zip")
    text = json.dumps(template, indent=1)
    template_path.write_text(text)
    old_template_hash = next(
        key for key, entry in assets["files"].items() if entry["source"]["path"] == template_path.name
    )
    template_hash = hashlib.sha256(text.encode()).hexdigest()
    assets["files"][template_hash] = _moved(
        assets["files"].pop(old_template_hash), template_path.name, f"{template_hash}.json"
    )
    assets_path.write_text(json.dumps(assets, indent=1))
    manifest_path = into / "manifest.json"
    manifest_path.write_text(
        manifest_path.read_text().replace(f"{old_template_hash}.json", f"{template_hash}.json")
    )
    return into


def _moved(entry: dict[str, Any], source: str, key: str) -> dict[str, Any]:
    moved: dict[str, Any] = json.loads(json.dumps(entry))
    moved["source"]["path"] = source
    for destination in moved["destinations"].values():
        destination["objectKey"] = key
    return moved


def _tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(directory)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()

"""Lambda code assets that hold exactly what a handler imports, built without Docker.

A function's asset is computed from its handler module: that module and every module it imports,
transitively, from the packages the caller vendors (this project's own, plus e.g. a sample domain),
read from wherever Python finds them: the source tree in development, site-packages once installed.
What else a handler imports must come from the Lambda runtime (the standard library, boto3 and
botocore) or from the Powertools layer; an import of anything else fails the synth with its name,
because the function would fail at its first invocation.

Imports are read from the source (`ast`), nothing is executed. Imports inside `if TYPE_CHECKING:` are
not followed: they never run.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

# Packages every function of this project may import without shipping them.
RUNTIME_PACKAGES = frozenset({"boto3", "botocore"})
"""In the Lambda Python runtime (docs/deploy.md, "What each function ships")."""
LAYER_PACKAGES = frozenset({"aws_lambda_powertools"})
"""In the Powertools layer every function gets."""
PROJECT_PACKAGES = ("outbox", "outbox_publisher")
"""This distribution's Lambda code."""


class AssetError(ValueError):
    """A handler's code cannot be packaged: it imports something no function would have."""


def handler_modules(handler_module: str, vendored: Collection[str]) -> dict[str, Path]:
    """Every module the handler module needs from the vendored packages: module name -> source file.

    Package `__init__` modules count too: importing `a.b` runs `a/__init__.py` first.
    """
    roots = {name: _package_root(name) for name in vendored}
    found: dict[str, Path] = {}
    queue = [handler_module]
    while queue:
        name = queue.pop()
        if name in found:
            continue
        path = _module_file(name, roots)
        if path is None:
            raise AssetError(f"{name} is not a module of the vendored packages {sorted(vendored)}")
        found[name] = path
        parent = name.rpartition(".")[0]
        if parent:
            queue.append(parent)
        for imported in _imports(path, name, is_package=path.name == "__init__.py"):
            top = imported.partition(".")[0]
            if top in roots:
                queue.extend(_with_submodule_candidates(imported, roots))
            elif not _provided(top):
                raise AssetError(
                    f"{name} imports {imported}, which neither the Lambda runtime nor the Powertools layer "
                    f"provides and which is not vendored ({sorted(vendored)}): vendor it, or give the "
                    "function its own code"
                )
    return found


def function_code(handler: str, vendored: Collection[str] = PROJECT_PACKAGES) -> lambda_.Code:
    """The asset of the function whose handler is `handler` (`package.module.function`)."""
    module = handler.rpartition(".")[0]
    if not module:
        raise AssetError(f"handler {handler!r} must be module.function")
    from aws_cdk import aws_lambda  # noqa: PLC0415 - the import analysis above needs no CDK (nor Node)

    files = handler_modules(module, vendored)
    return aws_lambda.Code.from_asset(str(_stage(_relative_files(files))))


def _package_root(top: str) -> Path:
    """The directory holding the top-level package `top` (found, not imported)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"vendored package {top!r} is not importable here (is it installed?)")
    locations = list(spec.submodule_search_locations)
    if len(locations) != 1 or not (Path(locations[0]) / "__init__.py").is_file():
        raise AssetError(f"vendored package {top!r} must be a regular package with an __init__.py")
    return Path(locations[0]).parent


def _module_file(name: str, roots: Mapping[str, Path]) -> Path | None:
    root = roots.get(name.partition(".")[0])
    if root is None:
        return None
    base = root.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _with_submodule_candidates(imported: str, roots: Mapping[str, Path]) -> Iterator[str]:
    """`from a import b`: `b` is a submodule or a name in `a`. Both arrive here as `a.b`."""
    if _module_file(imported, roots) is not None:
        yield imported
    else:
        yield imported.rpartition(".")[0]


def _imports(path: Path, module: str, *, is_package: bool) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base == "__future__":
                continue
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and everything under it that can run: `if TYPE_CHECKING:` bodies are left out."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:
                yield from _runtime_nodes(statement)
        else:
            yield from _runtime_nodes(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _provided(top: str) -> bool:
    return top in sys.stdlib_module_names or top in RUNTIME_PACKAGES or top in LAYER_PACKAGES


def _relative_files(files: Mapping[str, Path]) -> dict[str, Path]:
    """Each source file under the path it has inside the asset (`outbox/model.py`)."""
    relative = {}
    for name, path in files.items():
        root = _package_root(name.partition(".")[0])
        relative[path.relative_to(root).as_posix()] = path
    return relative


def _stage(files: Mapping[str, Path]) -> Path:
    """A directory holding exactly `files`, named by their content so that a synth never changes it.

    The directory is shared by every synth on the machine and written atomically: parallel synths
    (test workers) either create it or find it complete.
    """
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(relative.encode() + b"\0" + files[relative].read_bytes() + b"\0")
    target = Path(tempfile.gettempdir()) / "outbox-cdk-assets" / digest.hexdigest()[:32]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    for relative, source in files.items():
        destination = building / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    try:
        os.replace(building, target)
    except OSError:
        # Another synth finished the same directory first: its content is identical by construction.
        shutil.rmtree(building, ignore_errors=True)
        if not target.is_dir():
            raise
    return target

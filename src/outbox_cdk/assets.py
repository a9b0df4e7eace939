"""Lambda code assets that hold exactly what a handler imports, built without Docker.

A function's asset is computed from its handler module: that module and every module it imports,
transitively, from the packages the caller vendors (this project's own, plus e.g. a sample domain),
read from wherever Python finds them: the source tree in development, site-packages once installed.
What else a handler imports must come from the Lambda runtime (the python3.13 standard library, boto3
and botocore) or from the Powertools layer; an import of anything else fails the synth with its name,
because the function would fail at its first invocation. Only Python modules are shipped.

Imports are read from the source (`ast`), nothing is executed, so what the reading cannot see is refused
or must be named: a star import of a vendored package is refused (name what you import); a module
imported by name at run time (`importlib.import_module`) goes in `extra_modules`. Imports inside
`if TYPE_CHECKING:` are not followed (they never run); an import guarded by `except ImportError` is
optional (shipped when vendored, otherwise left to the runtime).
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from outbox_cdk.errors import OutboxConstructError

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_
    from constructs import IConstruct

# Packages every function of this project may import without shipping them.
RUNTIME_PACKAGES = frozenset({"boto3", "botocore"})
"""In the Lambda Python runtime (docs/deploy.md, "What each function ships")."""
LAYER_PACKAGES = frozenset({"aws_lambda_powertools"})
"""In the Powertools layer every function gets."""
PROJECT_PACKAGES = ("outbox", "outbox_publisher", "outbox_sweeper")
"""This distribution's Lambda code."""
# The synth may run on an older Python than the functions (python3.13): these left the standard library
# in 3.13 (PEP 594 and lib2to3), so an import of one would fail in Lambda.
REMOVED_IN_PYTHON_313 = frozenset(
    {
        "aifc",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "crypt",
        "imghdr",
        "lib2to3",
        "mailcap",
        "msilib",
        "nis",
        "nntplib",
        "ossaudiodev",
        "pipes",
        "sndhdr",
        "spwd",
        "sunau",
        "telnetlib",
        "uu",
        "xdrlib",
    }
)
_STAGING_DIR = ".outbox-assets"
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


class AssetError(OutboxConstructError):
    """A handler's code cannot be packaged: it imports something no function would have."""


@dataclass(frozen=True, slots=True)
class _Import:
    name: str
    optional: bool = False
    """Guarded by `except ImportError`: the code runs without it."""


def handler_modules(
    handler_module: str, vendored: Collection[str], *, extra_modules: Collection[str] = ()
) -> dict[str, Path]:
    """Every module the handler module needs from the vendored packages: module name -> source file.

    Package `__init__` modules count too: importing `a.b` runs `a/__init__.py` first.
    """
    roots = {name: _package_root(name) for name in vendored}
    found: dict[str, Path] = {}
    queue = [handler_module, *extra_modules]
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
            top = imported.name.partition(".")[0]
            if top in roots:
                queue.extend(_with_submodule_candidates(imported.name, roots))
            elif top in REMOVED_IN_PYTHON_313 and not imported.optional:
                raise AssetError(f"{name} imports {imported.name}, which python3.13 no longer has")
            elif not _provided(top) and not imported.optional:
                raise AssetError(
                    f"{name} imports {imported.name}, which neither the Lambda runtime nor the Powertools "
                    f"layer provides and which is not vendored ({sorted(vendored)}): vendor it, or give "
                    "the function its own code"
                )
    return found


def function_code(
    scope: IConstruct,
    handler: str,
    vendored: Collection[str] = PROJECT_PACKAGES,
    *,
    extra_modules: Collection[str] = (),
) -> lambda_.Code:
    """The asset of the function whose handler is `handler` (`package.module.function`).

    It is staged under the app's output directory (`cdk.out/.outbox-assets/<digest>`): private to this
    synth's user, and checked against its digest before it is reused.
    """
    # The import analysis needs no CDK (nor Node): only packaging imports it.
    from aws_cdk import Stage, aws_lambda  # noqa: PLC0415

    module = handler.rpartition(".")[0]
    if not module:
        raise AssetError(f"handler {handler!r} must be module.function")
    files = _relative_files(handler_modules(module, vendored, extra_modules=extra_modules))
    stage = Stage.of(scope)
    if stage is None or not stage.outdir:
        raise AssetError("a function's code is staged in the app's output directory: create it in an App")
    return aws_lambda.Code.from_asset(str(stage_files(files, Path(stage.outdir) / _STAGING_DIR)))


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


def _imports(path: Path, module: str, *, is_package: bool) -> Iterator[_Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    for node, optional in _runtime_nodes(tree, optional=False):
        if isinstance(node, ast.Import):
            yield from (_Import(alias.name, optional) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base == "__future__":
                continue
            if any(alias.name == "*" for alias in node.names):
                raise AssetError(
                    f"{module} star-imports {base}: the asset builder cannot see what that needs; "
                    "import the names you use"
                )
            yield _Import(base, optional)
            yield from (_Import(f"{base}.{alias.name}", optional) for alias in node.names)


def _runtime_nodes(node: ast.AST, *, optional: bool) -> Iterator[tuple[ast.AST, bool]]:
    """`node` and everything under it that can run, each with whether an `except ImportError` guards it.

    `if TYPE_CHECKING:` bodies are left out.
    """
    yield node, optional
    if isinstance(node, ast.Try) and any(_catches_import_error(handler) for handler in node.handlers):
        for statement in node.body:
            yield from _runtime_nodes(statement, optional=True)
        for rest in (*node.handlers, *node.orelse, *node.finalbody):
            yield from _runtime_nodes(rest, optional=optional)
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:
                yield from _runtime_nodes(statement, optional=optional)
        else:
            yield from _runtime_nodes(child, optional=optional)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught is not None else []
    return any(
        isinstance(name, ast.Name) and name.id in {"ImportError", "ModuleNotFoundError"} for name in names
    )


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


def _digest(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(relative.encode() + b"\0" + files[relative] + b"\0")
    return digest.hexdigest()


def _read_tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file()
    }


def stage_files(files: Mapping[str, Path], parent: Path) -> Path:
    """A directory under `parent` holding exactly `files` (asset path -> source), named by their content.

    An existing directory of that name is reused only if it still holds exactly that content; otherwise it
    is rebuilt. A new one is written beside it and moved into place, so a parallel synth either finds it
    complete or builds its own.
    """
    content = {relative: source.read_bytes() for relative, source in files.items()}
    digest = _digest(content)
    target = parent / digest[:32]
    if target.is_dir() and _digest(_read_tree(target)) == digest:
        return target
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=parent))
    try:
        for relative, data in content.items():
            destination = building / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
        if target.is_dir():
            shutil.rmtree(target)  # its content no longer matches its name
        os.replace(building, target)
    except OSError:
        # Another synth moved the same content into place first.
        if not (target.is_dir() and _digest(_read_tree(target)) == digest):
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target

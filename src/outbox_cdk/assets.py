"""Lambda code assets built without Docker: the function's vendored packages, whole, as Python source.

A function's asset is every `.py` file (and event schemas: `schemas/*.json`) of the packages it vendors (this
project's own, plus e.g. a sample domain), read from wherever Python finds them (the source tree in
development, site-packages once installed) and staged in one directory for `aws_lambda.Code.from_asset`;
what else a handler imports comes from the Lambda runtime (boto3, botocore) or the Powertools layer.
Whole packages rather than only the modules a handler imports: each asset is 12-33% larger zipped (65 KB
for the Orders API, 125 KB the largest), functions that vendor the same packages share one (3 assets of
254 KB in the sample app, not 5 of 371 KB), and a function imports, so pays at a cold start for, the same
modules either way.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from outbox_cdk.errors import OutboxConstructError

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_
    from constructs import IConstruct

PROJECT_PACKAGES = ("outbox", "outbox_tracing", "outbox_publisher", "outbox_sweeper")
"""This distribution's Lambda code."""
_STAGING_DIR = ".outbox-assets"
_CODE_FILES = ("*.py", "schemas/*.json")
"""What an asset takes of a package: its modules, and the event schemas of a `schemas` folder (outbox.schemas)
beside the code that loads them. No other data file."""


class AssetError(OutboxConstructError):
    """A function's code cannot be packaged: its handler or a vendored package cannot be found."""


def package_files(handler_module: str, vendored: Collection[str]) -> dict[str, Path]:
    """Every `.py` file and `schemas/*.json` file of the vendored packages, by its path in the asset
    (`outbox/model.py`)."""
    files: dict[str, Path] = {}
    for name in vendored:
        package = _package_dir(name)
        for suffix in _CODE_FILES:
            for path in package.rglob(suffix):
                files[path.relative_to(package.parent).as_posix()] = path
    handler_file = handler_module.replace(".", "/")
    if f"{handler_file}.py" not in files and f"{handler_file}/__init__.py" not in files:
        raise AssetError(f"{handler_module} is not a module of the vendored packages {sorted(vendored)}")
    return files


def function_code(
    scope: IConstruct, handler: str, vendored: Collection[str] = PROJECT_PACKAGES
) -> lambda_.Code:
    """The asset of the function whose handler is `handler` (`package.module.function`).

    It is staged under the app's output directory (`cdk.out/.outbox-assets/<digest>`): private to this
    synth's user, and checked against its digest before it is reused.
    """
    # Only packaging needs the CDK (and Node).
    from aws_cdk import Stage, aws_lambda  # noqa: PLC0415

    module = handler.rpartition(".")[0]
    if not module:
        raise AssetError(f"handler {handler!r} must be module.function")
    files = package_files(module, vendored)
    stage = Stage.of(scope)
    if stage is None or not stage.outdir:
        raise AssetError("a function's code is staged in the app's output directory: create it in an App")
    return aws_lambda.Code.from_asset(str(stage_files(files, Path(stage.outdir) / _STAGING_DIR)))


def _package_dir(top: str) -> Path:
    """The directory of the top-level package `top` (found, not imported)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"vendored package {top!r} is not importable here (is it installed?)")
    locations = list(spec.submodule_search_locations)
    if len(locations) != 1 or not (Path(locations[0]) / "__init__.py").is_file():
        raise AssetError(f"vendored package {top!r} must be a regular package with an __init__.py")
    return Path(locations[0])


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

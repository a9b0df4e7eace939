"""Imports flow one way: the core (`outbox`) owns the writer contract and imports none of the other packages;
the publisher builds on the core, the sweeper on the publisher; operations, consumers, infrastructure and the
CLI on what they name below. Every import counts (a function's own, a type checker's), read from the source
(AST): a package that reached back up would ship its dependants in a writer's Lambda asset, and a cycle
would make either one impossible to change alone. A unit test loads no local-runtime code (moto and the
emulators are for tests that run the local runtime, not for the unit suite's every collection).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
MAY_IMPORT = {
    "outbox": set(),
    "outbox_tracing": set(),
    "outbox_publisher": {"outbox", "outbox_tracing"},
    "outbox_sweeper": {"outbox", "outbox_tracing", "outbox_publisher"},
    "outbox_inbox": {"outbox"},
    # `outbox status` reads the regions' heartbeats with the publishing paths' own store and model.
    "outbox_ops": {"outbox", "outbox_publisher", "outbox_sweeper"},
    "outbox_local": {"outbox"},
    "outbox_cli": {"outbox", "outbox_ops", "outbox_local"},
    # The constructs validate each function's configuration at synth, with the function's own rules.
    "outbox_cdk": {"outbox", "outbox_publisher", "outbox_sweeper", "outbox_inbox", "outbox_ops"},
}
ALLOWED_LOCAL = ("outbox_local", "outbox_local.queues")
"""The local runtime's package (no imports of its own) and its SQS reader (plain boto3, which the CLI's queue
watcher imports): neither loads moto or an emulator."""
CONTRACT = {
    "__init__",
    "aws",  # the process's boto3 clients: the writer's own code, the functions and the inbox build on them
    "aws_errors",
    "clock",
    "config",
    "dynamodb",
    "errors",
    "event_rules",  # what every event holds, field by field: checked on write and on every row read
    "item_reader",
    "limits",
    "metrics",  # metric names shared by the functions and their alarms (outbox_cdk)
    "generation",  # the redrive counter every conditional write of a row compares
    "model",
    "numbers",
    "offloading",  # the writer's side of large payloads: an envelope over the threshold goes to the store
    "outputs",  # stack output names shared by the stack and the CLI
    "payload",
    "payload_refs",  # a row's payload_ref/payload_bytes: what the writer writes and every reader follows
    "region_settings",  # the regions an outbox spans: the writer's `origin`, and the names its functions read
    "payload_store",  # the payload store's port (no boto3) and its typed errors
    "s3_payloads",  # the store's S3 adapter, which writers, the publisher and the inbox share
    "schemas",  # the event schemas the writer checks every event against before saving (docs/schemas.md)
    "stream_mapping",  # the stream filter contract, shared by the CDK, the publisher and the local runtime
    "trace_context",  # the row's trace_header/traceparent: what the writer captures and every hop forwards
    "transaction",
    "writer",
}
"""The core's modules: the writer contract and what it needs (a subset check: fewer is fine)."""


def imported_packages(package: str) -> dict[str, set[str]]:
    """Each first-party package `package`'s modules import, with the modules that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((SRC / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in MAY_IMPORT and top != package:
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_package_is_placed() -> None:
    packages = {path.parent.name for path in SRC.glob("*/__init__.py")}
    assert packages == set(MAY_IMPORT)


def test_imports_flow_one_way() -> None:
    breaches = {
        f"{package} -> {imported}: {sorted(where)}"
        for package, allowed in MAY_IMPORT.items()
        for imported, where in imported_packages(package).items()
        if imported not in allowed
    }
    assert not breaches, "\n".join(sorted(breaches))


def test_the_core_holds_only_the_writer_contract() -> None:
    modules = {path.stem for path in (SRC / "outbox").glob("*.py")}
    assert not modules - CONTRACT, "publishing or operations code belongs with its package"
    assert not [path for path in (SRC / "outbox").iterdir() if path.is_dir() and path.name != "__pycache__"]


def test_a_unit_test_loads_no_local_runtime_code() -> None:
    # Given every unit test module outside tests/unit/local, and the suite's conftest, imported in one fresh
    # interpreter that refuses to import the local runtime (so the error names the module that asks for it)
    modules = ["tests.conftest"] + [
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in sorted((ROOT / "tests" / "unit").rglob("*.py"))
        if "local" not in path.relative_to(ROOT / "tests" / "unit").parts[:1]
    ]
    program = (
        "import importlib, sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == 'outbox_local' and name not in {ALLOWED_LOCAL!r}:\n"
        "            raise ImportError('a unit test imports the local runtime: ' + name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
    )
    # When they are imported
    done = subprocess.run(  # noqa: S603 - this interpreter, our own modules
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # Then none of them loads it
    assert done.returncode == 0, done.stderr[-3000:]

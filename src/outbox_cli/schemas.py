"""`outbox schemas check [DIR ...]`: are a service's event schemas loadable, and is each version compatible
with the one before it (outbox_ops.schema_compatibility, docs/schemas.md)?

Without DIR, every directory named `schemas` under the current one that holds `<event_type>.v<N>.json` files
(the card's layout keeps them next to each function's code). Prints one line per breach and a summary.

Exit codes: 0 every schema loads and every version is compatible; 1 a file does not load, a version is
missing, or a change breaks a consumer; 2 bad usage (no such directory, none found, fastjsonschema missing).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from outbox.errors import ConfigurationError
from outbox.schemas import SCHEMA_FILE, SchemaFile, read_schema_files
from outbox_cli import arguments as argument_types
from outbox_cli.operations import name_by_choices
from outbox_ops.schema_compatibility import breaches

EXIT_BREAKING = 1
EXIT_USAGE = 2
# Not searched for schema directories: tools' and build output's trees.
_SKIPPED = frozenset({"node_modules", "cdk.out", "build", "dist", "__pycache__"})


def add_commands(commands: Any) -> None:
    """Register `schemas check` on the `outbox` parser's subcommands."""
    schemas = commands.add_parser("schemas", help="event schemas: check versions for breaking changes")
    schema_commands = schemas.add_subparsers(dest="schemas_command", required=True)
    check = schema_commands.add_parser(
        "check", help="refuse a schema version that breaks a consumer of the version before it"
    )
    check.add_argument(
        "directories",
        metavar="DIR",
        nargs="*",
        type=argument_types.path,
        help="a folder of <event_type>.v<N>.json files (default: every `schemas` folder under this one)",
    )
    check.set_defaults(run=check_command)
    name_by_choices(schema_commands)


def check_command(arguments: argparse.Namespace, out: TextIO) -> int:
    directories: list[Path] = list(arguments.directories) or list(find_schema_directories(Path()))
    if not directories:
        print("outbox: no `schemas` folder with <event_type>.v<N>.json files here; name one", file=sys.stderr)
        return EXIT_USAGE
    try:
        import fastjsonschema  # noqa: F401, PLC0415 - says what is missing before any file is read
    except ModuleNotFoundError:
        print(
            "outbox: schemas check needs fastjsonschema: pip install 'dynamodb-outbox[schemas]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    exit_code = 0
    for directory in directories:
        if not directory.is_dir():
            print(f"outbox: {directory} is not a directory", file=sys.stderr)
            return EXIT_USAGE
        problems, summary = check_directory(directory)
        for problem in problems:
            print(f"{directory}: {problem}", file=out)
        print(f"{directory}: {summary}", file=out)
        if problems:
            exit_code = EXIT_BREAKING
    return exit_code


def check_directory(directory: Path) -> tuple[list[str], str]:
    """The problems of one folder's schemas (one line each), and a one-line summary."""
    from outbox.schemas import SchemaRegistry  # noqa: PLC0415

    try:
        files = read_schema_files(directory)
        SchemaRegistry({key: file.document for key, file in files.items()})  # each compiles, as the writer's
    except ConfigurationError as error:
        return [str(error)], "refused: a schema file does not load"
    problems: list[str] = []
    versions = _versions_by_type(files.values())
    for event_type, chain in sorted(versions.items()):
        numbers = [file.key.version for file in chain]
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        if missing:
            problems.append(
                f"{event_type}: version(s) {', '.join(map(str, missing))} missing: versions run 1..N"
            )
        for previous, new in itertools.pairwise(chain):
            for breach in breaches(previous.document, new.document):
                problems.append(f"{new.key} breaks consumers of v{previous.key.version} at {breach}")
    counted = f"{len(versions)} event type(s), {len(files)} schema(s)"
    return problems, (
        f"refused: {len(problems)} problem(s) in {counted}" if problems else f"compatible: {counted}"
    )


def _versions_by_type(files: Iterable[SchemaFile]) -> dict[str, list[SchemaFile]]:
    chains: dict[str, list[SchemaFile]] = defaultdict(list)
    for file in sorted(files, key=lambda file: file.key):
        chains[file.key.event_type].append(file)
    return chains


def find_schema_directories(root: Path) -> Iterator[Path]:
    """Folders named `schemas` under `root` that hold at least one schema file, in path order; hidden folders
    (a virtualenv, .git) and build output are not entered."""
    found: list[Path] = []
    for current, folders, _ in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith(".") and name not in _SKIPPED)
        directory = Path(current)
        if directory.name == "schemas" and any(
            SCHEMA_FILE.fullmatch(path.name) for path in directory.glob("*.json")
        ):
            found.append(directory)
    yield from sorted(found)

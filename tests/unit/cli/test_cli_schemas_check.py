"""`outbox schemas check`: the compatibility rules between versions, the command's verdicts and exit codes."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from orders.event_schemas import SCHEMA_DIRECTORY
from outbox_cli import schemas as command
from outbox_cli.main import main
from outbox_ops.schema_compatibility import Breach, breaches

V1: dict[str, Any] = {
    "type": "object",
    "required": ["order_id", "status"],
    "properties": {
        "order_id": {"type": "string", "maxLength": 64},
        "status": {"type": "string", "enum": ["PLACED", "CONFIRMED"]},
        "note": {"type": "string"},
        "lines": {
            "type": "array",
            "items": {"type": "object", "properties": {"quantity": {"type": "integer"}}},
        },
    },
}


def changed(edit: str, value: Any) -> dict[str, Any]:
    """V1 with one edit: `path.to.key` set to `value` (None deletes it)."""
    schema = copy.deepcopy(V1)
    *parents, last = edit.split(".")
    node = schema
    for name in parents:
        node = node[name]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return schema


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (changed("required", ["order_id"]), Breach("$.status", "required field removed (or made optional)")),
        (
            changed("properties.order_id.type", "integer"),
            Breach("$.order_id", "type changed from string to integer"),
        ),
        (
            changed("properties.lines.items.properties.quantity.type", "number"),
            Breach("$.lines[].quantity", "type changed from integer to number"),
        ),
        (
            changed("properties.status.enum", ["PLACED"]),
            Breach("$.status", "enum narrowed: 'CONFIRMED' no longer accepted"),
        ),
        (
            changed("required", ["order_id", "status", "note"]),
            Breach("$.note", "new required field without a default"),
        ),
        (
            changed("properties.order_id.maxLength", 32),
            Breach("$.order_id", "maxLength lowered to 32 (was 64)"),
        ),
        (
            changed("properties.note.pattern", "^[a-z]*$"),
            Breach("$.note", "pattern added or changed: values it accepted may now be refused"),
        ),
        (
            changed("additionalProperties", False),
            Breach("$", "additionalProperties closed: fields the previous version accepted are refused"),
        ),
        (
            changed("properties.note.oneOf", [{"type": "string"}]),
            Breach("$.note", "`oneOf` changed: these rules cannot prove it compatible"),
        ),
    ],
)
def test_a_change_that_breaks_a_consumer_is_found_where_it_is(new: dict[str, Any], expected: Breach) -> None:
    # When a version is compared with the one before it
    # Then the one change that breaks a consumer is reported, at its path
    assert breaches(V1, new) == [expected]


@pytest.mark.parametrize(
    "new",
    [
        copy.deepcopy(V1),
        changed("properties.extra", {"type": "string"}),  # a new optional field
        changed("properties.status.enum", ["PLACED", "CONFIRMED", "CANCELLED"]),  # an enum widened
        changed("properties.order_id.maxLength", 128),  # a bound loosened
        changed("properties.note", None),  # an optional field no longer described (others still accepted)
        # a new required field with a default: a consumer reading an older event fills it in
        changed("properties.channel", {"type": "string", "default": "web"})
        | {"required": ["order_id", "status", "channel"]},
    ],
    ids=[
        "same",
        "optional-field",
        "enum-widened",
        "bound-loosened",
        "optional-dropped",
        "required-with-default",
    ],
)
def test_a_change_every_consumer_survives_is_compatible(new: dict[str, Any]) -> None:
    assert breaches(V1, new) == []


def write_version(folder: Path, event_type: str, version: int, schema: dict[str, Any]) -> None:
    (folder / f"{event_type}.v{version}.json").write_text(json.dumps(schema))


def run(*arguments: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["schemas", "check", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_samples_schemas_pass_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    # When the command checks the sample's Orders schemas
    code, out, _ = run(str(SCHEMA_DIRECTORY), capsys=capsys)
    # Then they load and are compatible: exit 0
    assert code == 0
    assert out == f"{SCHEMA_DIRECTORY}: compatible: 3 event type(s), 3 schema(s)\n"


def test_a_breaking_version_of_a_sample_event_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the sample's schemas and an OrderPlaced v2 that drops the required `total` and retypes quantities
    folder = Path(shutil.copytree(SCHEMA_DIRECTORY, tmp_path / "schemas"))
    v2 = json.loads((folder / "OrderPlaced.v1.json").read_text())
    v2["required"].remove("total")
    v2["properties"]["lines"]["items"]["properties"]["quantity"] = {"type": "string"}
    write_version(folder, "OrderPlaced", 2, v2)
    # When the command checks the folder
    code, out, _ = run(str(folder), capsys=capsys)
    # Then it exits 1 and says which version breaks what, where
    assert code == command.EXIT_BREAKING
    breaking = f"{folder}: OrderPlaced v2 breaks consumers of v1 at"
    assert out.splitlines() == [
        f"{breaking} $.total: required field removed (or made optional)",
        f"{breaking} $.lines[].quantity: type changed from integer to string",
        f"{folder}: refused: 2 problem(s) in 3 event type(s), 4 schema(s)",
    ]


def test_a_missing_version_and_an_unloadable_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given versions 1 and 3 of a type, without 2
    write_version(tmp_path, "OrderPlaced", 1, V1)
    write_version(tmp_path, "OrderPlaced", 3, V1)
    code, out, _ = run(str(tmp_path), capsys=capsys)
    # Then the gap is refused
    assert code == 1
    assert f"{tmp_path}: OrderPlaced: version(s) 2 missing: versions run 1..N" in out.splitlines()
    # Given a file that is not a JSON Schema
    (tmp_path / "OrderPlaced.v2.json").write_text('{"type": 3}')
    code, out, _ = run(str(tmp_path), capsys=capsys)
    # Then it is refused as the writer would refuse to start with it
    assert code == 1
    assert "schema OrderPlaced v2 is not a valid JSON Schema" in out


def test_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory that does not exist
    code, _, err = run(str(tmp_path / "nowhere"), capsys=capsys)
    assert (code, err) == (2, f"outbox: {tmp_path / 'nowhere'} is not a directory\n")
    # No directory named, and none found under the current one
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys=capsys)
    assert code == 2
    assert "no `schemas` folder" in err


def test_without_a_directory_every_schemas_folder_below_is_checked_but_hidden_ones(tmp_path: Path) -> None:
    # Given schema folders next to two functions' code, one in a virtualenv, and one without schema files
    for folder in ("functions/a/schemas", "functions/b/schemas", ".venv/lib/x/schemas", "docs/schemas"):
        (tmp_path / folder).mkdir(parents=True)
    for folder in ("functions/a/schemas", "functions/b/schemas", ".venv/lib/x/schemas"):
        write_version(tmp_path / folder, "E", 1, V1)
    # Then the two functions' folders are found, in order
    found = list(command.find_schema_directories(tmp_path))
    assert found == [tmp_path / "functions/a/schemas", tmp_path / "functions/b/schemas"]


def test_without_fastjsonschema_the_command_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an install without the schemas extra
    monkeypatch.setitem(sys.modules, "fastjsonschema", None)
    code, _, err = run(str(SCHEMA_DIRECTORY), capsys=capsys)
    assert (code, err) == (
        2,
        "outbox: schemas check needs fastjsonschema: pip install 'dynamodb-outbox[schemas]'\n",
    )

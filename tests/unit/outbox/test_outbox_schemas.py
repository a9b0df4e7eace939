"""Event schemas: the registry's files, its verdicts, and what its errors say (never a value). No AWS."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from orders.event_schemas import SCHEMA_DIRECTORY
from outbox.errors import ConfigurationError, InvalidEventError, SchemaViolationError, UnknownSchemaError
from outbox.model import OutboxEvent
from outbox.schemas import DRAFT_04, SchemaKey, SchemaRegistry, read_schema_files
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from tests.support.doc_commands import REPOSITORY
from tests.support.readme import python_example

PLACED_V1: dict[str, Any] = {
    "$schema": DRAFT_04,
    "type": "object",
    "required": ["order_id", "lines"],
    "properties": {
        "order_id": {"type": "string"},
        "status": {"type": "string", "enum": ["PLACED"], "default": "PLACED"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku", "quantity"],
                "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
            },
        },
        "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
}


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    return SchemaRegistry({SchemaKey("OrderPlaced", 1): PLACED_V1})


def write_files(folder: Path, files: dict[str, Any]) -> Path:
    for name, content in files.items():
        (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def test_a_matching_payload_passes_unchanged(registry: SchemaRegistry) -> None:
    # Given a payload without the optional field whose schema has a default
    payload = {"order_id": "o-1", "lines": [{"sku": "A", "quantity": 2}]}
    # When it is checked
    registry.check("OrderPlaced", 1, payload)
    # Then it passes, and validation did not fill the default in (the payload is never changed)
    assert payload == {"order_id": "o-1", "lines": [{"sku": "A", "quantity": 2}]}


@pytest.mark.parametrize(
    ("payload", "path", "rule"),
    [
        ({"lines": []}, "$", "required"),
        ({"order_id": 7, "lines": []}, "$.order_id", "type"),
        ({"order_id": "o", "status": "SHIPPED", "lines": []}, "$.status", "enum"),
        (
            {"order_id": "o", "lines": [{"sku": "A", "quantity": 1}, {"sku": "B", "quantity": 0}]},
            "$.lines[1].quantity",
            "minimum",
        ),
        # A map's keys are data (they may be personal): the path shows `*`, never the key.
        ({"order_id": "o", "lines": [], "tags": {"jane@example.com": "x", "ok": 1}}, "$.tags.*", "type"),
    ],
)
def test_a_mismatch_names_type_version_path_and_rule_but_never_the_value(
    registry: SchemaRegistry, payload: dict[str, Any], path: str, rule: str
) -> None:
    # When a payload that breaks its schema is checked
    with pytest.raises(SchemaViolationError) as refused:
        registry.check("OrderPlaced", 1, payload)
    # Then the typed error says where and which rule, and is a bad-input error of the event's payload
    error = refused.value
    assert (error.event_type, error.schema_version, error.path, error.rule) == ("OrderPlaced", 1, path, rule)
    assert isinstance(error, InvalidEventError)
    assert error.field == "payload"
    assert str(error) == f"OrderPlaced v1 payload does not match its schema at {path} ({rule})"
    for secret in ("SHIPPED", "jane@example.com", "'x'", "7"):
        assert secret not in str(error)


def test_an_unknown_type_or_version_is_refused_unless_unknown_types_are_allowed(
    registry: SchemaRegistry,
) -> None:
    # Given a strict registry and a tolerant one over the same schema
    tolerant = SchemaRegistry({SchemaKey("OrderPlaced", 1): PLACED_V1}, allow_unknown_types=True)
    # Then the strict one refuses a type it does not know, and a known type's unknown version
    with pytest.raises(UnknownSchemaError, match=r"^no schema for OrderShipped v1: "):
        registry.check("OrderShipped", 1, {})
    with pytest.raises(UnknownSchemaError, match=r"^no schema for OrderPlaced v2: "):
        registry.check("OrderPlaced", 2, {})
    # and the tolerant one lets the unknown type through, but never a known type's undescribed version
    tolerant.check("OrderShipped", 1, {"anything": True})
    with pytest.raises(UnknownSchemaError):
        tolerant.check("OrderPlaced", 2, {})


def test_the_writer_checks_every_event_before_any_joins_the_transaction(registry: SchemaRegistry) -> None:
    # Given a transaction and two events, the second of which its schema refuses
    transaction = Transaction()
    good = OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id="o-1",
        seq=1,
        event_type="OrderPlaced",
        payload={"order_id": "o-1", "lines": []},
    )
    bad = OutboxEvent.new(
        aggregate_type="Order", aggregate_id="o-2", seq=1, event_type="OrderPlaced", payload={"lines": []}
    )
    # When both are appended
    with pytest.raises(SchemaViolationError):
        OutboxWriter("outbox", schemas=registry).append(transaction, good, bad)
    # Then neither joined it: the transaction is as it was
    assert len(transaction) == 0


def test_numbers_are_checked_as_the_stored_json_reads_them(registry: SchemaRegistry) -> None:
    # Given a quantity with a fraction (stored JSON text reads it back as a Decimal)
    event = OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id="o-1",
        seq=1,
        event_type="OrderPlaced",
        payload={"order_id": "o-1", "lines": [{"sku": "A", "quantity": 1.5}]},
    )
    # Then the writer refuses it: the schema sees what consumers will parse
    with pytest.raises(SchemaViolationError, match=r"\$\.lines\[0\]\.quantity \(type\)"):
        OutboxWriter("outbox", schemas=registry).append(Transaction(), event)


def test_files_load_by_name_and_bad_files_fail_loudly_at_start_up(tmp_path: Path) -> None:
    # Given a folder with two versions of one type, another type with a dotted name, and a README
    folder = write_files(
        tmp_path,
        {
            "OrderPlaced.v1.json": PLACED_V1,
            "OrderPlaced.v2.json": PLACED_V1,
            "com.acme.Shipped.v1.json": {"type": "object"},
            "README.md": "not a schema",
        },
    )
    # When it is loaded
    registry = SchemaRegistry.from_directory(folder)
    # Then each file is one (type, version), and the README is ignored
    assert sorted(registry.keys()) == [
        SchemaKey("OrderPlaced", 1),
        SchemaKey("OrderPlaced", 2),
        SchemaKey("com.acme.Shipped", 1),
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"OrderPlaced.json": {}}, r"OrderPlaced\.json is not named <event_type>\.v<N>\.json"),
        ({"OrderPlaced.v0.json": {}}, r"is not named"),
        ({"OrderPlaced.v1.json": "{not json"}, r"OrderPlaced\.v1\.json cannot be read as JSON"),
        ({"OrderPlaced.v1.json": [1]}, r"must hold a JSON object"),
        (
            {"OrderPlaced.v1.json": {"type": "no-such-type"}},
            r"schema OrderPlaced v1 is not a valid JSON Schema",
        ),
    ],
)
def test_a_bad_schema_file_is_a_configuration_error(
    tmp_path: Path, files: dict[str, Any], message: str
) -> None:
    # Given a folder with one bad file
    write_files(tmp_path, files)
    # Then loading it fails at once, naming the file
    with pytest.raises(ConfigurationError, match=message):
        SchemaRegistry.from_directory(tmp_path)


def test_a_missing_directory_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        read_schema_files(tmp_path / "nowhere")


def test_the_docs_writer_example_prints_the_refusal_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given docs/schemas.md's example, run from a folder holding the sample's schemas as `schemas`
    example = python_example("## The writer checks every event", document=REPOSITORY / "docs" / "schemas.md")
    shutil.copytree(SCHEMA_DIRECTORY, tmp_path / "schemas")
    monkeypatch.chdir(tmp_path)
    # When it runs
    exec(compile(example, "docs/schemas.md", "exec"), {})  # noqa: S102 - the doc's own example
    # Then it prints what its comment says it prints
    shown = example.rsplit("# ", 1)[1].strip()
    assert capsys.readouterr().out == f"{shown}\n"


def test_without_fastjsonschema_a_registry_fails_at_start_up_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a function with neither the Powertools layer nor the schemas extra
    monkeypatch.setitem(sys.modules, "fastjsonschema", None)
    # Then building a registry is a configuration error that says where fastjsonschema comes from
    with pytest.raises(
        ConfigurationError, match=r"Powertools layer, or pip install 'dynamodb-outbox\[schemas\]'"
    ):
        SchemaRegistry({SchemaKey("OrderPlaced", 1): PLACED_V1})

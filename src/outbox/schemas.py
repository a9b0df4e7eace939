"""Event schemas: one JSON Schema per (`event_type`, `schema_version`), checked before anything is saved.

A service keeps its schemas as files next to its code, one per version, named `<event_type>.v<N>.json`
(`OrderPlaced.v1.json`), and loads them once at start-up into a `SchemaRegistry`; `OutboxWriter(...,
schemas=registry)` then checks every event before it joins the transaction, so a payload its schema refuses
is never written. The same files feed `outbox schemas check` (compatibility between versions), the
constructs' EventBridge schema registry, and an inbox that validates on receipt (docs/schemas.md).

Validation uses fastjsonschema, the library of Powertools' validation utility, which the Powertools layer
ships; it is imported only when a registry is built, so a writer without schemas needs only boto3.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from outbox.errors import ConfigurationError, SchemaViolationError, UnknownSchemaError

SCHEMA_FILE = re.compile(
    r"^(?P<event_type>[A-Za-z][A-Za-z0-9_.-]{0,127})\.v(?P<version>[1-9][0-9]{0,8})\.json$"
)
"""A schema file's name: the event type (the row contract's rule for `event_type`) and a version >= 1."""

DRAFT_04 = "http://json-schema.org/draft-04/schema#"
"""The draft EventBridge's schema registry takes (`JSONSchemaDraft4`); fastjsonschema also reads 6 and 7."""

Validator = Callable[[Any], Any]


class SchemaKey(NamedTuple):
    event_type: str
    version: int

    def __str__(self) -> str:
        return f"{self.event_type} v{self.version}"


@dataclass(frozen=True, slots=True)
class SchemaFile:
    """One schema as its file holds it."""

    key: SchemaKey
    document: Mapping[str, Any]
    path: Path


def schema_file_name(key: SchemaKey) -> str:
    return f"{key.event_type}.v{key.version}.json"


def read_schema_files(directory: Path | str) -> dict[SchemaKey, SchemaFile]:
    """Every `<event_type>.v<N>.json` of `directory` (not its subdirectories), parsed, by key.

    Raises ConfigurationError for a missing directory, a `.json` file whose name does not follow the rule
    (a typo would otherwise leave an event type without its schema), unreadable JSON, or a document that is
    not a JSON object. Other files (a README) are ignored. Needs no validation library.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ConfigurationError(f"schema directory {folder} does not exist or is not a directory")
    schemas: dict[SchemaKey, SchemaFile] = {}
    for path in sorted(folder.glob("*.json")):
        name = SCHEMA_FILE.fullmatch(path.name)
        if name is None:
            raise ConfigurationError(
                f"schema file {path.name} is not named <event_type>.v<N>.json (e.g. OrderPlaced.v1.json)"
            )
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise ConfigurationError(f"schema file {path.name} cannot be read as JSON: {error}") from None
        if not isinstance(document, dict):
            raise ConfigurationError(f"schema file {path.name} must hold a JSON object")
        key = SchemaKey(name["event_type"], int(name["version"]))
        schemas[key] = SchemaFile(key, document, path)
    return schemas


class SchemaRegistry:
    """Compiled validators by (event_type, schema_version), built once per process.

    `allow_unknown_types`: an event type with no schema at all is let through (a service adopting schemas
    one type at a time). A known type's unknown version is always refused: a version nobody described is a
    mistake, not a new type.
    """

    def __init__(
        self, schemas: Mapping[SchemaKey, Mapping[str, Any]], *, allow_unknown_types: bool = False
    ) -> None:
        self._documents = dict(schemas)
        fastjsonschema = _fastjsonschema()
        self._mismatch: type[Exception] = fastjsonschema.JsonSchemaValueException
        self._validators = {
            key: _compile(fastjsonschema, key, document) for key, document in self._documents.items()
        }
        self._types = frozenset(key.event_type for key in self._validators)
        self.allow_unknown_types = allow_unknown_types

    @classmethod
    def from_directory(cls, directory: Path | str, *, allow_unknown_types: bool = False) -> SchemaRegistry:
        """The registry of a directory's schema files (see `read_schema_files`)."""
        files = read_schema_files(directory)
        documents = {key: file.document for key, file in files.items()}
        return cls(documents, allow_unknown_types=allow_unknown_types)

    def __contains__(self, key: object) -> bool:
        return key in self._validators

    def keys(self) -> Iterable[SchemaKey]:
        return self._validators.keys()

    def check(self, event_type: str, schema_version: int, payload: Mapping[str, Any]) -> None:
        """Raises UnknownSchemaError or SchemaViolationError (event type, version, JSON path and the rule that
        failed: never the value); returns None when the payload matches, changing nothing."""
        key = SchemaKey(event_type, schema_version)
        validate = self._validators.get(key)
        if validate is None:
            if event_type not in self._types and self.allow_unknown_types:
                return
            raise UnknownSchemaError(event_type, schema_version)
        try:
            validate(payload)
        except self._mismatch as error:
            path = json_path(self._documents[key], getattr(error, "path", None) or [])
            rule = getattr(error, "rule", None) or "schema"
            raise SchemaViolationError(event_type, schema_version, path=path, rule=str(rule)) from None

    def check_json(self, event_type: str, schema_version: int, payload_json: str) -> None:
        """`check` on a payload's JSON text: what consumers will parse, not the Python values it came from."""
        self.check(event_type, schema_version, _VALIDATION_DECODER.decode(payload_json))


def _fastjsonschema() -> Any:
    try:
        import fastjsonschema  # noqa: PLC0415 - only a service with schemas needs it
    except ModuleNotFoundError:
        raise ConfigurationError(
            "event schemas need fastjsonschema: use the Powertools layer, or pip install "
            "'dynamodb-outbox[schemas]'"
        ) from None
    return fastjsonschema


def _compile(fastjsonschema: Any, key: SchemaKey, document: Mapping[str, Any]) -> Validator:
    try:
        # use_default=False: validation must never change the payload it checks (fastjsonschema fills in
        # `default` values by default).
        validator: Validator = fastjsonschema.compile(dict(document), use_default=False)
    except fastjsonschema.JsonSchemaDefinitionException as error:
        raise ConfigurationError(f"schema {key} is not a valid JSON Schema: {error}") from None
    return validator


def json_path(schema: Mapping[str, Any], segments: Iterable[Any]) -> str:
    """The JSON path (`$.lines[0].sku`) of fastjsonschema's error path (`['data', 'lines', '0', 'sku']`).

    A key the schema does not declare in `properties` (a map's key under `additionalProperties`) is data,
    and may be personal: it is shown as `*`, and the path ends there. fastjsonschema writes array indexes as
    text.
    """
    path = "$"
    node: Mapping[str, Any] | None = schema
    for segment in list(segments)[1:]:  # the first is fastjsonschema's name for the root, `data`
        text = str(segment)
        items = None if node is None else node.get("items")
        if text.isdigit() and node is not None and (node.get("type") == "array" or items is not None):
            path += f"[{text}]"
            index = int(text)
            if isinstance(items, list):
                node = _schema_or_none(items[index] if index < len(items) else node.get("additionalItems"))
            else:
                node = _schema_or_none(items)
            continue
        properties = None if node is None else node.get("properties")
        if isinstance(properties, Mapping) and text in properties:
            path += f".{text}" if _PLAIN_KEY.fullmatch(text) else f"[{json.dumps(text)}]"
            node = _schema_or_none(properties[text])
        else:
            # fastjsonschema splits its path on dots, so what follows an undeclared key (which may hold
            # dots) is not known for sure: the path stops at the entry the mismatch is in.
            return path + ".*"
    return path


def _integer(text: str) -> int | Decimal:
    # JSON Schema's `integer` is a Python int to fastjsonschema. Python refuses to read an int of more than
    # 4,300 digits (sys.int_info): such a number stays a Decimal, a `number`.
    return int(text) if len(text) <= _MAX_INT_DIGITS else Decimal(text)


_MAX_INT_DIGITS = 4000
# Exact numbers for `minimum`/`maximum` and `multipleOf` (a float would round a long fraction).
_VALIDATION_DECODER = json.JSONDecoder(parse_float=Decimal, parse_int=_integer)

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _schema_or_none(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None

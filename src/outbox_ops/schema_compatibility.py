"""Whether a new version of an event's schema breaks a consumer of the version before (docs/schemas.md).

Two promises, checked between each version and the one before it:

- readers of the previous version can read every new event: each field they could rely on (required) is still
  required, and no field they know changes its type;
- every event valid under the previous version is still valid under the new one (consumers already on the new
  version, an inbox validating on receipt, a FAILED row written earlier and redriven, a replay): nothing is
  narrowed or tightened.

Widening (a new optional field, a new enum value, a longer string, a wider range) is allowed: consumers read
tolerantly. A change the rules cannot reason about (`$ref`, `oneOf`/`anyOf`/`allOf`/`not`, tuple `items`...)
is refused as unprovable: give the event a new type, or keep that part unchanged.
Pure: JSON documents in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

Schema = Mapping[str, Any]

# Keywords whose changes the rules do not compare: a change to one is refused as unprovable.
OPAQUE_KEYWORDS = (
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "patternProperties",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "definitions",
    "$defs",
    "additionalItems",
    "contains",
    "propertyNames",
    "uniqueItems",
)
# (keyword, which way is tighter): a new lower bound above the old, or upper bound below it, refuses events
# the previous version accepted.
_LOWER_BOUNDS = ("minimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "maxLength", "maxItems", "maxProperties")
# Keywords any change of which (or adding which) can refuse an event the previous version accepted.
_EXACT_KEYWORDS = ("pattern", "format", "multipleOf", "exclusiveMinimum", "exclusiveMaximum")


class Breach(NamedTuple):
    """One change of a new version that breaks a consumer: where (a JSON path of the schema), and what."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def breaches(previous: Schema, new: Schema) -> list[Breach]:
    """Every change from `previous` to `new` that breaks a consumer, in document order (empty: compatible)."""
    found: list[Breach] = []
    _compare(previous, new, "$", found)
    return found


def _compare(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    for keyword in OPAQUE_KEYWORDS:
        if old.get(keyword) != new.get(keyword):
            found.append(Breach(path, f"`{keyword}` changed: these rules cannot prove it compatible"))
    _compare_types(old, new, path, found)
    _compare_values(old, new, path, found)
    _compare_bounds(old, new, path, found)
    _compare_object(old, new, path, found)
    _compare_items(old, new, path, found)


def _types(schema: Schema) -> frozenset[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None  # any type
    return frozenset([declared] if isinstance(declared, str) else declared)


def _compare_types(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    before, after = _types(old), _types(new)
    if before != after:
        found.append(Breach(path, f"type changed from {_type_text(before)} to {_type_text(after)}"))


def _type_text(types: frozenset[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))


def _allowed_values(schema: Schema) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return None if values is None else list(values)


def _compare_values(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    before, after = _allowed_values(old), _allowed_values(new)
    if after is None:
        return  # no list, or the list dropped: every value the previous version took is still taken
    if before is None:
        found.append(Breach(path, "enum added: values the previous version accepted are now refused"))
        return
    removed = [value for value in before if value not in after]
    if removed:
        found.append(Breach(path, f"enum narrowed: {_values_text(removed)} no longer accepted"))


def _values_text(values: Iterable[Any]) -> str:
    return ", ".join(repr(value) for value in values)


def _compare_bounds(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    for keyword in _LOWER_BOUNDS:
        if keyword in new and (keyword not in old or new[keyword] > old[keyword]):
            found.append(Breach(path, f"{keyword} raised to {new[keyword]} (was {old.get(keyword, 'none')})"))
    for keyword in _UPPER_BOUNDS:
        if keyword in new and (keyword not in old or new[keyword] < old[keyword]):
            found.append(
                Breach(path, f"{keyword} lowered to {new[keyword]} (was {old.get(keyword, 'none')})")
            )
    for keyword in _EXACT_KEYWORDS:
        if keyword in new and new.get(keyword) != old.get(keyword):
            found.append(Breach(path, f"{keyword} added or changed: values it accepted may now be refused"))


def _compare_object(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    old_properties: Mapping[str, Schema] = old.get("properties", {})
    new_properties: Mapping[str, Schema] = new.get("properties", {})
    old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
    for name in sorted(old_required - new_required):
        found.append(Breach(_child(path, name), "required field removed (or made optional)"))
    for name in sorted(new_required - old_required):
        if "default" not in new_properties.get(name, {}):
            found.append(Breach(_child(path, name), "new required field without a default"))
    for name, old_property in old_properties.items():
        if name in new_properties:
            _compare(old_property, new_properties[name], _child(path, name), found)
        elif name not in old_required and new.get("additionalProperties") is False:
            found.append(Breach(_child(path, name), "optional field removed while other fields are refused"))
    _compare_additional(old, new, path, found)


def _compare_additional(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    before, after = old.get("additionalProperties", True), new.get("additionalProperties", True)
    if after is False and before is not False:
        found.append(
            Breach(path, "additionalProperties closed: fields the previous version accepted are refused")
        )
    elif isinstance(before, Mapping) and isinstance(after, Mapping):
        _compare(before, after, f"{path}.*", found)
    elif isinstance(after, Mapping) and before is True:
        found.append(
            Breach(path, "additionalProperties given a schema: values it accepted may now be refused")
        )


def _compare_items(old: Schema, new: Schema, path: str, found: list[Breach]) -> None:
    before, after = old.get("items"), new.get("items")
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        _compare(before, after, f"{path}[]", found)
    elif before != after:
        found.append(Breach(path, "`items` changed: these rules cannot prove it compatible"))


def _child(path: str, name: str) -> str:
    return f"{path}.{name}"

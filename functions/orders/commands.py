"""Commands as the domain accepts them, parsed from untrusted JSON with field-level errors.

Parsing is strict: unknown fields, wrong types and out-of-range values are refused (400 naming
the field), so what is stored and hashed for idempotency is always the canonical form.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from orders.errors import OrderValidationError
from orders.model import (
    MAX_LINES,
    Command,
    OrderLine,
    parse_unit_price,
    validate_currency,
    validate_customer_id,
    validate_lines,
    validate_order_id,
    validate_quantity,
    validate_sku,
)

# Printable, header-safe and long enough for a UUID or a client's own scheme.
_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PLACE_FIELDS = frozenset({"customer_id", "currency", "items"})
_LINE_FIELDS = frozenset({"sku", "quantity", "unit_price"})
_TRANSITION_FIELDS = frozenset({"expected_version"})
IF_MATCH_HEADER = "If-Match"
MAX_IF_MATCH_CHARS = 1024
# RFC 9110 section 8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E
# (obs-text, allowed there, is refused here: this API issues none).
_ENTITY_TAG = r'(?:W/)?"[\x21\x23-\x7e]*"'
_IF_MATCH = re.compile(rf"^[ \t]*(?:\*|{_ENTITY_TAG}(?:[ \t]*,[ \t]*{_ENTITY_TAG})*)[ \t]*$")
_TAGS = re.compile(_ENTITY_TAG)
# The tags this API issues (`entity_tag`): a version, in decimal without leading zeros.
_VERSION_TAG = re.compile(r'^"([1-9][0-9]{0,17})"$')


def validate_idempotency_key(value: str, *, field: str = "Idempotency-Key") -> str:
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise OrderValidationError("must be 1-128 letters, digits, '.', '_', ':' or '-'", field=field)
    return value


def entity_tag(version: int) -> str:
    """The order's strong entity tag (HTTP `ETag`) at `version`: the version, quoted, e.g. `"2"`."""
    return f'"{version}"'


class IfMatch(NamedTuple):
    """A parsed `If-Match` header: `*` (any current order) or the entity tags the client accepts.

    Strong comparison (RFC 9110 section 13.1.1): a weak tag never matches, and neither does a tag this API
    never issues; both are kept, for the request's fingerprint, but name no version.
    """

    wildcard: bool
    tags: tuple[str, ...]
    versions: frozenset[int]

    @classmethod
    def parse(cls, value: str) -> IfMatch:
        if len(value) > MAX_IF_MATCH_CHARS or not _IF_MATCH.fullmatch(value):
            raise OrderValidationError(
                f'must be "*" or quoted entity tags separated by commas, e.g. "2", in at most '
                f"{MAX_IF_MATCH_CHARS} characters",
                field=IF_MATCH_HEADER,
            )
        if value.strip() == "*":
            return cls(wildcard=True, tags=(), versions=frozenset())
        tags = tuple(sorted(set(_TAGS.findall(value))))
        versions = frozenset(int(match[1]) for tag in tags if (match := _VERSION_TAG.fullmatch(tag)))
        return cls(wildcard=False, tags=tags, versions=versions)

    def matches(self, version: int) -> bool:
        return self.wildcard or version in self.versions

    @property
    def single_version(self) -> int | None:
        """The one version the header accepts, if it accepts exactly one (the write can then be conditioned
        on it without reading the order)."""
        if self.wildcard or len(self.versions) != 1:
            return None
        (version,) = self.versions
        return version

    def canonical(self) -> str | list[str]:
        return "*" if self.wildcard else list(self.tags)


class PlaceOrder(NamedTuple):
    customer_id: str
    currency: str
    lines: tuple[OrderLine, ...]

    @classmethod
    def from_json(cls, body: object) -> PlaceOrder:
        data = _object(body, _PLACE_FIELDS, prefix="")
        for name in ("customer_id", "currency", "items"):
            if name not in data:
                raise OrderValidationError("is required", field=name)
        customer_id = validate_customer_id(data["customer_id"])
        currency = validate_currency(data["currency"])
        items = data["items"]
        if not isinstance(items, list):
            raise OrderValidationError("must be a list", field="items")
        if not 1 <= len(items) <= MAX_LINES:
            # Checked before the lines themselves: a huge list is refused without parsing it.
            raise OrderValidationError(f"must hold between 1 and {MAX_LINES} items", field="items")
        lines = tuple(_line(item, currency, f"items[{index}]") for index, item in enumerate(items))
        validate_lines(lines)
        return cls(customer_id, currency, lines)

    def canonical(self) -> dict[str, Any]:
        return {
            "customer_id": self.customer_id,
            "currency": self.currency,
            "items": [line.to_dict(self.currency) for line in self.lines],
        }


class TransitionOrder(NamedTuple):
    """Confirm or cancel. `expected_version`, when given, turns a stale client view into a 409; `if_match`
    (the `If-Match` header), into a 412."""

    command: Command
    order_id: str
    expected_version: int | None = None
    if_match: IfMatch | None = None

    @classmethod
    def from_json(
        cls, command: Command, order_id: str, body: object, *, if_match: str | None = None
    ) -> TransitionOrder:
        validate_order_id(order_id)
        precondition = None if if_match is None else IfMatch.parse(if_match)
        data = {} if body is None else _object(body, _TRANSITION_FIELDS, prefix="")
        expected = data.get("expected_version")
        if expected is not None and (
            isinstance(expected, bool) or not isinstance(expected, int) or expected < 1
        ):
            raise OrderValidationError("must be a whole number >= 1", field="expected_version")
        return cls(command, order_id, expected, precondition)

    def canonical(self) -> dict[str, Any]:
        """What the request fingerprint covers. `if_match` only when sent: a request without it fingerprints
        exactly as before the header existed, so keys stored then still replay."""
        canonical: dict[str, Any] = {"expected_version": self.expected_version}
        if self.if_match is not None:
            canonical["if_match"] = self.if_match.canonical()
        return canonical

    def blind_version(self) -> int | None:
        """The version a write may be conditioned on without reading the order: If-Match's one version, when
        `expected_version` is absent or the same. None: the order must be read to judge the preconditions."""
        version = None if self.if_match is None else self.if_match.single_version
        if version is None or self.expected_version not in (None, version):
            return None
        return version


def request_hash(command: Command, order_id: str | None, body: Mapping[str, Any]) -> str:
    """Fingerprint of a request for idempotency: command, order id and the canonical body.

    Canonical JSON (sorted keys, no spaces) of the *parsed* request, so formatting differences
    such as key order or whitespace do not make the same request look different.
    """
    text = json.dumps(
        {"command": command.value, "order_id": order_id, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _object(value: object, allowed: frozenset[str], *, prefix: str) -> Mapping[str, Any]:
    where = prefix or "body"
    if not isinstance(value, dict):
        raise OrderValidationError("must be a JSON object", field=where)
    for name in sorted(value):
        if name not in allowed:
            raise OrderValidationError(
                "is not a known field", field=f"{prefix}.{name}" if prefix else name, field_is_input=True
            )
    return value


def _line(value: object, currency: str, prefix: str) -> OrderLine:
    data = _object(value, _LINE_FIELDS, prefix=prefix)
    for name in ("sku", "quantity", "unit_price"):
        if name not in data:
            raise OrderValidationError("is required", field=f"{prefix}.{name}")
    return OrderLine(
        sku=validate_sku(data["sku"], field=f"{prefix}.sku"),
        quantity=validate_quantity(data["quantity"], field=f"{prefix}.quantity"),
        unit_price=parse_unit_price(data["unit_price"], currency, field=f"{prefix}.unit_price"),
    )


def _is_int(value: object) -> bool:
    # bool is an int in Python; JSON `true` is not a version.
    return isinstance(value, int) and not isinstance(value, bool)

"""The outbox row: the public contract (docs/contracts.md, "Outbox row") as a value object, and its table.

Other services, in any language, may write these rows and consumers parse the envelope built
from them, so attribute names and types here are stable API. The table holds exactly the events that are
not out yet: a row is deleted once its event is out on every destination of its route (or an operator
skipped it), so what stays is PENDING and FAILED rows, and the few items the outbox keeps for itself under
keys no event can have (`RESERVED_KEY_PREFIX`). The constructs, the writer, the publishing paths and the
operations commands all read the table's names from this module.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from outbox.clock import Clock, format_timestamp, utc_now
from outbox.errors import InvalidEventError, InvalidOutboxRowError
from outbox.event_rules import broken_rule, is_region_name
from outbox.item_reader import ItemReader
from outbox.limits import MAX_WHOLE_NUMBER, Item
from outbox.payload import JsonObject, decode_payload, encode_payload
from outbox.payload_refs import StoredEnvelope
from outbox.trace_context import NO_TRACE, TraceContext
from outbox.transaction import TableKeys

# --- The outbox table -------------------------------------------------------------------------
# All events of one aggregate share a partition; `seq` orders them within it.
PARTITION_KEY = "aggregate_key"
SORT_KEY = "seq"
RESERVED_KEY_PREFIX = "#"
"""Items the outbox keeps for itself (operators' audit records, the sweeper's cursor) have partition keys
starting with this: an event's cannot, since its `aggregate_type` starts with a letter."""
AUDIT_KEY_PREFIX = f"{RESERVED_KEY_PREFIX}audit{RESERVED_KEY_PREFIX}"
"""An event's audit record lives at (`#audit#` + its aggregate_key, its seq): one per event an operator acted
on, kept after the event's row has left the table."""
SWEEPER_CURSOR_KEY = f"{RESERVED_KEY_PREFIX}sweeper"
"""The sweeper's saved position in its scan of the table, one item per scan segment (seq = the segment)."""
# --- One outbox across regions (docs/multi-region.md; outbox_publisher.regions): absent on a single-region
# outbox.
ORIGIN = "origin"
"""String: the region whose writer saved the row (`OutboxWriter(origin=...)`). A row without one belongs to
the home region (the first of OUTBOX_REGIONS)."""
TAKEN_BY = "taken_by"
"""String: the region that claimed the row while it held the row's origin (a takeover); set by the sweeper's
claim, never by writers. No claim takes a row whose `taken_by` names a region still holding its origin."""
HEARTBEAT_KEY_PREFIX = f"{RESERVED_KEY_PREFIX}region{RESERVED_KEY_PREFIX}"
"""A region's heartbeat lives at (`#region#` + the region, 0), written by that region's sweeper each run."""
TAKEN_KEY_PREFIX = f"{RESERVED_KEY_PREFIX}taken{RESERVED_KEY_PREFIX}"
"""What a region published of another's origin while it held it, per aggregate: (`#taken#` + aggregate_key,
0)."""
# DynamoDB's TTL attribute. The outbox sets it on no row; a row another writer saves PENDING with it would
# expire before it is published, so reading one is poison, and its FAILED mark removes it.
TTL_ATTRIBUTE = "expires_at"
# Set by the publishing paths while they work on a row (the publisher's leases), never by writers.
LEASE_OWNER = "lease_owner"
LEASE_UNTIL = "lease_until"
"""Epoch seconds: until then, no other path may claim the row."""
NEXT_ATTEMPT_AT = "next_attempt_at"
"""Epoch seconds: the sweeper backs off a row it could not publish until then."""
SWEEP_FAILURES = "sweep_failures"
"""Sweeps that failed to publish the row: the exponent of its backoff."""
ENVELOPE_WAITS = "envelope_waits"
"""Sweeps that could not read the row's stored envelope: the exponent of their wait, never counted towards
giving up."""
DELIVERED_TO = "delivered_to"
"""String set: the destinations that already accepted the event while another did not. Written only on that
partial path; the publishing paths never send the event to them again."""
# Set by an operator (outbox_ops.release) to publish a FAILED row again; its cutoffs count from then.
REDRIVEN_AT = "redriven_at"
# On a FAILED row whose route lets the aggregate's later events go on past it (`on_poison: continue`).
RELEASED_AT = "released_at"
RELEASE_REASON = "release_reason"
FIRST_RELEASED_AT = "first_released_at"
"""When the row was first released: kept through redrives, so a row ever released stays known as one."""
# Bumped by every operator redrive (outbox_ops.release); every write of a publishing path requires the
# generation it read the row at, so a stale stream record of the row's earlier life can never settle or mark
# a redriven row.
GENERATION = "generation"
# FAILED rows are found through a sparse index, keyed on `failed_shard`: the attribute exists exactly while a
# row is FAILED (set by the FAILED mark, removed by a redrive), spread over a few index partitions.
FAILED_INDEX_NAME = "failed"
FAILED_INDEX_PARTITION_KEY = "failed_shard"
FAILED_INDEX_SORT_KEY = "failed_at"
FAILED_INDEX_SHARDS = 16
# What rows of an earlier release may still hold: the outbox neither writes nor reads them now
# (docs/deploy.md, "Upgrading"). A FAILED mark removes them.
LEGACY_ATTRIBUTES = ("pending_shard", "predecessor_released_at", "published_at")


_PLAIN_DIGITS = 38
"""DynamoDB's precision: a seq spelled in at most this many digits is read without a Decimal (and int() of a
longer text, which only a made-up record holds, could raise)."""


class RowKey(NamedTuple):
    """The primary key of an outbox row."""

    aggregate_key: str
    seq: int
    stored_seq: str = ""
    """The sort key as stored when it is not the plain spelling of `seq`, so the key still addresses the row:
    another writer's `N "1.5"`, no whole number (such a row can only be marked FAILED, `RowKey.stored`; the
    order gate never sees it), or a whole number spelled otherwise (`N "1E+2"`, which DynamoDB stores as
    `100` but moto keeps as written)."""

    @property
    def seq_text(self) -> str:
        """The seq as stored: what to show an operator."""
        return self.stored_seq or str(self.seq)

    def item(self) -> dict[str, dict[str, str]]:
        return {PARTITION_KEY: {"S": self.aggregate_key}, SORT_KEY: {"N": self.seq_text}}

    @property
    def predecessor(self) -> RowKey:
        return RowKey(self.aggregate_key, self.seq - 1)

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> RowKey | None:
        """The key of a row, if the item holds a well-formed one: a whole number for `seq` (a poison row may
        not)."""
        try:
            aggregate_key = str(item[PARTITION_KEY]["S"])
            text = str(item[SORT_KEY]["N"])
        except (KeyError, TypeError):
            return None
        plain = text.isascii() and text.isdigit() and len(text) <= _PLAIN_DIGITS
        if plain and text == str(seq := int(text)):
            return cls(aggregate_key, seq)  # the common case, read without a Decimal
        try:
            number = Decimal(text)
        except ArithmeticError:
            return None
        whole = number.is_finite() and number == number.to_integral_value()
        if not whole or number.copy_abs() > MAX_WHOLE_NUMBER:
            return None
        seq = int(number)
        return cls(aggregate_key, seq, "" if text == str(seq) else text)

    @classmethod
    def stored(cls, item: Mapping[str, Any]) -> RowKey | None:
        """The key of a row as stored, also when its seq is no whole number (to mark it FAILED)."""
        key = cls.of(item)
        if key is not None:
            return key
        try:
            aggregate_key = str(item[PARTITION_KEY]["S"])
            stored_seq = str(item[SORT_KEY]["N"])
            number = Decimal(stored_seq)
        except (KeyError, TypeError, ArithmeticError):
            return None
        # 0 for what is no seq (only a made-up record holds it): the stored text still addresses the row.
        whole = number.is_finite() and number.copy_abs() <= MAX_WHOLE_NUMBER
        return cls(aggregate_key, int(number) if whole else 0, stored_seq)


def outbox_table(table_name: str) -> TableKeys:
    """The outbox table's name and key schema, as the transaction builder needs them."""
    return TableKeys(table_name, PARTITION_KEY, SORT_KEY)


# How a JSON encoder with ensure_ascii=False writes a string (SNS and EventBridge count UTF-8 bytes, and
# escapes would only inflate them): the envelope is written field by field with it, as such an encoder writes
# it compactly, without the encoder's per-call set-up (tests/unit/outbox/test_envelope_text.py compares them).
_json_string = json.encoder.encode_basestring

MAX_ERROR_LENGTH = 512


class OutboxStatus(StrEnum):
    PENDING = "PENDING"
    FAILED = "FAILED"
    PUBLISHED = "PUBLISHED"
    """Written by earlier releases, which kept published rows until their TTL: read as out."""


def aggregate_key(aggregate_type: str, aggregate_id: str) -> str:
    return f"{aggregate_type}#{aggregate_id}"


def failed_shard(key: str) -> int:
    """Stable shard of the failed index for an aggregate (crc32: same answer in any language)."""
    return zlib.crc32(key.encode()) % FAILED_INDEX_SHARDS


IS_PENDING = f"(#status = :pending OR (attribute_exists({PARTITION_KEY}) AND attribute_not_exists(#status)))"
"""The condition that a row is PENDING, for a conditional write (`#status` naming `status`, `:pending` the
text PENDING): a row saved without `status` is read as PENDING (OutboxEvent.from_item), so it is written to as
one, else it could be published and never settled, or never claimed. The row must exist: an UpdateItem whose
condition holds on a missing item would create one."""


def is_reserved(aggregate_key: str) -> bool:
    """Whether a partition key is one the outbox keeps for its own items (audit, cursor): no event's."""
    return aggregate_key.startswith(RESERVED_KEY_PREFIX)


def is_own_item(item: Mapping[str, Any]) -> bool:
    """Whether an item (a row, a stream image) is one of the outbox's own: a reserved key, and no `status`
    (none of its own items has one). Anything else under a reserved key is another writer's row breaking the
    contract, handled as a row (poison: its key is no event's), never passed over unseen."""
    key = item.get(PARTITION_KEY)
    text = key.get("S") if isinstance(key, Mapping) else None
    return isinstance(text, str) and is_reserved(text) and "status" not in item


def string_attribute(item: Mapping[str, Any] | None, name: str) -> str | None:
    """A String attribute of a low-level item (a row, a stream image), or None when absent or not a String."""
    value = item.get(name) if isinstance(item, Mapping) else None  # a made-up image may be no map
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        return str(value["S"])
    return None


def truncate_error(message: str) -> str:
    """`last_error` stays short: long messages are cut, with a marker."""
    return message if len(message) <= MAX_ERROR_LENGTH else message[: MAX_ERROR_LENGTH - 1] + "…"


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """One outbox row. Immutable: state changes produce a new value."""

    aggregate_type: str
    aggregate_id: str
    seq: int
    event_type: str
    payload: JsonObject
    event_id: str
    occurred_at: str
    schema_version: int = 1
    correlation_id: str | None = None
    status: OutboxStatus = OutboxStatus.PENDING
    attempts: int = 0
    last_error: str | None = None
    expires_at: int | None = None
    # --- Trace context (outbox.trace_context): what the request that saved the event was traced as.
    trace: TraceContext = NO_TRACE
    # --- Large payloads (outbox.payload_refs): read from a row whose envelope is in the payload store, the
    # event holds where it is (and, once a publisher read it, its text) and an empty `payload`.
    stored: StoredEnvelope | None = field(default=None, repr=False, compare=False)
    origin: str | None = None
    """The region whose writer saved it (`ORIGIN`), when the outbox spans regions; not in the envelope."""
    _payload_json: str = field(default="", repr=False, compare=False)
    aggregate_key: str = field(init=False, repr=False, compare=False)
    """aggregate_type#aggregate_id: the row's partition key, the key of its order (set once, read often)."""

    def __post_init__(self) -> None:
        if type(self.status) is not OutboxStatus:
            try:
                object.__setattr__(self, "status", OutboxStatus(self.status))
            except ValueError:
                message = "status must be PENDING, PUBLISHED or FAILED"
                raise InvalidEventError(message, field="status") from None
        broken = broken_rule(self)
        if broken is not None:
            raise InvalidEventError(broken[1], field=broken[0])
        # The TTL must never delete an event that has not left the outbox.
        if self.status is OutboxStatus.PENDING and self.expires_at is not None:
            raise InvalidEventError("a PENDING row must not expire", field="expires_at")
        object.__setattr__(self, "_payload_json", encode_payload(self.payload))
        object.__setattr__(self, "aggregate_key", aggregate_key(self.aggregate_type, self.aggregate_id))

    @classmethod
    def new(
        cls,
        *,
        aggregate_type: str,
        aggregate_id: str,
        seq: int,
        event_type: str,
        payload: JsonObject,
        schema_version: int = 1,
        correlation_id: str | None = None,
        trace: TraceContext = NO_TRACE,
        clock: Clock = utc_now,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> OutboxEvent:
        """A fresh PENDING event with a new event_id, stamped now."""
        return cls(
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            seq=seq,
            event_type=event_type,
            payload=payload,
            event_id=str(new_id()),
            occurred_at=format_timestamp(clock()),
            schema_version=schema_version,
            correlation_id=correlation_id,
            trace=trace,
        )

    def with_status(self, status: OutboxStatus, **changes: Any) -> OutboxEvent:
        return replace(self, status=status, **changes)

    def envelope(self) -> dict[str, Any]:
        """The JSON body every consumer gets, on SNS and EventBridge alike (docs/contracts.md, "Published
        envelope")."""
        return self._envelope_head() | {"payload": dict(self.payload)}

    def envelope_json(self) -> str:
        """The envelope as compact JSON text, with the payload's text spliced in unchanged (see from_item);
        for a stored envelope, its text as stored (ValueError until it was read)."""
        if self.stored is not None:
            return self.stored.envelope_text()
        correlation_id = "null" if self.correlation_id is None else _json_string(self.correlation_id)
        return (
            f'{{"event_id":{_json_string(self.event_id)},"event_type":{_json_string(self.event_type)},'
            f'"schema_version":{int.__repr__(self.schema_version)},'
            f'"aggregate_type":{_json_string(self.aggregate_type)},'
            f'"aggregate_id":{_json_string(self.aggregate_id)},"seq":{int.__repr__(self.seq)},'
            f'"occurred_at":{_json_string(self.occurred_at)},"correlation_id":{correlation_id},'
            f'{self.trace.envelope_json() if self.trace else ""}"payload":{self._payload_json}}}'
        )

    @property
    def payload_json(self) -> str:
        """The payload as the JSON text that is published: as stored, for an event read from its row."""
        return self._payload_json

    def _envelope_head(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "schema_version": self.schema_version,
            "aggregate_type": self.aggregate_type,
            "aggregate_id": self.aggregate_id,
            "seq": self.seq,
            "occurred_at": self.occurred_at,
            "correlation_id": self.correlation_id,
        } | self.trace.envelope_fields()

    def to_item(self) -> dict[str, dict[str, Any]]:
        """The row as a low-level DynamoDB item (the format of TransactWriteItems and streams)."""
        item: dict[str, dict[str, Any]] = {
            PARTITION_KEY: {"S": self.aggregate_key},
            SORT_KEY: {"N": str(self.seq)},
            "event_id": {"S": self.event_id},
            "event_type": {"S": self.event_type},
            "schema_version": {"N": str(self.schema_version)},
            "aggregate_type": {"S": self.aggregate_type},
            "aggregate_id": {"S": self.aggregate_id},
            "payload": {"S": self._payload_json},
            "occurred_at": {"S": self.occurred_at},
            "status": {"S": self.status.value},
            "attempts": {"N": str(self.attempts)},
        }
        if self.stored is not None:
            del item["payload"]
            item.update(self.stored.attributes())
        if self.correlation_id is not None:
            item["correlation_id"] = {"S": self.correlation_id}
        if self.last_error is not None:
            item["last_error"] = {"S": truncate_error(self.last_error)}
        if self.expires_at is not None:
            item[TTL_ATTRIBUTE] = {"N": str(self.expires_at)}
        if self.trace:
            item.update(self.trace.attributes())
        if self.origin is not None:
            item[ORIGIN] = {"S": self.origin}
        return item

    @classmethod
    def from_item(cls, item: Item) -> OutboxEvent:
        """Read a row back. Any breach of the contract raises InvalidOutboxRowError naming the field."""
        reader = ItemReader(item)
        try:
            stored = StoredEnvelope.of_item(item)
            stored_payload = _STORED_ELSEWHERE if stored is not None else reader.string("payload")
            event = cls(
                aggregate_type=reader.string("aggregate_type"),
                aggregate_id=reader.string("aggregate_id"),
                seq=reader.integer(SORT_KEY),
                event_type=reader.string("event_type"),
                payload=decode_payload(stored_payload),
                event_id=reader.string("event_id"),
                occurred_at=reader.string("occurred_at"),
                schema_version=reader.integer("schema_version"),
                correlation_id=reader.optional_string("correlation_id"),
                status=_status(reader.string("status")) if "status" in item else OutboxStatus.PENDING,
                attempts=reader.integer("attempts") if "attempts" in item else 0,
                last_error=reader.optional_string("last_error"),
                expires_at=reader.integer("expires_at") if "expires_at" in item else None,
                trace=TraceContext.of_item(item)
                if _TRACE_HEADER in item or _TRACEPARENT in item
                else NO_TRACE,
                stored=stored,
                origin=_origin_read(item.get(ORIGIN)),
            )
        except InvalidOutboxRowError:
            raise
        except InvalidEventError as error:
            raise InvalidOutboxRowError(str(error), field=error.field) from None
        except ValueError:
            raise InvalidOutboxRowError(
                "status is not one of PENDING, PUBLISHED, FAILED", field="status"
            ) from None
        if reader.string(PARTITION_KEY) != event.aggregate_key:
            raise InvalidOutboxRowError(
                f"{PARTITION_KEY} does not match aggregate_type#aggregate_id", field=PARTITION_KEY
            )
        # Forward the payload exactly as the writer stored it: re-encoding the parsed value would
        # round numbers beyond double precision and change their spelling.
        object.__setattr__(event, "_payload_json", stored_payload)
        return event


_STORED_ELSEWHERE = "{}"
"""The `payload` of an event whose envelope is in the payload store: its row holds none."""


def _status(text: str) -> OutboxStatus:
    """`OutboxStatus(text)` by a dict lookup (an enum's call is slow); raises ValueError alike."""
    status = _STATUSES.get(text)
    if status is None:
        raise ValueError(f"{text!r} is not a valid OutboxStatus")
    return status


_STATUSES = {status.value: status for status in OutboxStatus}
_TRACE_HEADER, _TRACEPARENT = TraceContext._fields


def _origin_read(value: Any) -> str | None:
    """A row's `origin` as read: an attribute of that name that names no region (another writer's, on an
    outbox that may span no regions at all) reads as absent, never as a broken row; across regions such a
    row is the home region's, as one without `origin` is. Writers' events are checked on write."""
    text = value.get("S") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) and is_region_name(text) else None

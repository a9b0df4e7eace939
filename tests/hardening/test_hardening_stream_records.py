"""Bad stream records at the publisher's Lambda handler: every attribute type in every field, fields missing
and extra, records that are not INSERTs, events that are not stream batches.

These records are made up (no row behind them), as no DynamoDB stream would send most of them. Each one gets
a typed error (the invocation fails: `InvalidStreamEventError`, `StreamConfigurationError`), or is published,
skipped or held, or is poison with its reason; never an untyped exception, and never a handed-back record
(which would block the shard). Nothing is written: no row backs them, so no settle, FAILED mark or park may
land, and a REMOVE (a settle, or another writer's delete: outbox_publisher.writer_contract) writes nothing
back. Nothing is published that no record holds, nor twice to one destination, nor to a destination the
row's `delivered_to` names; an INSERT of the outbox's own items (keys starting with `#`) is skipped. No
payload value or key name shows in the logs, the metrics or a poison message's reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.clock import format_timestamp
from outbox.model import (
    AUDIT_KEY_PREFIX,
    DELIVERED_TO,
    GENERATION,
    RESERVED_KEY_PREFIX,
    SWEEPER_CURSOR_KEY,
    TTL_ATTRIBUTE,
)
from tests.hardening.checks import marker
from tests.hardening.profiles import examples
from tests.hardening.publishing import Delivery, Result, judge_delivery
from tests.hardening.strategies import (
    attribute_values,
    hostile_text,
    json_keys,
    json_objects,
    json_text,
    json_values,
    raw_json_texts,
    stored_attribute_values,
    unmarked_json_values,
    unmarked_text,
)
from tests.hardening.tally import Source
from tests.support.events import event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

CATEGORY = "stream-records"
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/2026-11-29T00:00:00.000"
ROW_FIELDS = (
    "aggregate_key",
    "seq",
    "event_id",
    "event_type",
    "schema_version",
    "aggregate_type",
    "aggregate_id",
    "payload",
    "occurred_at",
    "correlation_id",
    "status",
    "attempts",
    DELIVERED_TO,
    GENERATION,
)
_numbers = iter(range(1, 10**9))


def good_row(payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid PENDING row of an aggregate no other input uses, its payload holding markers."""
    return event(f"rec-{next(_numbers)}", 1, payload=payload or {marker(1): marker(2)}).to_item()


def stream_record(image: dict[str, Any] | None, *, name: str = "INSERT", number: int = 1) -> dict[str, Any]:
    """A record as Lambda delivers it (tests/support/streams.py shapes real ones the same way)."""
    stream: dict[str, Any] = {
        "ApproximateCreationDateTime": 1796040000,
        "SequenceNumber": f"{number:021d}",
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if image is not None:
        stream["Keys"] = {name_: image[name_] for name_ in ("aggregate_key", "seq") if name_ in image}
        stream["NewImage" if name != "REMOVE" else "OldImage"] = image
    return {
        "eventID": f"event-{number}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": stream,
        "eventSourceARN": STREAM_ARN,
    }


def deliver(delivery: Delivery, lambda_event: Any, *, source: Source) -> None:
    result = delivery.run(lambda_event)
    try:
        judge_delivery(CATEGORY, result, source=source)
    finally:
        delivery.put_back(result)


def _with(changes: dict[str, Any], *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    row = good_row() | changes
    for name in drop:
        row.pop(name, None)
    return row


# --- Listed ---------------------------------------------------------------------------------------------

LISTED_IMAGES: list[tuple[str, dict[str, Any]]] = [
    ("seq-1.5", _with({"seq": {"N": "1.5"}})),
    ("seq-1e400", _with({"seq": {"N": "1e400"}})),
    ("seq-past-dynamodb", _with({"seq": {"N": "1E+126"}})),
    ("seq-5000-digits", _with({"seq": {"N": "9" * 5000}})),
    ("seq-39-digits", _with({"seq": {"N": "9" * 39}})),
    ("schema-version-5000-digits", _with({"schema_version": {"N": "9" * 5000}})),
    ("seq-not-a-number", _with({"seq": {"N": "one"}})),
    ("seq-as-string", _with({"seq": {"S": "1"}})),
    ("seq-arabic-indic", _with({"seq": {"N": "\u0661"}})),
    ("key-as-number", _with({"aggregate_key": {"N": "1"}})),
    ("key-mismatch", _with({"aggregate_key": {"S": "Order#someone-else"}})),
    ("payload-not-json", _with({"payload": {"S": f'{{"{marker(3)}": '}})),
    ("payload-1e400", _with({"payload": {"S": f'{{"{marker(4)}": 1e400}}'}})),
    ("payload-5000-digits", _with({"payload": {"S": f'{{"{marker(5)}": {"9" * 5000}}}'}})),
    ("payload-lone-surrogate-key", _with({"payload": {"S": f'{{"\\ud800{marker(6)}": 1}}'}})),
    ("payload-duplicate-keys", _with({"payload": {"S": f'{{"a": "{marker(7)}", "a": 2}}'}})),
    ("payload-array", _with({"payload": {"S": f'["{marker(8)}"]'}})),
    ("payload-as-map", _with({"payload": {"M": {marker(9): {"S": marker(10)}}}})),
    ("payload-as-binary", _with({"payload": {"B": "eyJhIjoxfQ=="}})),
    ("payload-nan", _with({"payload": {"S": f'{{"{marker(11)}": NaN}}'}})),
    ("payload-deep", _with({"payload": {"S": '{"a":' + "[" * 5000 + "]" * 5000 + "}"}})),
    ("event-id-missing", _with({}, drop=("event_id",))),
    ("event-id-not-uuid", _with({"event_id": {"S": "not-a-uuid"}})),
    ("event-type-number", _with({"event_type": {"N": "1"}})),
    ("event-id-not-a-map", _with({"event_id": 1})),
    ("event-id-text-not-a-map", _with({"event_id": "xSx"})),
    ("status-unknown", _with({"status": {"S": "SHIPPED"}})),
    ("status-published", _with({"status": {"S": "PUBLISHED"}})),
    ("status-null", _with({"status": {"NULL": True}})),
    (
        "occurred-at-arabic-indic",
        _with({"occurred_at": {"S": "\u0662\u0660\u0662\u0666-11-29T12:00:00.123Z"}}),
    ),
    ("occurred-at-garbage", _with({"occurred_at": {"S": marker(12)}})),
    ("occurred-at-ancient", _with({"occurred_at": {"S": "1970-01-01T00:00:00.000Z"}})),
    ("schema-version-fraction", _with({"schema_version": {"N": "1.5"}})),
    ("attempts-negative", _with({"attempts": {"N": "-1"}})),
    ("expires-at-on-pending", _with({"expires_at": {"N": "1"}})),
    ("unknown-attribute", _with({marker(13): {"S": marker(14)}})),
    ("every-field-missing", {}),
    ("string-set-payload", _with({"payload": {"SS": [marker(15)]}})),
    ("delivered-to-both", _with({DELIVERED_TO: {"SS": ["eventbridge", "sns"]}})),
    ("delivered-to-unknown", _with({DELIVERED_TO: {"SS": ["kinesis", marker(16)]}})),
    ("delivered-to-a-string", _with({DELIVERED_TO: {"S": "sns"}})),
    ("delivered-to-a-list", _with({DELIVERED_TO: {"L": [{"S": "sns"}]}})),
    ("delivered-to-empty-set", _with({DELIVERED_TO: {"SS": []}})),
    ("generation-text", _with({GENERATION: {"S": "1"}})),
    ("generation-5000-digits", _with({GENERATION: {"N": "9" * 5000}})),
    ("legacy-pending-shard", _with({"pending_shard": {"N": "3"}})),
    ("reserved-key-seq-not-a-number", _with({"aggregate_key": {"S": SWEEPER_CURSOR_KEY}, "seq": {"N": "x"}})),
    ("null-everywhere", {name: {"NULL": True} for name in ROW_FIELDS}),
    ("bool-everywhere", {name: {"BOOL": True} for name in ROW_FIELDS}),
]


@pytest.mark.parametrize("image", [image for _, image in LISTED_IMAGES], ids=[i for i, _ in LISTED_IMAGES])
def test_listed_images_are_refused_poisoned_or_skipped_and_write_nothing(
    delivery: Delivery, image: dict[str, Any]
) -> None:
    # Given / When an INSERT record carrying a listed image is delivered / Then typed, poison or skipped
    deliver(delivery, {"Records": [stream_record(image)]}, source=Source.LISTED)


def _record_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record = stream_record(good_row())
    change(record)
    return record


def _modify_with_old_image(old_image: Any) -> dict[str, Any]:
    record = stream_record(good_row(), name="MODIFY")
    record["dynamodb"]["OldImage"] = old_image
    return record


LISTED_EVENTS: list[tuple[str, Any]] = [
    ("not-a-dict", [stream_record(good_row())]),
    ("no-records", {}),
    ("records-not-a-list", {"Records": {"0": stream_record(good_row())}}),
    ("empty-batch", {"Records": []}),
    ("modify-no-old-image", {"Records": [stream_record(good_row(), name="MODIFY")]}),
    ("modify-old-image-a-list", {"Records": [_modify_with_old_image([])]}),
    ("modify-old-image-text", {"Records": [_modify_with_old_image("image")]}),
    ("unknown-event-name", {"Records": [stream_record(good_row(), name="UPSERT")]}),
    ("no-event-name", {"Records": [_record_with(lambda r: r.pop("eventName"))]}),
    ("no-sequence-number", {"Records": [_record_with(lambda r: r["dynamodb"].pop("SequenceNumber"))]}),
    ("empty-sequence-number", {"Records": [_record_with(lambda r: r["dynamodb"].update(SequenceNumber=""))]}),
    ("no-new-image", {"Records": [_record_with(lambda r: r["dynamodb"].pop("NewImage"))]}),
    ("keys-only", {"Records": [_record_with(lambda r: r["dynamodb"].update(StreamViewType="KEYS_ONLY"))]}),
    ("no-keys", {"Records": [_record_with(lambda r: r["dynamodb"].pop("Keys"))]}),
    ("keys-of-another-row", {"Records": [_record_with(lambda r: r["dynamodb"].update(Keys=good_row()))]}),
    (
        "another-tables-stream",
        {
            "Records": [
                _record_with(lambda r: r.update(eventSourceARN=STREAM_ARN.replace("/outbox/", "/orders/")))
            ]
        },
    ),
    ("no-source-arn", {"Records": [_record_with(lambda r: r.pop("eventSourceARN"))]}),
    ("no-dynamodb", {"Records": [_record_with(lambda r: r.pop("dynamodb"))]}),
    ("duplicate-sequence-numbers", {"Records": [stream_record(good_row()), stream_record(good_row())]}),
    (
        "event-id-reused",
        {
            "Records": [
                stream_record(
                    good_row() | {"event_id": {"S": "00000000-0000-4000-8000-000000000001"}}, number=n
                )
                for n in (1, 2)
            ]
        },
    ),
]


@pytest.mark.parametrize("lambda_event", [e for _, e in LISTED_EVENTS], ids=[i for i, _ in LISTED_EVENTS])
def test_listed_events_are_refused_with_a_typed_error_or_handled(
    delivery: Delivery, lambda_event: Any
) -> None:
    # Given / When a listed event reaches the handler / Then a typed error, or each record handled
    deliver(delivery, copy.deepcopy(lambda_event), source=Source.LISTED)


# --- Generated ------------------------------------------------------------------------------------------

payload_texts = st.one_of(json_objects.map(json_text), raw_json_texts(json_objects))
# Markers go into the payload and into attributes the contract does not know: ids and the other known fields
# are logged on purpose.
field_values = attribute_values(unmarked_text, unmarked_json_values)
extra_attributes = st.dictionaries(json_keys, attribute_values(hostile_text, json_values), max_size=2)
# A record's Keys address the FAILED mark of a poison row (and a MODIFY's old image goes whole to the poison
# queue): DynamoDB refuses keys it cannot store, but moto stores them and then cannot read its own table back.
# Those hold only what it stores.
well_formed_field_values = stored_attribute_values(unmarked_text, as_sent=True)
well_formed_extra_attributes = st.dictionaries(
    json_keys.filter(bool), stored_attribute_values(hostile_text, as_sent=True), max_size=2
)


@st.composite
def images(draw: Callable[..., Any], *, malformed: bool = True) -> dict[str, Any]:
    """A valid row with some of its fields given other values (of any type, or none), and some added."""
    row = good_row()
    row["payload"] = {"S": draw(payload_texts)}
    values = field_values if malformed else well_formed_field_values
    for name in draw(st.lists(st.sampled_from(ROW_FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            row.pop(name, None)
        else:
            row[name] = draw(values)
    row.update(draw(extra_attributes if malformed else well_formed_extra_attributes))
    return row


@st.composite
def records(draw: Callable[..., Any], number: int) -> Any:
    name = draw(st.sampled_from(("INSERT", "INSERT", "INSERT", "MODIFY", "REMOVE", "UPSERT")))
    image = draw(images())
    record = stream_record(image, name=name, number=number)
    stream = record["dynamodb"]
    if name == "MODIFY":
        stream["OldImage"] = draw(st.one_of(images(), st.just(image | {"status": {"S": "PUBLISHED"}})))
    # The record keeps Lambda's shape (maps where maps go): what is in the maps is what varies. Shapes that
    # are not records at all are listed above.
    for field_name in draw(
        st.lists(st.sampled_from(("Keys", "OldImage", "StreamViewType", "SizeBytes")), max_size=2)
    ):
        if draw(st.booleans()):
            stream.pop(field_name, None)
        elif field_name in {"Keys", "OldImage"}:
            stream[field_name] = draw(images(malformed=False))
        else:
            stream[field_name] = draw(st.one_of(unmarked_text, st.integers()))
    for field_name in draw(
        st.lists(st.sampled_from(("eventSource", "eventVersion", "awsRegion", "eventID")), max_size=2)
    ):
        record[field_name] = draw(unmarked_text)
    return record


# As Lambda's runtime hands the event over: decoded from JSON (numbers past a float's range are inf).
batches = (
    st.lists(st.integers(1, 10**6), min_size=1, max_size=3, unique=True)
    .flatmap(lambda numbers: st.tuples(*(records(number) for number in sorted(numbers))))
    .map(lambda batch: json.loads(json_text(list(batch))))
)


@examples(2)
@given(batch=batches)
def test_generated_records_are_refused_poisoned_or_skipped_and_write_nothing(
    delivery: Delivery, batch: list[Any]
) -> None:
    # Given / When a generated batch of made-up records is delivered / Then typed, poison, skipped or held
    deliver(delivery, {"Records": batch}, source=Source.GENERATED)


# --- What the new model must hold -----------------------------------------------------------------------


def _row_image(status: str) -> dict[str, Any]:
    return good_row() | {"status": {"S": status}}


REMOVED_IMAGES: list[tuple[str, dict[str, Any]]] = [
    ("pending", _row_image("PENDING")),
    ("failed", _row_image("FAILED")),
    ("published-legacy", _row_image("PUBLISHED")),
    ("pending-delivered-to-one", _row_image("PENDING") | {DELIVERED_TO: {"SS": ["sns"]}}),
    ("audit-record", {"aggregate_key": {"S": f"{AUDIT_KEY_PREFIX}Order#x"}, "seq": {"N": "1"}}),
]


@pytest.mark.parametrize("image", [i for _, i in REMOVED_IMAGES], ids=[i for i, _ in REMOVED_IMAGES])
def test_a_remove_record_is_skipped_and_writes_nothing_back(
    delivery: Delivery, image: dict[str, Any]
) -> None:
    # Given a REMOVE record: a settle (the publishing paths delete a row once it is out), a skip, or another
    # writer's delete, which the stream cannot tell apart
    lambda_event = {"Records": [stream_record(image, name="REMOVE")]}
    # When it reaches the publisher
    result = delivery.run(lambda_event)
    try:
        # Then it is skipped: nothing published, poisoned, handed back, and no row written back
        assert result.error is None
        assert (result.published, result.poison, result.handed_back) == ([], [], [])
        assert result.skipped("remove") == 1, result.summary
        assert result.changed == set()
        judge_delivery(CATEGORY, result, source=Source.LISTED)
    finally:
        delivery.put_back(result)


# The outbox's own items (outbox.model.RESERVED_KEY_PREFIX): an operator's audit record of an event, which
# keeps a skipped row whole (its payload included), and the sweeper's cursor; and anything else under such a
# key.
reserved_keys = st.one_of(
    st.just(SWEEPER_CURSOR_KEY),
    st.builds(lambda rest: AUDIT_KEY_PREFIX + rest, st.sampled_from(("Order#1", "Order#a#b", ""))),
    st.builds(lambda rest: RESERVED_KEY_PREFIX + rest, unmarked_text),
)
stored_seqs = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.decimals(min_value=-(10**9), max_value=10**9, allow_nan=False, allow_infinity=False, places=3).map(
        str
    ),
)


def _audit_record() -> st.SearchStrategy[dict[str, Any]]:
    entry = st.builds(
        lambda reason, row: {
            "M": {
                "action": {"S": "skip"},
                "at": {"S": "2026-11-29T12:00:00.000Z"},
                "by": {"S": "operator"},
                "reason": {"S": reason},
                "generation": {"N": "0"},
                "row": {"M": row},
            }
        },
        hostile_text,
        st.just(_row_image("FAILED")),
    )
    return st.builds(
        lambda entries: {"entries": {"L": entries}, "event_id": good_row()["event_id"]},
        st.lists(entry, min_size=1, max_size=2),
    )


_cursor = st.builds(
    lambda segments, pending: {
        "segments": {"N": str(segments)},
        "so_far": {"M": {"pending": {"N": str(pending)}}},
        "position": {"M": good_row()},
    },
    st.integers(1, 50),
    st.integers(0, 10**6),
)
reserved_bodies = st.one_of(
    _audit_record(),
    _cursor,
    st.builds(good_row),  # an event row copied under a reserved key: another writer's row, poison
    st.builds(lambda image: {k: v for k, v in image.items() if k not in ("aggregate_key", "seq")}, images()),
)


@st.composite
def reserved_inserts(draw: Callable[..., Any]) -> list[Any]:
    numbers = draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=3, unique=True))
    batch = []
    for number in sorted(numbers):
        key = {"aggregate_key": {"S": draw(reserved_keys)}, "seq": {"N": draw(stored_seqs)}}
        batch.append(stream_record(draw(reserved_bodies) | key, number=number))
    return list(json.loads(json_text(batch)))  # as Lambda's runtime hands the event over, decoded from JSON


@examples(1)
@given(batch=reserved_inserts())
def test_an_insert_under_a_reserved_key_is_skipped_if_the_outboxs_own_else_never_published(
    delivery: Delivery, batch: list[Any]
) -> None:
    # Given INSERT records of items under reserved keys (audit records, the sweeper's cursor, anything)
    # When they reach the publisher
    result = delivery.run({"Records": batch})
    try:
        # Then the outbox's own items (no status) are skipped as no event; anything else under such a key is
        # another writer's row, handled as one: never published (its key is no event's), poison if PENDING
        own = sum("status" not in record["dynamodb"]["NewImage"] for record in batch)
        assert result.error is None, result.error
        assert (result.published, result.handed_back) == ([], [])
        assert result.skipped("not_an_event") == own, result.summary
        # (a poison message names the key it could read: a seq of "0.001" is no key an event can have)
        assert all(
            message["row"]["aggregate_key"]["S"].startswith(RESERVED_KEY_PREFIX) for message in result.poison
        )
        judge_delivery(CATEGORY, result, source=Source.GENERATED)
    finally:
        delivery.put_back(result)


# Attributes no part of the outbox reads: a writer's own bookkeeping, or anything at all.
KNOWN_ATTRIBUTES = frozenset(ROW_FIELDS) | {
    TTL_ATTRIBUTE,
    "last_error",
    "failed_at",
    "failed_shard",
    "lease_owner",
    "lease_until",
    "next_attempt_at",
    "sweep_failures",
    "redriven_at",
    "released_at",
    "release_reason",
    "first_released_at",
}
unknown_attributes = st.dictionaries(
    json_keys.filter(lambda name: bool(name) and name not in KNOWN_ATTRIBUTES),
    stored_attribute_values(hostile_text, as_sent=True),
    max_size=3,
)
delivered_names = st.lists(
    st.one_of(st.sampled_from(("sns", "eventbridge")), unmarked_text.filter(bool)),
    min_size=1,
    max_size=3,
    unique=True,
)


def fresh_row(delivery: Delivery) -> dict[str, Any]:
    """A valid PENDING row that occurred just now by the publisher's clock: published without a claim."""
    now = delivery.world.clock() - timedelta(seconds=2)
    return good_row() | {"occurred_at": {"S": format_timestamp(now)}}


def _sent(result: Result, event_id: str) -> dict[str, int]:
    return {name: published.count(event_id) for name, published in result.published_to.items()}


@examples(1)
@given(names=delivered_names, extra=unknown_attributes)
def test_an_event_goes_once_to_each_destination_its_row_does_not_name_in_delivered_to(
    delivery: Delivery, names: list[str], extra: dict[str, Any]
) -> None:
    # Given a fresh row that records destinations (known or not) as having taken its event, and attributes
    # nobody knows
    image = fresh_row(delivery) | extra | {DELIVERED_TO: {"SS": names}}
    event_id = image["event_id"]["S"]
    # When its INSERT reaches the publisher
    result = delivery.run({"Records": [stream_record(image)]})
    try:
        # Then it goes once to each destination of its route the row does not name, and to no other
        route = {destination.value for destination in result.router.destinations_for("Order", "OrderPlaced")}
        expected = {name: int(name in route and name not in names) for name in result.published_to}
        assert result.error is None, result.error
        assert (_sent(result, event_id), result.poison, result.handed_back) == (expected, [], [])
        judge_delivery(CATEGORY, result, source=Source.GENERATED)
    finally:
        delivery.put_back(result)

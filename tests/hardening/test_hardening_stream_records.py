"""Bad stream records at the publisher's Lambda handler: every attribute type in every field, fields missing
and extra, records that are not INSERTs, events that are not stream batches.

These records are made up (no row behind them), as no DynamoDB stream would send most of them. Each one gets
a typed error (the invocation fails: `InvalidStreamEventError`, `StreamConfigurationError`), or is published,
skipped or held, or is poison with its reason; never an untyped exception, and never a handed-back record
(which would block the shard). Nothing partial is written: no row backs them, so no mark may land, and a row
written back (a pending row's REMOVE) is FAILED with its poison message. No payload value or key name shows
in the logs, the metrics or a poison message's reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hardening.checks import marker
from tests.hardening.profiles import examples
from tests.hardening.publishing import Delivery, judge_delivery
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
    "pending_shard",
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
    ("remove", {"Records": [stream_record(good_row(), name="REMOVE")]}),
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
# A REMOVE's old image is written back (outbox_publisher.writer_contract): DynamoDB refuses what it cannot
# store, but moto stores it and then cannot read its own table back. Those images hold only what it stores.
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
    image = draw(images(malformed=name != "REMOVE"))
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

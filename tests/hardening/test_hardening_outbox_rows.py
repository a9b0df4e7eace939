"""Outbox rows from other writers (any language, any care for the row contract), through the real stream to
the publisher's Lambda handler: rows put with every attribute type, fields missing or extra, keys the contract
does not allow, and rows rewritten or deleted after they were written.

Each record is published, skipped or held, or its row is poison with its reason; never an untyped exception,
never a handed-back record. Nothing partial (tests/hardening/publishing.py, `row_problems`): the publisher
writes no row of its own; it deletes a row only once its event is out on every destination the row still
needed (its route's, less those its `delivered_to` names), and then it must; otherwise it only parks a row
(records which destinations took its event) or marks it FAILED, with its message on the poison queue, and a
poison row is kept FAILED, never dropped. Nothing is published that no stream record holds, nor to a
destination the row says took it already. The outbox's own items (keys starting with `#`) are skipped. No
payload value or key name shows in the logs, the metrics, a `last_error` or a poison message's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import assume, given
from hypothesis import strategies as st

from outbox.model import (
    AUDIT_KEY_PREFIX,
    DELIVERED_TO,
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    LEASE_OWNER,
    LEASE_UNTIL,
    LEGACY_ATTRIBUTES,
    NEXT_ATTEMPT_AT,
    REDRIVEN_AT,
    RELEASE_REASON,
    RELEASED_AT,
    RESERVED_KEY_PREFIX,
    SWEEP_FAILURES,
    SWEEPER_CURSOR_KEY,
    TTL_ATTRIBUTE,
)
from tests.hardening.checks import OUTBOX_KEY, TableState, key_of, marker, restore
from tests.hardening.profiles import examples
from tests.hardening.publishing import Delivery, Result, judge_delivery
from tests.hardening.strategies import (
    hostile_text,
    json_keys,
    json_objects,
    json_text,
    raw_json_texts,
    stored_attribute_values,
    unmarked_text,
)
from tests.hardening.tally import Source
from tests.support.events import event
from tests.support.streams import lambda_event, read_stream

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

CATEGORY = "outbox-rows"
_numbers = iter(range(1, 10**9))


class Writer:
    """Another writer on the outbox table, and the stream records its writes make."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.world = delivery.world
        self._seen: str | None = None
        self.records()  # what earlier tests left on the stream is not this test's
        self.baseline = TableState.read(self.world.dynamodb, self.world.tables.outbox, OUTBOX_KEY)
        """The table as every input finds it: each is put back to it afterwards."""

    def records(self) -> list[dict[str, Any]]:
        raw = read_stream(self.world.streams, self.world.tables.outbox_stream_arn, after=self._seen)
        if raw:
            self._seen = raw[-1]["dynamodb"]["SequenceNumber"]
        return raw

    def event(self) -> dict[str, Any]:
        """The Lambda event for what was written since the last call."""
        return lambda_event(self.records(), self.world.tables.outbox_stream_arn)

    def put(self, item: dict[str, Any]) -> None:
        try:
            self.world.put_raw(item)
        except ClientError:
            # DynamoDB refuses it: nothing for the publisher to get, and no input to judge.
            self.reset()
            assume(False)

    def reset(self) -> None:
        """The table back as every input finds it, and what that wrote to the stream read past."""
        restore(self.world.dynamodb, self.baseline)
        self.records()


@pytest.fixture(scope="module")
def writer(delivery: Delivery) -> Writer:
    return Writer(delivery)


def deliver(writer: Writer, *, source: Source, first: Callable[[], None] | None = None) -> Result:
    """Runs the handler on what the writer wrote (after `first`, if given: an earlier invocation), judges it,
    and puts the table back as the test found it. What the run did, for the test's own checks."""
    try:
        if first is not None:
            first()
        result = writer.delivery.run(writer.event())
        judge_delivery(CATEGORY, result, source=source)
    finally:
        writer.reset()
    return result


def row(**changes: Any) -> dict[str, Any]:
    """A valid PENDING row of an aggregate no other input uses, its payload holding markers."""
    item = event(f"row-{next(_numbers)}", 1, payload={marker(1): [marker(2)]}).to_item()
    return item | changes


# --- Listed ---------------------------------------------------------------------------------------------

LISTED_ROWS: list[tuple[str, dict[str, Any]]] = [
    ("seq-1.5", row(seq={"N": "1.5"})),
    ("seq-1e2", row(seq={"N": "1E+2"})),
    ("seq-38-digits", row(seq={"N": "9" * 38})),
    ("seq-2-no-predecessor", row(seq={"N": "2"})),
    ("key-mismatch", row(aggregate_key={"S": "Order#somebody-else"})),
    ("key-without-hash", row(aggregate_key={"S": "no-type-here"})),
    ("payload-not-json", row(payload={"S": f'{{"{marker(3)}": '})),
    ("payload-1e400", row(payload={"S": f'{{"{marker(4)}": 1e400}}'})),
    ("payload-5000-digits", row(payload={"S": f'{{"{marker(5)}": {"9" * 5000}}}'})),
    ("payload-lone-surrogate", row(payload={"S": f'{{"\\ud800{marker(6)}": "\\udfff"}}'})),
    ("payload-duplicate-keys", row(payload={"S": f'{{"{marker(7)}": 1, "{marker(7)}": 2}}'})),
    ("payload-a-map", row(payload={"M": {marker(8): {"S": marker(9)}}})),
    ("payload-binary", row(payload={"B": b'{"a": 1}'})),
    ("payload-too-large", row(payload={"S": f'{{"{marker(10)}": "{"x" * 300_000}"}}'})),
    ("payload-deep", row(payload={"S": '{"a":' + "[" * 2000 + "]" * 2000 + "}"})),
    ("event-id-missing", {k: v for k, v in row().items() if k != "event_id"}),
    ("event-id-a-number", row(event_id={"N": "1"})),
    ("event-type-bad", row(event_type={"S": "Order Placed!"})),
    ("status-missing", {k: v for k, v in row().items() if k != "status"}),
    ("status-unknown", row(status={"S": "SHIPPED"})),
    ("status-published", row(status={"S": "PUBLISHED"})),
    ("status-failed", row(status={"S": "FAILED"})),
    ("status-bool", row(status={"BOOL": True})),
    ("occurred-at-non-ascii-digits", row(occurred_at={"S": "\u0662\u0660\u0662\u0666-11-29T12:00:00.000Z"})),
    ("occurred-at-ancient", row(occurred_at={"S": "1999-01-01T00:00:00.000Z"})),
    ("occurred-at-future", row(occurred_at={"S": "2999-01-01T00:00:00.000Z"})),
    ("schema-version-zero", row(schema_version={"N": "0"})),
    ("correlation-id-empty", row(correlation_id={"S": ""})),
    ("expires-at-on-pending", row(expires_at={"N": "1"})),
    ("legacy-pending-with-index-attribute", row(pending_shard={"N": "3"})),
    ("legacy-published-awaiting-ttl", row(status={"S": "PUBLISHED"}, expires_at={"N": "1"})),
    ("delivered-to-both", row(delivered_to={"SS": ["eventbridge", "sns"]})),
    ("delivered-to-one", row(delivered_to={"SS": ["sns"]})),
    ("delivered-to-unknown", row(delivered_to={"SS": ["kinesis", marker(15)]})),
    ("delivered-to-a-string", row(delivered_to={"S": "sns"})),
    ("delivered-to-a-list", row(delivered_to={"L": [{"S": "eventbridge"}]})),
    ("delivered-to-a-number-set", row(delivered_to={"NS": ["1"]})),
    ("generation-text", row(generation={"S": "1"})),
    ("generation-text-on-a-poison-row", row(generation={"S": ""}, payload={"S": "not json"})),
    ("unknown-attributes", row(**{marker(11): {"S": marker(12)}, "extra": {"SS": [marker(13)]}})),
    ("aggregate-type-unrouted", row(aggregate_key={"S": "Payment#p"}, aggregate_type={"S": "Payment"})),
]


@pytest.mark.parametrize("item", [item for _, item in LISTED_ROWS], ids=[i for i, _ in LISTED_ROWS])
def test_listed_rows_are_published_skipped_held_or_poison_and_nothing_partial(
    writer: Writer, item: dict[str, Any]
) -> None:
    # Given another writer's listed row / When its stream record reaches the publisher / Then a verdict
    writer.put(item)
    deliver(writer, source=Source.LISTED)


def test_a_pending_row_rewritten_with_another_event_is_handled(writer: Writer) -> None:
    # Given a PENDING row that another writer then overwrites with another event
    original = row()
    writer.put(original)
    writer.put(row(aggregate_key=original["aggregate_key"], payload={"S": f'{{"{marker(14)}": 1}}'}))
    # When both records reach the publisher / Then each has its verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.LISTED)


def test_a_slot_written_again_after_its_row_was_settled_is_a_new_event(writer: Writer) -> None:
    # Given a row published (settled: gone from the table), then its slot written again by another writer
    original = row()
    writer.put(original)
    replacement = row(aggregate_key=original["aggregate_key"], aggregate_id=original["aggregate_id"])
    settled: list[Result] = []

    def publish_then_rewrite() -> None:
        settled.append(writer.delivery.run(writer.event()))
        writer.put(replacement)

    # When the new INSERT reaches the publisher
    result = deliver(writer, source=Source.LISTED, first=publish_then_rewrite)
    # Then the first run settled the original, and the slot's new event went out as any other, and was settled
    key = key_of(original, OUTBOX_KEY)
    assert original["event_id"]["S"] in settled[0].published
    assert key not in settled[0].after.items
    assert replacement["event_id"]["S"] in result.published
    assert key not in result.after.items


def test_a_pending_row_another_writer_deletes_is_published_as_committed_and_nothing_is_written_back(
    writer: Writer,
) -> None:
    # Given a PENDING row another writer deletes before it was published (the stream cannot tell that delete
    # from a settle: outbox_publisher.writer_contract)
    doomed = row()
    writer.put(doomed)
    writer.world.dynamodb.delete_item(
        TableName=writer.world.tables.outbox,
        Key={"aggregate_key": doomed["aggregate_key"], "seq": doomed["seq"]},
    )
    # When both records reach the publisher
    result = deliver(writer, source=Source.LISTED)
    # Then the committed INSERT is published, the REMOVE skipped, and no row written back
    assert sorted(result.published) == [doomed["event_id"]["S"]] * 2
    assert result.skipped("remove") == 1, result.summary
    assert (result.poison, result.changed) == ([], set())


def test_an_insert_of_the_outboxs_own_items_is_skipped_and_a_row_under_their_keys_is_poison(
    writer: Writer,
) -> None:
    # Given the outbox's own items put in the table: an operator's audit record keeping a skipped row whole,
    # the sweeper's cursor; and another writer's event row under a reserved key (it has a status)
    skipped = row(status={"S": "FAILED"})
    kept = {name: value for name, value in skipped.items() if name not in OUTBOX_KEY}
    audit = {
        "aggregate_key": {"S": AUDIT_KEY_PREFIX + skipped["aggregate_key"]["S"]},
        "seq": skipped["seq"],
        "event_id": skipped["event_id"],
        "entries": {"L": [{"M": {"action": {"S": "skip"}, "reason": {"S": marker(16)}, "row": {"M": kept}}}]},
    }
    cursor = {"aggregate_key": {"S": SWEEPER_CURSOR_KEY}, "seq": {"N": "0"}, "segments": {"N": "1"}}
    copy = row() | {"aggregate_key": {"S": RESERVED_KEY_PREFIX + "copy"}}
    for item in (audit, cursor, copy):
        writer.put(item)
    # When their INSERTs reach the publisher
    result = deliver(writer, source=Source.LISTED)
    # Then the outbox's own items are skipped as no event; the row is poison (its key is no event's), kept
    # FAILED where operators see it, never passed over unseen; nothing is published
    assert result.skipped("not_an_event") == 2, result.summary
    assert result.published == []
    assert [message["event_id"] for message in result.poison] == [copy["event_id"]["S"]]
    assert result.changed == {key_of(copy, OUTBOX_KEY)}
    assert result.after.items[key_of(copy, OUTBOX_KEY)]["status"] == {"S": "FAILED"}


# --- Generated ------------------------------------------------------------------------------------------

# Fields the contract names, and those the publishing paths keep, given values of any type DynamoDB stores.
# Markers go only into the payload and into attributes nobody knows: ids and known fields are logged on
# purpose.
CONTRACT_FIELDS = (
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
    "last_error",
    TTL_ATTRIBUTE,
    "generation",
    LEASE_OWNER,
    LEASE_UNTIL,
    DELIVERED_TO,
    *LEGACY_ATTRIBUTES,
)
# The keys of the table and of its indexes must have their schema's types, or DynamoDB refuses the put.
seq_values = st.one_of(
    st.integers(min_value=1, max_value=5).map(str),
    st.sampled_from(("1.5", "1E+2", "1.0", "9" * 38, "1E+125")),
).map(lambda text: {"N": text})
aggregate_keys = st.one_of(
    st.just(None),
    unmarked_text.filter(lambda text: 0 < len(text.encode()) <= 1024).map(lambda text: {"S": text}),
)
delivered_names = st.lists(
    st.one_of(st.sampled_from(("sns", "eventbridge")), unmarked_text.filter(bool)),
    min_size=1,
    max_size=3,
    unique=True,
)
"""What a row's `delivered_to` string set may name: the destinations, and names no destination has."""
payloads = st.one_of(
    json_objects.map(lambda value: {"S": json_text(value)}),
    raw_json_texts(json_objects).filter(bool).map(lambda text: {"S": text}),
    stored_attribute_values(hostile_text),
)


@st.composite
def rows(draw: Callable[..., Any]) -> dict[str, Any]:
    item = row(payload=draw(payloads), seq=draw(seq_values))
    if (key := draw(aggregate_keys)) is not None:
        item["aggregate_key"] = key
    for name in draw(st.lists(st.sampled_from(CONTRACT_FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            item.pop(name, None)
        else:
            item[name] = draw(stored_attribute_values(unmarked_text))
    if draw(st.booleans()):
        item[DELIVERED_TO] = {"SS": draw(delivered_names)}
    extra_names = json_keys.filter(lambda name: 0 < len(name.encode()) <= 255 and name not in item)
    item.update(draw(st.dictionaries(extra_names, stored_attribute_values(hostile_text), max_size=2)))
    return item


@examples(1.5)
@given(item=rows(), then=st.sampled_from(("nothing", "nothing", "rewrite", "delete")))
def test_generated_rows_are_published_skipped_held_or_poison_and_nothing_partial(
    writer: Writer, item: dict[str, Any], then: str
) -> None:
    # Given another writer's generated row, perhaps then rewritten with another or deleted
    writer.put(item)
    if then == "rewrite":
        writer.put(row(aggregate_key=item["aggregate_key"], seq=item["seq"]))
    elif then == "delete":
        writer.world.dynamodb.delete_item(
            TableName=writer.world.tables.outbox,
            Key={"aggregate_key": item["aggregate_key"], "seq": item["seq"]},
        )
    # When what it wrote reaches the publisher / Then a verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.GENERATED)


# Attributes no part of the outbox reads: a writer's own bookkeeping, or anything at all (marker names too).
KNOWN_ATTRIBUTES = frozenset(
    {
        "aggregate_key",
        "seq",
        *CONTRACT_FIELDS,
        "failed_at",
        FAILED_INDEX_PARTITION_KEY,
        NEXT_ATTEMPT_AT,
        SWEEP_FAILURES,
        REDRIVEN_AT,
        RELEASED_AT,
        RELEASE_REASON,
        FIRST_RELEASED_AT,
    }
)
unknown_attributes = st.dictionaries(
    json_keys.filter(lambda name: 0 < len(name.encode()) <= 255 and name not in KNOWN_ATTRIBUTES),
    stored_attribute_values(hostile_text),
    max_size=3,
)


@examples(1)
@given(names=delivered_names, extra=unknown_attributes)
def test_a_row_goes_once_to_each_destination_its_delivered_to_does_not_name_then_leaves_the_table(
    writer: Writer, names: list[str], extra: dict[str, Any]
) -> None:
    # Given a row that records destinations (known or not) as having taken its event, and attributes nobody
    # knows
    item = row() | extra | {DELIVERED_TO: {"SS": names}}
    writer.put(item)
    # When its INSERT reaches the publisher
    result = deliver(writer, source=Source.GENERATED)
    # Then it goes once to each destination of its route the row does not name, to no other, and is settled
    route = {destination.value for destination in result.router.destinations_for("Order", "OrderPlaced")}
    event_id = item["event_id"]["S"]
    sent = {name: published.count(event_id) for name, published in result.published_to.items()}
    assert sent == {name: int(name in route and name not in names) for name in result.published_to}
    assert result.poison == []
    assert key_of(item, OUTBOX_KEY) not in result.after.items

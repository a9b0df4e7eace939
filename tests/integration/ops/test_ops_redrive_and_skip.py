"""`outbox redrive` and `outbox skip` through the real entry point, against the local runtime: same
`event_id`, in order, audited, dry runs that change nothing, queues cleaned up after."""

from __future__ import annotations

import json
from datetime import timedelta

from outbox.clock import utc_now
from outbox.marking import DynamoDBRowMarker
from outbox.model import RowKey
from outbox.row_marks import FailedMark, PublishedMark
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_status_and_failed import BAD_PAYLOAD, new

GOOD_PAYLOAD = {"S": '{"total":"9.99"}'}
MOTO_CALLER = "arn:aws:sts::123456789012:user/moto"
"""Who moto says the caller is: what the audit records."""


def poisoned(
    ops: Ops, aggregate_id: str, *, age: timedelta = timedelta(days=1)
) -> tuple[RowKey, RowKey, str]:
    """X#1 poison (FAILED, on the poison queue) and X#2 held behind it, both `age` old."""
    first = ops.put(new(aggregate_id, 1, age=age), **BAD_PAYLOAD)
    second = ops.put(new(aggregate_id, 2, age=age))
    ops.publish()
    assert (ops.status_of(first), ops.status_of(second)) == ("FAILED", "PENDING")
    return first, second, str(ops.row(first)["event_id"]["S"])


def fix_payload(ops: Ops, key: RowKey) -> None:
    ops.dynamodb.update_item(
        TableName=ops.table,
        Key=key.item(),
        UpdateExpression="SET payload = :good",
        ExpressionAttributeValues={":good": GOOD_PAYLOAD},
    )


def test_a_dry_run_says_what_would_be_done_and_changes_nothing(ops: Ops) -> None:
    # Given a FAILED event, on the poison queue
    _first, _, event_id = poisoned(ops, "dry")
    rows, poison = ops.rows(), ops.messages(ops.poison_queue)

    # When the operator redrives it as a dry run
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "check", "--dry-run", "--json")

    # Then it says it would redrive it, and neither the table nor the queues changed
    assert result.code == 0, result.err
    assert [(r["event_id"], r["outcome"]) for r in result.json["rows"]] == [(event_id, "would_redrive")]
    assert result.json["dry_run"] is True
    assert ops.rows() == rows
    assert ops.messages(ops.poison_queue) == poison
    assert ops.messages(ops.on_failure_queue) == []


def test_a_redrive_without_a_reason_is_refused(ops: Ops) -> None:
    # Given a FAILED event
    _, _, event_id = poisoned(ops, "noreason")
    rows = ops.rows()

    # When the operator redrives it without a reason, or with a blank one
    missing = ops.cli("redrive", "--event-id", event_id)
    blank = ops.cli("redrive", "--event-id", event_id, "--reason", "  ")

    # Then both are refused, saying why, and nothing changed
    assert missing.code == 2
    assert "--reason" in missing.err
    assert blank.code == 1
    assert blank.err.startswith("outbox: a reason is required")
    assert ops.rows() == rows


def test_a_redriven_event_is_published_with_its_event_id_in_order_and_audited(ops: Ops) -> None:
    # Given X#1 FAILED (its payload was not JSON) and X#2 held behind it; the writer's bug is fixed
    first, second, event_id = poisoned(ops, "fixed")
    fix_payload(ops, first)

    # When the operator redrives it
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired", "--json")

    # Then it is PENDING again, its poison message gone, who/when/why on the row
    assert result.code == 0, result.err
    assert [(r["event_id"], r["outcome"]) for r in result.json["rows"]] == [(event_id, "redriven")]
    assert result.json["poison_messages_removed"] == 1
    assert ops.messages(ops.poison_queue) == []
    row = ops.row(first)
    assert (row["status"]["S"], row["generation"]["N"], row["event_id"]["S"]) == ("PENDING", "1", event_id)
    (entry,) = row["audit"]["L"]
    assert (entry["M"]["action"]["S"], entry["M"]["by"]["S"], entry["M"]["reason"]["S"]) == (
        "redrive",
        MOTO_CALLER,
        "payload repaired",
    )

    # When the sweeper runs
    ops.sweep()

    # Then X#1, then X#2 are PUBLISHED, and nothing is FAILED any more
    assert (ops.status_of(first), ops.status_of(second)) == ("PUBLISHED", "PUBLISHED")
    assert ops.cli("failed", "list", "--json").json["failed"] == []

    # When the original poison INSERT of X#1 reaches the publisher again (a stale re-delivery)
    ops.redeliver_insert(first)

    # Then the row stays PUBLISHED
    assert ops.status_of(first) == "PUBLISHED"


def test_a_stale_insert_of_a_redriven_row_cannot_mark_it_failed_again(ops: Ops) -> None:
    # Given a fresh poison row (the stream publishes it without a claim), fixed and redriven
    first, _, event_id = poisoned(ops, "stale", age=timedelta(0))
    fix_payload(ops, first)
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired").code == 0

    # When its original INSERT (the poison image) reaches the publisher again before the sweeper ran
    ops.redeliver_insert(first)

    # Then the stale poisoning does not mark the redriven row: it is still PENDING for the sweeper
    row = ops.row(first)
    assert (row["status"]["S"], row["generation"]["N"]) == ("PENDING", "1")
    assert "pending_shard" in row


def test_a_redrive_that_would_publish_after_a_later_event_is_refused_unless_allowed(ops: Ops) -> None:
    # Given Y#1 FAILED, skipped by an operator, and Y#2 published since
    first, second, event_id = poisoned(ops, "order")
    skipped = ops.cli("skip", event_id, "--reason", "superseded", "--json")
    assert skipped.code == 0, skipped.err
    assert [r["outcome"] for r in skipped.json["rows"]] == ["skipped"]
    assert skipped.json["poison_messages_removed"] == 1
    ops.sweep()
    assert ops.status_of(second) == "PUBLISHED"
    fix_payload(ops, first)
    rows = ops.rows()

    # When the operator redrives Y#1
    refused = ops.cli("redrive", "--event-id", event_id, "--reason", "needed after all", "--json")

    # Then it is refused (Y#1 would go out after Y#2), and nothing changed
    assert refused.code == 1
    (row,) = refused.json["rows"]
    assert row["outcome"] == "refused"
    assert "seq 2 of its aggregate is PUBLISHED" in row["detail"]
    assert ops.rows() == rows

    # When the operator allows it out of order
    allowed = ops.cli(
        "redrive", "--event-id", event_id, "--reason", "needed after all", "--allow-out-of-order", "--json"
    )

    # Then it is redriven, and published by the sweeper; the audit keeps the skip and the redrive
    assert allowed.code == 0, allowed.err
    assert [r["outcome"] for r in allowed.json["rows"]] == ["redriven"]
    ops.sweep()
    row_now = ops.row(first)
    assert row_now["status"]["S"] == "PUBLISHED"
    assert [(e["M"]["action"]["S"], e["M"].get("out_of_order")) for e in row_now["audit"]["L"]] == [
        ("skip", None),
        ("redrive", {"BOOL": True}),
    ]


def test_a_missing_event_is_skipped_and_its_successor_goes(ops: Ops) -> None:
    # Given Z#1 published and Z#3 held behind Z#2, which was never written
    ops.put(new("gap", 1, age=timedelta(days=1)))
    third = ops.put(new("gap", 3, age=timedelta(days=1)))
    ops.publish()
    assert ops.status_of(third) == "PENDING"

    # When the operator releases the missing event (after a dry run), then the sweeper runs
    dry = ops.cli("skip", "--missing", "Order#gap", "2", "--reason", "never written", "--dry-run", "--json")
    assert [r["outcome"] for r in dry.json["rows"]] == ["would_skip"]
    assert "predecessor_released_at" not in ops.row(third)
    done = ops.cli("skip", "--missing", "Order#gap", "2", "--reason", "never written", "--json")
    assert done.code == 0, done.err
    ops.sweep()

    # Then Z#3 is PUBLISHED, and its audit says who released its predecessor
    row = ops.row(third)
    assert row["status"]["S"] == "PUBLISHED"
    assert [e["M"]["action"]["S"] for e in row["audit"]["L"]] == ["skip_missing_predecessor"]

    # And releasing an event that exists is refused
    refused = ops.cli("skip", "--missing", "Order#gap", "1", "--reason", "oops")
    assert refused.code == 1
    assert "seq 1 exists" in refused.out


def test_on_failure_messages_are_mapped_back_to_their_rows_and_redriven(ops: Ops) -> None:
    # Given SNS refusing every publish (a broken topic policy): the stream mapping retries W#1's record, then
    # discards it to the on-failure queue (shard and sequence numbers only)
    rule = ops.runtime.faults.arm("sns", "PublishBatch", error_code="AuthorizationError", http_status=403)
    key = ops.put(new("discarded", 1, age=timedelta(days=1)))
    ops.publish()
    (message,) = ops.messages(ops.on_failure_queue)
    assert "DDBStreamBatchInfo" in json.loads(message)
    # ... and the sweeper gave up on the row (as it does past its cutoffs), marking it FAILED
    DynamoDBRowMarker(ops.dynamodb, ops.table).mark(
        [FailedMark(key, "gave_up: AuthorizationError", 5, utc_now())]
    )
    ops.runtime.faults.disarm(rule)
    rows = ops.rows()

    # When the operator redrives the on-failure queue as a dry run
    dry = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--dry-run", "--json")

    # Then the message is mapped to W#1, which would be redriven; nothing changed
    assert dry.code == 0, dry.err
    assert [(r["aggregate_key"], r["seq"], r["outcome"]) for r in dry.json["rows"]] == [
        ("Order#discarded", 1, "would_redrive")
    ]
    assert ops.rows() == rows
    assert ops.messages(ops.on_failure_queue) == [message]

    # When the operator redrives it for real, and the sweeper runs
    done = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--json")
    ops.sweep()

    # Then W#1 is redriven and PUBLISHED, and the on-failure message is gone
    assert done.code == 0, done.err
    assert [r["outcome"] for r in done.json["rows"]] == ["redriven"]
    assert done.json["on_failure_messages_removed"] == 1
    assert ops.messages(ops.on_failure_queue) == []
    assert ops.status_of(key) == "PUBLISHED"


def test_an_on_failure_message_whose_rows_are_still_pending_is_settled_without_a_redrive(ops: Ops) -> None:
    # Given a record discarded by the mapping whose row is still PENDING (the sweeper's to publish)
    rule = ops.runtime.faults.arm("sns", "PublishBatch", error_code="AuthorizationError", http_status=403)
    key = ops.put(new("pending", 1, age=timedelta(days=1)))
    ops.publish()
    ops.runtime.faults.disarm(rule)

    # When the operator redrives the on-failure queue
    done = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--json")

    # Then the row is left to the sweeper (nothing to redrive) and the message is settled
    assert [(r["seq"], r["outcome"]) for r in done.json["rows"]] == [(1, "pending")]
    assert done.json["on_failure_messages_removed"] == 1
    assert ops.status_of(key) == "PENDING"


def test_a_poison_message_a_stale_redelivery_left_is_removed_once_its_row_is_published(ops: Ops) -> None:
    # Given a fresh poison row, fixed and redriven, whose original INSERT came again: parked once more on the
    # poison queue, the row not marked (its generation moved on)
    first, _, event_id = poisoned(ops, "orphan", age=timedelta(0))
    fix_payload(ops, first)
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired").code == 0
    ops.redeliver_insert(first)
    assert len(ops.messages(ops.poison_queue)) == 1
    # ... then published (as the sweeper does once the row is due)
    DynamoDBRowMarker(ops.dynamodb, ops.table).mark([PublishedMark(first, utc_now(), 1, generation=1)])
    assert ops.status_of(first) == "PUBLISHED"

    # When the operator next redrives something else
    _, _, other_id = poisoned(ops, "orphan-other")
    result = ops.cli("redrive", "--event-id", other_id, "--reason", "r", "--json")

    # Then the stale message goes with the other's: the poison queue is empty
    assert result.json["poison_messages_removed"] == 2
    assert ops.messages(ops.poison_queue) == []


def test_a_poison_message_of_the_redriven_rows_next_failure_is_kept(ops: Ops) -> None:
    # Given a FAILED event on the poison queue, and (as if the sweeper had already failed its redrive) a newer
    # poison message of the same row, generation 1
    _, _, event_id = poisoned(ops, "newer")
    (old,) = ops.messages(ops.poison_queue)
    newer = json.loads(old)
    newer["row"]["generation"] = {"N": "1"}
    ops.sqs.send_message(QueueUrl=ops.poison_queue, MessageBody=json.dumps(newer))

    # When the operator redrives it
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "r", "--json")

    # Then only the message of the life it redrove is removed
    assert result.json["poison_messages_removed"] == 1
    (left,) = ops.messages(ops.poison_queue)
    assert json.loads(left)["row"]["generation"] == {"N": "1"}

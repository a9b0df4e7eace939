"""An outbox deployed with the release before the table became the pending set, upgraded in place: its
table still holds that release's rows (PENDING ones carrying the `pending` index's attributes, PUBLISHED ones
waiting for their TTL, FAILED ones released by a skip or with their audit on the row) when the new publisher
and sweeper start. The promise holds over them: each pending event goes out, in order, after its predecessor;
a PUBLISHED or released row lets its successors go; a FAILED one holds its aggregate; nothing is published
twice or lost (docs/deploy.md, "Upgrading").
"""

from __future__ import annotations

from typing import Any

from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox_ops.audit import AuditRecords
from outbox_ops.failed import FailedRows
from outbox_ops.release import redrive
from tests.integration.publisher.publisher_world import World
from tests.integration.publisher.sweeping import GRACE, OUT, assert_in_seq_order, published_ids, statuses
from tests.support.events import event

EXPIRES = {"N": "1900000000"}
LEGACY_AUDIT = {
    "L": [
        {
            "M": {
                "action": {"S": "skip"},
                "at": {"S": "2026-11-20T12:00:00.000Z"},
                "by": {"S": "alice"},
                "reason": {"S": "superseded"},
            }
        }
    ]
}


def legacy(world: World, e: OutboxEvent, status: OutboxStatus, **attributes: Any) -> None:
    """A row as the earlier release left it."""
    item = e.to_item() | {"status": {"S": status.value}} | attributes
    if status is OutboxStatus.PENDING:
        item["pending_shard"] = {"N": "7"}
    if status is OutboxStatus.PUBLISHED:
        item |= {"published_at": {"S": "2026-11-28T12:00:00.000Z"}, "expires_at": EXPIRES}
    if status is OutboxStatus.FAILED:
        item |= {"failed_at": {"S": "2026-11-20T11:00:00.000Z"}}
    world.put_raw(item)


def test_the_new_sweeper_and_publisher_keep_the_promise_over_an_earlier_releases_rows(world: World) -> None:
    # Given what the earlier release left: A#1 PUBLISHED (TTL pending) with A#2, A#3 PENDING behind it (index
    # attributes on them); B#1 FAILED and skipped (released), B#2 PENDING; C#3 PENDING behind a gap the
    # earlier release let an operator release; D#1 FAILED (not released, its audit on the row), D#2 PENDING
    a = [event("A", seq) for seq in (1, 2, 3)]
    b = [event("B", seq) for seq in (1, 2)]
    c3 = event("C", 3)
    d = [event("D", seq) for seq in (1, 2)]
    legacy(world, a[0], OutboxStatus.PUBLISHED)
    legacy(world, a[1], OutboxStatus.PENDING)
    legacy(world, a[2], OutboxStatus.PENDING, next_attempt_at={"N": "1"})
    released = {"released_at": {"S": "2026-11-20T12:00:00.000Z"}, "released_by": {"S": "alice"}}
    legacy(world, b[0], OutboxStatus.FAILED, failed_shard={"N": "1"}, audit=LEGACY_AUDIT, **released)
    legacy(world, b[1], OutboxStatus.PENDING)
    legacy(world, c3, OutboxStatus.PENDING, predecessor_released_at={"S": "2026-11-20T12:00:00.000Z"})
    legacy(world, d[0], OutboxStatus.FAILED, failed_shard={"N": "2"}, last_error={"S": "rejected: x"})
    legacy(world, d[1], OutboxStatus.PENDING)
    records = world.stream_event()

    # When the new sweeper runs past the grace, and the stream then delivers the old rows' records late
    world.clock.advance(GRACE)
    report = world.sweep(world.sweeper())
    late = world.invoke(world.publisher(), records)

    # Then every pending event whose predecessor is out went, once, in order; D waits behind its FAILED row
    published = published_ids(world)
    assert sorted(published) == sorted(e.event_id for e in (a[1], a[2], b[1], c3))
    assert_in_seq_order(published, a, released={a[0].event_id})  # A#1 went out before the upgrade
    assert late == {"batchItemFailures": []}
    assert report.held_aggregates == 1
    # and their rows left the table; the PUBLISHED one waits for its TTL, as it would have; FAILED rows stay
    assert statuses(world, *a, *b, c3, *d) == ["PUBLISHED", OUT, OUT, "FAILED", OUT, OUT, "FAILED", "PENDING"]
    assert world.row(a[0])["expires_at"] == EXPIRES


def test_an_earlier_releases_audit_on_a_row_is_shown_and_kept_when_the_row_is_redriven(world: World) -> None:
    # Given a FAILED row whose skip-and-redrive history the earlier release kept on the row itself
    d1 = event("D", 1)
    legacy(world, d1, OutboxStatus.FAILED, failed_shard={"N": "2"}, last_error={"S": "x"}, audit=LEGACY_AUDIT)

    # When an operator looks at it, then redrives it
    before = FailedRows(world.dynamodb, world.tables.outbox).find(d1.event_id)
    redrive(world.dynamodb, world.tables.outbox, RowKey(d1.aggregate_key, 1), reason="fixed", actor="bob")

    # Then the earlier entries are shown, and the new one goes to the event's audit record
    assert [(entry.action, entry.by) for entry in before.audit] == [("skip", "alice")]
    record = AuditRecords(world.dynamodb, world.tables.outbox).of_event(RowKey(d1.aggregate_key, 1))
    assert record is not None
    assert [(entry.action, entry.by) for entry in record.entries] == [("redrive", "bob")]

"""`outbox purge-published`: deletes what TTL would have, and nothing else."""

from __future__ import annotations

import time
from datetime import timedelta

from outbox.model import OutboxStatus
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_status_and_failed import new


def test_purge_deletes_only_published_rows_past_their_retention(ops: Ops) -> None:
    # Given rows published 40 days ago and past their TTL, one published yesterday (TTL not passed), and a
    # FAILED and a PENDING one, as old
    now = int(time.time())
    expired = [
        ops.put(
            new("old", seq, age=timedelta(days=40)).with_status(OutboxStatus.PUBLISHED),
            published_at={"S": "2026-10-22T12:00:00.000Z"},
            expires_at={"N": str(now - 86_400)},
        )
        for seq in (1, 2, 3)
    ]
    recent = ops.put(
        new("recent", 1, age=timedelta(days=1)).with_status(OutboxStatus.PUBLISHED),
        published_at={"S": "2026-11-30T12:00:00.000Z"},
        expires_at={"N": str(now + 6 * 86_400)},
    )
    failed = ops.put(new("failed", 1, age=timedelta(days=40)).with_status(OutboxStatus.FAILED))
    pending = ops.put(new("pending", 1, age=timedelta(days=40)))
    rows = ops.rows()

    # When the operator purges rows published more than 30 days ago, first as a dry run
    dry = ops.cli("purge-published", "--older-than", "30d", "--dry-run", "--json")

    # Then it counts the three, and deletes nothing
    assert dry.code == 0, dry.err
    assert (dry.json["eligible"], dry.json["deleted"]) == (3, 0)
    assert ops.rows() == rows

    # When it purges for real
    done = ops.cli("purge-published", "--older-than", "30d", "--json")

    # Then exactly the three are gone
    assert (done.json["eligible"], done.json["deleted"]) == (3, 3)
    left = {(row["aggregate_key"]["S"], int(row["seq"]["N"])) for row in ops.rows()}
    assert left == {(key.aggregate_key, key.seq) for key in (recent, failed, pending)}
    assert not left & {(key.aggregate_key, key.seq) for key in expired}


def test_purge_refuses_a_duration_it_cannot_read(ops: Ops) -> None:
    result = ops.cli("purge-published", "--older-than", "a month")
    assert result.code == 2
    assert "is not a duration like 90s, 15m, 12h or 30d" in result.err

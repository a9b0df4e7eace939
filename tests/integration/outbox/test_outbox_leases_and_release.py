"""Leases and operator releases on moto: each is one conditional update that changes nothing unless the row
is in the state it expects, and says which state it found."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from outbox.errors import AwsUnavailableError, ThrottledError
from outbox.leases import STREAM_PUBLISHER, Claim, DynamoDBRowClaimer, Lease
from outbox.marking import DynamoDBRowMarker
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox.release import ReleaseError, redrive, skip, skip_missing_predecessor
from outbox.row_marks import FailedMark
from tests.integration.publisher.publisher_world import client_error
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event


def put(dynamodb: Any, tables: Tables, e: OutboxEvent, **extra: Any) -> RowKey:
    dynamodb.put_item(TableName=tables.outbox, Item=e.to_item() | extra)
    return RowKey(e.aggregate_key, e.seq)


def get(dynamodb: Any, tables: Tables, key: RowKey) -> dict[str, Any]:
    item: dict[str, Any] = dynamodb.get_item(TableName=tables.outbox, Key=key.item(), ConsistentRead=True)[
        "Item"
    ]
    return item


SWEEPER_LEASE = Lease("sweeper", START + timedelta(seconds=60))


def test_a_claim_takes_a_free_pending_row_and_returns_it_as_stored(dynamodb: Any, tables: Tables) -> None:
    # Given a pending row
    key = put(dynamodb, tables, event("A", 1))
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)

    # When the sweeper claims it
    result = claimer.claim(key, SWEEPER_LEASE, START)

    # Then it holds it, and got the row with the lease on it
    assert result.claim is Claim.CLAIMED
    assert result.row is not None
    assert result.row["lease_owner"] == {"S": "sweeper"}
    assert get(dynamodb, tables, key)["lease_until"] == {"N": str(int(START.timestamp()) + 60)}


def test_a_claim_says_why_it_could_not_take_a_row(dynamodb: Any, tables: Tables) -> None:
    # Given a published row, a row the stream publisher holds, a row backing off, and no row at all
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    published = put(dynamodb, tables, event("A", 1).with_status(OutboxStatus.PUBLISHED))
    leased = put(dynamodb, tables, event("B", 1))
    claimer.claim(leased, Lease(STREAM_PUBLISHER, START + timedelta(seconds=30)), START)
    backing_off = put(dynamodb, tables, event("C", 1), next_attempt_at={"N": str(int(START.timestamp()) + 5)})
    missing = RowKey("Order#D", 1)

    # When the sweeper tries to claim each
    answers = [
        claimer.claim(key, SWEEPER_LEASE, START).claim for key in (published, leased, backing_off, missing)
    ]

    # Then each refusal names its reason, and no row changed
    assert answers == [Claim.NOT_PENDING, Claim.LEASED, Claim.BACKING_OFF, Claim.MISSING]
    assert get(dynamodb, tables, leased)["lease_owner"] == {"S": STREAM_PUBLISHER}
    assert "lease_owner" not in get(dynamodb, tables, backing_off)


def test_an_expired_lease_or_the_owners_own_lease_can_be_claimed_again(dynamodb: Any, tables: Tables) -> None:
    # Given a row the stream publisher claimed until START + 30 s
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    key = put(dynamodb, tables, event("A", 1))
    claimer.claim(key, Lease(STREAM_PUBLISHER, START + timedelta(seconds=30)), START)

    # When its next invocation claims it again at once (until + 40 s), and the sweeper after that ran out
    again = claimer.claim(key, Lease(STREAM_PUBLISHER, START + timedelta(seconds=40)), START)
    later = START + timedelta(seconds=41)
    taken = claimer.claim(key, Lease("sweeper", later + timedelta(seconds=60)), later)

    # Then both succeed
    assert (again.claim, taken.claim) == (Claim.CLAIMED, Claim.CLAIMED)
    assert get(dynamodb, tables, key)["lease_owner"] == {"S": "sweeper"}


def test_a_backoff_needs_the_lease_and_drops_it(dynamodb: Any, tables: Tables) -> None:
    # Given a row the sweeper holds, and another the stream publisher holds
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    mine = put(dynamodb, tables, event("A", 1))
    theirs = put(dynamodb, tables, event("B", 1))
    claimer.claim(mine, SWEEPER_LEASE, START)
    claimer.claim(theirs, Lease(STREAM_PUBLISHER, START + timedelta(seconds=30)), START)
    later = START + timedelta(seconds=45)

    # When the sweeper backs both off
    kept = claimer.back_off(mine, SWEEPER_LEASE, attempts=3, next_attempt_at=later, error="sns:InternalError")
    lost = claimer.back_off(
        theirs, SWEEPER_LEASE, attempts=3, next_attempt_at=later, error="sns:InternalError"
    )

    # Then only its own row changed: attempts added, the failed sweep counted, the lease dropped
    assert (kept, lost) == (True, False)
    row = get(dynamodb, tables, mine)
    assert (row["attempts"], row["sweep_failures"], row["next_attempt_at"]) == (
        {"N": "3"},
        {"N": "1"},
        {"N": str(int(later.timestamp()))},
    )
    assert "lease_owner" not in row
    assert "next_attempt_at" not in get(dynamodb, tables, theirs)


class FailingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def update_item(self, **_: Any) -> None:
        raise self.error

    def get_item(self, **_: Any) -> None:
        raise self.error


def test_claims_and_releases_translate_aws_failures_into_typed_errors() -> None:
    # Given DynamoDB throttling, then unreachable
    throttled = FailingClient(client_error("ProvisionedThroughputExceededException", "UpdateItem"))
    unreachable = FailingClient(EndpointConnectionError(endpoint_url="https://dynamodb"))
    key = RowKey("Order#A", 1)

    # When a claim and a redrive are tried
    # Then each raises the library's typed error, never botocore's
    with pytest.raises(ThrottledError):
        DynamoDBRowClaimer(throttled, "outbox").claim(key, SWEEPER_LEASE, START)
    with pytest.raises(AwsUnavailableError):
        DynamoDBRowClaimer(unreachable, "outbox").claim(key, SWEEPER_LEASE, START)
    with pytest.raises(ThrottledError):
        redrive(throttled, "outbox", key, reason="r", actor="ops", now=START)
    with pytest.raises(AwsUnavailableError):
        skip(unreachable, "outbox", key, reason="r", actor="ops", now=START)


def failed(e: OutboxEvent) -> OutboxEvent:
    return e.with_status(OutboxStatus.FAILED, last_error="rejected: sns:InvalidParameter", attempts=4)


def test_a_redrive_makes_a_failed_row_pending_again_with_who_and_why(dynamodb: Any, tables: Tables) -> None:
    # Given a FAILED row that had backed off before
    key = put(dynamodb, tables, failed(event("A", 1)), sweep_failures={"N": "3"}, next_attempt_at={"N": "1"})

    # When an operator redrives it
    redrive(dynamodb, tables.outbox, key, reason="topic policy fixed", actor="alice", now=START)

    # Then it is PENDING, back in the pending index, its attempts and backoff started afresh
    row = get(dynamodb, tables, key)
    assert row["status"] == {"S": "PENDING"}
    assert "pending_shard" in row
    assert row["attempts"] == {"N": "0"}
    for gone in ("sweep_failures", "next_attempt_at", "released_at", "expires_at"):
        assert gone not in row
    assert (row["redriven_at"], row["redriven_by"], row["redrive_reason"]) == (
        {"S": "2026-11-29T12:00:00.000Z"},
        {"S": "alice"},
        {"S": "topic policy fixed"},
    )
    # and it keeps its event id and payload
    assert row["event_id"] == {"S": event_id_of(dynamodb, tables, key)}


def event_id_of(dynamodb: Any, tables: Tables, key: RowKey) -> str:
    return str(get(dynamodb, tables, key)["event_id"]["S"])


@pytest.mark.parametrize("status", [OutboxStatus.PENDING, OutboxStatus.PUBLISHED])
def test_only_a_failed_row_can_be_redriven_or_skipped(
    dynamodb: Any, tables: Tables, status: OutboxStatus
) -> None:
    # Given a row that is not FAILED
    key = put(dynamodb, tables, event("A", 1).with_status(status))
    before = get(dynamodb, tables, key)

    # When an operator tries to redrive or skip it
    # Then each is refused with the state it needed, and nothing changed
    with pytest.raises(ReleaseError, match="Order#A seq 1 is not FAILED"):
        redrive(dynamodb, tables.outbox, key, reason="r", actor="ops", now=START)
    with pytest.raises(ReleaseError, match="not FAILED and not yet released"):
        skip(dynamodb, tables.outbox, key, reason="r", actor="ops", now=START)
    assert get(dynamodb, tables, key) == before


def test_a_skip_releases_a_failed_row_once(dynamodb: Any, tables: Tables) -> None:
    # Given a FAILED row
    key = put(dynamodb, tables, failed(event("A", 1)))

    # When an operator skips it, twice
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    with pytest.raises(ReleaseError, match="not yet released"):
        skip(dynamodb, tables.outbox, key, reason="again", actor="eve", now=START)

    # Then it stays FAILED, released by the first
    row = get(dynamodb, tables, key)
    assert row["status"] == {"S": "FAILED"}
    assert (row["released_by"], row["release_reason"]) == ({"S": "bob"}, {"S": "superseded"})


def test_a_missing_predecessor_is_released_on_the_pending_row_behind_it(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a PENDING A#3 behind a gap, and a PUBLISHED B#2
    gap = put(dynamodb, tables, event("A", 3))
    done = put(dynamodb, tables, event("B", 2).with_status(OutboxStatus.PUBLISHED))

    # When an operator releases A#3's missing predecessor, and tries the same on B#2
    skip_missing_predecessor(dynamodb, tables.outbox, gap, reason="A#2 never existed", actor="ops", now=START)
    with pytest.raises(ReleaseError, match="not PENDING"):
        skip_missing_predecessor(dynamodb, tables.outbox, done, reason="r", actor="ops", now=START)

    # Then A#3 records it; B#2 is unchanged
    assert get(dynamodb, tables, gap)["predecessor_released_at"] == {"S": "2026-11-29T12:00:00.000Z"}
    assert "predecessor_released_at" not in get(dynamodb, tables, done)


@pytest.mark.parametrize("reason", ["", "   "])
def test_a_release_without_a_reason_is_refused_before_anything_is_written(
    dynamodb: Any, tables: Tables, reason: str
) -> None:
    # Given a FAILED row
    key = put(dynamodb, tables, failed(event("A", 1)))
    before = get(dynamodb, tables, key)

    # When an operator gives no reason
    # Then it is refused and nothing changed
    with pytest.raises(ReleaseError, match="a reason is required"):
        redrive(dynamodb, tables.outbox, key, reason=reason, actor="ops", now=START)
    assert get(dynamodb, tables, key) == before


def test_a_released_row_with_a_later_event_out_is_redriven_only_when_out_of_order_is_asked_for(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 skipped, and A#2 published since
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    put(dynamodb, tables, event("A", 2).with_status(OutboxStatus.PUBLISHED))
    before = get(dynamodb, tables, key)

    # When an operator redrives it plainly
    # Then it is refused (it would be published after A#2), and nothing changed
    with pytest.raises(ReleaseError, match="seq 2 of its aggregate is PUBLISHED"):
        redrive(dynamodb, tables.outbox, key, reason="needed after all", actor="bob", now=START)
    assert get(dynamodb, tables, key) == before

    # When the operator asks for it out of order
    redrive(dynamodb, tables.outbox, key, reason="needed after all", actor="bob", out_of_order=True)

    # Then it is PENDING again, no longer released, and its audit says it went out of order
    row = get(dynamodb, tables, key)
    assert row["status"] == {"S": "PENDING"}
    assert "released_at" not in row
    assert [entry["M"]["action"]["S"] for entry in row["audit"]["L"]] == ["skip", "redrive"]
    assert row["audit"]["L"][1]["M"]["out_of_order"] == {"BOOL": True}


def test_a_released_row_with_nothing_after_it_is_redriven_in_order(dynamodb: Any, tables: Tables) -> None:
    # Given A#1 skipped a moment ago, nothing written after it
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)

    # When an operator redrives A#1
    redrive(
        dynamodb, tables.outbox, key, reason="needed after all", actor="bob", now=START + timedelta(hours=1)
    )

    # Then it is PENDING again, unreleased (an A#2 written now waits for it), one generation on
    row = get(dynamodb, tables, key)
    assert (row["status"], row["generation"]) == ({"S": "PENDING"}, {"N": "1"})
    assert "released_at" not in row
    assert "out_of_order" not in row["audit"]["L"][-1]["M"]


@pytest.mark.parametrize(
    ("later", "redriven_after", "why"),
    [
        (OutboxStatus.PENDING, timedelta(hours=1), r"seq 2 of its aggregate exists \(PENDING\)"),
        (None, timedelta(days=2), "a later event may have been published and expired since"),
    ],
)
def test_a_released_row_whose_successor_may_be_out_is_not_redriven_in_order(
    dynamodb: Any, tables: Tables, later: OutboxStatus | None, redriven_after: timedelta, why: str
) -> None:
    # Given A#1 skipped, and A#2 PENDING after it (the gate may be publishing it now), or, two days on,
    # nothing after it (an A#2 may have been published and expired by its TTL)
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    if later is not None:
        put(dynamodb, tables, event("A", 2).with_status(later))
    before = get(dynamodb, tables, key)

    # When an operator redrives A#1 plainly
    # Then it is refused, saying why, and nothing changed
    with pytest.raises(ReleaseError, match=why):
        redrive(dynamodb, tables.outbox, key, reason="r", actor="bob", now=START + redriven_after)
    assert get(dynamodb, tables, key) == before


def test_every_redrive_and_skip_is_kept_in_the_rows_audit_trail(dynamodb: Any, tables: Tables) -> None:
    # Given a FAILED row, redriven, failed again and redriven again
    key = put(dynamodb, tables, failed(event("A", 1)), failed_shard={"N": "3"})
    redrive(dynamodb, tables.outbox, key, reason="first try", actor="alice", now=START)
    dynamodb.update_item(
        TableName=tables.outbox,
        Key=key.item(),
        UpdateExpression="SET #s = :failed",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":failed": {"S": "FAILED"}},
    )
    redrive(dynamodb, tables.outbox, key, reason="second try", actor="bob", now=START + timedelta(hours=1))

    # Then the row keeps both entries, in order, with who, when and why; its generation counts them
    row = get(dynamodb, tables, key)
    assert [entry["M"] for entry in row["audit"]["L"]] == [
        {
            "action": {"S": "redrive"},
            "at": {"S": "2026-11-29T12:00:00.000Z"},
            "by": {"S": "alice"},
            "reason": {"S": "first try"},
        },
        {
            "action": {"S": "redrive"},
            "at": {"S": "2026-11-29T13:00:00.000Z"},
            "by": {"S": "bob"},
            "reason": {"S": "second try"},
        },
    ]
    assert row["generation"] == {"N": "2"}
    assert "failed_shard" not in row  # out of the failed index while PENDING


def test_a_release_without_an_actor_is_refused(dynamodb: Any, tables: Tables) -> None:
    # Given a FAILED row
    key = put(dynamodb, tables, failed(event("A", 1)))

    # When an operator does not say who they are
    # Then it is refused
    with pytest.raises(ReleaseError, match="actor"):
        skip(dynamodb, tables.outbox, key, reason="superseded", actor=" ")


def test_a_predecessor_that_exists_is_not_released_as_missing(dynamodb: Any, tables: Tables) -> None:
    # Given A#2 PENDING (backing off, say) and A#3 waiting behind it
    put(dynamodb, tables, event("A", 2))
    waiting = put(dynamodb, tables, event("A", 3))
    before = get(dynamodb, tables, waiting)

    # When an operator releases A#3's predecessor as missing
    # Then it is refused (A#3 would overtake A#2), and nothing changed
    with pytest.raises(ReleaseError, match="seq 2 exists, it is not missing"):
        skip_missing_predecessor(dynamodb, tables.outbox, waiting, reason="gap", actor="ops", now=START)
    assert get(dynamodb, tables, waiting) == before


def test_a_first_event_has_no_predecessor_to_release(dynamodb: Any, tables: Tables) -> None:
    # Given A#1 PENDING
    first = put(dynamodb, tables, event("A", 1))

    # When an operator releases its predecessor, Then it is refused
    with pytest.raises(ReleaseError, match="no predecessor"):
        skip_missing_predecessor(dynamodb, tables.outbox, first, reason="gap", actor="ops", now=START)


def test_only_the_holder_releases_a_lease(dynamodb: Any, tables: Tables) -> None:
    # Given a row the sweeper holds
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    key = put(dynamodb, tables, event("A", 1))
    claimer.claim(key, SWEEPER_LEASE, START)

    # When another path releases it, then the holder
    other = claimer.release(key, Lease(STREAM_PUBLISHER, START + timedelta(seconds=30)))
    holder = claimer.release(key, SWEEPER_LEASE)

    # Then only the holder's release took: the row is free to claim at once
    assert (other, holder) == (False, True)
    assert "lease_owner" not in get(dynamodb, tables, key)
    assert (
        claimer.claim(key, Lease(STREAM_PUBLISHER, START + timedelta(seconds=30)), START).claim == "claimed"
    )


class SuccessorWrittenAfterTheRead:
    """DynamoDB as a redrive sees it when A#2 is written between its read of the later rows and its write."""

    def __init__(self, real: Any, write_successor: Any) -> None:
        self._real = real
        self._write_successor = write_successor

    def query(self, **arguments: Any) -> Any:
        page = self._real.query(**arguments)
        self._write_successor()
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_successor_written_while_a_released_row_is_redriven_makes_the_redrive_refuse(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 skipped, nothing after it yet, and A#2 written (and perhaps published) just after the
    # redrive read the aggregate's later rows
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    before = get(dynamodb, tables, key)
    racing = SuccessorWrittenAfterTheRead(dynamodb, lambda: put(dynamodb, tables, event("A", 2)))

    # When the redrive writes
    # Then it is refused (A#1 could go out after A#2), and nothing changed
    with pytest.raises(ReleaseError, match="a later event was written meanwhile"):
        redrive(racing, tables.outbox, key, reason="r", actor="bob", now=START + timedelta(hours=1))
    assert get(dynamodb, tables, key) == before


def test_a_row_redriven_out_of_order_that_fails_again_is_not_redriven_in_order(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 skipped, A#2 published, A#1 redriven out of order and then FAILED again (unreleased now)
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    put(dynamodb, tables, event("A", 2).with_status(OutboxStatus.PUBLISHED))
    redrive(dynamodb, tables.outbox, key, reason="needed", actor="bob", now=START, out_of_order=True)
    DynamoDBRowMarker(dynamodb, tables.outbox).mark([FailedMark(key, "rejected", 1, START, generation=1)])
    row = get(dynamodb, tables, key)
    assert (row["status"]["S"], "released_at" in row) == ("FAILED", False)
    assert "first_released_at" in row  # kept through the redrive

    # When it is redriven plainly
    # Then it is refused: A#2 is out
    with pytest.raises(ReleaseError, match="seq 2 of its aggregate is PUBLISHED"):
        redrive(dynamodb, tables.outbox, key, reason="again", actor="bob", now=START)


def test_a_row_released_long_ago_and_redriven_since_is_not_redriven_in_order_once_failed_again(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 skipped two days ago (an A#2 may have gone out and expired since), redriven out of order,
    # and FAILED again
    key = put(dynamodb, tables, failed(event("A", 1)))
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)
    later = START + timedelta(days=2)
    redrive(dynamodb, tables.outbox, key, reason="needed", actor="bob", now=later, out_of_order=True)
    DynamoDBRowMarker(dynamodb, tables.outbox).mark([FailedMark(key, "rejected", 1, later, generation=1)])

    # When it is redriven plainly, Then it is refused, saying when it was first released
    with pytest.raises(ReleaseError, match=r"it was released at 2026-11-29T12:00:00\.000Z"):
        redrive(dynamodb, tables.outbox, key, reason="again", actor="bob", now=later)


def test_a_gap_is_not_released_while_the_row_below_it_holds_the_aggregate(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 FAILED (unreleased), A#2 never written, A#3 PENDING
    put(dynamodb, tables, failed(event("A", 1)))
    waiting = put(dynamodb, tables, event("A", 3))
    before = get(dynamodb, tables, waiting)

    # When an operator releases the gap at A#2
    # Then it is refused (A#3 would go before A#1), and nothing changed
    with pytest.raises(ReleaseError, match="seq 1, below the gap, is not out"):
        skip_missing_predecessor(dynamodb, tables.outbox, waiting, reason="r", actor="bob", now=START)
    assert get(dynamodb, tables, waiting) == before

    # And once A#1 is skipped, the gap may be released
    skip(dynamodb, tables.outbox, RowKey("Order#A", 1), reason="superseded", actor="bob", now=START)
    skip_missing_predecessor(dynamodb, tables.outbox, waiting, reason="r", actor="bob", now=START)
    assert "predecessor_released_at" in get(dynamodb, tables, waiting)


def test_an_unreleased_row_passed_by_a_released_gap_is_not_redriven_in_order(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 FAILED (unreleased) and A#3 PUBLISHED past a released gap at A#2 (as before gaps were checked)
    key = put(dynamodb, tables, failed(event("A", 1)))
    put(
        dynamodb,
        tables,
        event("A", 3).with_status(OutboxStatus.PUBLISHED),
        predecessor_released_at={"S": "x"},
    )

    # When A#1 is redriven plainly, Then it is refused
    with pytest.raises(ReleaseError, match="seq 3 of its aggregate is PUBLISHED"):
        redrive(dynamodb, tables.outbox, key, reason="r", actor="bob", now=START)

"""Leases on moto: each claim, backoff and release is one conditional update that changes nothing unless the
row is in the state it expects, and says which state it found."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from outbox.errors import AwsUnavailableError, ThrottledError
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox_publisher.leases import STREAM_PUBLISHER, Claim, DynamoDBRowClaimer, Lease
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
    # Given a FAILED row, a row the stream publisher holds, a row backing off, and no row at all (settled)
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    published = put(dynamodb, tables, event("A", 1).with_status(OutboxStatus.FAILED))
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
    assert "delivered_to" not in row
    assert "next_attempt_at" not in get(dynamodb, tables, theirs)


def test_a_backoff_records_the_destinations_that_took_the_event_adding_to_what_the_row_had(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a row EventBridge took earlier (its row says so), claimed by the sweeper
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    key = put(dynamodb, tables, event("A", 1), delivered_to={"SS": ["eventbridge"]})
    claimer.claim(key, SWEEPER_LEASE, START)

    # When the sweeper backs it off after SNS took it in its run and EventBridge refused again
    claimer.back_off(
        key,
        SWEEPER_LEASE,
        attempts=1,
        next_attempt_at=START + timedelta(seconds=30),
        error="eventbridge:InternalException",
        delivered_to=frozenset({"sns"}),
    )

    # Then the row records both (a string set only grows)
    assert sorted(get(dynamodb, tables, key)["delivered_to"]["SS"]) == ["eventbridge", "sns"]


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

    # When claims and a release are tried
    # Then each raises the library's typed error, never botocore's
    with pytest.raises(ThrottledError):
        DynamoDBRowClaimer(throttled, "outbox").claim(key, SWEEPER_LEASE, START)
    with pytest.raises(AwsUnavailableError):
        DynamoDBRowClaimer(unreachable, "outbox").claim(key, SWEEPER_LEASE, START)
    with pytest.raises(ThrottledError):
        DynamoDBRowClaimer(throttled, "outbox").release(key, SWEEPER_LEASE)


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

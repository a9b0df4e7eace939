"""The publisher's and sweeper's configuration across regions, and the stream publisher's cached ownership
(outbox_publisher.region_store.CachedOwnership): read at most once per VIEW_MAX_AGE, never guessed."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import timedelta

import pytest

from outbox.errors import AwsUnavailableError, ConfigurationError
from outbox.regions import VIEW_MAX_AGE, Heartbeat, RegionSettings, RegionState, TakenRecord, epoch_ms
from outbox_publisher.config import PublisherConfig
from outbox_publisher.deadline import Deadline
from outbox_publisher.region_store import CachedOwnership
from outbox_sweeper.config import SweeperConfig
from tests.support.clock import FakeClock

A, B = "us-east-1", "eu-west-1"
BASE = {
    "OUTBOX_TABLE_NAME": "outbox",
    "POISON_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/poison",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:events",
}


def test_a_single_region_configuration_has_no_regions() -> None:
    assert PublisherConfig.from_env(BASE).regions is None
    assert SweeperConfig.from_env(BASE).publisher.regions is None


def test_the_regions_are_read_with_the_rest_of_the_configuration() -> None:
    env = BASE | {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": B}
    assert PublisherConfig.from_env(env).regions == RegionSettings(B, (A, B))
    assert SweeperConfig.from_env(env).publisher.regions == RegionSettings(B, (A, B))


def test_a_bad_region_setting_fails_the_start_up() -> None:
    with pytest.raises(ConfigurationError, match="OUTBOX_REGION"):
        PublisherConfig.from_env(BASE | {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": "ap-south-1"})


class CountingStore:
    """A region store in memory that counts its reads and fails the ones told to."""

    def __init__(self, heartbeats: list[Heartbeat]) -> None:
        self.heartbeats = heartbeats
        self.reads = 0
        self.fail = False

    def read_heartbeats(self, regions: Iterable[str], deadline: Deadline) -> list[Heartbeat]:
        self.reads += 1
        if self.fail:
            raise AwsUnavailableError("no answer")
        return list(self.heartbeats)

    def write_heartbeat(self, heartbeat: Heartbeat, deadline: Deadline) -> None:
        raise AssertionError("not the publisher's")

    def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]:
        raise AssertionError("not the publisher's")

    def record_taken(self, aggregate_key: str, **arguments: object) -> None:
        raise AssertionError("not the publisher's")


def test_the_ownership_is_read_at_most_once_per_view_max_age() -> None:
    clock = FakeClock()
    now = epoch_ms(clock())
    store = CountingStore([Heartbeat(A, now, RegionState.OWN, now), Heartbeat(B, now, RegionState.OWN, now)])
    cached = CachedOwnership(store, RegionSettings(A, (A, B)), max_age=VIEW_MAX_AGE, clock=clock)

    first = cached.current()
    clock.advance(VIEW_MAX_AGE)
    assert cached.current() is first
    assert store.reads == 1

    clock.advance(timedelta(milliseconds=1))
    store.heartbeats = [Heartbeat(A, now, RegionState.YIELDED, now)]
    assert cached.current().state is RegionState.YIELDED
    assert store.reads == 2


def test_an_ownership_that_cannot_be_read_again_is_not_guessed() -> None:
    clock = FakeClock()
    now = epoch_ms(clock())
    store = CountingStore([Heartbeat(A, now, RegionState.OWN, now)])
    cached = CachedOwnership(store, RegionSettings(A, (A, B)), max_age=VIEW_MAX_AGE, clock=clock)
    cached.current()
    store.fail = True
    clock.advance(VIEW_MAX_AGE + timedelta(seconds=1))
    with pytest.raises(AwsUnavailableError):
        cached.current()

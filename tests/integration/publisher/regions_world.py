"""Two regions on moto (us-east-1 and eu-west-1, each its own `outbox` table), publishing to the same
destinations so that a duplicate across regions shows, and the replication between the two tables done
EXPLICITLY by the test (`Replication`): what global tables do asynchronously, item by item, here happens when
a test says so, for the items it says. (The project's in-process replicator, outbox_local.replication,
emulates it faithfully; these tests name each copy instead, to place a fault exactly.) As global tables do, a
copy applies last writer wins, deletes included: each region's DynamoDB client records when it wrote each
item (`WriteRecordingClient`, an order over every write of the test), and a copied write older than the
target's own write of that item is discarded.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import boto3

from outbox_sweeper.sweep import Sweeper, SweepReport
from tests.integration.publisher.publisher_world import World
from tests.support.aws import create_tables, scan_all

A, B, C = "us-east-1", "eu-west-1", "ap-south-1"
"""A is the home region (first in the ring); C joins only in `three_regions`."""
INTERVAL = timedelta(seconds=60)
TAKEOVER = timedelta(seconds=300)
"""The shortest takeover time these settings allow: 3 x the interval + the timeout."""
MARGIN = timedelta(seconds=240)
"""The sweeper's timeout (120 s) + 2 x the interval."""

Key = tuple[str, str]


def region_env(region: str, ring: tuple[str, ...] = (A, B)) -> dict[str, str]:
    return {
        "OUTBOX_REGIONS": ",".join(ring),
        "OUTBOX_REGION": region,
        "OUTBOX_TAKEOVER_AFTER_SECONDS": str(int(TAKEOVER.total_seconds())),
        "OUTBOX_SWEEP_INTERVAL_SECONDS": str(int(INTERVAL.total_seconds())),
        "OUTBOX_SWEEPER_TIMEOUT_SECONDS": "120",
    }


def key_of(item: dict[str, Any]) -> Key:
    return item["aggregate_key"]["S"], item["seq"]["N"]


_write_order = itertools.count(1)
"""One order over every write of a test run, in every region: the timestamps last writer wins compares."""


class WriteRecordingClient:
    """Wraps a region's real DynamoDB client: records, per item, when (`_write_order`) its last successful
    write was made (puts, updates, deletes, each action of a transaction); every call goes to moto."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.written: dict[Key, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _wrote(self, key: dict[str, Any]) -> None:
        self.written[(key["aggregate_key"]["S"], key["seq"]["N"])] = next(_write_order)

    def put_item(self, **arguments: Any) -> Any:
        answer = self._real.put_item(**arguments)
        self._wrote(arguments["Item"])
        return answer

    def update_item(self, **arguments: Any) -> Any:
        answer = self._real.update_item(**arguments)
        self._wrote(arguments["Key"])
        return answer

    def delete_item(self, **arguments: Any) -> Any:
        answer = self._real.delete_item(**arguments)
        self._wrote(arguments["Key"])
        return answer

    def transact_write_items(self, **arguments: Any) -> Any:
        answer = self._real.transact_write_items(**arguments)
        for action in arguments["TransactItems"]:
            for kind in ("Put", "Update", "Delete"):
                if kind in action:
                    self._wrote(action[kind].get("Item") or action[kind]["Key"])
        return answer


@dataclass
class Replication:
    """Copies the writes made in one table since the last copy into the other, when told (no echo: an item
    copied in is not a write of the table it was copied into)."""

    worlds: dict[str, World]
    seen: dict[str, dict[Key, dict[str, Any]]] = field(default_factory=dict)

    def copy(self, source: str, target: str, *, hold: Callable[[Key], bool] = lambda _key: False) -> int:
        """Copies `source`'s writes since the last copy into `target`, except the items `hold` keeps back
        (they are copied by a later call), each only if it is newer than `target`'s own last write of the
        item (last writer wins). Returns how many writes it applied."""
        src, dst = self.worlds[source], self.worlds[target]
        seen_src = self.seen.setdefault(source, {})
        seen_dst = self.seen.setdefault(target, {})
        written_src, written_dst = _written(src), _written(dst)
        now = {key_of(item): item for item in scan_all(src.dynamodb, src.tables.outbox)}
        changed = [key for key, item in now.items() if seen_src.get(key) != item]
        deleted = [key for key in seen_src if key not in now]
        applied = 0
        for key in [*changed, *deleted]:
            if hold(key):
                continue
            when = written_src.get(key, 0)
            newer = when > written_dst.get(key, 0)
            if key in now:
                seen_src[key] = now[key]
                if newer:
                    dst.dynamodb._real.put_item(TableName=dst.tables.outbox, Item=now[key])
                    seen_dst[key] = now[key]
            else:
                del seen_src[key]
                if newer:
                    dst.dynamodb._real.delete_item(
                        TableName=dst.tables.outbox,
                        Key={"aggregate_key": {"S": key[0]}, "seq": {"N": key[1]}},
                    )
                    seen_dst.pop(key, None)
            if newer:
                written_dst[key] = when  # a replicated write keeps its timestamp
                applied += 1
        return applied

    def both(self) -> None:
        """Every region's writes into every other region."""
        for source in self.worlds:
            for target in self.worlds:
                if source != target:
                    self.copy(source, target)


@dataclass
class TwoRegions:
    worlds: dict[str, World]
    replication: Replication
    sweepers: dict[str, Sweeper] = field(default_factory=dict)

    def world(self, region: str) -> World:
        return self.worlds[region]

    @property
    def ring(self) -> tuple[str, ...]:
        return tuple(self.worlds)

    def sweeper(self, region: str, **options: Any) -> Sweeper:
        return self.worlds[region].sweeper(**region_env(region, self.ring), **options)

    def sweep(self, region: str, sweeper: Sweeper | None = None) -> SweepReport:
        if sweeper is None:
            sweeper = self.sweepers.setdefault(region, self.sweeper(region))
        return self.worlds[region].sweep(sweeper)

    def advance(self, delta: timedelta = INTERVAL) -> None:
        self.worlds[A].clock.advance(delta)

    def rounds(self, count: int, *, regions: tuple[str, ...] = (), replicate: bool = True) -> None:
        """`count` sweep intervals: each region in `regions` (every region by default) sweeps, then (if
        `replicate`) every copy runs."""
        for _ in range(count):
            for region in regions or self.ring:
                self.sweep(region)
            if replicate:
                self.replication.both()
            self.advance()

    def published(self) -> list[str]:
        """Event ids every region published since the last call (one topic for both: duplicates show)."""
        return [envelope["event_id"] for envelope in self.worlds[A].topic_envelopes()]


def _written(world: World) -> dict[Key, int]:
    client = world.dynamodb
    assert isinstance(client, WriteRecordingClient)
    return client.written


def _region(world: World, region: str) -> World:
    """`world` in `region`: its own `outbox` table there, its writes recorded; same destinations, clock."""
    dynamodb = boto3.client("dynamodb", region_name=region)
    return replace(world, tables=create_tables(dynamodb), dynamodb=WriteRecordingClient(dynamodb))


def two_regions(world: World) -> TwoRegions:
    """`world` as region A; region B its replica table in eu-west-1, on the same destinations and clock."""
    worlds = {A: replace(world, dynamodb=WriteRecordingClient(world.dynamodb)), B: _region(world, B)}
    return TwoRegions(worlds, Replication(worlds))


def three_regions(world: World) -> TwoRegions:
    """A, B and C (ap-south-1), in that ring order."""
    regions = two_regions(world)
    regions.worlds[C] = _region(world, C)
    return regions

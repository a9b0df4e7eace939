"""The replicator between the replicas of a global table (`outbox_local.replication`), on moto's regions with
real boto3: last writer wins by the write's time, deletes included; every replica's stream carries every write
once; no echo; a cut region's writes queue and are delivered once it is restored; the lag is honoured."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from outbox_local.moto_streams import InProcessStreams
from outbox_local.replication import ReplicationError, Replicator

EAST, WEST = "us-east-1", "us-west-2"
TABLE = "Outbox"


def _client(region: str) -> Any:
    return boto3.client(
        "dynamodb", region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def _make_table(region: str, view: str = "NEW_AND_OLD_IMAGES") -> None:
    _client(region).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": view},
    )


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def regions() -> Iterator[dict[str, Any]]:
    with mock_aws():
        clients = {EAST: _client(EAST), WEST: _client(WEST)}
        for region in clients:
            _make_table(region)
        yield clients


def _key(pk: str, sk: int = 1) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def _item(pk: str, sk: int = 1, **attributes: str) -> dict[str, Any]:
    return {**_key(pk, sk), **{name: {"S": value} for name, value in attributes.items()}}


def _get(client: Any, pk: str, sk: int = 1) -> dict[str, Any] | None:
    found: dict[str, Any] | None = client.get_item(
        TableName=TABLE, Key=_key(pk, sk), ConsistentRead=True
    ).get("Item")
    return found


def _stream(region: str) -> list[dict[str, Any]]:
    """Every record of the region's replica's stream."""
    arn = _client(region).describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = InProcessStreams(region)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return records


def _replicator(clock: Clock | None = None, **options: Any) -> Replicator:
    replicator = Replicator(_client, clock=clock or Clock(), **options)
    replicator.add_table(TABLE, [EAST, WEST])
    return replicator


def test_a_write_reaches_the_other_replica_and_each_stream_carries_it_once(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING", blob="x"))
    regions[WEST].put_item(TableName=TABLE, Item=_item("B", status="PENDING"))

    assert replicator.drain() == 2
    for client in regions.values():
        assert _get(client, "A") == _item("A", status="PENDING", blob="x")
        assert _get(client, "B") == _item("B", status="PENDING")
    # No echo: another round replicates nothing, and each stream holds each write once.
    assert replicator.drain() == 0
    for region in (EAST, WEST):
        records = _stream(region)
        assert sorted(r["dynamodb"]["Keys"]["pk"]["S"] for r in records) == ["A", "B"]
        assert {r["eventName"] for r in records} == {"INSERT"}
    assert replicator.stats()["replicated"] == 2


def test_concurrent_updates_converge_on_the_later_write_everywhere(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    replicator.drain()
    # Both replicas change the item before either change is replicated: the later one wins in both.
    regions[WEST].put_item(TableName=TABLE, Item=_item("A", status="CLAIMED-WEST"))
    time.sleep(0.002)
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="CLAIMED-EAST"))
    replicator.drain()
    assert _get(regions[EAST], "A") == _item("A", status="CLAIMED-EAST")
    assert _get(regions[WEST], "A") == _item("A", status="CLAIMED-EAST")
    # The earlier write lost in east: east's stream never shows it (a superseded delivery writes nothing).
    east_statuses = [r["dynamodb"]["NewImage"]["status"]["S"] for r in _stream(EAST)]
    assert east_statuses == ["PENDING", "CLAIMED-EAST"]
    west_statuses = [r["dynamodb"]["NewImage"]["status"]["S"] for r in _stream(WEST)]
    assert west_statuses == ["PENDING", "CLAIMED-WEST", "CLAIMED-EAST"]
    assert replicator.stats()["superseded"] == 1


def test_a_delete_beats_an_older_update_that_arrives_later_no_resurrection(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    replicator.drain()
    # West updates (a claim), then east deletes (a settle) later: the delete is the last writer.
    regions[WEST].put_item(TableName=TABLE, Item=_item("A", status="CLAIMED"))
    time.sleep(0.002)
    regions[EAST].delete_item(TableName=TABLE, Key=_key("A"))
    replicator.drain()
    assert _get(regions[EAST], "A") is None
    assert _get(regions[WEST], "A") is None
    assert [r["eventName"] for r in _stream(WEST)] == ["INSERT", "MODIFY", "REMOVE"]
    assert [r["eventName"] for r in _stream(EAST)] == ["INSERT", "REMOVE"]


def test_an_update_newer_than_a_delete_wins_over_it(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    replicator.drain()
    regions[EAST].delete_item(TableName=TABLE, Key=_key("A"))
    time.sleep(0.002)
    regions[WEST].put_item(TableName=TABLE, Item=_item("A", status="AGAIN"))
    replicator.drain()
    assert _get(regions[EAST], "A") == _item("A", status="AGAIN")
    assert _get(regions[WEST], "A") == _item("A", status="AGAIN")


def test_many_interleaved_writes_converge_whatever_the_delivery_order(regions: dict[str, Any]) -> None:
    rng = random.Random(34)  # noqa: S311 - a test's reproducible choices
    replicator = _replicator(order=random.Random(7))  # noqa: S311
    for round_ in range(4):
        for index in range(12):
            region = rng.choice([EAST, WEST])
            if rng.random() < 0.3:
                regions[region].delete_item(TableName=TABLE, Key=_key(f"K{index % 5}", index % 3))
            else:
                item = _item(f"K{index % 5}", index % 3, v=f"{round_}-{index}-{region}")
                regions[region].put_item(TableName=TABLE, Item=item)
            if rng.random() < 0.3:
                replicator.step(now=time.time() + 10)  # part of it delivered while writes go on
    replicator.drain()
    scans = [
        sorted(
            regions[region].scan(TableName=TABLE, ConsistentRead=True)["Items"],
            key=lambda item: (item["pk"]["S"], item["sk"]["N"]),
        )
        for region in (EAST, WEST)
    ]
    assert scans[0] == scans[1]


def test_a_cut_region_queues_its_writes_both_ways_until_restored(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    replicator.cut(WEST)
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="FROM-EAST"))
    regions[WEST].put_item(TableName=TABLE, Item=_item("B", status="FROM-WEST"))
    assert replicator.drain() == 0
    assert _get(regions[WEST], "A") is None
    assert _get(regions[EAST], "B") is None
    assert replicator.pending(WEST) == 2
    assert replicator.cut_regions == {WEST}

    replicator.restore(WEST)
    assert replicator.drain() == 2
    assert _get(regions[WEST], "A") == _item("A", status="FROM-EAST")
    assert _get(regions[EAST], "B") == _item("B", status="FROM-WEST")
    assert replicator.pending() == 0


def test_the_lag_is_honoured(regions: dict[str, Any]) -> None:
    clock = Clock()
    replicator = _replicator(clock, lag_s=1.0)
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    written = time.time()
    assert replicator.step(now=written + 0.5) == 0
    assert _get(regions[WEST], "A") is None
    assert replicator.next_due() == pytest.approx(written + 1.0, abs=0.1)
    assert replicator.step(now=written + 1.2) == 1
    assert _get(regions[WEST], "A") == _item("A", status="PENDING")


def test_a_local_write_racing_a_delivery_is_never_overwritten_by_an_older_one(
    regions: dict[str, Any],
) -> None:
    replicator = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="OLD"))
    replicator.poll()  # east's write read and queued, not yet delivered
    regions[WEST].put_item(TableName=TABLE, Item=_item("A", status="NEWER"))  # not read yet
    # The delivery finds west's item changed since last read: it waits, and west's newer write wins.
    replicator.drain()
    assert _get(regions[WEST], "A") == _item("A", status="NEWER")
    assert _get(regions[EAST], "A") == _item("A", status="NEWER")
    assert replicator.stats()["superseded"] == 1


def test_the_background_thread_replicates_after_the_lag(regions: dict[str, Any]) -> None:
    replicator = Replicator(_client, lag_s=0.2)
    replicator.add_table(TABLE, [EAST, WEST])
    replicator.start(interval_s=0.02)
    try:
        regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
        written = time.time()
        deadline = written + 5
        while _get(regions[WEST], "A") is None and time.time() < deadline:
            time.sleep(0.01)
        assert time.time() - written >= 0.2
        assert _get(regions[WEST], "A") is not None
    finally:
        replicator.stop()


def test_state_taken_up_again_reads_on_from_where_it_was(regions: dict[str, Any]) -> None:
    first = _replicator()
    first.cut(WEST)
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    first.drain()
    saved = first.state()
    second = Replicator(_client, clock=Clock())
    second.resume(saved)
    assert second.pending(WEST) == 1
    second.restore(WEST)
    assert second.drain() == 1
    assert _get(regions[WEST], "A") == _item("A", status="PENDING")
    assert len(_stream(WEST)) == 1


def test_a_replica_without_a_stream_of_new_images_is_refused() -> None:
    with mock_aws():
        _make_table(EAST)
        _make_table(WEST, view="KEYS_ONLY")
        with pytest.raises(ReplicationError, match="us-west-2 has no stream of new images"):
            Replicator(_client).add_table(TABLE, [EAST, WEST])


def test_binary_and_set_attributes_replicate_as_they_are(regions: dict[str, Any]) -> None:
    replicator = _replicator()
    item = {
        **_key("A"),
        "body": {"B": b"\x00\x01"},
        "tags": {"SS": ["b", "a"]},
        "m": {"M": {"n": {"N": "1"}}},
    }
    regions[EAST].put_item(TableName=TABLE, Item=item)
    replicator.drain()
    assert _get(regions[WEST], "A") == _get(regions[EAST], "A")
    regions[WEST].put_item(TableName=TABLE, Item={**item, "m": {"M": {"n": {"N": "2"}}}})
    replicator.drain()
    assert _get(regions[EAST], "A") == _get(regions[WEST], "A")


def test_concurrent_writers_and_the_background_thread_converge(regions: dict[str, Any]) -> None:
    replicator = Replicator(_client, lag_s=0.0, order=random.Random(3))  # noqa: S311
    replicator.add_table(TABLE, [EAST, WEST])
    replicator.start(interval_s=0.005)

    def write(region: str) -> None:
        client = _client(region)
        for index in range(30):
            client.put_item(TableName=TABLE, Item=_item(f"K{index % 3}", v=f"{region}-{index}"))

    try:
        writers = [threading.Thread(target=write, args=(region,)) for region in (EAST, WEST)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
    finally:
        replicator.stop()
    replicator.drain()
    for pk in ("K0", "K1", "K2"):
        assert _get(regions[EAST], pk) == _get(regions[WEST], pk)


def test_a_lag_raised_holds_the_queued_writes_longer_and_brought_back_releases_them(
    regions: dict[str, Any],
) -> None:
    replicator = _replicator(lag_s=1.0)
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    written = time.time()
    replicator.set_lag(30.0)
    assert replicator.step(now=written + 5) == 0
    assert replicator.next_due() == pytest.approx(written + 30, abs=0.5)
    replicator.set_lag(1.0)
    assert replicator.step(now=written + 5) == 1
    assert _get(regions[WEST], "A") == _item("A", status="PENDING")
    with pytest.raises(ReplicationError, match="cannot be negative"):
        replicator.set_lag(-1)


class CrashedError(Exception):
    """The process died here (a test's stand-in for SIGKILL)."""


@pytest.mark.parametrize("cut_at", ["before the write", "after the write"])
def test_a_state_taken_while_a_write_is_delivered_resumes_without_writing_twice(
    regions: dict[str, Any], cut_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a snapshot of the replicator's state taken while a delivery is under way (a cut holds requests,
    # not the replicator's thread), then a crash: before its write reached moto, or after it did and before
    # the delivery was settled
    first = _replicator()
    regions[EAST].put_item(TableName=TABLE, Item=_item("A", status="PENDING"))
    taken: list[Any] = []
    write = first._write

    def write_then_crash(*arguments: Any) -> None:
        if cut_at == "after the write":
            write(*arguments)
        taken.append(first.state())
        raise CrashedError

    monkeypatch.setattr(first, "_write", write_then_crash)
    with pytest.raises(CrashedError):
        first.drain()
    written_before = len(_stream(WEST))

    # When a restarted replicator resumes from that state
    second = Replicator(_client, clock=Clock())
    second.resume(taken[0])
    second.drain()

    # Then the replica holds the write, its stream carries it once, and nothing is replicated back
    assert _get(regions[WEST], "A") == _item("A", status="PENDING")
    assert len(_stream(WEST)) == 1
    assert written_before == (1 if cut_at == "after the write" else 0)
    assert second.pending() == 0
    assert [r["eventName"] for r in _stream(EAST)] == ["INSERT"]

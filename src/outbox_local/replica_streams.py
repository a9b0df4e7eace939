"""Each replica's stream, as the replicator reads it (outbox_local.replication): in this process through
`outbox_local.moto_streams.InProcessStreams` (the named module that reads moto's streams; its record times
keep moto's microseconds, where GetRecords over HTTP answers milliseconds), page after page from a saved
position."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.moto_streams import InProcessStreams


class ReplicaStreams:
    def __init__(self, clients: Callable[[str], Any]) -> None:
        """`clients(region)`: a DynamoDB client in that region."""
        self._clients = clients
        self._arns: dict[tuple[str, str], str] = {}
        """(region, table) -> its replica's stream ARN, asked once (a DescribeTable per stream and step would
        cost the endpoint a request every few milliseconds)."""

    def forget(self, table: str | None = None) -> None:
        """Ask `table` (None: every table) for its streams again: a table no longer replicated, a runtime
        starting again, a state taken up."""
        self._arns = {key: arn for key, arn in self._arns.items() if table is not None and key[1] != table}

    def pages(self, table: str, region: str, after: str | None) -> Iterator[list[Mapping[str, Any]]]:
        """The records of `region`'s replica of `table` after sequence number `after` (None: from the first),
        a page at a time, until none is left; nothing when the replica or its stream is gone."""
        stream_arn = self._arn(table, region)
        if stream_arn is None:
            return
        streams = InProcessStreams(region)
        shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        if not shards:
            return
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn,
            ShardId=shards[0]["ShardId"],
            ShardIteratorType="AFTER_SEQUENCE_NUMBER" if after else "TRIM_HORIZON",
            SequenceNumber=after,
        )["ShardIterator"]
        while True:
            answer = streams.get_records(ShardIterator=iterator)
            if not answer["Records"]:
                return
            yield answer["Records"]
            iterator = answer["NextShardIterator"]

    def _arn(self, table: str, region: str) -> str | None:
        known = self._arns.get((region, table))
        if known is not None:
            return known
        try:
            description = self._clients(region).describe_table(TableName=table)["Table"]
        except ClientError as error:
            if error.response["Error"]["Code"] == "ResourceNotFoundException":
                return None
            raise
        arn = description.get("LatestStreamArn")
        if not arn:
            return None
        self._arns[(region, table)] = str(arn)
        return str(arn)

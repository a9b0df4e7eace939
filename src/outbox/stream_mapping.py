"""The Lambda event source mapping that feeds the publisher from the outbox table's stream.

Two places must agree on what AWS accepts: the CDK construct refuses a setting at synth, and the local
runtime refuses a template that holds one. Both ask `violations` here. The values are AWS's
("Lambda parameters for Amazon DynamoDB event source mappings" and the `CreateEventSourceMapping` API
reference), keyed by the CloudFormation property names of `AWS::Lambda::EventSourceMapping`.

The defaults are the ones this project deploys. AWS's own defaults for retries and record age are -1
(infinite), which lets one poison record block a shard for the stream's whole 24 hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

STARTING_POSITIONS: Final = ("TRIM_HORIZON", "LATEST")
INFINITE: Final = -1
INSERT_EVENT_NAME: Final = "INSERT"
MODIFY_EVENT_NAME: Final = "MODIFY"
REMOVE_EVENT_NAME: Final = "REMOVE"

_PENDING: Final = "PENDING"
_PUBLISHED: Final = "PUBLISHED"
PUBLISHER_FILTER_PATTERNS: Final[tuple[Mapping[str, object], ...]] = (
    # New rows: the events.
    {"eventName": [INSERT_EVENT_NAME]},
    # A PENDING row rewritten (or a PUBLISHED one, as earlier releases kept them, made PENDING again): the
    # publishing paths' own updates of a pending row (a lease, a backoff, the destinations that took it)
    # match too and are skipped; another writer replacing the slot's event is a writer-contract break
    # (outbox_publisher.writer_contract). Needs a NEW_AND_OLD_IMAGES stream: on a NEW_IMAGE stream no MODIFY
    # has an OldImage, so none match.
    {
        "eventName": [MODIFY_EVENT_NAME],
        "dynamodb": {
            "OldImage": {"status": {"S": [_PENDING, _PUBLISHED]}},
            "NewImage": {"status": {"S": [_PENDING]}},
        },
    },
)
"""The publisher mapping's FilterCriteria patterns (any one matches). Settles (deletes), FAILED marks,
redrives and TTL deletions match none, so they cost no invocations."""


_ORIGIN: Final = "origin"  # outbox.model.ORIGIN (this module stays free of the model: the constructs load it)


def publisher_filter_patterns(
    region: str | None = None, home: bool = False
) -> tuple[Mapping[str, object], ...]:
    """The publisher mapping's patterns on an outbox across regions (docs/multi-region.md): its region's
    INSERTs only (`origin` = `region`), and for the home region also INSERTs of rows without `origin` (another
    writer's). Other regions' INSERTs, which every replica's stream carries, cost no invocation; their owner
    is their own region's publisher, or a sweeper. The MODIFY pattern is unchanged (the publisher checks a
    rewritten slot's origin itself). Without `region`: PUBLISHER_FILTER_PATTERNS, the single-region value.

    "Attribute absent" is `{"exists": false}` on the leaf: Lambda's Exists operator works on leaf nodes only,
    and a DynamoDB image nests each value under its type, so the test is on `origin.S`.
    """
    if region is None:
        return PUBLISHER_FILTER_PATTERNS
    own: list[Mapping[str, object]] = [
        {"eventName": [INSERT_EVENT_NAME], "dynamodb": {"NewImage": {_ORIGIN: {"S": [region]}}}}
    ]
    if home:
        own.append(
            {
                "eventName": [INSERT_EVENT_NAME],
                "dynamodb": {"NewImage": {_ORIGIN: {"S": [{"exists": False}]}}},
            }
        )
    return (*own, PUBLISHER_FILTER_PATTERNS[1])


class Range(NamedTuple):
    """An allowed range."""

    low: int
    high: int
    also: int | None = None
    """One more value AWS accepts outside [low, high] (-1, "infinite")."""

    def allows(self, value: int) -> bool:
        return self.low <= value <= self.high or value == self.also

    def describe(self) -> str:
        extra = "" if self.also is None else f" or {self.also}"
        return f"{self.low}..{self.high}{extra}"


AWS_RANGES: Final[Mapping[str, Range]] = {
    "BatchSize": Range(1, 10_000),
    "MaximumBatchingWindowInSeconds": Range(0, 300),
    "MaximumRetryAttempts": Range(0, 10_000, also=INFINITE),
    # The API's absolute range is -1..604800, but "values less than 60 and greater than -1 ... are not
    # allowed".
    "MaximumRecordAgeInSeconds": Range(60, 604_800, also=INFINITE),
    "ParallelizationFactor": Range(1, 10),
}

# What this project deploys.
DEFAULT_BATCH_SIZE: Final = 100
DEFAULT_MAX_BATCHING_WINDOW_SECONDS: Final = 1
DEFAULT_MAX_RETRY_ATTEMPTS: Final = 10
DEFAULT_MAX_RECORD_AGE_SECONDS: Final = 3600
DEFAULT_PARALLELIZATION_FACTOR: Final = 1


def violations(settings: Mapping[str, object], names: Mapping[str, str] | None = None) -> list[str]:
    """What AWS would refuse among `settings` (CloudFormation property names), one message each.

    `names` says how the caller calls each property (a CDK prop's field name), to name it in the message.
    """
    names = names or {}
    found = []
    position = settings.get("StartingPosition")
    if "StartingPosition" in settings and position not in STARTING_POSITIONS:
        found.append(
            f"StartingPosition must be {' or '.join(STARTING_POSITIONS)} for a DynamoDB stream, "
            f"got {position!r}"
        )
    for name, allowed in AWS_RANGES.items():
        if name not in settings:
            continue
        value = settings[name]
        number = _whole_number(value)
        if number is None or not allowed.allows(number):
            label = f"{names[name]} ({name})" if name in names else name
            found.append(f"{label} must be {allowed.describe()}, got {value!r}")
    return found


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None

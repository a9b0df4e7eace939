"""The publisher's configuration: parsed from the environment once, at start-up, and validated there, so a
mistake fails every invocation before anything is published instead of poisoning events (docs/publisher.md,
"Configuration", lists the variables).

Numbers are ASCII digits, durations at most 100 years (`outbox.numbers`); anything else fails the start-up.
The CDK construct sets these variables by the names defined here (and, for the two destinations, in
`outbox_publisher.routing`), so the two cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from outbox.config import optional, positive_duration, positive_int, require
from outbox.errors import ConfigurationError
from outbox_publisher.messages import (
    EVENTBRIDGE_MAX_CONFIGURABLE_BYTES,
    EVENTBRIDGE_MAX_ENTRY_BYTES,
    SNS_MAX_CONFIGURABLE_BYTES,
    SNS_MAX_MESSAGE_BYTES,
    SNS_MIN_CONFIGURABLE_BYTES,
    is_fifo,
)
from outbox_publisher.regions import RegionSettings
from outbox_publisher.routing import (
    ENV_EVENT_BUS_NAME,
    ENV_TOPIC_ARN,
    Destination,
    Router,
    configured_destinations,
)

ENV_OUTBOX_TABLE_NAME = "OUTBOX_TABLE_NAME"
ENV_EVENT_SOURCE = "EVENT_SOURCE"
ENV_POISON_QUEUE_URL = "POISON_QUEUE_URL"
ENV_OUTBOX_ROUTES = "OUTBOX_ROUTES"
ENV_SWEEP_GRACE_SECONDS = "SWEEP_GRACE_SECONDS"
ENV_TOPIC_MAX_MESSAGE_BYTES = "TOPIC_MAX_MESSAGE_BYTES"
"""The topic's MaximumMessageSize (the construct sets both from one prop): larger events go as claim
checks."""
ENV_EVENTBRIDGE_MAX_ENTRY_BYTES = "EVENTBRIDGE_MAX_ENTRY_BYTES"
"""PutEvents' entry limit: the API reference's 256 KB unless set (the AWS Compute Blog reports 1 MB)."""
DEFAULT_SWEEP_GRACE_SECONDS = 60
# The stream publisher keeps a 20 s horizon for the rows it publishes without a claim
# (outbox_publisher.stream): a grace below 30 s would leave almost no row young enough to go without one.
MIN_SWEEP_GRACE_SECONDS = 30

# SNS answers a malformed TopicArn with InvalidParameter, which reads as "this entry is bad": each
# event would be sent alone, refused, and poisoned. So the ARN's shape is checked here, once.
_TABLE_ARN = re.compile(r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/([A-Za-z0-9_.-]{3,255})")
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?")


def table_name_of(name_or_arn: str) -> str:
    """A table's name, given its name or its ARN (DynamoDB takes both; stream records name the table)."""
    if not name_or_arn.startswith("arn:"):
        return name_or_arn
    found = _TABLE_ARN.fullmatch(name_or_arn)
    if found is None:
        raise ConfigurationError(f"{ENV_OUTBOX_TABLE_NAME} is an ARN but not a DynamoDB table's")
    return found.group(1)


def event_source_problem(source: str) -> str | None:
    """Why EventBridge would refuse `source` as the `Source` of our events, or None.

    Sources starting with "aws." are reserved for AWS services: PutEvents refuses them for every entry.
    """
    if not source or source.startswith("aws."):
        return f"EventBridge source must be non-empty and not start with 'aws.', got {source!r}"
    return None


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    table_name: str
    poison_queue_url: str
    router: Router
    topic_arn: str | None = None
    event_bus_name: str | None = None
    event_source: str | None = None
    sweep_grace: timedelta = timedelta(seconds=DEFAULT_SWEEP_GRACE_SECONDS)
    topic_max_message_bytes: int = SNS_MAX_MESSAGE_BYTES
    eventbridge_max_entry_bytes: int = EVENTBRIDGE_MAX_ENTRY_BYTES
    regions: RegionSettings | None = None
    """An outbox across regions (`OUTBOX_REGIONS`, outbox.region_settings); None: a single-region outbox."""

    @property
    def fifo_topic(self) -> bool:
        return self.topic_arn is not None and is_fifo(self.topic_arn)

    @property
    def destinations(self) -> tuple[Destination, ...]:
        return configured_destinations(self.topic_arn, self.event_bus_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PublisherConfig:
        table_name = table_name_of(require(env, ENV_OUTBOX_TABLE_NAME))
        poison_queue_url = require(env, ENV_POISON_QUEUE_URL)
        topic_arn = optional(env, ENV_TOPIC_ARN)
        event_bus_name = optional(env, ENV_EVENT_BUS_NAME)
        configured = configured_destinations(topic_arn, event_bus_name)
        if not configured:
            raise ConfigurationError(
                f"set {ENV_TOPIC_ARN}, {ENV_EVENT_BUS_NAME} or both: there is nowhere to publish"
            )
        if topic_arn is not None and not _TOPIC_ARN.fullmatch(topic_arn):
            raise ConfigurationError(
                f"{ENV_TOPIC_ARN} must be a topic ARN (arn:aws:sns:<region>:<account>:<name>)"
            )
        event_source = optional(env, ENV_EVENT_SOURCE)
        if event_bus_name is not None and event_source is None:
            raise ConfigurationError(
                f"environment variable {ENV_EVENT_SOURCE} is required with {ENV_EVENT_BUS_NAME}"
            )
        if event_source is not None and (problem := event_source_problem(event_source)):
            raise ConfigurationError(f"{ENV_EVENT_SOURCE}: {problem}")
        grace = positive_duration(
            env, ENV_SWEEP_GRACE_SECONDS, unit=timedelta(seconds=1), default=DEFAULT_SWEEP_GRACE_SECONDS
        )
        if grace < timedelta(seconds=MIN_SWEEP_GRACE_SECONDS):
            raise ConfigurationError(f"{ENV_SWEEP_GRACE_SECONDS} must be at least {MIN_SWEEP_GRACE_SECONDS}")
        topic_bytes = positive_int(env, ENV_TOPIC_MAX_MESSAGE_BYTES, default=SNS_MAX_MESSAGE_BYTES)
        if not SNS_MIN_CONFIGURABLE_BYTES <= topic_bytes <= SNS_MAX_CONFIGURABLE_BYTES:
            raise ConfigurationError(
                f"{ENV_TOPIC_MAX_MESSAGE_BYTES} must be between {SNS_MIN_CONFIGURABLE_BYTES} and "
                f"{SNS_MAX_CONFIGURABLE_BYTES} (the topic's MaximumMessageSize)"
            )
        bus_bytes = positive_int(env, ENV_EVENTBRIDGE_MAX_ENTRY_BYTES, default=EVENTBRIDGE_MAX_ENTRY_BYTES)
        if bus_bytes > EVENTBRIDGE_MAX_CONFIGURABLE_BYTES:
            raise ConfigurationError(
                f"{ENV_EVENTBRIDGE_MAX_ENTRY_BYTES} must be at most {EVENTBRIDGE_MAX_CONFIGURABLE_BYTES}"
            )
        return cls(
            table_name=table_name,
            poison_queue_url=poison_queue_url,
            router=Router.parse(optional(env, ENV_OUTBOX_ROUTES), configured),
            topic_arn=topic_arn,
            event_bus_name=event_bus_name,
            event_source=event_source,
            sweep_grace=grace,
            topic_max_message_bytes=topic_bytes,
            eventbridge_max_entry_bytes=bus_bytes,
            regions=RegionSettings.from_env(env),
        )

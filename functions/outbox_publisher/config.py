"""The publisher's configuration: parsed from the environment once, at start-up, and validated there.

| variable | required | meaning |
|---|---|---|
| `OUTBOX_TABLE_NAME` | yes | the outbox table; stream records of any other table are skipped |
| `TOPIC_ARN` | one of the two | SNS topic; a `.fifo` ARN makes it a FIFO topic (group and dedup ids) |
| `EVENT_BUS_NAME` | one of the two | EventBridge bus name (or ARN) |
| `EVENT_SOURCE` | with a bus | EventBridge `Source` of every event |
| `POISON_QUEUE_URL` | yes | SQS queue that receives poison events whole |
| `OUTBOX_ROUTES` | no | routing rules (JSON, below); default: every event to every configured destination |
| `PUBLISHED_RETENTION_DAYS` | no | TTL of PUBLISHED rows, in days (default 7) |

`OUTBOX_ROUTES`, like Debezium's outbox event router but keyed on both `aggregate_type` and `event_type`::

    {"routes": [
        {"aggregate_type": "Order", "event_type": "OrderPlaced", "destinations": ["sns", "eventbridge"]},
        {"aggregate_type": "Customer", "destinations": ["eventbridge"]}
     ],
     "default": ["sns"]}

Routes are tried in order and the first match wins; a matcher left out matches anything. `default` applies
to events no route matches; left out, it is every configured destination; `[]` makes unmatched events
poison ("no route"). A destination is `sns` or `eventbridge` and must be configured (TOPIC_ARN or
EVENT_BUS_NAME set): anything else, and malformed JSON, is a ConfigurationError at start-up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from outbox.config import optional, positive_int, require
from outbox.errors import ConfigurationError
from outbox_publisher.messages import is_fifo

DEFAULT_PUBLISHED_RETENTION_DAYS = 7
# SNS answers a malformed TopicArn with InvalidParameter, which reads as "this entry is bad": each
# event would be sent alone, refused, and poisoned. So the ARN's shape is checked here, once.
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?")


class Destination(StrEnum):
    SNS = "sns"
    EVENTBRIDGE = "eventbridge"


# Destinations are always published in this order, so runs are reproducible.
DESTINATION_ORDER = (Destination.SNS, Destination.EVENTBRIDGE)


@dataclass(frozen=True, slots=True)
class Route:
    destinations: tuple[Destination, ...]
    aggregate_type: str | None = None
    event_type: str | None = None

    def matches(self, aggregate_type: str, event_type: str) -> bool:
        return (self.aggregate_type is None or self.aggregate_type == aggregate_type) and (
            self.event_type is None or self.event_type == event_type
        )


@dataclass(frozen=True, slots=True)
class Router:
    """Which destinations an event goes to. An empty answer means "no route" (poison)."""

    routes: tuple[Route, ...]
    default: tuple[Destination, ...]

    def destinations_for(self, aggregate_type: str, event_type: str) -> tuple[Destination, ...]:
        for route in self.routes:
            if route.matches(aggregate_type, event_type):
                return route.destinations
        return self.default

    @classmethod
    def everything_to(cls, configured: Sequence[Destination]) -> Router:
        return cls(routes=(), default=_ordered(configured))

    @classmethod
    def parse(cls, text: str | None, configured: Sequence[Destination]) -> Router:
        if text is None:
            return cls.everything_to(configured)
        try:
            document = json.loads(text)
        except ValueError:
            raise ConfigurationError("OUTBOX_ROUTES is not valid JSON") from None
        if not isinstance(document, dict):
            raise ConfigurationError("OUTBOX_ROUTES must be a JSON object with 'routes' and/or 'default'")
        unknown_keys = set(document) - {"routes", "default"}
        if unknown_keys:
            raise ConfigurationError(f"OUTBOX_ROUTES has unknown keys: {', '.join(sorted(unknown_keys))}")
        raw_routes = document.get("routes", [])
        if not isinstance(raw_routes, list):
            raise ConfigurationError("OUTBOX_ROUTES.routes must be a list")
        routes = tuple(_parse_route(raw, index, configured) for index, raw in enumerate(raw_routes))
        if "default" in document:
            default = _parse_destinations(document["default"], "OUTBOX_ROUTES.default", configured)
        else:
            default = _ordered(configured)
        return cls(routes=routes, default=default)


def _parse_route(raw: Any, index: int, configured: Sequence[Destination]) -> Route:
    where = f"OUTBOX_ROUTES.routes[{index}]"
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{where} must be an object")
    unknown_keys = set(raw) - {"aggregate_type", "event_type", "destinations"}
    if unknown_keys:
        raise ConfigurationError(f"{where} has unknown keys: {', '.join(sorted(unknown_keys))}")
    matchers: dict[str, str | None] = {}
    for name in ("aggregate_type", "event_type"):
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigurationError(f"{where}.{name} must be a non-empty string")
        matchers[name] = value
    if "destinations" not in raw:
        raise ConfigurationError(f"{where} needs 'destinations'")
    destinations = _parse_destinations(raw["destinations"], f"{where}.destinations", configured)
    return Route(destinations, aggregate_type=matchers["aggregate_type"], event_type=matchers["event_type"])


def _parse_destinations(raw: Any, where: str, configured: Sequence[Destination]) -> tuple[Destination, ...]:
    if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
        raise ConfigurationError(f"{where} must be a list of destination names")
    destinations = []
    for name in raw:
        try:
            destination = Destination(name)
        except ValueError:
            raise ConfigurationError(
                f"{where}: unknown destination {name!r} (known: {', '.join(d.value for d in Destination)})"
            ) from None
        if destination not in configured:
            variable = "TOPIC_ARN" if destination is Destination.SNS else "EVENT_BUS_NAME"
            raise ConfigurationError(
                f"{where}: destination {name!r} is not configured ({variable} is not set)"
            )
        destinations.append(destination)
    return _ordered(destinations)


def _ordered(destinations: Sequence[Destination]) -> tuple[Destination, ...]:
    return tuple(destination for destination in DESTINATION_ORDER if destination in destinations)


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    table_name: str
    poison_queue_url: str
    router: Router
    topic_arn: str | None = None
    event_bus_name: str | None = None
    event_source: str | None = None
    published_retention: timedelta = timedelta(days=DEFAULT_PUBLISHED_RETENTION_DAYS)

    @property
    def fifo_topic(self) -> bool:
        return self.topic_arn is not None and is_fifo(self.topic_arn)

    @property
    def destinations(self) -> tuple[Destination, ...]:
        return configured_destinations(self.topic_arn, self.event_bus_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PublisherConfig:
        table_name = require(env, "OUTBOX_TABLE_NAME")
        poison_queue_url = require(env, "POISON_QUEUE_URL")
        topic_arn = optional(env, "TOPIC_ARN")
        event_bus_name = optional(env, "EVENT_BUS_NAME")
        configured = configured_destinations(topic_arn, event_bus_name)
        if not configured:
            raise ConfigurationError("set TOPIC_ARN, EVENT_BUS_NAME or both: there is nowhere to publish")
        if topic_arn is not None and not _TOPIC_ARN.fullmatch(topic_arn):
            raise ConfigurationError("TOPIC_ARN must be a topic ARN (arn:aws:sns:<region>:<account>:<name>)")
        event_source = optional(env, "EVENT_SOURCE")
        if event_bus_name is not None and event_source is None:
            raise ConfigurationError("environment variable EVENT_SOURCE is required with EVENT_BUS_NAME")
        retention_days = positive_int(
            env, "PUBLISHED_RETENTION_DAYS", default=DEFAULT_PUBLISHED_RETENTION_DAYS
        )
        return cls(
            table_name=table_name,
            poison_queue_url=poison_queue_url,
            router=Router.parse(optional(env, "OUTBOX_ROUTES"), configured),
            topic_arn=topic_arn,
            event_bus_name=event_bus_name,
            event_source=event_source,
            published_retention=timedelta(days=retention_days),
        )


def configured_destinations(topic_arn: str | None, event_bus_name: str | None) -> tuple[Destination, ...]:
    present = {Destination.SNS: topic_arn is not None, Destination.EVENTBRIDGE: event_bus_name is not None}
    return tuple(destination for destination in DESTINATION_ORDER if present[destination])

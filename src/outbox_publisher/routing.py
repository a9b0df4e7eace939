"""Routing: which destinations each event goes to, by `aggregate_type` and `event_type` (`OUTBOX_ROUTES`, like
Debezium's outbox event router but keyed on both; docs/publisher.md, "Routing", gives the format).

Routes are tried in order, the first match wins; `default` serves events no route matches (left out: every
configured destination; `[]`: they are poison). A route's `on_poison` says whether a poison event holds its
aggregate's later events (`hold`) or lets them go, leaving the gap (`continue`). An unknown or unconfigured
destination, or malformed JSON, is a ConfigurationError at start-up.

The CDK construct builds the same JSON from typed `Route`s (`routes_json`) and checks it with `Router.parse`
at synth, so a route the publisher would refuse at start-up is refused before deployment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from outbox.errors import ConfigurationError

# The environment variable each destination is configured by (named in routing errors).
ENV_TOPIC_ARN = "TOPIC_ARN"
ENV_EVENT_BUS_NAME = "EVENT_BUS_NAME"


class Destination(StrEnum):
    SNS = "sns"
    EVENTBRIDGE = "eventbridge"


# Destinations are always published in this order, so runs are reproducible.
DESTINATION_ORDER = (Destination.SNS, Destination.EVENTBRIDGE)


class PoisonPolicy(StrEnum):
    HOLD = "hold"
    """A poison event holds its aggregate's later events until it is redriven or skipped."""
    CONTINUE = "continue"
    """Later events go on past a poison event; the gap in `seq` stays."""


@dataclass(frozen=True, slots=True)
class Route:
    destinations: tuple[Destination, ...]
    aggregate_type: str | None = None
    event_type: str | None = None
    on_poison: PoisonPolicy = PoisonPolicy.HOLD

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

    def poison_policy_for(self, aggregate_type: str, event_type: str) -> PoisonPolicy:
        for route in self.routes:
            if route.matches(aggregate_type, event_type):
                return route.on_poison
        return PoisonPolicy.HOLD

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
        except RecursionError:  # the decoder's own limit: no routing rules nest anywhere near it
            raise ConfigurationError("OUTBOX_ROUTES is nested too deeply for routing rules") from None
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
    unknown_keys = set(raw) - {"aggregate_type", "event_type", "destinations", "on_poison"}
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
    try:
        on_poison = PoisonPolicy(raw.get("on_poison", PoisonPolicy.HOLD.value))
    except ValueError:
        choices = " or ".join(repr(policy.value) for policy in PoisonPolicy)
        raise ConfigurationError(f"{where}.on_poison must be {choices}") from None
    return Route(
        destinations,
        aggregate_type=matchers["aggregate_type"],
        event_type=matchers["event_type"],
        on_poison=on_poison,
    )


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
            variable = ENV_TOPIC_ARN if destination is Destination.SNS else ENV_EVENT_BUS_NAME
            raise ConfigurationError(
                f"{where}: destination {name!r} is not configured ({variable} is not set)"
            )
        destinations.append(destination)
    return _ordered(destinations)


def _ordered(destinations: Sequence[Destination]) -> tuple[Destination, ...]:
    return tuple(destination for destination in DESTINATION_ORDER if destination in destinations)


def configured_destinations(topic_arn: str | None, event_bus_name: str | None) -> tuple[Destination, ...]:
    present = {Destination.SNS: topic_arn is not None, Destination.EVENTBRIDGE: event_bus_name is not None}
    return tuple(destination for destination in DESTINATION_ORDER if present[destination])


def routes_json(routes: Sequence[Route], default: Sequence[Destination] | None = None) -> str:
    """`OUTBOX_ROUTES` for these routes; `default` None means every configured destination."""
    document: dict[str, Any] = {
        "routes": [
            {
                **({"aggregate_type": route.aggregate_type} if route.aggregate_type is not None else {}),
                **({"event_type": route.event_type} if route.event_type is not None else {}),
                "destinations": [destination.value for destination in route.destinations],
                **({"on_poison": route.on_poison.value} if route.on_poison is not PoisonPolicy.HOLD else {}),
            }
            for route in routes
        ]
    }
    if default is not None:
        document["default"] = [destination.value for destination in default]
    return json.dumps(document, sort_keys=True, separators=(",", ":"))

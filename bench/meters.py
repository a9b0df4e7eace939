"""The three meters on every counted client (calls, DynamoDB capacity, billed units), and their snapshots."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.billing import BilledUnits
from bench.capacity import CapacityMeter, Peek, Usage, total
from bench.counting import CallCounter, Operation


@dataclass(frozen=True)
class Snapshot:
    """What the counted clients did during one measured step."""

    calls: Mapping[Operation, int]
    usage: Mapping[tuple[str, str], Usage]
    billed: Mapping[str, int]
    unmodelled: frozenset[str] = frozenset()
    """DynamoDB operations whose capacity the meter does not model (none expected)."""

    def count(self, service: str, operations: Iterable[str] | None = None) -> int:
        """Calls to `service` (only these `operations`, when given)."""
        wanted = None if operations is None else set(operations)
        return sum(
            count
            for (name, operation), count in self.calls.items()
            if name == service and (wanted is None or operation in wanted)
        )

    def capacity(self, tables: Iterable[str] | None = None, operations: Iterable[str] | None = None) -> Usage:
        return total(self.usage, tables, operations)

    def calls_detail(self) -> dict[str, int]:
        """{"service.Operation": calls}, sorted: a figure's detail."""
        return {
            f"{service}.{operation}": self.calls[(service, operation)]
            for service, operation in sorted(self.calls)
        }


class Meters:
    def __init__(self, peek: Peek) -> None:
        self.calls = CallCounter()
        self.capacity = CapacityMeter(peek)
        self.billed = BilledUnits()

    def attach(self, client: Any) -> Any:
        self.calls.attach(client)
        self.billed.attach(client)
        if client.meta.service_model.service_name == "dynamodb":
            self.capacity.attach(client)
        return client

    def reset(self) -> None:
        self.calls.reset()
        self.capacity.reset()
        self.billed.reset()

    def snapshot(self) -> Snapshot:
        return Snapshot(
            dict(self.calls.counts),
            copy.deepcopy(self.capacity.usage),
            dict(self.billed.units),
            frozenset(self.capacity.unmodelled),
        )

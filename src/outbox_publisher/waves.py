"""The order a run takes its events in (outbox_publisher.engine): in WAVES across the whole batch. Each wave
takes the next event of every aggregate, in processing order, so a publish call holds up to 10 distinct
aggregates whatever the interleave, and never two events of one aggregate.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Container, Iterable, Sequence

LOOKAHEAD = 10_000
"""How far past the first event not settled (in processing order) a wave may take an aggregate's next event:
the whole batch (a stream batch holds at most 10,000 records). With 0 a call ends at the first aggregate it
repeats in stream order.

Why the whole batch, from the figures (docs/BENCHMARKS.md, `duplicates.*` and their `by_window` detail, one
failure injected at each position of 100 records over 10 aggregates): the duplicates a failure costs grow
about as fast as the calls shrink, so the windows that meet the 0.11 calls per event target (about 50 and
more) already re-send nearly what the whole batch does, and the windows that re-send markedly fewer (20 and
less) pay 1.5 to 2.6 times the calls on EVERY batch. Calls are paid on every batch; duplicates only after a
failure that outlasts its retries, and they are duplicates by `event_id`, never out of order, which consumers
already drop (at-least-once). A window is for a deployment whose failures are frequent: pass `lookahead`."""


class Waves:
    """Each aggregate's events in the order they go, a heap of each queue's head by its place, and how far a
    wave may reach."""

    def __init__(self, order: Sequence[int], aggregates: Sequence[str], lookahead: int) -> None:
        self._order = order
        self._aggregates = aggregates
        self._lookahead = lookahead
        self._rank = {index: place for place, index in enumerate(order)}
        self._queues: dict[str, deque[int]] = {}
        for index in order:
            self._queues.setdefault(aggregates[index], deque()).append(index)
        self._heads = [(self._rank[queue[0]], aggregate) for aggregate, queue in self._queues.items()]
        heapq.heapify(self._heads)
        self._frontier = 0
        """The place of the first event not settled."""
        self._limit = len(order)
        """No event at or after a stop's place in processing order is sent."""
        self._stops: list[int] = []

    @property
    def remaining(self) -> bool:
        return bool(self._heads)

    def next_wave(self, settled: Container[int]) -> list[str]:
        """The aggregates whose next event is within reach, in processing order."""
        while self._frontier < len(self._order) and self._order[self._frontier] in settled:
            self._frontier += 1
        reach = min(
            self._limit,
            self._frontier + _window(self._order, self._aggregates, self._frontier, self._lookahead),
        )
        wave: list[str] = []
        while self._heads and self._heads[0][0] < reach:
            wave.append(heapq.heappop(self._heads)[1])
        return wave

    def take(self, aggregate: str) -> int:
        """The aggregate's next event; its successor heads its queue."""
        queue = self._queues[aggregate]
        index = queue.popleft()
        if queue:
            heapq.heappush(self._heads, (self._rank[queue[0]], aggregate))
        return index

    def put_back(self, index: int) -> None:
        """An event taken but not settled (the run stopped before it): it heads its queue again."""
        self._queues[self._aggregates[index]].appendleft(index)

    def stop_at(self, index: int, not_done: Iterable[int]) -> None:
        """After a stop, the queues the run goes on with. A wave may stop on an event far later in the batch
        than events earlier waves have not reached yet, and the stream hands back from the first event not
        done: stopping there would publish those only one wave per redelivery (a persistent failure late in
        the batch would hold the whole shard). So the run goes on with the events before the stop, of
        aggregates with nothing unsettled: nothing after a stop, and nothing of an aggregate whose earlier
        event is not out, is sent."""
        self._stops.append(index)
        self._limit = min(self._limit, self._rank[index])
        blocked = {self._aggregates[unsettled] for unsettled in not_done}
        self._heads = [
            (self._rank[queue[0]], aggregate)
            for aggregate, queue in self._queues.items()
            if queue and self._rank[queue[0]] < self._limit and aggregate not in blocked
        ]
        heapq.heapify(self._heads)

    def earliest_stop(self, last: int | None) -> int | None:
        """The earliest of the run's stops (and `last`, the one it ended on) in processing order."""
        stops = [*self._stops, last] if last is not None else self._stops
        return min(stops, key=self._rank.__getitem__) if stops else None


def _window(order: Sequence[int], aggregates: Sequence[str], frontier: int, lookahead: int) -> int:
    """How far past the first event not settled a wave may reach: the lookahead, and at least the run the
    contiguous cut would take."""
    return (
        lookahead if lookahead >= len(order) else max(lookahead, _distinct_run(order, aggregates, frontier))
    )


def _distinct_run(order: Sequence[int], aggregates: Sequence[str], start: int) -> int:
    """How many events from `start` on, in processing order, before one whose aggregate came already: the
    run the contiguous cut would put in calls (LOOKAHEAD = 0)."""
    seen: set[str] = set()
    for place in range(start, len(order)):
        aggregate = aggregates[order[place]]
        if aggregate in seen:
            return place - start
        seen.add(aggregate)
    return len(order) - start

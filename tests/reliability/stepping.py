"""What the single-region system (tests.reliability.system) and the two-region one (tests.reliability.regions)
drive the same way: the virtual clock run until something holds, and one function's invocation bracketed on
the wire."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.reliability.wire import Crash, Publication, Wire
from tests.support.clock import FakeClock

TICK_S = 0.001
"""The fake clock counts whole microseconds: a deadline this close counts as reached."""


def run_until(
    clock: FakeClock,
    round_: Callable[[], tuple[bool, bool]],
    next_due: Callable[[], float],
    done: Callable[[], bool],
    *,
    deadline: float,
    max_rounds: int,
) -> bool:
    """Runs `round_` (answering whether it did work, and whether something waits a moment) until `done`, or
    the virtual `deadline`: with work, round again; with something waiting, a short step; idle, the clock
    jumps to `next_due()`."""
    for _ in range(max_rounds):
        now = clock.seconds()
        if now >= deadline - TICK_S:
            return done()
        worked, waiting = round_()
        if worked:
            continue
        if waiting:
            clock.advance(max(TICK_S, min(0.25, deadline - now)))
            continue
        if done():
            return True
        clock.advance(max(0.05, min(next_due(), deadline) - clock.seconds()))
    return done()


@contextmanager
def invocation(
    wire: Wire,
    function: str,
    *,
    restart: Callable[[], None],
    stamp: Callable[[], None],
    recorded: Callable[[list[Publication]], Any],
) -> Iterator[None]:
    """One invocation of `function` on the wire: a crash point that fires marks it crashed (a timeout
    counted) and throws the function's instance away (`restart`); either way the wire closes it, the stream
    reader's clock is stamped, and what the table records of its publications is kept."""
    begun = wire.begin(function)
    before = len(wire.published)
    try:
        yield
    except Crash as crash:
        begun.crashed = True
        if crash.timeout:
            begun.faults["timeout"] += 1
        restart()
        raise
    finally:
        wire.end()
        stamp()
        begun.recorded = recorded(wire.published[before:])

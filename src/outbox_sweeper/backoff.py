"""How long the sweeper waits before it tries a row again, from the counts it keeps on the row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from outbox.config import MAX_COUNT
from outbox_sweeper.config import SweepSettings


def backoff(failures: int, settings: SweepSettings, draw: float) -> timedelta:
    """The wait after a row's `failures`-th failed sweep: the base doubled per further failure, at most the
    cap, with equal jitter (`draw` in [0, 1)): at least half of it, so a failing row waits."""
    base, most = settings.backoff_base, settings.backoff_max
    # Doubled no more often than it takes to pass the cap: base * 2**n overflows a timedelta past n ~ 40.
    doublings = max(0, min(failures - 1, (most // base).bit_length()))
    ceiling = min(most, base * (1 << doublings))
    return ceiling * (0.5 + draw / 2)


def stored_count(row: Mapping[str, Any], name: str) -> int:
    """A count the sweeper keeps on a row (attempts, failed sweeps), from 0 to MAX_COUNT: a larger one
    (another writer's `9E+125`, `1e400` or `Infinity`) is MAX_COUNT, which passes every cutoff; an unreadable
    one is 0."""
    try:
        value = Decimal(row.get(name, {}).get("N", "0"))
    except (TypeError, ArithmeticError, AttributeError, ValueError):
        return 0
    if value.is_nan() or value <= 0:
        return 0
    return MAX_COUNT if value >= MAX_COUNT else int(value)

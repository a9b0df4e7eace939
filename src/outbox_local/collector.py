"""The garbage collector tuned for `outbox local up`, a long-running process holding moto's whole state.

Measured under `bench/local_load.py`: with CPython's default thresholds (700, 10, 10) the runtime spent about
8% of its CPU in the collector, most of it in full collections of a heap of half a million objects (moto's
tables, queues and messages, the provisioned stack), each a pause of about 0.2 s that every request in flight
waited out. Everything alive once the runtime has started (modules, the provisioned resources) lives as long
as the process: it is moved out of the collector's sight (`gc.freeze`). A larger young generation makes the
short-lived cycles of each request (Flask's contexts, botocore's parsers) die in the cheap collections, so
the full ones become rare. Reference counting frees everything else as before (the benchmark reports the
runtime's peak memory with its other figures). The one trade: a cycle among the frozen objects that becomes
garbage later (none is expected: the provisioned stack lives as long as the process) is not collected until
the runtime stops.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_GENERATION = 50_000
"""Allocations between young collections (CPython: 700)."""
OLDER_GENERATIONS = (20, 10)
"""Young collections per middle one, middle ones per full one (CPython: 10, 10)."""


@contextmanager
def tuned_for_a_long_run() -> Iterator[None]:
    """While in effect: what is alive now is frozen, and the young generation is larger. Restored after."""
    thresholds = gc.get_threshold()
    gc.collect()  # the start-up's garbage, so that only what lives on is frozen
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION, *OLDER_GENERATIONS)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

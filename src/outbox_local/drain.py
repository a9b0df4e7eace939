"""The runtime driven without threads (`LocalRuntime.drain_streams`): every event source mapping and the
replication stepped by the caller until nothing is left to do, the virtual clock moved forward instead of
waiting (the counterpart of `outbox_local.background`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from outbox_local.background import Poller
from outbox_local.errors import RuntimeStateError
from outbox_local.persistence import Persistence
from outbox_local.replication import Replicator
from outbox_local.runtime_options import VirtualClock
from outbox_local.stream_mapping import NOTHING_DONE, StepKind

_WAIT_STEP_S = 0.05
_LEAST_ADVANCE_S = 0.001
"""drain_streams always moves the clock on while waiting, so a due time a rounding short is still reached."""


def drain(
    pollers: Callable[[], Sequence[Poller]],
    replication: Replicator,
    persistence: Persistence | None,
    clock: VirtualClock,
    max_steps: int,
) -> None:
    """Run every mapping of `pollers()` (asked again each step: a region cut off or back changes them) and the
    replication until nothing is left to do.

    When a mapping only waits (batching window, retry delay), the virtual clock moves forward instead of
    the caller sleeping, so tests stay fast and deterministic. A queue message left invisible by a
    failed invocation is not work: it comes back when moto's visibility timeout (real time) ends. With a
    state directory, stream records no snapshot holds yet are work too: a save makes them readable.
    """
    for _ in range(max_steps):
        reports = [report for mapping in pollers() for report in mapping.poll_once()]
        replicated = replication.step()
        replication_due = replication.next_due()
        if all(report.kind is StepKind.IDLE for report in reports) and replication_due is None:
            if persistence is None or persistence.holds_every_record():
                return
            persistence.wait_saved()
        if all(report.kind in NOTHING_DONE for report in reports) and not replicated:
            # On to when something is next due (a window's end, a retry, a throttle's back-off, a write
            # replicated after the lag).
            due = [report.due_at for report in reports if report.due_at is not None]
            due += [replication_due] if replication_due is not None else []
            wait = min(due) - clock() if due else _WAIT_STEP_S
            clock.advance(max(wait, _LEAST_ADVANCE_S))
    raise RuntimeStateError(f"event source mappings still busy after {max_steps} steps")

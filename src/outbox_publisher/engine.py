"""The publishing engine: outbox rows in, in order; one outcome per row out. Knows nothing of streams or
boto3, so the stream publisher (a shard's batch) and the sweeper (the rows it claimed) share one algorithm.

The constraints it keeps (docs/publisher.md explains each):
- Order: each aggregate's events go in `seq` order, none before its predecessor is out (`gate`); an event
  that must wait is HELD without holding up other aggregates.
- A call never carries two events of one aggregate: calls fail per entry, so A#2 could go out while A#1
  failed. A hot aggregate therefore costs one call per event (`waves`, `planning`).
- Destinations are independent: an outage of one neither holds back nor repeats the other. A destination
  that fails a whole call is down for the rest of the run; its events are UNDELIVERED, left for the sweeper.
- Poison goes whole to the poison queue once the gate lets it (a contract break at once) and its row is
  marked FAILED; if the queue refuses it, it is UNDELIVERED, never dropped.
- A failed row update never fails an event: the event is out, the sweeper reconciles the row.
- The run stops only where it cannot go on (no time, the gate's reads failed, an unmarked contract break);
  from there everything is NOT_ATTEMPTED and the stream hands it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from outbox.clock import Clock, utc_now
from outbox.errors import ConfigurationError
from outbox.payload_store import PayloadStore
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline, NoDeadline
from outbox_publisher.memory import RowMemory
from outbox_publisher.outcome_updates import update_rows
from outbox_publisher.ports import DestinationPort, PoisonQueue
from outbox_publisher.predecessors import PredecessorReader
from outbox_publisher.report import PublishReport
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination, Router
from outbox_publisher.row_updates import Park, RowUpdate, RowUpdater, RowUpdatesReport
from outbox_publisher.run import EngineRun
from outbox_publisher.waves import LOOKAHEAD


class PublishingEngine:
    def __init__(
        self,
        *,
        destinations: Mapping[Destination, DestinationPort],
        router: Router,
        poison_queue: PoisonQueue,
        updater: RowUpdater,
        predecessors: PredecessorReader,
        clock: Clock = utc_now,
        retry: RetryPolicy | None = None,
        sleep: Sleep = system_sleep,
        random: Random = system_random,
        lookahead: int = LOOKAHEAD,
        memory: RowMemory | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        if lookahead < 0:
            raise ValueError("lookahead must not be negative")
        routed = {destination for route in router.routes for destination in route.destinations}
        missing = (routed | set(router.default)) - set(destinations)
        if missing:
            names = ", ".join(sorted(destination.value for destination in missing))
            raise ConfigurationError(f"routes name destinations that have no adapter: {names}")
        self._destinations = dict(destinations)
        self._router = router
        self._poison_queue = poison_queue
        self._updater = updater
        self._predecessors = predecessors
        self._clock = clock
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._random = random
        self._lookahead = lookahead
        self._payloads = payloads
        """Where rows' stored envelopes are read (outbox_publisher.stored_envelopes)."""
        self.memory = memory if memory is not None else RowMemory()
        """The rows this engine settled and parked lately (outbox_publisher.memory)."""

    def publish(
        self,
        candidates: Sequence[Candidate],
        deadline: Deadline | None = None,
        *,
        publish_until: datetime | None = None,
    ) -> PublishReport:
        """Publish `candidates`; `publish_until`: no publish call may end after it (None: no such bound)."""
        return EngineRun(self, candidates, deadline or NoDeadline(), publish_until).execute()

    def update_rows(self, updates: Sequence[RowUpdate], deadline: Deadline) -> RowUpdatesReport:
        """Writes a caller's own row updates (the stream publisher's parks) through the engine's port, and
        remembers the parks made."""
        report = update_rows(self._updater, updates, deadline)
        done = set(report.done)
        for update in updates:
            if isinstance(update, Park) and update.key in done:
                self.memory.parked_row(update.key, update.event_id, update.delivered_to)
        return report

"""The regions of a running runtime (docs/local.md, "Two regions locally"): which it holds something in, which
are cut off (`LocalRuntime.cut_region`), as in a regional outage, and which region each poller and function
belongs to. What the function host, the stream and queue pollers, the schedules and the alarms ask before
running anything of a region, and the replication held into and out of each (`Replicator.cut`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from outbox_local.errors import LocalRuntimeError
from outbox_local.replication import Replicator

if TYPE_CHECKING:
    from outbox_local.functions import FunctionHost
    from outbox_local.queue_mapping import QueueMappingRunner
    from outbox_local.stack_set import StackSet
    from outbox_local.stream_poller import StreamMappingRunner


class RegionCuts:
    """The runtime's regions; what the control API's regions routes act on (`control_api.RegionControl`).
    The stacks and the function host are asked for as they are now: a runtime started again has new ones."""

    def __init__(
        self,
        replication: Replicator,
        home: str,
        *,
        stacks: Callable[[], StackSet | None],
        host: Callable[[], FunctionHost | None],
    ) -> None:
        self._replication = replication
        self._home = home
        self._stacks = stacks
        self._host = host
        self._cut: set[str] = set()
        self._lock = threading.Lock()

    def cut_region(self, region: str) -> None:
        """Cut `region` off, as in a regional outage: its functions are no longer invoked (an invocation of
        one answers `RegionCutOff`), its stream and queue mappings stop polling (where they are: no record is
        retried or discarded meanwhile), its schedules stop firing, and replication into and out of it queues
        (`Replicator.cut`). Invocations under way finish."""
        with self._lock:
            self._cut.add(region)
            self._replication.cut(region)

    def restore_region(self, region: str) -> None:
        """Bring `region` back: its mappings take up where they were, a schedule due meanwhile fires once,
        and the queued replication flows (after the lag, counted from each write)."""
        with self._lock:
            self._cut.discard(region)
            self._replication.restore(region)

    def is_cut(self, region: str | None) -> bool:
        with self._lock:
            return region in self._cut

    @property
    def regions(self) -> frozenset[str]:
        """The regions cut off."""
        with self._lock:
            return frozenset(self._cut)

    def clear(self) -> None:
        """Nothing cut off (a runtime starting again)."""
        with self._lock:
            self._cut.clear()

    def held(self) -> list[str]:
        """The regions the runtime holds something in: its own, its stacks', its global tables' replicas."""
        stacks = self._stacks()
        held = {self._home}
        if stacks is not None:
            held |= {stacks.region_of(deployed.definition) for deployed in list(stacks.stacks.values())}
        held |= {region for regions in self._replication.tables.values() for region in regions}
        return sorted(held | self.regions)

    def region_report(self) -> dict[str, Any]:
        """What `outbox local regions` shows."""
        return {
            "regions": self.held(),
            "cut": sorted(self.regions),
            "replication_pending": self._replication.pending(),
            "replication_lag_s": self._replication.lag_s,
        }

    def set_replication_lag(self, seconds: float) -> None:
        """A replication lag fault (`Replicator.set_lag`), from the control API."""
        self._replication.set_lag(seconds)

    def pollers(self) -> list[StreamMappingRunner | QueueMappingRunner]:
        """Every stack's mappings, but those of a region cut off."""
        stacks = self._stacks()
        if stacks is None:
            return []
        cut = self.regions
        pollers: list[StreamMappingRunner | QueueMappingRunner] = []
        for deployed in list(stacks.stacks.values()):
            if stacks.region_of(deployed.definition) not in cut:
                pollers += [*deployed.mappings, *deployed.queue_mappings]
        return pollers

    def of_function(self, name: str) -> str | None:
        """The region of a hosted function's stack (None: the runtime's)."""
        host = self._host()
        if host is None:
            return None
        try:
            return host.find(name).region
        except LocalRuntimeError:
            return None

    def of_poller(self, poller: object) -> str | None:
        stacks = self._stacks()
        if stacks is None:
            return None
        for deployed in list(stacks.stacks.values()):
            if any(poller is runner for runner in [*deployed.mappings, *deployed.queue_mappings]):
                return stacks.region_of(deployed.definition)
        return None

"""The regions cut off from a running runtime (`LocalRuntime.cut_region`), as in a regional outage: what the
function host, the stream and queue pollers, the schedules and the alarms ask before running anything of a
region, and the replication held into and out of each (`Replicator.cut`)."""

from __future__ import annotations

import threading

from outbox_local.replication import Replicator


class RegionCuts:
    def __init__(self, replication: Replicator) -> None:
        self._replication = replication
        self._cut: set[str] = set()
        self._lock = threading.Lock()

    def cut(self, region: str) -> None:
        with self._lock:
            self._cut.add(region)
            self._replication.cut(region)

    def restore(self, region: str) -> None:
        with self._lock:
            self._cut.discard(region)
            self._replication.restore(region)

    def is_cut(self, region: str | None) -> bool:
        with self._lock:
            return region in self._cut

    @property
    def regions(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._cut)

    def clear(self) -> None:
        """Nothing cut off (a runtime starting again)."""
        with self._lock:
            self._cut.clear()

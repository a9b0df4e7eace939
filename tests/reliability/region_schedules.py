"""Random fault schedules on one outbox across two regions (tests.reliability.regions): writes in both regions
interleaved with the region fault kinds; then the faults clear, the system drains, the promise is checked.

The steps are the single-region schedules' `Step` (plain data, Hypothesis generates and shrinks it):

- `write`: the next `nth` (1 to 3) events of one of eight aggregates, each written in one region (`order` % 2
  picks it), one transaction each; a write in a region cut off is refused (its service is down) and counted
  as a failed command;
- `region_loss`: a region cut off (`tests.reliability.regions.TwoRegions.cut`) for `seconds` (one of
  `LOSS_SECONDS`: shorter than the fence, shorter and longer than the takeover time), then back on its own.
  `nth` 1: the home region, 2: the other, each its functions first and its replication
  `REPLICATION_AFTER_S` later (a random half of its last writes reach the peer, unpublished: the RPO; the
  others only when it is back); 3: the home region, all at once, the moment its publisher has published a
  batch (after the destinations accepted it, before its settle: the documented in-flight case); 4: as 1, and
  the taker's sweeper crashes once the topic accepted its first batch while it holds the origin (before it
  records that batch published: its seqs stay `claimed` only in the `#taken#` record);
- `region_return`: the region cut off longest ago comes back now (before its loss's end);
- `replication_lag`: replication slower than usual for `seconds`. `nth` 1: nothing replicates (both ways);
  2: the writes out of a random region held back that long (the other way flows); 3: a random half of the
  writes held back that long (a later write of an aggregate may arrive before an earlier one);
- `wait`: time passing (up to past the takeover time).

At the end a cut region stays cut to its loss's end (so that a takeover it would see happens), every fault
clears, and the system drains (`DRAIN_LIMIT_S`), the operator skipping the late replicas (the runbook). The
promise is the single-region one on the union of both regions' destinations (tests.reliability.invariants),
plus the replicas agreeing once everything replicated (`diverged`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import strategies as st

from tests.reliability.invariants import Verdict
from tests.reliability.kinds import REGION_UNITS
from tests.reliability.regions import REGIONS, TwoRegions, two_regions
from tests.reliability.schedules import ScheduleResult, Step
from tests.reliability.system import PUBLISHER, SWEEPER
from tests.reliability.wire import SNS, CrashPoint

REGION_KINDS = tuple(REGION_UNITS)
LOSS_SECONDS = (60.0, 200.0, 420.0, 900.0)
"""Shorter than the fence (its sweeper missed no run), between the fence and the takeover time (it rejoins,
nothing taken over), longer (taken over)."""
LAG_SECONDS = (5.0, 30.0, 120.0)
"""Below the takeover time and the handback margin: a lag that long is the RPO's business (documented)."""
REPLICATION_AFTER_S = 3.0
WAITS = (0.5, 2.0, 10.0, 30.0, 120.0, 400.0)
AGGREGATES = 8
WARM_UP_S = 600
DRAIN_LIMIT_S = 3 * 3600
OPERATOR_ROUND_S = 120
assert set(REGION_KINDS) == {"region_loss", "region_return", "replication_lag"}


def steps() -> st.SearchStrategy[Step]:
    write = st.builds(
        Step, action=st.just("write"), order=st.integers(0, AGGREGATES - 1), nth=st.integers(1, 3)
    )
    fault = st.sampled_from(REGION_KINDS).flatmap(
        lambda kind: st.builds(
            Step,
            action=st.just("fault"),
            kind=st.just(kind),
            seconds=st.sampled_from(LOSS_SECONDS if kind == "region_loss" else LAG_SECONDS),
            nth=st.integers(1, 4 if kind == "region_loss" else 3),
        )
    )
    wait = st.builds(Step, action=st.just("wait"), seconds=st.sampled_from(WAITS))
    return st.one_of(write, write, fault, wait)


def schedules() -> st.SearchStrategy[tuple[int, list[Step]]]:
    """(seed for the system's own choices, the steps): at least one write and one fault."""
    return st.tuples(
        st.integers(0, 2**31),
        st.lists(steps(), min_size=3, max_size=12).filter(
            lambda s: any(step.action == "write" for step in s) and any(step.action == "fault" for step in s)
        ),
    )


class RegionFaults:
    """The region faults armed in one schedule, and when each loss ends."""

    def __init__(self, system: TwoRegions) -> None:
        self.system = system
        self.losses: dict[str, float] = {}
        """Region cut off -> when its loss ends (it comes back on its own)."""
        self.armed: Counter[str] = Counter()
        self.returns = 0
        self.pending_cuts: list[CrashPoint] = []

    def arm(self, step: Step) -> None:
        system = self.system
        kind = step.kind
        self.armed[kind] += 1
        if kind == "region_loss":
            region = REGIONS[1] if step.nth == 2 else REGIONS[0]
            # 1, 2: its functions stop, and its replication `REPLICATION_AFTER_S` later (its last writes
            # reach the peer unpublished: the peer's to take over); 3: all at once, mid-publish; 4: as 1,
            # and the taker's sweeper crashes once the topic accepted its first batch while it holds the
            # origin (before it records that batch published)
            if region in self.losses or any(point.function.endswith(region) for point in self.pending_cuts):
                return
            if step.nth == 4:
                self._crash_taker(region)
            if step.nth == 3:
                # Cut the moment its publisher's next batch was accepted by the topic (before the settle).
                point = CrashPoint(
                    f"{PUBLISHER}@{region}",
                    SNS,
                    "PublishBatch",
                    "after",
                    on_fire=lambda: self._cut(region, step.seconds),
                    kind="region_loss",
                )
                system.wire.crash_points.append(point)
                self.pending_cuts.append(point)
            else:
                self._cut(region, step.seconds, replication_after_s=REPLICATION_AFTER_S, partial=True)
        elif kind == "region_return":
            if self.losses:
                region = min(self.losses, key=self.losses.__getitem__)
                self._restore(region)
        elif kind == "replication_lag":
            if step.nth == 1:
                system.replication.pause(step.seconds)
            elif step.nth == 2:
                source = system.random.choice(REGIONS)
                system.replication.hold_writes(
                    lambda delivery: delivery.source == source, step.seconds, lasting=True
                )
            else:
                system.replication.hold_writes(
                    lambda _delivery: system.random.random() < 0.5, step.seconds, lasting=True
                )

    def _crash_taker(self, origin: str) -> None:
        system = self.system
        taker = next(region for region in REGIONS if region != origin)

        def holding(_params: dict[str, Any]) -> bool:
            beats = [beat for beat in system.beats if beat.region == taker]
            return bool(beats) and origin in beats[-1].taking

        system.wire.crash_points.append(
            CrashPoint(
                f"{SWEEPER}@{taker}", SNS, "PublishBatch", "after", condition=holding, kind="taker_crash"
            )
        )

    def _cut(
        self, region: str, seconds: float, *, replication_after_s: float = 0.0, partial: bool = False
    ) -> None:
        self.system.cut(region, replication_after_s=replication_after_s, partial=partial)
        self.losses[region] = self.system.clock.seconds() + seconds

    def _restore(self, region: str) -> None:
        self.system.restore(region)
        self.losses.pop(region, None)
        self.returns += 1

    def tick(self) -> None:
        now = self.system.clock.seconds()
        for region, until in list(self.losses.items()):
            if now >= until:
                self._restore(region)

    def next_end(self) -> float | None:
        return min(self.losses.values(), default=None)

    def clear(self) -> None:
        """A loss runs its whole length (the system working on meanwhile); then every fault clears."""
        system = self.system
        while (end := self.next_end()) is not None:
            run_for(system, self, max(0.0, end - system.clock.seconds()) + 0.001)
        for point in self.pending_cuts:
            point.until = system.clock.seconds()
        system.replication.release()


def run_for(system: TwoRegions, faults: RegionFaults, seconds: float) -> None:
    end = system.clock.seconds() + seconds
    while system.clock.seconds() < end - 0.001:
        faults.tick()
        step_end = min(end, faults.next_end() or end, system.clock.seconds() + 30.0)
        system.run_for(max(0.001, step_end - system.clock.seconds()))
    faults.tick()


def play(system: TwoRegions, faults: RegionFaults, plan: list[Step]) -> None:
    for step in plan:
        if step.action == "write":
            region = REGIONS[step.order % 2]
            for _ in range(step.nth):
                system.write(region, f"{region}-{step.order}")
        elif step.action == "fault":
            faults.arm(step)
        elif step.action == "wait":
            run_for(system, faults, step.seconds)
        run_for(system, faults, 0.2)


def drain(system: TwoRegions) -> tuple[float, bool]:
    cleared = system.clock.seconds()
    deadline = cleared + DRAIN_LIMIT_S
    while system.clock.seconds() < deadline:
        system.operate()
        if system.run_until(
            system.settled, deadline=min(deadline, system.clock.seconds() + OPERATOR_ROUND_S)
        ):
            return system.clock.seconds() - cleared, True
    return system.clock.seconds() - cleared, system.settled()


def effective_counts(system: TwoRegions, faults: RegionFaults) -> Counter[str]:
    """region_loss: origins taken over; region_return: regions back (their loss ended, or a return step);
    replication_lag: writes held back."""
    effective: Counter[str] = Counter(dict.fromkeys(REGION_KINDS, 0))
    holding: dict[str, set[str]] = {region: set() for region in REGIONS}
    for beat in system.beats:
        effective["region_loss"] += len(set(beat.taking) - holding[beat.region])
        holding[beat.region] = set(beat.taking)
    effective["region_return"] = faults.returns
    effective["replication_lag"] = system.replication.writes_held
    effective.update(system.operator_actions)
    return effective


def run_region_schedule(seed: int, plan: list[Step]) -> tuple[ScheduleResult, Verdict, dict[str, Any]]:
    """Plays `plan` on two fresh regions; returns the figures (the single-region ones, plus per region in the
    third value: `regions`, `diverged`)."""
    with two_regions(seed=seed) as system:
        system.run_until(system.owning, deadline=system.clock.seconds() + WARM_UP_S)
        faults = RegionFaults(system)
        play(system, faults, plan)
        faults.clear()
        seconds, drained = drain(system)
        verdict = system.verdict()
        diverged = system.diverged()
        violations = [*verdict.violations(), *(f"replicas differ: {d}" for d in diverged)]
        result = ScheduleResult(
            seed=seed,
            steps=len(plan),
            commands=sum(step.nth for step in plan if step.action == "write"),
            commands_failed=system.writes_refused,
            events=len(system.committed),
            armed=Counter(faults.armed),
            effective=effective_counts(system, faults),
            duplicates=verdict.duplicates,
            clear_to_drained_s=round(seconds, 1),
            drained=drained,
            lost=len(verdict.lost),
            invented=len(verdict.invented),
            out_of_order=len(verdict.out_of_order),
            duplicate_effects=len(verdict.duplicate_effects),
            unexplained_duplicates=len(verdict.unexplained),
            violations=violations[:20],
        )
        extra = {
            "suite": "regions",
            "regions": system.figures(verdict),
            "diverged": len(diverged),
            "taker_crashes": system.wire.injected["taker_crash"],
        }
        return result, verdict, extra

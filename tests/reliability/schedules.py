"""Random fault schedules: order commands interleaved with faults; then the faults clear, the system drains.

A schedule is plain data (Hypothesis generates and shrinks it): a list of steps, each an order command, a
fault, or time passing. `run_schedule` plays it on a fresh `System`, lets a single-destination outage run its
whole length (the system working on meanwhile), clears every fault (a crash point that has not fired stays
armed for the drain's first `CRASH_ARMED_INTO_DRAIN_S`), drains on the virtual clock (bounded:
`DRAIN_LIMIT_S` of virtual time), lets the operator deal with the injected poison (fix and redrive, or skip,
as the step said), checks the invariants and returns the figures, among them what each single-destination
outage cost the destination that stayed up (`outage_figures`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from hypothesis import strategies as st

from orders.model import Command
from tests.reliability.invariants import Verdict
from tests.reliability.kinds import EFFECTIVE_UNITS
from tests.reliability.system import API, LEDGER, PUBLISHER, SUMMARY, SWEEPER, Outage, System, running_system
from tests.reliability.wire import EVENTBRIDGE, SNS, CallFault, CrashPoint, EntryFault, Publication

DRAIN_LIMIT_S = 6 * 3600
CRASH_ARMED_INTO_DRAIN_S = 600
"""A crash point that has not fired when the faults clear stays armed this long into the drain (it still fires
at most once): the sweeper's and the consumers' matching calls mostly come then."""
OPERATOR_ROUND_S = 120
S3 = "s3"
S3_READS = frozenset({"GetObject", "HeadObject"})
KB = 1000
STORED_SIZES: dict[int, tuple[int, ...]] = {
    # A step's `nth` -> the payload sizes of another writer's aggregate, one row each. Over the writer's
    # 64 KiB threshold the envelope is stored; 100 KB goes inline on both destinations, 300 KB inline on the
    # topic (1 MiB) and as a claim check on the bus (256 KB), 1.2 MB as a claim check on both (its object
    # only checked to exist).
    1: (100 * KB, 300 * KB),
    2: (300 * KB, 1200 * KB),
    3: (1 * KB, 100 * KB, 300 * KB, 1200 * KB),
}
RETRIED = ("crash", "OrderStoreUnavailableError", "ClientError")
"""What a client retries (same idempotency key) once the faults clear: it cannot know whether it committed."""

# kind -> (service, operations, code, status, functions) for the call faults.
CALL_FAULTS: dict[str, tuple[str, frozenset[str] | None, str, int, frozenset[str] | None]] = {
    "sns_throttled": (SNS, frozenset({"PublishBatch"}), "Throttling", 400, None),
    "sns_5xx": (SNS, frozenset({"PublishBatch"}), "InternalError", 500, None),
    "eventbridge_throttled": (EVENTBRIDGE, frozenset({"PutEvents"}), "ThrottlingException", 400, None),
    "eventbridge_5xx": (EVENTBRIDGE, frozenset({"PutEvents"}), "InternalException", 500, None),
    "sns_authorization": (SNS, frozenset({"PublishBatch"}), "AuthorizationError", 403, None),
    "poison_queue_down": (
        "sqs",
        frozenset({"SendMessage"}),
        "ServiceUnavailable",
        503,
        frozenset({PUBLISHER, SWEEPER}),
    ),
    "dynamodb_outage": ("dynamodb", None, "InternalServerError", 500, None),
    # The publishing paths' row updates: settles (DeleteItem), FAILED marks, parks, claims, backoffs and
    # lease releases (UpdateItem).
    "dynamodb_row_updates": (
        "dynamodb",
        frozenset({"DeleteItem", "UpdateItem"}),
        "InternalServerError",
        500,
        frozenset({PUBLISHER, SWEEPER}),
    ),
    # The reads of stored envelopes (GetObject: read whole; HeadObject: checked to exist) by every function
    # that reads them: the publisher, the sweeper, the consumers. Arming one also has another writer commit
    # an aggregate of stored envelopes (`STORED_SIZES`), so there is something to read while it lasts.
    "s3_5xx": (S3, S3_READS, "InternalError", 500, None),
    "s3_throttled": (S3, S3_READS, "SlowDown", 503, None),
}
S3_FAULTS = frozenset({"s3_5xx", "s3_throttled"})
OUTAGES: dict[str, tuple[str, str, str, int]] = {
    # kind -> (destination, operation, code, status): every call of every function refused, for
    # `OUTAGE_SECONDS`, far longer than the engine's retries and the mapping's.
    "sns_outage": (SNS, "PublishBatch", "InternalError", 500),
    "eventbridge_outage": (EVENTBRIDGE, "PutEvents", "InternalException", 500),
}
OUTAGE_SECONDS = (30.0, 60.0, 120.0, 300.0)
FAULT_SECONDS = (2.0, 6.0, 20.0, 45.0, 120.0)
ENTRY_FAULTS: dict[str, tuple[str, str, bool]] = {
    "sns_entries": (SNS, "InternalError", False),
    "eventbridge_entries": (EVENTBRIDGE, "ThrottlingException", False),
}
CRASHES: dict[str, tuple[str, str, str, str, bool]] = {
    # kind -> (function, service, operation, when, timeout)
    "publisher_crash": (PUBLISHER, SNS, "PublishBatch", "after", False),
    "publisher_timeout": (PUBLISHER, EVENTBRIDGE, "PutEvents", "after", True),
    "sweeper_crash": (SWEEPER, SNS, "PublishBatch", "before", False),
    "consumer_crash": (SUMMARY, "dynamodb", "TransactWriteItems", "after", False),
}
WRITER_FAULTS = frozenset({"foreign_poison", "foreign_unstreamed", "large_payloads", "s3_missing"})
OTHER_FAULTS = (
    "stream_gap",
    "foreign_poison",
    "foreign_unstreamed",
    "large_payloads",
    "s3_missing",
    "duplicate_deliveries",
    "reordered_deliveries",
)
FAULT_KINDS = (*CALL_FAULTS, *ENTRY_FAULTS, *CRASHES, *OTHER_FAULTS, "both_5xx")
"""The kinds whose steps last `Step.seconds` from the short list (the outages have their own)."""
ALL_KINDS = (*FAULT_KINDS, *OUTAGES)
UNSTREAMED_ROWS = 3
"""Rows of one foreign aggregate written by a `foreign_unstreamed` step."""
assert set(ALL_KINDS) == set(EFFECTIVE_UNITS), "tests.reliability.kinds lists every fault kind"


@dataclass(frozen=True)
class Step:
    action: str
    """place, confirm, cancel, fault, wait."""
    order: int = 0
    """Which order (place: the customer; confirm, cancel: an index into the orders placed so far)."""
    kind: str = ""
    seconds: float = 0.0
    nth: int = 1
    """A crash point's matching call; an entry fault's spacing; the deliveries made twice or held back
    (times 2); which of a `foreign_unstreamed` aggregate's records are dropped (1: all, 2: its first, 3: its
    second)."""
    stale: bool = False
    redrive: bool = False


@dataclass
class ScheduleResult:
    seed: int
    steps: int
    commands: int
    commands_failed: int
    events: int
    armed: Counter[str]
    """The schedule's fault steps, by kind (armed: whether or not anything met them)."""
    effective: Counter[str]
    """What took effect, by kind (`effective_counts`), and the operator's actions."""
    duplicates: Counter[str]
    clear_to_drained_s: float
    drained: bool
    lost: int
    invented: int
    out_of_order: int
    duplicate_effects: int
    unexplained_duplicates: int = 0
    violations: list[str] = field(default_factory=list)
    outages: list[dict[str, Any]] = field(default_factory=list)
    """What each single-destination outage cost the destination that stayed up (`outage_figures`)."""

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["armed"] = dict(self.armed)
        document["effective"] = dict(self.effective)
        document["duplicates"] = dict(self.duplicates)
        return document


def steps() -> st.SearchStrategy[Step]:
    command = st.one_of(
        st.builds(Step, action=st.just("place"), order=st.integers(0, 5)),
        st.builds(
            Step, action=st.sampled_from(["confirm", "cancel"]), order=st.integers(0, 7), stale=st.booleans()
        ),
    )
    fault = st.sampled_from(ALL_KINDS).flatmap(
        lambda kind: st.builds(
            Step,
            action=st.just("fault"),
            kind=st.just(kind),
            seconds=st.sampled_from(OUTAGE_SECONDS if kind in OUTAGES else FAULT_SECONDS),
            nth=st.integers(1, 3),
            redrive=st.booleans(),
        )
    )
    wait = st.builds(Step, action=st.just("wait"), seconds=st.sampled_from([0.5, 2.0, 10.0, 30.0]))
    return st.one_of(command, command, fault, wait)


def schedules() -> st.SearchStrategy[tuple[int, list[Step]]]:
    """(seed for the system's own choices, the steps): at least one command and one fault."""
    return st.tuples(
        st.integers(0, 2**31),
        st.lists(steps(), min_size=3, max_size=14).filter(
            lambda s: any(step.action == "place" for step in s) and any(step.action == "fault" for step in s)
        ),
    )


def arm(system: System, step: Step) -> None:
    """Arm one fault (it ends by itself after `step.seconds`, or at the drain; an outage only after its
    whole length)."""
    wire = system.wire
    until = system.clock.seconds() + step.seconds
    kind = step.kind
    if kind in CALL_FAULTS:
        service, operations, code, status, functions = CALL_FAULTS[kind]
        if kind == "dynamodb_outage":
            functions = frozenset({PUBLISHER, SWEEPER, SUMMARY, LEDGER, API})
        wire.call_faults.append(CallFault(kind, service, operations, code, status, functions, until=until))
        if kind in S3_FAULTS:
            system.write_stored_rows(f"{kind}-{system.fault_log[kind]}", STORED_SIZES[step.nth])
    elif kind in OUTAGES:
        destination, operation, code, status = OUTAGES[kind]
        fault = CallFault(kind, destination, frozenset({operation}), code, status, until=until)
        wire.call_faults.append(fault)
        system.outages.append(Outage(kind, destination, system.clock.seconds(), until))
    elif kind == "both_5xx":
        for service, operation, code in (
            (SNS, "PublishBatch", "InternalError"),
            (EVENTBRIDGE, "PutEvents", "InternalException"),
        ):
            wire.call_faults.append(CallFault(kind, service, frozenset({operation}), code, 500, until=until))
    elif kind in ENTRY_FAULTS:
        service, code, sender = ENTRY_FAULTS[kind]
        wire.entry_faults.append(EntryFault(kind, service, code, sender, every=step.nth, until=until))
    elif kind in CRASHES:
        function, service, operation, when, timeout = CRASHES[kind]
        on_fire = (lambda: system.clock.advance(60)) if timeout else None
        wire.crash_points.append(
            CrashPoint(function, service, operation, when, step.nth, timeout, on_fire=on_fire, kind=kind)
        )
    elif kind == "stream_gap":
        system.stream_stalled = True
        system.pending_trim_at = until
    elif kind in WRITER_FAULTS:
        _arm_writer(system, step)
    elif kind == "duplicate_deliveries":
        system.duplicate_deliveries += 2 * step.nth
    elif kind == "reordered_deliveries":
        system.reorder_deliveries += 2 * step.nth
    system.fault_log[kind] += 1


def _arm_writer(system: System, step: Step) -> None:
    """The faults that are rows another writer commits."""
    kind = step.kind
    if kind == "foreign_poison":
        ids = system.write_foreign_rows(f"inv-{len(system.injected_poison)}", poison_first=True)
        system.operator_plan[ids[0]] = "redrive" if step.redrive else "skip"
    elif kind == "foreign_unstreamed":
        dropped = {1: range(1, UNSTREAMED_ROWS + 1), 2: range(1, 2), 3: range(2, 3)}[step.nth]
        system.write_foreign_rows(
            f"unstreamed-{len(system.unstreamed)}",
            poison_first=False,
            count=UNSTREAMED_ROWS,
            discard=dropped.__contains__,
        )
    elif kind == "large_payloads":
        ids = system.write_stored_rows(f"large-{system.fault_log[kind]}", STORED_SIZES[step.nth])
        system.large_payloads.update(ids)
    elif kind == "s3_missing":
        # Its seq 1's object gone: FAILED (PayloadMissing), never published; seq 2 waits behind it until the
        # operator restores the object and redrives, or skips.
        ids = system.write_stored_rows(
            f"missing-{system.fault_log[kind]}", (300 * KB, 100 * KB), missing=lambda seq: seq == 1
        )
        system.operator_plan[ids[0]] = "restore" if step.redrive else "skip"


def effective_counts(system: System) -> Counter[str]:
    """Each fault kind counted where it took effect (0 when it was armed for nothing), and the operator's
    actions."""
    effective: Counter[str] = Counter(dict.fromkeys(ALL_KINDS, 0))
    for kind in (*CALL_FAULTS, *OUTAGES, "both_5xx", *ENTRY_FAULTS, *CRASHES):
        effective[kind] = system.wire.injected[kind]
    effective["stream_gap"] = system.streams.trimmed
    effective["foreign_poison"] = len(
        set(system.wire.poison_sent) & (system.injected_poison - set(system.missing_objects))
    )
    effective["foreign_unstreamed"] = len(
        {p.event_id for p in system.wire.published if p.function == SWEEPER} & system.unstreamed
    )
    effective["large_payloads"] = sum(
        count for event_id, count in system.wire.claims.items() if event_id in system.large_payloads
    )
    effective["s3_missing"] = len(set(system.wire.poison_sent) & set(system.missing_objects))
    effective["duplicate_deliveries"] = sum(q.duplicates_sent for q in system.queues.values())
    effective["reordered_deliveries"] = sum(q.reordered for q in system.queues.values())
    effective.update(system.operator_actions)
    return effective


def _tick_system_faults(system: System) -> None:
    if (
        system.stream_stalled
        and system.pending_trim_at is not None
        and system.clock.seconds() >= system.pending_trim_at
    ):
        system.stream_stalled = False
        system.pending_trim_at = None
        system.trim_stream()


def play(system: System, plan: list[Step]) -> None:
    placed: list[str] = []
    for number, step in enumerate(plan):
        key = f"request-{number}"
        if step.action == "place":
            outcome = system.place(f"customer-{step.order}", key=key)
            if outcome.ok and outcome.order_id:
                placed.append(outcome.order_id)
            system.retry_later.append((step, key, None, outcome))
        elif step.action in {"confirm", "cancel"} and placed:
            order_id = placed[step.order % len(placed)]
            command = Command.CONFIRM if step.action == "confirm" else Command.CANCEL
            expected = 1 if step.stale else None
            outcome = system.transition(command, order_id, key=key, expected_version=expected)
            system.retry_later.append((step, key, order_id, outcome))
        elif step.action == "fault":
            arm(system, step)
        elif step.action == "wait":
            run_for(system, step.seconds)
        run_for(system, 0.2)


def run_for(system: System, seconds: float) -> None:
    end = system.clock.seconds() + seconds
    while system.clock.seconds() < end - 0.001:
        _tick_system_faults(system)
        system.run_for(min(1.0, end - system.clock.seconds()))


def clear_and_drain(system: System) -> tuple[float, bool]:
    """A single-destination outage runs its whole length; then every fault is cleared; clients retry what
    failed (same idempotency key); the operator deals with the injected poison; the system runs until nothing
    is left to do. Returns (virtual seconds from the faults cleared, drained)."""
    wire = system.wire
    outages_end = max((outage.until for outage in system.outages), default=0.0)
    if outages_end > system.clock.seconds():
        run_for(system, outages_end - system.clock.seconds())
    wire.clear_faults()
    for point in wire.crash_points:
        if not point.fired:
            point.until = system.clock.seconds() + CRASH_ARMED_INTO_DRAIN_S
    if system.stream_stalled:
        system.stream_stalled = False
        system.trim_stream()
    system.pending_trim_at = None
    cleared = system.clock.seconds()
    for step, key, order_id, outcome in system.retry_later:
        if outcome.ok or not outcome.error or not outcome.error.startswith(RETRIED):
            continue
        if step.action == "place":
            system.place(f"customer-{step.order}", key=key)
        elif order_id is not None:
            command = Command.CONFIRM if step.action == "confirm" else Command.CANCEL
            system.transition(command, order_id, key=key, expected_version=1 if step.stale else None)
    deadline = cleared + DRAIN_LIMIT_S
    while system.clock.seconds() < deadline:
        if system.run_until(
            system.settled, deadline=min(deadline, system.clock.seconds() + OPERATOR_ROUND_S)
        ):
            return system.clock.seconds() - cleared, True
        operate(system)
    return system.clock.seconds() - cleared, system.settled()


def operate(system: System) -> None:
    """The operator's runbook for the injected poison: fix the payload and redrive it, or skip it."""
    for row in system.failed_rows():
        event_id = row["event_id"]["S"]
        plan = system.operator_plan.pop(event_id, None)
        if event_id in system.injected_poison and "last_error" in row:
            system.failed_reasons.setdefault(event_id, row["last_error"]["S"])
        if plan == "redrive":
            system.operator_fix_and_redrive(row)
            system.operator_actions["operator_redrive"] += 1
        elif plan == "restore":
            system.operator_restore_and_redrive(row)
            system.operator_actions["operator_redrive"] += 1
        elif plan == "skip":
            system.operator_skip(row)
            system.operator_actions["operator_skip"] += 1


def run_schedule(seed: int, plan: list[Step]) -> tuple[ScheduleResult, Verdict]:
    with running_system(seed=seed) as system:
        play(system, plan)
        seconds, drained = clear_and_drain(system)
        verdict = system.verdict()
        result = ScheduleResult(
            seed=seed,
            steps=len(plan),
            commands=len(system.commands),
            commands_failed=sum(1 for c in system.commands if not c.ok),
            events=len(system.committed),
            armed=Counter(system.fault_log),
            effective=effective_counts(system),
            duplicates=verdict.duplicates,
            clear_to_drained_s=round(seconds, 1),
            drained=drained,
            lost=len(verdict.lost),
            invented=len(verdict.invented),
            out_of_order=len(verdict.out_of_order),
            duplicate_effects=len(verdict.duplicate_effects),
            unexplained_duplicates=len(verdict.unexplained),
            violations=verdict.violations()[:20],
            outages=outage_figures(system, verdict),
        )
        return result, verdict


def outage_figures(system: System, verdict: Verdict) -> list[dict[str, Any]]:
    """For each single-destination outage, what the destination that stayed up received: the events it was
    affected by (those the downed destination refused during it, and those the healthy one first got during
    it), and the extra copies of them the healthy destination got (over the whole run), by cause."""
    figures = []
    for outage in system.outages:
        healthy = EVENTBRIDGE if outage.destination == SNS else SNS
        firsts: dict[str, Publication] = {}
        for publication in system.wire.published:
            if publication.destination == healthy:
                firsts.setdefault(publication.event_id, publication)
        # Whichever fault answered (another one on the same destination may have matched first), the
        # destination refused these while it was down.
        refused = {
            refusal.event_id
            for refusal in system.wire.refused
            if refusal.destination == outage.destination and outage.start <= refusal.at < outage.until
        }
        during = {event_id for event_id, first in firsts.items() if outage.start <= first.at < outage.until}
        affected = (refused | during) & set(firsts)
        copies = [c for c in verdict.copies if c.destination == healthy and c.event_id in affected]
        per_event = Counter(copy.event_id for copy in copies)
        figures.append(
            {
                "kind": outage.kind,
                "destination": outage.destination,
                "healthy": healthy,
                "seconds": round(outage.until - outage.start, 1),
                "took_effect": bool(refused),
                "events": len(affected),
                "extra_copies": len(copies),
                "most_per_event": max(per_event.values(), default=0),
                "causes": dict(Counter(copy.cause for copy in copies)),
            }
        )
    return figures


def describe(seed: int, plan: list[Step]) -> str:
    """The schedule as one line of JSON (what a regression test is named after and replays)."""
    return json.dumps({"seed": seed, "steps": [asdict(step) for step in plan]})

"""What the named tests share: a system with orders placed through the service, drained, and the promises
asserted."""

from __future__ import annotations

from orders.model import Command
from tests.reliability.schedules import clear_and_drain
from tests.reliability.system import System


def place_orders(system: System, count: int, *, transitions: bool = True, prefix: str = "") -> list[str]:
    """`count` orders placed, then (with `transitions`) each confirmed and then cancelled: 3 events each."""
    placed = []
    for number in range(count):
        outcome = system.place(f"customer-{prefix}{number}", key=f"place-{prefix}{number}")
        assert outcome.ok, outcome
        assert outcome.order_id
        placed.append(outcome.order_id)
    if transitions:
        for command in (Command.CONFIRM, Command.CANCEL):
            for order_id in placed:
                assert system.transition(command, order_id, key=f"{command.value}-{order_id}").ok
    return placed


def drain_and_check(system: System) -> None:
    """Faults cleared, the system drained; every promise held."""
    _, drained = clear_and_drain(system)
    verdict = system.verdict()
    assert drained, "the system did not drain"
    assert verdict.ok, "\n".join(verdict.violations())


def statuses(system: System) -> dict[str, int]:
    """The committed events, counted by their row's status; "OUT" for those whose row left the table (settled,
    or skipped by an operator)."""
    stored = {row["event_id"]["S"]: row.get("status", {}).get("S", "") for row in system.outbox_rows()}
    counts: dict[str, int] = {}
    for event_id in system.committed:
        status = stored.get(event_id, "OUT")
        counts[status] = counts.get(status, 0) + 1
    return counts

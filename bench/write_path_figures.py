"""DynamoDB calls and WCU per order command, per event lifecycle, and the outbox row's size, on moto.

The commands run through the sample's `OrderService` on its `DynamoDBOrderRepository`, exactly as the Orders
API Lambda wires them (orders_api.handler.get_service), with a metered DynamoDB client: `commands` commands
of each kind, each on an order of its own; the orders a confirm or a cancel needs are placed beforehand
through an unmetered repository (and published, so the gate finds their predecessors out).

Each command runs on the paths a client can take: without and with an Idempotency-Key; confirm and cancel
also with `If-Match` (the ETag `GET` returned: the order's version, here 1), which makes them one
TransactWriteItems without reading the order; and the replay of a keyed request (the same request again,
answered from the key's record: it writes nothing, so it has no lifecycle or row figure).

An event's lifecycle: the command's writes (the order, the idempotency record when the request has a key, the
outbox row), then the publisher's settle, a conditional DeleteItem of the row, measured as our publisher takes
the batch of those rows. Nothing else is written on that path: no index entry, no mark, no TTL delete (the
row is gone once settled). The outbox row's own life is its share of the transaction plus its settle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import targets
from bench.capacity import item_size
from bench.figures import Figure, Group, per
from bench.meters import Snapshot
from bench.publish_figures import ROW_WRITES, SETTLE_CALLS
from bench.world import BenchWorld, bench_world
from orders.commands import PlaceOrder, TransitionOrder
from orders.model import Command
from orders.repository import DynamoDBOrderRepository
from orders.service import CommandResult, OrderService

COMMANDS = 10
ETAG_AT_PLACE = '"1"'
"""The ETag of a placed order (its version, quoted): what a client that read it sends as If-Match."""
COMMAND = "python -m bench --only write_path"
HOOKS = "botocore before-call hooks on the repository's DynamoDB client (moto in process)"
EVENT_TYPES = {
    Command.PLACE: "OrderPlaced",
    Command.CONFIRM: "OrderConfirmed",
    Command.CANCEL: "OrderCancelled",
}
PLACE_BODY: dict[str, Any] = {
    "customer_id": "customer-1",
    "currency": "EUR",
    "items": [{"sku": "SKU-1", "quantity": 2, "unit_price": "9.99"}],
}


@dataclass(frozen=True)
class CommandRun:
    command: Command
    keyed: bool
    commands: int
    written: Snapshot
    """The commands themselves."""
    settled: Snapshot
    """Our publisher taking the batch of the rows they wrote, and settling them."""
    row_bytes: int
    """The largest outbox row as written (PENDING): the only image it has (a settle deletes it)."""
    if_match: bool = False
    """Confirm or cancel sent with `If-Match` (the placed order's ETag)."""
    replay: bool = False
    """What was measured is the keyed request's replay (the request itself ran before, unmeasured)."""
    outbox_table: str = ""
    """The outbox table's name: the outbox row's share of the command's writes is this table's."""


def command_run(
    command: Command, *, keyed: bool, commands: int = COMMANDS, if_match: bool = False, replay: bool = False
) -> CommandRun:
    if replay and not keyed:
        raise ValueError("only a keyed request has a replay")
    if if_match and command is Command.PLACE:
        raise ValueError("If-Match is for confirm and cancel")
    with bench_world() as world:
        metered = _service(world, world.clients["dynamodb"])
        publisher = world.publisher()
        orders: list[str] = []
        if command is not Command.PLACE:
            unmetered = _service(world, world.world.dynamodb)
            orders = [
                unmetered.place(PlaceOrder.from_json(PLACE_BODY)).order.order_id for _ in range(commands)
            ]
            world.measure(lambda: world.publish(publisher, world.new_batch()))
        steps = [
            _step(
                metered,
                command,
                orders[i] if orders else None,
                f"bench-{i}" if keyed else None,
                if_match=ETAG_AT_PLACE if if_match else None,
            )
            for i in range(commands)
        ]
        if replay:
            world.measure(lambda: [step() for step in steps])
        results, written = world.measure(lambda: [step() for step in steps])
        if replay:
            assert all(result.replayed for result in results)  # noqa: S101 - a figure of something else
        keys = [_row_key(result) for result in results]
        row_bytes = max(item_size(world.item(key)) for key in keys)
        _, settled = world.measure(lambda: world.publish(publisher, world.new_batch()))
        left = [key for key in keys if world.item(key) is not None]
        if left:
            raise RuntimeError(f"{len(left)} rows were not settled: a figure of something else")
        return CommandRun(
            command, keyed, commands, written, settled, row_bytes, if_match, replay, world.outbox_table
        )


def runs(commands: int = COMMANDS) -> list[CommandRun]:
    """Every path measured: each command without and with a key; confirm and cancel with If-Match too; and
    the replay of every keyed request."""
    paths = [
        (command, keyed, if_match)
        for command in Command
        for if_match in ((False,) if command is Command.PLACE else (False, True))
        for keyed in (False, True)
    ]
    first = [
        command_run(command, keyed=keyed, commands=commands, if_match=if_match)
        for command, keyed, if_match in paths
    ]
    replays = [
        command_run(command, keyed=True, commands=commands, if_match=if_match, replay=True)
        for command, keyed, if_match in paths
        if keyed
    ]
    return first + replays


def measure(commands: int = COMMANDS) -> list[Group]:
    measured = runs(commands)
    first = [run for run in measured if not run.replay]
    per_command = [figure for run in measured for figure in _command_figures(run)]
    lifecycle = [lifecycle_figure(run) for run in first]
    outbox_row = [outbox_row_figure(run) for run in first if not run.keyed]
    rows = [_row_figure(run) for run in first if not run.keyed and not run.if_match]
    return [
        Group(
            "write_path",
            f"Write path: DynamoDB per order command ({commands} commands each)",
            "-",
            per_command,
            notes=[
                "Through orders.service.OrderService and orders.repository.DynamoDBOrderRepository, as the "
                "Orders API wires them. WCU: every table and index the command wrote. The naive publisher "
                "changes nothing here: no baseline.",
                f"If-Match: the placed order's ETag ({ETAG_AT_PLACE}); the order is then updated in the "
                "transaction without being read. A replay is the keyed request sent again: answered from the "
                "key's record, nothing written; its calls are the replay path's, outside the 1-call target.",
            ],
            command=COMMAND,
        ),
        Group(
            "lifecycle",
            "WCU per event lifecycle (the command's transaction, then the settle)",
            "-",
            outbox_row + lifecycle,
            notes=[
                "Outbox row: its Put in the command's transaction (2 WCU: a transaction bills twice) plus "
                "our publisher's settle (a conditional DeleteItem, 1 WCU); issue 29's target is 3.",
                "Lifecycle: every write of the command (the order, the idempotency record with a key, the "
                "outbox row) plus the settle. Issue 29's target is 5 without an Idempotency-Key; with one, "
                "the key's record is a third transactional Put (2 more), read against issue 14's 7. Nothing "
                "else is written on the healthy path (`settle.other_writes.first`, and each figure's "
                "detail).",
            ],
            command=COMMAND,
        ),
        Group(
            "row_size",
            "Outbox row size for the sample events (DynamoDB item size rules)",
            "-",
            rows,
            notes=["The row as written (PENDING), its only image: a settle deletes it. 1 WCU covers 1 KB."],
            command=COMMAND,
        ),
    ]


def _command_figures(run: CommandRun) -> list[Figure]:
    name, label = _names(run)
    usage = run.written.capacity()
    # The target is the common path's: a command without If-Match reads the order first by design (2 calls,
    # the path kept for clients that send no version), and a replay may read the key's record.
    common = not run.replay and (run.command is Command.PLACE or run.if_match)
    return [
        Figure(
            f"write.calls.{name}",
            f"DynamoDB calls, {label}",
            "calls/command",
            per(run.written.count("dynamodb"), run.commands),
            floor=None if run.replay else targets.COMMAND_CALLS_FLOOR,
            target=targets.COMMAND_CALLS_TARGET if common else None,
            source=HOOKS,
            detail={"calls": run.written.calls_detail()},
        ),
        Figure(
            f"write.wcu.{name}",
            f"WCU, {label}",
            "WCU/command",
            per(usage.wcu, run.commands),
            source=usage.source(),
            detail={
                "rcu_per_command": per(usage.rcu, run.commands),
                "by_table": {
                    table: {
                        "table_wcu": per(one.table_wcu, run.commands),
                        "index_wcu": per(one.index_wcu, run.commands),
                    }
                    for table, one in _by_table(run.written).items()
                },
            },
        ),
    ]


def lifecycle_figure(run: CommandRun) -> Figure:
    name, label = _names(run)
    written = run.written.capacity()
    settled = run.settled.capacity(operations=SETTLE_CALLS)
    other = run.settled.capacity(operations=[op for op in ROW_WRITES if op not in SETTLE_CALLS])
    return Figure(
        f"lifecycle.wcu.{name}",
        label,
        "WCU/event",
        per(written.wcu + settled.wcu + other.wcu, run.commands),
        target=targets.LIFECYCLE_WCU_KEYED_TARGET if run.keyed else targets.LIFECYCLE_WCU_TARGET,
        source=f"command: {written.source()}; settle: {settled.source()}",
        detail={
            "command_wcu": per(written.wcu, run.commands),
            "command_index_wcu": per(written.index_wcu, run.commands),
            "settle_wcu": per(settled.wcu, run.commands),
            "other_publisher_write_wcu": per(other.wcu, run.commands),
            "publisher_calls": run.settled.calls_detail(),
        },
    )


def outbox_row_figure(run: CommandRun) -> Figure:
    name, label = _names(run)
    row = run.written.capacity(tables=[run.outbox_table])
    settled = run.settled.capacity(operations=SETTLE_CALLS)
    other = run.settled.capacity(operations=[op for op in ROW_WRITES if op not in SETTLE_CALLS])
    return Figure(
        f"lifecycle.outbox_row.{name}",
        f"outbox row alone, {label}",
        "WCU/event",
        per(row.wcu + settled.wcu + other.wcu, run.commands),
        target=targets.OUTBOX_ROW_WRU_TARGET,
        source=f"command: {row.source()}; settle: {settled.source()}",
        detail={
            "row_in_transaction_wcu": per(row.wcu, run.commands),
            "settle_wcu": per(settled.wcu, run.commands),
            "other_publisher_write_wcu": per(other.wcu, run.commands),
        },
    )


def _row_figure(run: CommandRun) -> Figure:
    event_type = EVENT_TYPES[run.command]
    return Figure(
        f"row.bytes.{event_type}",
        f"{event_type} row",
        "bytes",
        float(run.row_bytes),
        target=float(targets.ROW_BYTES_TARGET),
        decimals=0,
        source="DynamoDB's item size rules on the stored row (bench.capacity.item_size)",
    )


def _names(run: CommandRun) -> tuple[str, str]:
    key = "key" if run.keyed else "no_key"
    name = f"{run.command.value}.if_match.{key}" if run.if_match else f"{run.command.value}.{key}"
    precondition = ", If-Match" if run.if_match else ""
    label = f"{run.command.value}{precondition}, {'with' if run.keyed else 'no'} Idempotency-Key"
    if run.replay:
        return f"{name}.replay", f"{label}, replayed"
    return name, label


def _service(world: BenchWorld, client: Any) -> OrderService:
    repository = DynamoDBOrderRepository(
        client, orders_table=world.orders_table, outbox_table=world.outbox_table
    )
    return OrderService(repository, clock=world.world.clock)


def _step(
    service: OrderService, command: Command, order_id: str | None, key: str | None, *, if_match: str | None
) -> Callable[[], CommandResult]:
    if command is Command.PLACE:
        return lambda: service.place(
            PlaceOrder.from_json(PLACE_BODY), idempotency_key=key, correlation_id="bench"
        )
    assert order_id is not None  # noqa: S101 - placed beforehand
    request = TransitionOrder.from_json(command, order_id, None, if_match=if_match)
    return lambda: service.transition(request, idempotency_key=key, correlation_id="bench")


def _row_key(result: CommandResult) -> dict[str, Any]:
    return {
        "aggregate_key": {"S": f"Order#{result.order.order_id}"},
        "seq": {"N": str(result.order.last_seq)},
    }


def _by_table(snapshot: Snapshot) -> dict[str, Any]:
    tables = sorted({table for table, _ in snapshot.usage})
    return {table: snapshot.capacity(tables=[table]) for table in tables}

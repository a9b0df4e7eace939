"""DynamoDB capacity of every call, by DynamoDB's sizing rules, with moto's ReturnConsumedCapacity beside it.

Each counted DynamoDB call asks for `ReturnConsumedCapacity=INDEXES` (added at `before-parameter-build`) and
moto's answer is kept. But moto answers with per-call constants whatever the item (PutItem and Query 1.0,
GetItem 0.5 even when strongly consistent, UpdateItem always 0.5, BatchGetItem 1 per key, TransactWriteItems
nothing, index writes never), so each call's capacity is also computed from the rules below, applied to the
very items it touched: their images before and after the call, read beside the code under test so that
nothing counts it (`Peek`: bench.world reads moto's backend directly). A figure uses the rules and says
whether moto agrees (`source`).

DynamoDB's rules (developer guide: "Item sizes and formats", "read/write capacity modes", "Provisioned
throughput considerations for global secondary indexes"):
- item size: attribute names plus values; strings UTF-8 bytes, numbers about 1 byte per 2 significant digits
  plus 1, binary bytes, booleans and nulls 1 byte, lists and maps 3 bytes plus 1 byte per element plus the
  elements (and their names), sets the sum of their elements;
- writes: 1 WCU per KB, rounded up, of the larger of the item before and after; a DeleteItem the size of the
  item it deletes (a missing item the minimum, 1); a failed condition still costs the existing item (at least
  1); a transaction's writes cost twice;
- reads: 1 RCU per 4 KB strongly consistent, half that eventually consistent; GetItem and each BatchGetItem
  item rounded up on their own, a missing item the minimum; a Query or a Scan page rounds the sum of what it
  read, and a Scan reads whole items whatever its ProjectionExpression (DynamoDB charges what it evaluated,
  not what it returned);
- global secondary indexes: one write of the entry when an item gains the index keys, one when it loses them,
  two (delete and put) when an index key changes, one when only projected attributes change; an entry is its
  projected attributes, keys included, 1 WCU per KB. Index writes are not doubled in a transaction (AWS does
  not say; the index is maintained outside the transaction): an assumption, named in the doc;
- TTL deletes are free and happen outside the API: never counted here.

A cancelled transaction's charge is not documented either: it is counted as if it had committed (each action
at its transactional price), an upper bound, and reported apart (`cancelled_transaction_wcu`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any, Protocol

Item = Mapping[str, Any]
"""An item in DynamoDB's low-level JSON (boto3 client format)."""

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


def value_size(value: Mapping[str, Any]) -> int:
    (kind, content), *_ = value.items()
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_size(element) for name, element in content.items())
    if kind in ("SS", "NS", "BS"):
        return sum(_scalar_size(kind[0], element) for element in content)
    return _scalar_size(kind, content)


def _scalar_size(kind: str, content: Any) -> int:
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "N":
        return number_size(str(content))
    if kind in ("S", "B"):
        # boto3 hands Binary over as bytes; a string here is its text (or base64) form
        return len(content) if isinstance(content, bytes | bytearray) else len(str(content).encode())
    raise ValueError(f"unknown DynamoDB type {kind}")


def number_size(text: str) -> int:
    digits = Decimal(text).as_tuple().digits
    significant = "".join(map(str, digits)).strip("0") or "0"
    return math.ceil(len(significant) / 2) + 1


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool) -> float:
    return max(1, math.ceil(size / READ_UNIT_BYTES)) * (1.0 if consistent else 0.5)


class Peek(Protocol):
    """Reads items as stored, beside the code under test: nothing it does is counted."""

    def item(self, table: str, key: Mapping[str, Any]) -> Item | None: ...

    def describe(self, table: str) -> Mapping[str, Any]:
        """The table's description, as DescribeTable's `Table`."""
        ...


@dataclass(frozen=True)
class IndexSchema:
    name: str
    keys: tuple[str, ...]
    projection: str
    non_key: tuple[str, ...] = ()

    def entry(self, item: Item | None, table_keys: tuple[str, ...]) -> dict[str, Any] | None:
        """The item's entry in this index, or None when it lacks the index's keys (a sparse index)."""
        if not item or any(key not in item for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = set(table_keys) | set(self.keys)
        if self.projection == "INCLUDE":
            names |= set(self.non_key)
        return {name: value for name, value in item.items() if name in names}


@dataclass(frozen=True)
class TableSchema:
    name: str
    keys: tuple[str, ...]
    indexes: tuple[IndexSchema, ...]

    def key_of(self, item: Item) -> dict[str, Any]:
        return {name: item[name] for name in self.keys}

    def index(self, name: str) -> IndexSchema:
        return next(index for index in self.indexes if index.name == name)

    @classmethod
    def described(cls, table: Mapping[str, Any]) -> TableSchema:
        indexes = tuple(
            IndexSchema(
                index["IndexName"],
                tuple(key["AttributeName"] for key in index["KeySchema"]),
                index["Projection"]["ProjectionType"],
                tuple(index["Projection"].get("NonKeyAttributes", ())),
            )
            for index in [*table.get("GlobalSecondaryIndexes", []), *table.get("LocalSecondaryIndexes", [])]
        )
        return cls(table["TableName"], tuple(key["AttributeName"] for key in table["KeySchema"]), indexes)


@dataclass
class Usage:
    """What the calls of one operation on one table consumed."""

    calls: int = 0
    table_wcu: float = 0.0
    index_wcu: float = 0.0
    rcu: float = 0.0
    cancelled_transaction_wcu: float = 0.0
    """Part of `table_wcu` that went to transactions DynamoDB cancelled (counted as if committed)."""
    moto_units: float = 0.0
    moto_calls: int = 0
    """Calls for which moto returned a ConsumedCapacity at all."""
    operations: set[str] = field(default_factory=set)

    @property
    def wcu(self) -> float:
        return self.table_wcu + self.index_wcu

    def add(self, other: Usage) -> None:
        for name in ("calls", "table_wcu", "index_wcu", "rcu", "cancelled_transaction_wcu", "moto_units"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.moto_calls += other.moto_calls
        self.operations |= other.operations

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "operations"}
        return data | {"operations": sorted(self.operations)}

    def source(self) -> str:
        """Where the figure's capacity comes from, and what moto said."""
        modelled = self.wcu + self.rcu
        rules = "DynamoDB's sizing rules on the items touched"
        if self.calls and self.moto_calls == self.calls and math.isclose(self.moto_units, modelled):
            return f"ReturnConsumedCapacity (moto), equal to {rules}"
        if self.moto_calls:
            return f"{rules}; moto reported {self.moto_units:g} (its per-call constants)"
        return f"{rules}; moto returned no ConsumedCapacity"


@dataclass
class _Write:
    table: str
    key: dict[str, Any]
    action: str
    """Put, Update, Delete or ConditionCheck."""
    intended: Item | None
    before: Item | None
    transactional: bool


@dataclass
class _Read:
    table: str
    keys: list[dict[str, Any]]
    consistent: bool


class CapacityMeter:
    def __init__(self, peek: Peek) -> None:
        self._peek = peek
        self._schemas: dict[str, TableSchema] = {}
        self.usage: dict[tuple[str, str], Usage] = {}
        self.unmodelled: set[str] = set()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)
        return client

    def reset(self) -> None:
        self.usage.clear()
        self.unmodelled.clear()

    def schema(self, table: str) -> TableSchema:
        if table not in self._schemas:
            self._schemas[table] = TableSchema.described(self._peek.describe(table))
        return self._schemas[table]

    def item(self, table: str, key: Mapping[str, Any]) -> Item | None:
        return self._peek.item(table, key)

    # -- hooks ---------------------------------------------------------------------------------

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "INDEXES")
        operation = model.name
        context["bench_table"] = params.get("TableName")
        if operation in _WRITES:
            context["bench_writes"] = self._planned_writes(operation, params)
        elif operation in ("GetItem", "BatchGetItem"):
            context["bench_reads"] = self._planned_reads(operation, params)
        elif operation in ("Query", "Scan"):
            context["bench_query"] = dict(params)
            if operation == "Scan" and "FilterExpression" in params:
                # What a filtered Scan evaluated is not what it returned: the rules below could not size it.
                self.unmodelled.add("Scan with a FilterExpression")
        else:
            self.unmodelled.add(operation)

    def _after(
        self, http_response: Any, parsed: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        failed = http_response.status_code >= 300
        operation = model.name
        touched: dict[str, Usage] = {}
        for write in context.get("bench_writes", []):
            self._charge_write(write, failed, touched.setdefault(write.table, Usage()))
        for read in context.get("bench_reads", []):
            usage = touched.setdefault(read.table, Usage())
            for key in read.keys:
                usage.rcu += read_units(item_size(self.item(read.table, key)), consistent=read.consistent)
        if operation in ("Query", "Scan") and not failed:
            self._charge_page(context["bench_query"], parsed, touched)
        moto = _moto_units(parsed.get("ConsumedCapacity"))
        if not touched:
            touched[str(context.get("bench_table", "?"))] = Usage()
        for position, (table, usage) in enumerate(touched.items()):
            usage.operations.add(operation)
            if position == 0:
                # One call, however many tables it touched: counted on the first; moto's figure, if any, is
                # for the call as a whole.
                usage.calls = 1
                if moto is not None:
                    usage.moto_units, usage.moto_calls = moto, 1
            self.usage.setdefault((table, operation), Usage()).add(usage)

    # -- writes ----------------------------------------------------------------------------------

    def _planned_writes(self, operation: str, params: Mapping[str, Any]) -> list[_Write]:
        planned: list[tuple[str, str, Item, Item | None, bool]] = []
        if operation == "PutItem":
            planned.append((params["TableName"], "Put", {}, params["Item"], False))
        elif operation in ("UpdateItem", "DeleteItem"):
            planned.append((params["TableName"], operation.removesuffix("Item"), params["Key"], None, False))
        elif operation == "TransactWriteItems":
            for action in params["TransactItems"]:
                (kind, body), *_ = action.items()
                planned.append((body["TableName"], kind, body.get("Key", {}), body.get("Item"), True))
        elif operation == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        planned.append((table, "Put", {}, request["PutRequest"]["Item"], False))
                    else:
                        planned.append((table, "Delete", request["DeleteRequest"]["Key"], None, False))
        writes = []
        for table, action, key, intended, transactional in planned:
            full_key = self.schema(table).key_of(intended) if intended is not None else dict(key)
            writes.append(
                _Write(table, full_key, action, intended, self.item(table, full_key), transactional)
            )
        return writes

    def _charge_write(self, write: _Write, failed: bool, usage: Usage) -> None:
        after = write.before if failed else self.item(write.table, write.key)
        sizes = [item_size(write.before), item_size(after)]
        if write.action == "Put":
            sizes.append(item_size(write.intended))
        if write.action in ("Delete", "ConditionCheck"):
            sizes = [item_size(write.before)]
        units = write_units(max(sizes)) * (2 if write.transactional else 1)
        usage.table_wcu += units
        if failed:
            if write.transactional:
                usage.cancelled_transaction_wcu += units
            return
        schema = self.schema(write.table)
        for index in schema.indexes:
            usage.index_wcu += index_writes(
                index, index.entry(write.before, schema.keys), index.entry(after, schema.keys)
            )

    # -- reads -----------------------------------------------------------------------------------

    def _planned_reads(self, operation: str, params: Mapping[str, Any]) -> list[_Read]:
        if operation == "GetItem":
            return [_Read(params["TableName"], [params["Key"]], bool(params.get("ConsistentRead")))]
        return [
            _Read(table, list(request["Keys"]), bool(request.get("ConsistentRead")))
            for table, request in params["RequestItems"].items()
        ]

    def _charge_page(
        self, query: Mapping[str, Any], parsed: Mapping[str, Any], touched: dict[str, Usage]
    ) -> None:
        schema = self.schema(query["TableName"])
        index = schema.index(query["IndexName"]) if query.get("IndexName") else None
        size = 0
        for returned in parsed.get("Items", []):
            # The whole item (or index entry) as stored: what DynamoDB read, whatever the projection returned.
            full = self.item(schema.name, schema.key_of(returned))
            size += item_size(index.entry(full, schema.keys) if index is not None else full)
        consistent = bool(query.get("ConsistentRead")) and index is None
        touched.setdefault(schema.name, Usage()).rcu += read_units(size, consistent=consistent)


def total(
    usage: Mapping[tuple[str, str], Usage],
    tables: Iterable[str] | None = None,
    operations: Iterable[str] | None = None,
) -> Usage:
    """The usage of these tables and operations (all when None), summed."""
    wanted_tables = None if tables is None else set(tables)
    wanted_operations = None if operations is None else set(operations)
    summed = Usage()
    for (table, operation), one in usage.items():
        if (wanted_tables is None or table in wanted_tables) and (
            wanted_operations is None or operation in wanted_operations
        ):
            summed.add(one)
    return summed


def index_writes(index: IndexSchema, before: Item | None, after: Item | None) -> int:
    """WCU one write of the table costs in `index`, from the item's entries before and after."""
    if before is None and after is None:
        return 0
    if before is None or after is None:
        return write_units(item_size(before or after))
    if any(before[key] != after[key] for key in index.keys):
        return write_units(item_size(before)) + write_units(item_size(after))  # moved: delete, then put
    if before == after:
        return 0
    return write_units(max(item_size(before), item_size(after)))


def _moto_units(consumed: Any) -> float | None:
    """moto's ConsumedCapacity (a dict or a list of them) as one number; None when it gave none."""
    if not consumed:
        return None
    entries = consumed if isinstance(consumed, list) else [consumed]
    return float(sum(entry.get("CapacityUnits", 0) for entry in entries))

"""The Order aggregate: lines, money, status and the transitions between statuses.

Pure domain code: no I/O, no boto3. Money is `Decimal` with a currency, never float; each
currency has its ISO-4217 minor-unit exponent (2 unless listed), which bounds the decimals a
price may carry and how totals are rounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any, NamedTuple

from orders.errors import InvalidTransitionError, OrderValidationError

AGGREGATE_TYPE = "Order"

MAX_LINES = 50
MAX_QUANTITY = 1000
MAX_UNIT_PRICE = Decimal(1_000_000)

_ORDER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_CUSTOMER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_SKU = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
# ASCII digits, then at most one point: no sign, exponent, spaces or thousands separators. [0-9], not \d:
# \d matches every Unicode digit, and Decimal would then read "٩.٩٩" as 9.99.
_DECIMAL_TEXT = re.compile(r"^[0-9]{1,16}(\.[0-9]{1,16})?$")

# ISO-4217 currencies whose minor unit is not 1/100. Every other currency uses 2 decimals.
_CURRENCY_EXPONENTS: Mapping[str, int] = {
    "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
    "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
    "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
    "CLF": 4, "UYW": 4,
}  # fmt: skip


class OrderStatus(StrEnum):
    PLACED = "PLACED"
    CONFIRMED = "CONFIRMED"
    CANCELLED = "CANCELLED"


class Command(StrEnum):
    """What a request asks for; also the idempotency record's `command` (part of the request hash)."""

    PLACE = "place"
    CONFIRM = "confirm"
    CANCEL = "cancel"


# The only status changes there are. CANCELLED is final.
TRANSITIONS: Mapping[Command, tuple[frozenset[OrderStatus], OrderStatus]] = {
    Command.CONFIRM: (frozenset({OrderStatus.PLACED}), OrderStatus.CONFIRMED),
    Command.CANCEL: (frozenset({OrderStatus.PLACED, OrderStatus.CONFIRMED}), OrderStatus.CANCELLED),
}


def statuses_at(version: int) -> frozenset[OrderStatus]:
    """Every status an order can have at `version`: placing makes version 1 PLACED, each transition adds one.

    A walk over TRANSITIONS, never over stored data. The walk's sets repeat at the latest after 2**n steps
    (n statuses), so a huge version costs no more than that.
    """
    current = frozenset({OrderStatus.PLACED})
    seen: dict[frozenset[OrderStatus], int] = {}
    step = 1
    while step < version and current:
        if current in seen:
            # The walk repeats from here on: skip its whole periods.
            for _ in range((version - step) % (step - seen[current])):
                current = _successors(current)
            return current
        seen[current] = step
        current = _successors(current)
        step += 1
    return current


def seq_at(version: int) -> int:
    """An order's `last_seq` at `version`: placing sets both to 1 and every command advances both by one (one
    event per command). A writer relying on it must check it in its condition (`change_at`'s writer does)."""
    return version


def _successors(statuses: frozenset[OrderStatus]) -> frozenset[OrderStatus]:
    return frozenset(target for allowed, target in TRANSITIONS.values() if statuses & allowed)


def currency_exponent(currency: str) -> int:
    return _CURRENCY_EXPONENTS.get(currency, 2)


def format_money(amount: Decimal, currency: str) -> str:
    """Fixed-point text with exactly the currency's decimals, e.g. `19.98`, `2000` (JPY)."""
    return f"{amount.quantize(Decimal(1).scaleb(-currency_exponent(currency))):f}"


def validate_order_id(value: object, *, field: str = "order_id") -> str:
    if not isinstance(value, str) or not _ORDER_ID.fullmatch(value):
        raise OrderValidationError("must be 1-64 letters, digits, '_' or '-'", field=field)
    return value


def validate_customer_id(value: object, *, field: str = "customer_id") -> str:
    if not isinstance(value, str) or not _CUSTOMER_ID.fullmatch(value):
        raise OrderValidationError("must be 1-64 letters, digits, '.', '_', ':' or '-'", field=field)
    return value


def validate_currency(value: object, *, field: str = "currency") -> str:
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise OrderValidationError("must be an ISO-4217 code of 3 uppercase letters", field=field)
    return value


def validate_sku(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not _SKU.fullmatch(value):
        raise OrderValidationError("must be 1-64 letters, digits, '.', '_' or '-'", field=field)
    return value


def validate_quantity(value: object, *, field: str) -> int:
    # bool is an int in Python; JSON `true` is not a quantity.
    if isinstance(value, bool) or not isinstance(value, int):
        raise OrderValidationError("must be a whole number", field=field)
    if not 1 <= value <= MAX_QUANTITY:
        raise OrderValidationError(f"must be between 1 and {MAX_QUANTITY}", field=field)
    return value


def parse_unit_price(value: object, currency: str, *, field: str) -> Decimal:
    """A positive decimal *string*: JSON numbers are refused so no float ever touches money."""
    if not isinstance(value, str) or not _DECIMAL_TEXT.fullmatch(value):
        raise OrderValidationError('must be a decimal string such as "9.99"', field=field)
    try:
        amount = Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        raise OrderValidationError("is not a decimal number", field=field) from None
    exponent = currency_exponent(currency)
    decimals = len(value.partition(".")[2])
    if decimals > exponent:
        raise OrderValidationError(f"has more than {exponent} decimal places for {currency}", field=field)
    if amount <= 0:
        raise OrderValidationError("must be greater than zero", field=field)
    if amount > MAX_UNIT_PRICE:
        raise OrderValidationError(f"must be at most {MAX_UNIT_PRICE}", field=field)
    return amount


class OrderLine(NamedTuple):
    sku: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self) -> Decimal:
        return self.unit_price * self.quantity

    def to_dict(self, currency: str) -> dict[str, Any]:
        return {
            "sku": self.sku,
            "quantity": self.quantity,
            "unit_price": format_money(self.unit_price, currency),
        }


def validate_lines(lines: Sequence[OrderLine]) -> None:
    if not 1 <= len(lines) <= MAX_LINES:
        raise OrderValidationError(f"must hold between 1 and {MAX_LINES} items", field="items")
    seen: set[str] = set()
    for index, line in enumerate(lines):
        if line.sku in seen:
            # One line per SKU keeps totals and downstream stock reservations unambiguous.
            raise OrderValidationError("duplicates an earlier item's sku", field=f"items[{index}].sku")
        seen.add(line.sku)


class Order(NamedTuple):
    """One order. Immutable: a command returns the next state with `version` and `last_seq` advanced.

    `version` guards concurrent writers (conditional write on the stored version); `last_seq` is the
    `seq` of the order's latest outbox event. Each command emits exactly one event, so today they move
    together, but they mean different things and are kept apart on purpose.
    """

    order_id: str
    customer_id: str
    currency: str
    lines: tuple[OrderLine, ...]
    status: OrderStatus
    version: int
    last_seq: int
    created_at: str
    updated_at: str

    @classmethod
    def place(
        cls, *, order_id: str, customer_id: str, currency: str, lines: Sequence[OrderLine], now: str
    ) -> Order:
        validate_order_id(order_id)
        validate_customer_id(customer_id)
        validate_currency(currency)
        validate_lines(lines)
        return cls(
            order_id=order_id,
            customer_id=customer_id,
            currency=currency,
            lines=tuple(lines),
            status=OrderStatus.PLACED,
            version=1,
            last_seq=1,
            created_at=now,
            updated_at=now,
        )

    @property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal(0))

    @property
    def total_text(self) -> str:
        return format_money(self.total, self.currency)

    def can(self, command: Command) -> bool:
        allowed, _ = TRANSITIONS[command]
        return self.status in allowed

    def apply(self, command: Command, *, now: str) -> Order:
        """The order after `command`, or InvalidTransitionError (nothing changes)."""
        if command not in TRANSITIONS:
            raise ValueError(f"{command} is not a transition")
        allowed, target = TRANSITIONS[command]
        if self.status not in allowed:
            raise InvalidTransitionError(self.order_id, self.status.value, command.value)
        return self._replace(
            status=target, version=self.version + 1, last_seq=self.last_seq + 1, updated_at=now
        )

    def to_dict(self) -> dict[str, Any]:
        """The order as JSON-ready data (money as strings). Round-trips through `from_dict`."""
        return {
            "order_id": self.order_id,
            "customer_id": self.customer_id,
            "currency": self.currency,
            "items": [line.to_dict(self.currency) for line in self.lines],
            "total": self.total_text,
            "status": self.status.value,
            "version": self.version,
            "last_seq": self.last_seq,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Order:
        currency = str(data["currency"])
        return cls(
            order_id=str(data["order_id"]),
            customer_id=str(data["customer_id"]),
            currency=currency,
            lines=tuple(
                OrderLine(str(line["sku"]), int(line["quantity"]), Decimal(str(line["unit_price"])))
                for line in data["items"]
            ),
            status=OrderStatus(str(data["status"])),
            version=int(data["version"]),
            last_seq=int(data["last_seq"]),
            created_at=str(data["created_at"]),
            updated_at=str(data["updated_at"]),
        )


class StatusChange(NamedTuple):
    """A transition computed from the version a client saw, without reading the order (`change_at`).

    It holds exactly what the command knows: the order id, the status before and after, the order's `version`
    and `last_seq` after it, and when. It is true only of an order stored at `version - 1`, `last_seq - 1` and
    `previous_status`: the write that stores it must be conditioned on all three.
    """

    order_id: str
    previous_status: OrderStatus
    status: OrderStatus
    version: int
    last_seq: int
    updated_at: str

    @property
    def expected_version(self) -> int:
        return self.version - 1

    @property
    def expected_seq(self) -> int:
        return self.last_seq - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "order_id": self.order_id,
            "previous_status": self.previous_status.value,
            "status": self.status.value,
            "version": self.version,
            "last_seq": self.last_seq,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StatusChange:
        return cls(
            order_id=str(data["order_id"]),
            previous_status=OrderStatus(str(data["previous_status"])),
            status=OrderStatus(str(data["status"])),
            version=int(data["version"]),
            last_seq=int(data["last_seq"]),
            updated_at=str(data["updated_at"]),
        )


def change_at(command: Command, *, order_id: str, version: int, now: str) -> StatusChange | None:
    """What `command` does to the order a client saw at `version`, when that is known without reading it.

    It is when exactly one of the statuses the order can have at `version` (`statuses_at`) allows the
    command: confirm at version 1 (PLACED), cancel at version 1 (PLACED) or 2 (CONFIRMED: an order CANCELLED
    at version 2 cannot be cancelled again). Otherwise None: the order must be read. The condition on the
    write makes a wrong guess harmless: an order at `version` in another status fails it and is then judged
    as it is stored.
    """
    if command not in TRANSITIONS:
        raise ValueError(f"{command} is not a transition")
    validate_order_id(order_id)
    allowed, target = TRANSITIONS[command]
    candidates = statuses_at(version) & allowed
    if len(candidates) != 1:
        return None
    (previous,) = candidates
    return StatusChange(
        order_id=order_id,
        previous_status=previous,
        status=target,
        version=version + 1,
        last_seq=seq_at(version) + 1,
        updated_at=now,
    )

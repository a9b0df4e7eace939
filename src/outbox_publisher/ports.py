"""The engine's ports: what it needs of a destination and of the poison queue. Adapters implement them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from outbox_publisher.errors import FailureKind
from outbox_publisher.messages import Message
from outbox_publisher.poison import PoisonMessage
from outbox_publisher.routing import Destination


class EntryResult(NamedTuple):
    """One entry's answer from a destination."""

    ok: bool
    code: str | None = None
    kind: FailureKind | None = None

    @classmethod
    def success(cls) -> EntryResult:
        return _SUCCESS  # immutable: one for every entry that went through

    @classmethod
    def failure(cls, code: str, kind: FailureKind) -> EntryResult:
        return cls(False, code, kind)


_SUCCESS = EntryResult(True)


class DestinationPort(Protocol):
    """SNS or EventBridge, as the engine needs them."""

    @property
    def destination(self) -> Destination: ...

    @property
    def max_entry_bytes(self) -> int: ...

    @property
    def max_batch_bytes(self) -> int: ...

    def size_of(self, message: Message) -> int: ...

    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        """One batch call. Returns one result per message, in order; raises DestinationCallError when
        the call as a whole failed."""
        ...


class PoisonQueue(Protocol):
    def send(self, message: PoisonMessage) -> None:
        """Raises PoisonQueueUnavailableError when the queue did not take the message."""
        ...

"""moto's hot paths under load, made cheap while a local runtime runs: the same answers for less CPU.

Each piece here cuts the runtime's CPU per order by more than 10% (`python -m bench.local_load --orders 600
--rate 15` on a loaded 2-core machine: 15.1 ms per order with every layer, and without each; docs/local.md):
- EventBridge (23.0 ms without): for every event and rule target moto parses the default input template's
  eight JSONPath expressions with a parser it builds anew (about 0.8 ms each); each is parsed once and kept.
- SQS (20.3 ms without): a receive reads the retention period through GetQueueAttributes, and a send reads
  the queue's attributes, each computing three counts over all the queue's messages (the clock read per
  message); a delete asks every message twice whether it had the receipt handle, building a list each time;
  a receipt handle's 185 letters are drawn one call each. Here a receive reads the period, a send computes
  only `ContentBasedDeduplication`, each count reads the clock once, a message compares the handle with its
  own, and the letters come from one `choices` call on moto's own random source. moto's delete itself is
  left as it is, so `outbox_local.moto_isolation`'s queue lock around it holds.
- DynamoDB expressions (20.3 ms without): `outbox_local.moto_expressions`.
"""

from __future__ import annotations

import functools
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jsonpath_ng.ext
import moto.sqs.utils
from moto.core.utils import unix_time, unix_time_millis
from moto.sqs.models import Message, Queue, SQSBackend

from outbox_local.moto_expressions import cheaper_expressions
from outbox_local.moto_imports import rebind

_PARSED_EXPRESSIONS = 1024


def _retention_respected(backend: SQSBackend, queue_name: str, message: Message) -> bool:
    """moto's `is_message_valid_based_on_retention_period`, reading the one attribute it needs."""
    queue: Any = backend.get_queue(queue_name)  # its attributes are set from the queue's settings, untyped
    sent_ms: Any = message.sent_timestamp  # set when the message is sent, before any receive
    return bool(queue.message_retention_period + sent_ms / 1000 > unix_time())


def _available(queue: Queue) -> list[Message]:
    """moto's `Queue.messages`: visible and not delayed."""
    now = unix_time_millis()
    return [m for m in queue._messages if now > m.visible_at and now >= m.delayed_until]


def _delayed(queue: Queue) -> int:
    now = unix_time_millis()
    return sum(1 for m in queue._messages if now < m.delayed_until)


def _not_visible(queue: Queue) -> int:
    now = unix_time_millis()
    return sum(1 for m in queue._messages if not now > m.visible_at)


_sending = threading.local()
"""Set while moto sends a message on this thread: what it then reads of the queue's attributes is one."""


def _attributes_while_sending(original: Any) -> property:
    def attributes(self: Queue) -> dict[str, Any]:
        if not getattr(_sending, "active", False):
            return original.fget(self)  # type: ignore[no-any-return]
        if not self.fifo_queue:  # moto lists FIFO attributes for a FIFO queue only
            return {}
        # moto sets it from the queue's attributes (setattr by name): untyped
        value: Any = getattr(self, "content_based_deduplication")  # noqa: B009
        return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}

    return property(attributes)


def _sending_message(original: Any) -> Any:
    @functools.wraps(original)
    def send(self: SQSBackend, *args: Any, **kwargs: Any) -> Any:
        before = getattr(_sending, "active", False)
        _sending.active = True
        try:
            return original(self, *args, **kwargs)
        finally:
            _sending.active = before

    return send


def _had_receipt_handle(self: Message, receipt_handle: str) -> bool:
    """moto's `Message.had_receipt_handle` (its current handle or an earlier one), without building a list."""
    return receipt_handle == self.receipt_handle or receipt_handle in self._old_receipt_handles


_QUEUE_SCANS = {
    "messages": _available,
    "approximate_number_of_messages_delayed": _delayed,
    "approximate_number_of_messages_not_visible": _not_visible,
}


RECEIPT_HANDLE_LENGTH = 185
"""What moto's `generate_receipt_handle` draws: this many lowercase letters."""


def _receipt_handle() -> str:
    """moto's `generate_receipt_handle`, its letters drawn in one call (from moto's own random source)."""
    sqs_utils: Any = moto.sqs.utils  # moto's random source, which it does not export
    return "".join(sqs_utils.random.choices(string.ascii_lowercase, k=RECEIPT_HANDLE_LENGTH))


@contextmanager
def lighter_moto() -> Iterator[None]:
    """While in effect, this process's moto answers as before, with the hot paths above made cheap."""
    ext: Any = jsonpath_ng.ext
    parse = ext.parse
    retention = SQSBackend.is_message_valid_based_on_retention_period
    scans = {name: getattr(Queue, name) for name in _QUEUE_SCANS}
    queue_attributes, had_receipt_handle = Queue.__dict__["attributes"], Message.had_receipt_handle
    send, validate = SQSBackend.send_message, SQSBackend._validate_message
    receipt_handle = moto.sqs.utils.generate_receipt_handle
    # moto imports `parse` from jsonpath_ng.ext inside the function, at each call: it finds this one.
    ext.parse = functools.lru_cache(maxsize=_PARSED_EXPRESSIONS)(parse)
    SQSBackend.is_message_valid_based_on_retention_period = _retention_respected  # type: ignore[method-assign,assignment]
    for name, scan in _QUEUE_SCANS.items():
        setattr(Queue, name, property(scan))
    Queue.attributes = _attributes_while_sending(queue_attributes)  # type: ignore[method-assign,assignment]
    Message.had_receipt_handle = _had_receipt_handle  # type: ignore[method-assign]
    SQSBackend.send_message = _sending_message(send)  # type: ignore[method-assign]
    SQSBackend._validate_message = _sending_message(validate)  # type: ignore[method-assign]
    rebind("generate_receipt_handle", receipt_handle, _receipt_handle)  # moto.sqs.models imported it by name
    try:
        with cheaper_expressions():
            yield
    finally:
        ext.parse = parse
        SQSBackend.is_message_valid_based_on_retention_period = retention  # type: ignore[method-assign]
        for name, original in scans.items():
            setattr(Queue, name, original)
        Queue.attributes, Message.had_receipt_handle = queue_attributes, had_receipt_handle  # type: ignore[method-assign]
        SQSBackend.send_message, SQSBackend._validate_message = send, validate  # type: ignore[method-assign]
        rebind("generate_receipt_handle", _receipt_handle, receipt_handle)

"""moto's hot paths under load, made cheap while a local runtime runs: the same answers for less CPU. A named
correction of moto 5.2, like `outbox_local.moto_transactions` (docs/local.md, "Execution environments").

Found by profiling the runtime under `bench/local_load.py` (every request moto serves shares one interpreter,
so its CPU is the runtime's throughput):

- EventBridge: for every event and every rule target, moto (`EventTemplateParser.parse`) parses the eight
  JSONPath expressions of the default input template with a parser it builds anew each time (PLY's parser
  tables, about 0.8 ms each): a sixth of the runtime's CPU at 25 events/s. A parsed expression is a plain
  value, so each is parsed once and kept.
- SQS ReceiveMessage: for each message it hands out, moto reads the queue's retention period through
  GetQueueAttributes, which computes every attribute of the queue, three counts over all its messages among
  them: a receive cost the batch size times three scans of the queue. The period is read from the queue.
- SQS SendMessage (SNS and EventBridge deliveries included) reads the queue's attributes too, so the same
  three counts, and each count reads moto's clock (a datetime built and subtracted) once or twice per
  message: a fifth of the runtime's CPU once a consumer's queue held a few hundred messages. Each count now
  reads the clock once for the whole queue: the same answer, as of one instant. And a send needs one of
  those attributes (`ContentBasedDeduplication`, which only a FIFO queue has): while moto sends, it is the one
  computed, so a send no longer scans the queue at all (over a long run the strict consumer's queue holds
  thousands, and every SNS and EventBridge delivery to it paid three scans).
- SQS DeleteMessage: moto asks every message of the queue, twice, whether it ever had the receipt handle,
  building a list of the message's handles for each question: a delete that cost the backlog. A message now
  answers by comparing the handle with its own, then its old ones (the same answer, no list). moto's delete
  itself is left as it is, so `outbox_local.moto_isolation`'s queue lock around it still holds (replacing the
  method would have undone that lock: a send during a delete lost its message).
- Every request: moto finds out whether the action is a method of its response class by listing the class's
  members (`inspect.getmembers`), 0.4 ms a request, a fifth of a GetItem's CPU. A class's methods do not
  change: listed once per class.
- moto turns names from camel case to snake case (`camelcase_to_underscores`, a loop over the name's
  characters) for every action, every parameter and every attribute it answers: GetQueueAttributes alone
  makes 43 such calls per queue count (about half of its CPU), and SQS sends read the queue's attributes
  too. The answer depends on the name only: computed once per name (a bounded cache).
- CloudWatch GetMetricStatistics (what the alarm evaluator asks each second for each alarm on a function's
  metric) filters every datapoint moto holds, of every metric: a cost that grows with the run (the functions
  put several datapoints per order). The datapoints are indexed by namespace and metric name as moto stores
  them (it only ever appends them), and moto filters only the metric's own: the same datapoints, in the same
  order, so the same answer.
- DynamoDB Query and Scan (the sweeper's sweep of the pending index, the gate's look for a predecessor) walk
  every item of the table in key order, which moto sorts anew for each request comparing `DynamoType`s (a
  conversion of both values per comparison): 130 ms a Query on a table of a few thousand rows, while every
  other DynamoDB request waited (`outbox_local.moto_isolation`). The items are sorted on their key values,
  converted once per item: the same order, as the key attributes of a table all have the one type its
  schema gives them (where they do not, moto's own sort runs).
- DynamoDB items: moto checks an item's size (its 400 KB limit) as it sets each attribute, by sizing every
  attribute already set (`LimitedSizeDict.__setitem__`): building an item costs the square of its attribute
  count, a fifth of a place-order transaction's CPU (two puts of a dozen attributes and more). A new item's
  size is summed once, as its attributes are converted in turn, against moto's own limit: as every
  attribute's size is at least zero, the running sum passes the limit at the attribute where moto's check
  would, so the same items are refused there, with moto's own error (an attribute after it is not looked at,
  as in moto). Updates to an item still go through moto's check.
- SQS receipt handles: moto draws each of a received message's 185 letters with its own `random.choice`
  call, about 0.2 ms a message, and every message is received at least once (a consumer's, a subscriber
  queue's). They are drawn in one `choices` call from moto's own random source: the same 185 lowercase
  letters, each as likely, about a quarter of the time.
- DynamoDB update expressions are parsed once per text and validated faster (`outbox_local.moto_expressions`),
  condition expressions parsed once per combination or shape (`outbox_local.moto_conditions`).
"""

from __future__ import annotations

import functools
import string
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jsonpath_ng.ext
import moto.core.responses
import moto.core.utils
import moto.sqs.utils
from moto.cloudwatch.models import CloudWatchBackend, MetricDatumBase
from moto.core.utils import unix_time, unix_time_millis
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
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


class _MetricIndex:
    """A CloudWatch backend's datapoints by (namespace, metric name), kept up with moto's list as it grows."""

    def __init__(self) -> None:
        self.indexed = 0
        self.by_name: dict[tuple[str, str], list[MetricDatumBase]] = {}

    def of(self, stored: list[MetricDatumBase], name: tuple[str, str]) -> list[MetricDatumBase]:
        if len(stored) < self.indexed:  # not moto's way (it only appends), but then start again
            self.indexed, self.by_name = 0, {}
        for datum in stored[self.indexed :]:
            self.by_name.setdefault((datum.namespace, datum.name), []).append(datum)
        self.indexed = len(stored)
        return self.by_name.get(name, [])


_indexes: weakref.WeakKeyDictionary[CloudWatchBackend, _MetricIndex] = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()
_asked = threading.local()
"""The metric a GetMetricStatistics on this thread is about, while moto gathers its datapoints."""


def _statistics_of_one_metric(original: Any) -> Any:
    def get_metric_statistics(
        self: CloudWatchBackend, namespace: str, metric_name: str, *args: Any, **kwargs: Any
    ) -> Any:
        _asked.name = (namespace, metric_name)
        try:
            return original(self, namespace, metric_name, *args, **kwargs)
        finally:
            _asked.name = None

    return get_metric_statistics


def _all_metrics_or_the_asked_ones(original: Any) -> Any:
    def get_all_metrics(self: CloudWatchBackend) -> list[MetricDatumBase]:
        name = getattr(_asked, "name", None)
        if name is None:
            return list(original(self))
        with _indexes_lock:
            own = list(_indexes.setdefault(self, _MetricIndex()).of(self.metric_data, name))
        return own + self.aws_metric_data  # moto's order: its stored datapoints, then the providers'

    return get_all_metrics


def _items_in_key_order(original: Any) -> Any:
    def all_items(self: Table) -> list[Any]:
        # moto's table: {hash: item}, or {hash: {range: item}} when it has a range key.
        stored: Any = self.items
        items: list[Any] = [
            item for held in stored.values() for item in (held.values() if self.range_key_attr else (held,))
        ]
        if len({(item.hash_key.type, getattr(item.range_key, "type", None)) for item in items}) > 1:
            return list(original(self))  # key values of more than one type: moto's comparisons decide
        if self.range_key_attr:
            return sorted(items, key=lambda item: (item.hash_key.cast_value, item.range_key.cast_value))
        return sorted(items, key=lambda item: item.hash_key.cast_value)

    return all_items


ITEM_SIZE_LIMIT = 405_000
"""moto's limit on an item's size, in `LimitedSizeDict.__setitem__` (between AWS's documented 400 KB and what
AWS was seen to accept)."""


def _item_sized_once(
    self: Item, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]
) -> None:
    """moto's `Item.__init__`, sizing the new item once instead of once per attribute.

    As moto does, each attribute is converted and sized in turn, and the item refused as soon as the size so
    far passes the limit: an attribute after that point is neither converted nor sized (one moto cannot
    convert or size raises its own error only where moto's would)."""
    self.hash_key = hash_key
    self.range_key = range_key
    converted: dict[str, DynamoType] = {}
    size = 0
    for name, value in attrs.items():
        attribute = DynamoType(value)
        size += bytesize(name) + attribute.size()
        if size > ITEM_SIZE_LIMIT:
            raise ItemSizeTooLarge
        converted[name] = attribute
    self.attrs = LimitedSizeDict()
    dict.update(self.attrs, converted)  # sized above: its __setitem__ would size the item again per attribute


RECEIPT_HANDLE_LENGTH = 185
"""What moto's `generate_receipt_handle` draws: this many lowercase letters."""


def _receipt_handle() -> str:
    """moto's `generate_receipt_handle`, its letters drawn in one call (from moto's own random source)."""
    sqs_utils: Any = moto.sqs.utils  # moto's random source, which it does not export
    return "".join(sqs_utils.random.choices(string.ascii_lowercase, k=RECEIPT_HANDLE_LENGTH))


_CACHED_NAMES = 4096


@contextmanager
def _names_converted_once() -> Iterator[None]:
    original = moto.core.utils.camelcase_to_underscores
    cached = functools.lru_cache(maxsize=_CACHED_NAMES)(original)
    rebind("camelcase_to_underscores", original, cached)  # moto.core.utils itself too: modules imported later
    try:
        yield
    finally:
        rebind("camelcase_to_underscores", cached, original)


@contextmanager
def lighter_moto() -> Iterator[None]:
    """While in effect, this process's moto answers as before, with the hot paths above made cheap."""
    ext: Any = jsonpath_ng.ext
    responses: Any = moto.core.responses
    parse, method_names = ext.parse, responses.method_names_from_class
    retention = SQSBackend.is_message_valid_based_on_retention_period
    scans = {name: getattr(Queue, name) for name in _QUEUE_SCANS}
    queue_attributes, had_receipt_handle = Queue.__dict__["attributes"], Message.had_receipt_handle
    send, validate = SQSBackend.send_message, SQSBackend._validate_message
    statistics, all_metrics = CloudWatchBackend.get_metric_statistics, CloudWatchBackend.get_all_metrics
    all_items, new_item = Table.all_items, Item.__init__
    receipt_handle = moto.sqs.utils.generate_receipt_handle
    # moto imports `parse` from jsonpath_ng.ext inside the function, at each call: it finds this one.
    ext.parse = functools.lru_cache(maxsize=_PARSED_EXPRESSIONS)(parse)
    responses.method_names_from_class = functools.cache(method_names)
    SQSBackend.is_message_valid_based_on_retention_period = _retention_respected  # type: ignore[method-assign,assignment]
    for name, scan in _QUEUE_SCANS.items():
        setattr(Queue, name, property(scan))
    Queue.attributes = _attributes_while_sending(queue_attributes)  # type: ignore[method-assign,assignment]
    Message.had_receipt_handle = _had_receipt_handle  # type: ignore[method-assign]
    SQSBackend.send_message = _sending_message(send)  # type: ignore[method-assign]
    SQSBackend._validate_message = _sending_message(validate)  # type: ignore[method-assign]
    CloudWatchBackend.get_metric_statistics = _statistics_of_one_metric(statistics)  # type: ignore[method-assign]
    CloudWatchBackend.get_all_metrics = _all_metrics_or_the_asked_ones(all_metrics)  # type: ignore[method-assign]
    Table.all_items = _items_in_key_order(all_items)  # type: ignore[method-assign]
    Item.__init__ = _item_sized_once  # type: ignore[method-assign]
    rebind("generate_receipt_handle", receipt_handle, _receipt_handle)  # moto.sqs.models imported it by name
    try:
        with _names_converted_once(), cheaper_expressions():
            yield
    finally:
        ext.parse, responses.method_names_from_class = parse, method_names
        SQSBackend.is_message_valid_based_on_retention_period = retention  # type: ignore[method-assign]
        for name, original in scans.items():
            setattr(Queue, name, original)
        Queue.attributes, Message.had_receipt_handle = queue_attributes, had_receipt_handle  # type: ignore[method-assign]
        SQSBackend.send_message, SQSBackend._validate_message = send, validate  # type: ignore[method-assign]
        CloudWatchBackend.get_metric_statistics = statistics  # type: ignore[method-assign]
        CloudWatchBackend.get_all_metrics = all_metrics  # type: ignore[method-assign]
        Table.all_items = all_items  # type: ignore[method-assign]
        Item.__init__ = new_item  # type: ignore[method-assign]
        rebind("generate_receipt_handle", _receipt_handle, receipt_handle)

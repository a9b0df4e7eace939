"""Requests isolated from each other as AWS isolates them, while a local runtime runs: corrects moto 5.2,
which serves each request on a thread of its own and isolates none (docs/local.md, "Where moto differs from
AWS").

- DynamoDB: a Query or Scan walking a table while a put adds a key answers 500 ("dictionary changed size
  during iteration"), and a read can see half an UpdateItem. Every DynamoDB request runs alone: one lock
  around moto's request handler, answer included.
- SQS: moto deletes a message by putting a rebuilt list of the queue's other messages in place of the old
  one while a send appends to the old one (a message sent during a delete is lost), and two receives can
  hand out one message twice. Delete, receive and send each hold the queue's own lock (moto's, which a send
  already takes to append; a long poll waits on it, which lets it go meanwhile).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.responses import DynamoHandler
from moto.sqs.models import Queue, SQSBackend


def _holding(lock: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def held(*arguments: Any, **keywords: Any) -> Any:
        with lock:
            return method(*arguments, **keywords)

    return held


def _holding_the_queue(method: Callable[..., Any]) -> Callable[..., Any]:
    """A Queue method run under the queue's own lock (reentrant: moto's Condition over an RLock)."""

    @functools.wraps(method)
    def held(queue: Queue, *arguments: Any, **keywords: Any) -> Any:
        with queue._messages_lock:
            return method(queue, *arguments, **keywords)

    return held


def _receiving_under_the_queue_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def held(backend: SQSBackend, queue_name: str, *arguments: Any, **keywords: Any) -> Any:
        with backend.get_queue(queue_name)._messages_lock:
            return method(backend, queue_name, *arguments, **keywords)

    return held


@contextmanager
def isolated_requests() -> Iterator[None]:
    """While in effect, this process's moto runs each DynamoDB request alone and each SQS queue's sends,
    receives and deletes one at a time."""
    dynamodb_call = DynamoHandler.call_action
    add, delete = Queue.add_message, Queue.delete_message
    receive = SQSBackend.receive_message
    DynamoHandler.call_action = _holding(threading.RLock(), dynamodb_call)  # type: ignore[method-assign]
    Queue.add_message = _holding_the_queue(add)  # type: ignore[method-assign]
    Queue.delete_message = _holding_the_queue(delete)  # type: ignore[method-assign]
    SQSBackend.receive_message = _receiving_under_the_queue_lock(receive)  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoHandler.call_action = dynamodb_call  # type: ignore[method-assign]
        Queue.add_message, Queue.delete_message = add, delete  # type: ignore[method-assign]
        SQSBackend.receive_message = receive  # type: ignore[method-assign]

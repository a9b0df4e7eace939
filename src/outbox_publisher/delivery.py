"""Delivering one batch of messages to one destination: batch calls, with the transient entries retried.

Each round sends what is still owed in one call; entries that failed transiently go again after a capped,
jittered backoff, within the attempts the `RetryPolicy` allows and the time the `Deadline` leaves. An
entry refused for good is not retried. A call refused as a whole for its content is split into one call
per entry, to tell which entry was at fault. No call starts without the policy's safety margin left:
after another destination's retries, starting one could run past the Lambda timeout and fail the batch.
Nor does a call start that could end after `publish_until`, when the caller sets one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from outbox.clock import Clock, utc_now
from outbox_publisher.deadline import Deadline
from outbox_publisher.errors import DestinationCallError, FailureKind
from outbox_publisher.messages import Message
from outbox_publisher.ports import DestinationPort, EntryResult
from outbox_publisher.retry import PUBLISH_CALL_S, Random, RetryPolicy, Sleep

_log = logging.getLogger(__name__)


class Delivery(NamedTuple):
    """How one message fared on one destination."""

    ok: bool
    attempts: int
    code: str | None = None
    kind: FailureKind | None = None
    whole_call: bool = False
    """Failed: the last call that carried it failed as a whole (no answer per entry), as a destination that
    is down fails; not the entry's own answer."""
    destination_down: bool = False
    """Not sent: its destination failed a whole call earlier in the run (outbox_publisher.engine)."""


def destination_failed(results: Sequence[Delivery]) -> bool:
    """The destination fails, not an entry: every entry was tried and failed, none for good, and either the
    call failed as a whole (throttled, unavailable, refused) or it carried more than one entry. One entry
    that fails alone in its answer is that entry's failure: the destination takes the run's other events."""
    failed = bool(results) and all(
        not result.ok and result.kind is not FailureKind.PERMANENT and result.attempts > 0
        for result in results
    )
    return failed and (len(results) > 1 or results[0].whole_call)


@functools.cache
def _delivered(attempts: int) -> Delivery:
    """The Delivery of a message that went through: immutable, so one per attempt count (a handful)."""
    return Delivery(True, attempts)


class Deliverer:
    """Sends batches with retries; counts every call it makes (`calls`)."""

    def __init__(
        self,
        policy: RetryPolicy,
        deadline: Deadline,
        *,
        sleep: Sleep,
        random: Random,
        clock: Clock = utc_now,
        publish_until: datetime | None = None,
    ) -> None:
        self._policy = policy
        self._deadline = deadline
        self._sleep = sleep
        self._random = random
        self._clock = clock
        self._publish_until = publish_until
        self.calls = 0

    def may_call(self, delay_ms: float = 0.0) -> bool:
        """A publish call started now (after `delay_ms`) ends in time."""
        if not self._policy.has_time_for(self._deadline, delay_ms):
            return False
        if self._publish_until is None:
            return True
        latest_start = self._publish_until - timedelta(seconds=PUBLISH_CALL_S)
        return self._clock() + timedelta(milliseconds=delay_ms) <= latest_start

    def deliver(self, port: DestinationPort, messages: Sequence[Message]) -> list[Delivery]:
        """One `Delivery` per message, in order."""
        policy = self._policy
        attempts = [0] * len(messages)
        done: dict[int, Delivery] = {}
        pending = list(range(len(messages)))
        round_number = 0
        while pending:
            if not self.may_call():
                for position in pending:
                    done[position] = Delivery(
                        False, attempts[position], "DeadlineExceeded", FailureKind.TRANSIENT
                    )
                break
            round_number += 1
            results, whole_call = self._call(port, [messages[position] for position in pending])
            retry: list[tuple[int, EntryResult]] = []
            for position, result in zip(pending, results, strict=True):
                attempts[position] += 1
                if result.ok:
                    done[position] = _delivered(attempts[position])
                elif result.kind is FailureKind.TRANSIENT:
                    retry.append((position, result))
                else:
                    done[position] = Delivery(False, attempts[position], result.code, result.kind)
            if not retry:
                break
            delay_ms = policy.delay_ms(round_number, self._random)
            if round_number >= policy.max_attempts or not self.may_call(delay_ms):
                for position, result in retry:
                    done[position] = Delivery(False, attempts[position], result.code, result.kind, whole_call)
                break
            _log.info(
                "retrying transient publish failures",
                extra={
                    "destination": port.destination.value,
                    "attempt": round_number,
                    "delay_ms": round(delay_ms),
                    "event_ids": [messages[position].event.event_id for position, _ in retry],
                    "codes": sorted({str(result.code) for _, result in retry}),
                },
            )
            self._sleep(delay_ms / 1000)
            pending = [position for position, _ in retry]
        return [done[position] for position in range(len(messages))]

    def _call(self, port: DestinationPort, messages: Sequence[Message]) -> tuple[list[EntryResult], bool]:
        """The entries' results, and whether the call failed as a whole (no answer per entry)."""
        self.calls += 1
        try:
            results = port.publish(messages)
        except DestinationCallError as error:
            if error.kind is FailureKind.PERMANENT and len(messages) > 1:
                # Refused as a whole for something in its content: send each entry alone to find which.
                return [result for message in messages for result in self._call(port, [message])[0]], False
            return [EntryResult.failure(error.code, error.kind)] * len(messages), True
        if len(results) != len(messages):
            # An answer that does not account for every entry: nothing in it can be trusted as done.
            return [EntryResult.failure("IncompleteResponse", FailureKind.TRANSIENT)] * len(messages), True
        return results, False

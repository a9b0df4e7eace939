"""One delivered message in, one outcome out: the envelope found, the inbox asked, a gap waited for.

`InboxConsumer` is what a consumer function calls per message (an SQS record, or an EventBridge event given
to the function directly). It never lets a message vanish:
- applied, duplicate or stale: acknowledged;
- a gap (strict mode): `GapNotFilledError` is raised, so the batch reports the message as failed and SQS
  hands it back after its visibility timeout, until its predecessor has been applied. Once it has waited
  `max_gap_wait_s` since its first receipt, it goes to the dead-letter queue with the reason, or (by
  configuration) is applied with the skipped seqs recorded;
- not an envelope at all, or (when the consumer validates on receipt) a payload its schema refuses: to the
  dead-letter queue with the reason (it can never be applied, and must not fail its batch over and over);
- anything else (throttling, the effect's own condition failing): raised, nothing written, handed back.
Every outcome is logged with ids only and counted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol, runtime_checkable

from outbox.clock import Clock, utc_now
from outbox.errors import ConfigurationError, SchemaError
from outbox.payload_store import PayloadStore
from outbox.schemas import SchemaRegistry
from outbox_inbox.adapters import DeadLetter, DeadLetters
from outbox_inbox.envelope import Envelope, envelope_of
from outbox_inbox.errors import GapNotFilledError, MalformedEnvelopeError
from outbox_inbox.event_scope import EventScope, log_keys
from outbox_inbox.inbox import (
    DEFAULT_MAX_GAP_WAIT_S,
    MAX_SKIPPED_SEQS,
    Effect,
    GapTimeout,
    Inbox,
    Ordering,
    Outcome,
    Result,
    no_effect,
)

_log = logging.getLogger(__name__)

METRIC_NAMES: Final = {
    Outcome.APPLIED: "InboxApplied",
    Outcome.APPLIED_WITH_GAP: "InboxAppliedWithGap",
    Outcome.DUPLICATE: "InboxDuplicates",
    Outcome.STALE: "InboxStale",
    Outcome.GAP: "InboxGapsHandedBack",
    Outcome.SKIPPED_LATE: "InboxSkippedLate",
    Outcome.EVENT_ID_REUSED: "InboxEventIdReused",
    Outcome.SLOT_REWRITTEN: "InboxSlotRewritten",
    Outcome.DEAD_LETTERED: "InboxDeadLettered",
}

# Outcomes that can never apply: dead-lettered with this reason (`inbox_reason`).
_REFUSALS: Final = {
    Outcome.SKIPPED_LATE: "late: seq {seq} arrived after the consumer applied past it (it was skipped)",
    Outcome.EVENT_ID_REUSED: "event_id_reused: this event_id was applied for another aggregate or seq",
    Outcome.SLOT_REWRITTEN: "slot_rewritten: the consumer applied seq {seq} as another event",
}

FAILURES_METRIC: Final = "InboxFailures"
"""Messages handed back for another reason than a gap (throttling, an effect's own condition, a bug)."""

ExternalEffect = Callable[[Envelope], None]
"""An effect outside DynamoDB (an email, an HTTP call): see `outbox_inbox.external`."""


@runtime_checkable
class InvocationAware(Protocol):
    """An external effect that bounds its in-progress state by the invocation (`external.IdempotentCall`)."""

    def register_lambda_context(self, context: Any) -> None: ...


class MetricsSink(Protocol):
    """What the consumer counts with: Powertools' `Metrics` is one."""

    def add_metric(self, *, name: str, unit: str, value: float) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    max_gap_wait_s: int = DEFAULT_MAX_GAP_WAIT_S
    """How long an event may wait for its predecessor, from its first receipt."""
    on_gap_timeout: GapTimeout = GapTimeout.DEAD_LETTER

    def __post_init__(self) -> None:
        if self.max_gap_wait_s < 0:
            raise ConfigurationError("the gap wait may not be negative")


class InboxConsumer:
    def __init__(
        self,
        inbox: Inbox,
        *,
        dead_letters: DeadLetters,
        effect: Effect = no_effect,
        external: ExternalEffect | None = None,
        settings: ConsumerSettings | None = None,
        metrics: MetricsSink | None = None,
        clock: Clock = utc_now,
        event_scope: EventScope | None = None,
        schemas: SchemaRegistry | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        """`event_scope`: entered around each event's handling (`outbox_inbox.event_scope`: its log keys and
        trace). `payloads`: where claim checks are read (outbox_inbox.claim_checks)."""
        settings = settings or ConsumerSettings()
        if external is not None:
            check_external_ordering(inbox.settings.ordering, settings.on_gap_timeout)
        self.inbox = inbox
        self._dead_letters = dead_letters
        self._effect = effect
        self._external = external
        self.settings = settings
        self._metrics = metrics
        self._clock = clock
        self._event_scope = event_scope
        self._handling: tuple[str, Envelope] | None = None
        """The message being handled and its envelope: its failure's log line names the event's keys too."""
        # Validation on receipt (off by default): the producer's schema files, checked before the inbox.
        self._schemas = schemas
        self._payloads = payloads

    def register_lambda_context(self, context: Any) -> None:
        """Called once per invocation by the batch handler."""
        # None first: an isinstance check against a runtime-checkable Protocol inspects the protocol's members
        # each time, and most consumers have no external effect.
        if self._external is not None and isinstance(self._external, InvocationAware):
            self._external.register_lambda_context(context)

    def consume_sqs_record(self, record: Mapping[str, Any]) -> Outcome:
        """One record of an SQS event (any body shape `envelope_of` knows)."""
        message_id = str(record.get("messageId", ""))
        attributes = record.get("attributes") or {}
        group_id = attributes.get("MessageGroupId") if isinstance(attributes, Mapping) else None
        body = record.get("body")
        text = body if isinstance(body, str) and body else json.dumps(record, default=str)

        def letter(reason: str) -> DeadLetter:
            return DeadLetter(text, reason, message_id, group_id)

        if not isinstance(attributes, Mapping):  # Lambda always sends a map: this record is made up
            return self._give_up(None, letter("malformed record: its attributes are not a map"))
        try:
            envelope = envelope_of(record, payloads=self._payloads)
        except MalformedEnvelopeError as error:
            return self._give_up(None, letter(f"malformed envelope: {error}"))
        self._handling = (message_id, envelope)
        return self._consume(envelope, _first_received(attributes, self._clock), letter)

    def consume_eventbridge_event(self, event: Mapping[str, Any]) -> Outcome:
        """An EventBridge event given to the function directly (a rule targeting it), for `latest` and
        `unordered` consumers. A failure raises: Lambda retries the asynchronous invocation, then sends it to
        the function's own on-failure destination or dead-letter queue (configure one)."""
        if self.inbox.settings.ordering is Ordering.STRICT:
            raise ConfigurationError(
                "a strict consumer must read from an SQS queue: an event EventBridge gives the function "
                "directly cannot be handed back to wait for a missing predecessor (use latest or unordered)"
            )
        message_id = str(event.get("id", ""))

        def letter(reason: str) -> DeadLetter:
            return DeadLetter(json.dumps(event, default=str), reason, message_id)

        try:
            envelope = envelope_of(event, payloads=self._payloads)
        except MalformedEnvelopeError as error:
            return self._give_up(None, letter(f"malformed envelope: {error}"))
        return self._consume(envelope, _event_time(event, self._clock), letter)

    def _consume(
        self, envelope: Envelope, first_received: datetime, letter: Callable[[str], DeadLetter]
    ) -> Outcome:
        with nullcontext() if self._event_scope is None else self._event_scope(envelope):
            if self._schemas is not None:
                try:
                    self._schemas.check(envelope.event_type, envelope.schema_version, envelope.payload)
                except SchemaError as error:
                    # It can never apply: dead-lettered with the reason (type, version, path, rule; no
                    # value), before the inbox records anything, so a corrected redrive applies it.
                    return self._give_up(envelope, letter(f"schema: {error}"))
            try:
                return self._consume_envelope(envelope, first_received, letter)
            except MalformedEnvelopeError as error:
                # Raised by the effect: the payload breaks its event type's schema. Nothing was written.
                return self._give_up(envelope, letter(f"malformed payload: {error}"))

    def _consume_envelope(
        self, envelope: Envelope, first_received: datetime, letter: Callable[[str], DeadLetter]
    ) -> Outcome:
        result = self._apply(envelope, skip_after=None)
        if result.outcome is Outcome.GAP:
            last_applied = result.last_applied or 0
            waited_s = (self._clock() - first_received).total_seconds()
            if waited_s < self.settings.max_gap_wait_s:
                raise self._hand_back(envelope, last_applied)
            skipping = envelope.seq - 1 - last_applied
            if self.settings.on_gap_timeout is GapTimeout.APPLY and skipping <= MAX_SKIPPED_SEQS:
                result = self._apply(envelope, skip_after=last_applied)
            else:
                reason = (
                    f"gap: seq {envelope.seq} waited {int(waited_s)} s for seq {last_applied + 1} "
                    f"(max {self.settings.max_gap_wait_s} s)"
                )
                return self._give_up(envelope, letter(reason))
            if result.outcome is Outcome.GAP:
                # Another delivery applied an event in between: judge this one again on its next receipt.
                raise self._hand_back(envelope, result.last_applied or 0)
        refusal = _REFUSALS.get(result.outcome)
        if refusal is not None:
            self._observe(result.outcome, envelope)
            return self._give_up(envelope, letter(refusal.format(seq=envelope.seq)))
        self._observe(result.outcome, envelope)
        return result.outcome

    def _apply(self, envelope: Envelope, *, skip_after: int | None) -> Result:
        if self._external is not None:
            refused = self.inbox.check(envelope, skip_after=skip_after)
            if refused is not None:
                return refused
            self._external(envelope)
        return self.inbox.apply(envelope, self._effect, skip_after=skip_after)

    def observe_failure(self, message_id: str, error: Exception) -> None:
        """A message that failed for another reason than a gap: handed back, logged with its id (and its
        event's keys, when it got that far), counted."""
        details = {
            "consumer": self.inbox.settings.consumer,
            "message_id": message_id,
            "error": type(error).__name__,
        }
        if self._handling is not None and self._handling[0] == message_id:
            details.update(log_keys(self._handling[1]))
        _log.warning("inbox message failed; handed back", extra=details)
        if self._metrics is not None:
            self._metrics.add_metric(name=FAILURES_METRIC, unit="Count", value=1)

    def _hand_back(self, envelope: Envelope, last_applied: int) -> GapNotFilledError:
        self._observe(Outcome.GAP, envelope)
        return GapNotFilledError(
            event_id=envelope.event_id,
            aggregate_key=envelope.aggregate_key,
            seq=envelope.seq,
            last_applied=last_applied,
        )

    def _give_up(self, envelope: Envelope | None, letter: DeadLetter) -> Outcome:
        # Raises DeadLetterError if the queue does not take it: the message is then handed back, not lost.
        self._dead_letters.send(letter)
        self._observe(
            Outcome.DEAD_LETTERED, envelope, message_id=letter.source_message_id, reason=letter.reason
        )
        return Outcome.DEAD_LETTERED

    def _observe(
        self, outcome: Outcome, envelope: Envelope | None, *, message_id: str | None = None, reason: str = ""
    ) -> None:
        details: dict[str, Any] = {"consumer": self.inbox.settings.consumer, "outcome": outcome.value}
        if envelope is not None:
            details.update(event_id=envelope.event_id, aggregate_key=envelope.aggregate_key, seq=envelope.seq)
            details.update(log_keys(envelope))  # also without an event scope (a consumer built by hand)
        if message_id is not None:
            details["message_id"] = message_id
        if reason:
            details["reason"] = reason
        level = logging.WARNING if outcome is Outcome.DEAD_LETTERED else logging.INFO
        _log.log(level, "inbox %s", outcome.value, extra=details)
        if self._metrics is not None:
            self._metrics.add_metric(name=METRIC_NAMES[outcome], unit="Count", value=1)


def _first_received(attributes: Mapping[str, Any], clock: Clock) -> datetime:
    """When SQS first handed the message out: where its wait for a predecessor started."""
    try:
        return datetime.fromtimestamp(int(attributes["ApproximateFirstReceiveTimestamp"]) / 1000, UTC)
    except (KeyError, TypeError, ValueError):
        return clock()


def _event_time(event: Mapping[str, Any], clock: Clock) -> datetime:
    try:
        return datetime.fromisoformat(str(event["time"]).replace("Z", "+00:00")).astimezone(UTC)
    except (KeyError, ValueError):
        return clock()


def check_external_ordering(ordering: Ordering, on_gap_timeout: GapTimeout) -> None:
    """External calls keep the order rules only where no later event can pass the inbox's check while an
    earlier one's call is made and its record not yet written: strict waiting (or no order at all)."""
    if ordering is Ordering.LATEST:
        raise ConfigurationError(
            "external effects need strict or unordered ordering: in latest mode a later event's call may be "
            "made before an earlier one whose record failed is retried"
        )
    if ordering is Ordering.STRICT and on_gap_timeout is GapTimeout.APPLY:
        raise ConfigurationError(
            "external effects cannot apply past gaps (on_gap_timeout apply): a skipped predecessor arriving "
            "meanwhile would have its call made after its successor's"
        )

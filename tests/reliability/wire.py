"""The AWS client layer of the reliability suite: faults, crash points and the record of what went out.

Everything is injected through botocore's event hooks on the functions' real boto3 clients (talking to moto
in process), never by changing product code:

- `before-parameter-build`: a single-entry fault takes chosen entries out of a PublishBatch or PutEvents
  request before it is sent (the rest go to moto);
- `before-call`: a call fault answers the call with the service's error instead of sending it (what
  botocore raises is the `ClientError` AWS would cause); a crash point raises `Crash` there (nothing sent);
- `after-call`: the entries moto accepted are recorded (the wire), the taken-out entries are put back into
  the response as failed, every listener of the calls that returned is told (what a writer committed), and a
  crash point raises `Crash` after the call returned.

The entries a call fault refused are recorded too (`refused`): which events a destination outage kept out.

A claim check (docs/contracts.md, "Claim checks") carries no aggregate or seq: the recorder resolves it with
the inbox's own resolution (`outbox_inbox.claim_checks`) through `payloads`, a store no fault reaches, and
records the envelope it points to (`body`) beside what went on the wire (`sent`).

`Crash` derives from BaseException: no `except Exception` in the product catches it, so it ends the
invocation exactly where it was raised, as a process killed there would. The invoker turns it into a
function error and throws the function's instance away (its clients, its wiring: module state), so the next
invocation starts a fresh one, as a new Lambda container would.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from outbox.payload_store import PayloadStore
from outbox_inbox import claim_checks
from outbox_inbox.errors import MalformedEnvelopeError

Clock = Callable[[], float]

SNS = "sns"
EVENTBRIDGE = "eventbridge"
DESTINATION_OPERATIONS = {SNS: "PublishBatch", EVENTBRIDGE: "PutEvents"}


class Crash(BaseException):
    """The function's process died at this point (killed, out of memory, timed out)."""

    def __init__(self, where: str, *, timeout: bool = False) -> None:
        super().__init__(where)
        self.where = where
        self.timeout = timeout


@dataclass(frozen=True)
class Publication:
    """One entry a destination accepted, in the order the destinations accepted them."""

    destination: str
    event_id: str
    aggregate_key: str
    seq: int
    event_type: str
    body: str
    """The envelope as published (JSON text); for a claim check, the stored envelope it points to."""
    invocation: int
    function: str
    at: float
    sent: str = ""
    """What went on the wire when it was a claim check (the extended clients' pointer, the bus's claim);
    empty when `body` itself went."""

    @property
    def wire_body(self) -> str:
        """What the destination delivers to its subscribers."""
        return self.sent or self.body


@dataclass(frozen=True)
class Refusal:
    """An event a destination refused with a call fault (the whole call answered with an error)."""

    destination: str
    event_id: str
    kind: str
    at: float


@dataclass
class CallFault:
    """Every matching call of the matching functions is answered with an error, while active."""

    kind: str
    service: str
    operations: frozenset[str] | None
    """None: every operation of the service."""
    code: str
    status: int
    functions: frozenset[str] | None = None
    """None: every function's clients."""
    until: float | None = None
    remaining: int | None = None
    injected: int = 0

    def matches(self, function: str, service: str, operation: str, now: float) -> bool:
        if self.remaining == 0 or (self.until is not None and now >= self.until):
            return False
        if service != self.service or (self.operations is not None and operation not in self.operations):
            return False
        return self.functions is None or function in self.functions


@dataclass
class EntryFault:
    """Entries of PublishBatch or PutEvents whose position in the call matches fail on their own."""

    kind: str
    service: str
    code: str
    sender_fault: bool
    every: int = 1
    """Entry positions divisible by this fail (1: every entry)."""
    until: float | None = None
    remaining: int | None = None
    injected: int = 0

    def active(self, service: str, now: float) -> bool:
        return service == self.service and self.remaining != 0 and (self.until is None or now < self.until)


@dataclass
class CrashPoint:
    """Raise `Crash` at the `nth` matching call of `function` (before it is sent or after it returned)."""

    function: str
    service: str
    operation: str
    when: str
    """"before" (nothing sent) or "after" (the call did its work and returned)."""
    nth: int = 1
    timeout: bool = False
    condition: Callable[[dict[str, Any]], bool] | None = None
    """Counts only calls whose parameters pass (e.g. a TransactWriteItems that marks rows)."""
    on_fire: Callable[[], None] | None = None
    kind: str = ""
    """The schedule's fault kind (publisher_crash, ...): what its firing is counted as."""
    until: float | None = None
    """Disarmed at this virtual time if it has not fired by then (the drain's first minutes)."""
    seen: int = 0
    fired: bool = False


@dataclass
class Invocation:
    number: int
    function: str
    crashed: bool = False
    faults: Counter[str] = field(default_factory=Counter)
    """What was injected during it, by service (and `entries` for single-entry faults)."""
    recorded: frozenset[tuple[str, str]] = frozenset()
    """(event_id, destination) of the deliveries it made that the table recorded when it ended: the event's
    row was gone (settled, skipped) or named the destination in its `delivered_to`. Nothing sends an event to
    a destination again once that is recorded."""
    retried: bool = False
    """A publisher invocation that reported a failure (an error, batch item failures): the mapping sends
    (part of) its batch again, records of events it published and recorded included."""


@dataclass
class Wire:
    clock: Clock
    call_faults: list[CallFault] = field(default_factory=list)
    entry_faults: list[EntryFault] = field(default_factory=list)
    crash_points: list[CrashPoint] = field(default_factory=list)
    published: list[Publication] = field(default_factory=list)
    poison_sent: list[str] = field(default_factory=list)
    """event_id of every poison message the poison queue accepted."""
    poisoned_by: Counter[str] = field(default_factory=Counter)
    """Poison messages the poison queue accepted, by the function that sent them."""
    refused: list[Refusal] = field(default_factory=list)
    """Events a destination's call fault refused, in order."""
    injected: Counter[str] = field(default_factory=Counter)
    """What took effect, by fault kind: requests (or entries) failed, crash points fired."""
    crashes: Counter[str] = field(default_factory=Counter)
    """Crash points that fired, by function."""
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """Calls that returned (no injected error), by (function, service, operation)."""
    invocations: list[Invocation] = field(default_factory=list)
    current: Invocation | None = None
    on_publication: list[Callable[[Publication], None]] = field(default_factory=list)
    on_call: list[Callable[[str, str, str, dict[str, Any]], None]] = field(default_factory=list)
    """Told (function, service, operation, parameters) of every call that returned without an error."""
    payloads: PayloadStore | None = None
    """Where the recorder reads the envelopes claim checks point to (no fault reaches it)."""
    claims: Counter[str] = field(default_factory=Counter)
    """Claim checks the destinations accepted, by event_id."""
    unreadable: list[str] = field(default_factory=list)
    """event_id of every claim check a destination accepted whose stored envelope could not be read."""

    # --- invocations -----------------------------------------------------------------------------------

    def begin(self, function: str) -> Invocation:
        invocation = Invocation(len(self.invocations) + 1, function)
        self.invocations.append(invocation)
        self.current = invocation
        return invocation

    def end(self) -> None:
        self.current = None

    def clear_faults(self) -> None:
        self.call_faults.clear()
        self.entry_faults.clear()

    def active_faults(self) -> bool:
        now = self.clock()
        faults: list[CallFault | EntryFault] = [*self.call_faults, *self.entry_faults]
        return any(f.remaining != 0 and (f.until is None or now < f.until) for f in faults)

    # --- hooks -----------------------------------------------------------------------------------------

    def instrument(self, client: Any, function: str, service: str) -> Any:
        """Register the hooks on a function's client; `service` is our short name (sns, eventbridge, ...)."""
        events = client.meta.events

        def before_parameter_build(
            params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
        ) -> None:
            self._take_out_entries(service, model.name, params, context)

        def before_call(model: Any, params: Any, context: dict[str, Any], **_: Any) -> Any:
            operation = model.name
            self._crash(function, service, operation, "before", context)
            fault = self._call_fault(function, service, operation)
            if fault is not None:
                self._refused(service, operation, fault.kind, context)
                return _error(fault.code, fault.status)
            if context.get("reliability_all_taken_out"):
                return _all_failed(service, context["reliability_taken_out"])
            return None

        def after_call(
            http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
        ) -> None:
            operation = model.name
            status = getattr(http_response, "status_code", 200)
            if status < 300:
                self.calls[(function, service, operation)] += 1
                self._record(function, service, operation, parsed, context)
                self._put_back_entries(service, parsed, context)
                for listener in self.on_call:
                    listener(function, service, operation, context.get("reliability_params", {}))
            self._crash(function, service, operation, "after", context)

        events.register_first("before-parameter-build", before_parameter_build)
        events.register_first("before-call", before_call)
        events.register_first("after-call", after_call)
        return client

    def _call_fault(self, function: str, service: str, operation: str) -> CallFault | None:
        now = self.clock()
        for fault in self.call_faults:
            if fault.matches(function, service, operation, now):
                fault.injected += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                self.injected[fault.kind] += 1
                if self.current is not None:
                    self.current.faults[service] += 1
                return fault
        return None

    def _crash(self, function: str, service: str, operation: str, when: str, context: dict[str, Any]) -> None:
        now = self.clock()
        for point in self.crash_points:
            if point.fired or point.function != function or point.service != service:
                continue
            if point.until is not None and now >= point.until:
                continue
            if point.operation != operation or point.when != when:
                continue
            if point.condition is not None and not point.condition(context.get("reliability_params", {})):
                continue
            point.seen += 1
            if point.seen == point.nth:
                point.fired = True
                if point.on_fire is not None:
                    point.on_fire()
                self.injected[point.kind or ("timeout" if point.timeout else "crash")] += 1
                self.crashes[function] += 1
                raise Crash(f"{function}: {when} {service} {operation} #{point.nth}", timeout=point.timeout)

    def _refused(self, service: str, operation: str, kind: str, context: dict[str, Any]) -> None:
        if DESTINATION_OPERATIONS.get(service) != operation:
            return
        now = self.clock()
        for entry in context.get("reliability_sent", []):
            self.refused.append(Refusal(service, _event_id_of(service, entry), kind, now))

    def _take_out_entries(
        self, service: str, operation: str, params: dict[str, Any], context: dict[str, Any]
    ) -> None:
        context["reliability_params"] = params
        if DESTINATION_OPERATIONS.get(service) != operation:
            return
        now = self.clock()
        fault = next((f for f in self.entry_faults if f.active(service, now)), None)
        name = "PublishBatchRequestEntries" if service == SNS else "Entries"
        entries = list(params.get(name, []))
        context["reliability_sent"] = entries
        if fault is None:
            return
        taken = [(i, e) for i, e in enumerate(entries) if i % fault.every == 0]
        if not taken:
            return
        fault.injected += len(taken)
        if fault.remaining is not None:
            fault.remaining -= 1
        self.injected[fault.kind] += len(taken)
        if self.current is not None:
            self.current.faults["entries"] += len(taken)
        kept = [e for i, e in enumerate(entries) if i % fault.every != 0]
        context["reliability_taken_out"] = [(i, e, fault.code, fault.sender_fault) for i, e in taken]
        context["reliability_sent"] = kept
        if kept:
            params[name] = kept
        else:
            context["reliability_all_taken_out"] = True

    def _put_back_entries(self, service: str, parsed: dict[str, Any], context: dict[str, Any]) -> None:
        taken = context.get("reliability_taken_out")
        if not taken or context.get("reliability_all_taken_out"):
            return
        if service == SNS:
            parsed.setdefault("Failed", []).extend(
                {"Id": e["Id"], "Code": code, "SenderFault": sender, "Message": "injected"}
                for _, e, code, sender in taken
            )
            return
        answers = list(parsed.get("Entries", []))
        for position, _, code, _ in taken:
            answers.insert(position, {"ErrorCode": code, "ErrorMessage": "injected"})
        parsed["Entries"] = answers
        parsed["FailedEntryCount"] = sum(1 for answer in answers if "ErrorCode" in answer)

    def _record(
        self, function: str, service: str, operation: str, parsed: dict[str, Any], context: dict[str, Any]
    ) -> None:
        sent: list[dict[str, Any]] = context.get("reliability_sent", [])
        accepted: list[dict[str, Any]] = []
        if service == SNS and operation == "PublishBatch":
            ok = {entry["Id"] for entry in parsed.get("Successful", [])}
            accepted = [e for e in sent if e["Id"] in ok]
        elif service == EVENTBRIDGE and operation == "PutEvents":
            answers = parsed.get("Entries", [])
            accepted = [e for e, answer in zip(sent, answers, strict=False) if "EventId" in answer]
        elif service == "sqs" and operation == "SendMessage":
            params = context.get("reliability_params", {})
            if "poison" in str(params.get("QueueUrl", "")):
                try:
                    poisoned = json.loads(params.get("MessageBody", "{}"))
                except ValueError:
                    poisoned = {}
                self.poison_sent.append(str(_find_event_id(poisoned)))
                self.poisoned_by[function] += 1
            return
        else:
            return
        invocation = self.current.number if self.current is not None else 0
        for entry in accepted:
            body = str(entry["Message" if service == SNS else "Detail"])
            try:
                envelope, stored = self._envelope(service, body)
            except MalformedEnvelopeError:
                # A claim check whose envelope no consumer could read: published without its body.
                self.unreadable.append(_event_id_of(service, entry))
                continue
            if stored is not None:
                self.claims[str(envelope["event_id"])] += 1
            publication = Publication(
                destination=service,
                event_id=str(envelope["event_id"]),
                aggregate_key=f"{envelope['aggregate_type']}#{envelope['aggregate_id']}",
                seq=int(envelope["seq"]),
                event_type=str(envelope["event_type"]),
                body=body if stored is None else stored,
                invocation=invocation,
                function=function,
                at=self.clock(),
                sent="" if stored is None else body,
            )
            self.published.append(publication)
            for listener in self.on_publication:
                listener(publication)

    def _envelope(self, service: str, body: str) -> tuple[dict[str, Any], str | None]:
        """The envelope an accepted entry carries, and its JSON text when the entry was a claim check (None:
        the entry is the envelope). Resolved as a consumer resolves it (outbox_inbox.claim_checks)."""
        if service == SNS:
            ref = claim_checks.pointer_in(body)
            document = json.loads(body) if ref is None else claim_checks.resolve(ref, self.payloads)
        else:
            detail = json.loads(body)
            ref = claim_checks.eventbridge_claim(detail)
            claim = claim_checks.resolve(ref, self.payloads, claim=detail) if ref is not None else None
            document = detail if claim is None else claim
        if not isinstance(document, dict):
            raise TypeError(f"{service} accepted an entry that is no envelope")
        return document, None if ref is None else json.dumps(document, default=float)


def _event_id_of(service: str, entry: dict[str, Any]) -> str:
    """The event an entry carries, from what every entry holds (a claim check too): SNS's `event_id` message
    attribute, the bus's Detail."""
    if service == SNS:
        return str(entry["MessageAttributes"]["event_id"]["StringValue"])
    return str(json.loads(entry["Detail"])["event_id"])


def _find_event_id(document: Any) -> str | None:
    """The poison message's event id, wherever the message keeps it."""
    if isinstance(document, dict):
        if isinstance(document.get("event_id"), str):
            return str(document["event_id"])
        for value in document.values():
            found = _find_event_id(value)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class _Http:
    status_code: int


def _error(code: str, status: int) -> tuple[_Http, dict[str, Any]]:
    return _Http(status), {
        "Error": {"Code": code, "Message": f"Injected fault: {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }


def _all_failed(
    service: str, taken: list[tuple[int, dict[str, Any], str, bool]]
) -> tuple[_Http, dict[str, Any]]:
    if service == SNS:
        return _Http(200), {
            "Successful": [],
            "Failed": [
                {"Id": e["Id"], "Code": code, "SenderFault": sender, "Message": "injected"}
                for _, e, code, sender in taken
            ],
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
    return _Http(200), {
        "FailedEntryCount": len(taken),
        "Entries": [{"ErrorCode": code, "ErrorMessage": "injected"} for _, _, code, _ in taken],
        "ResponseMetadata": {"HTTPStatusCode": 200},
    }

"""The runtime's trace journal (outbox_local.trace_journal) on the event shapes Lambda delivers: a failed
invocation hands every record back, the path a message came by is told from its body, a malformed message or
poison row is passed over, and only the most recent events are kept."""

from __future__ import annotations

import json
from typing import Any

from outbox.trace_context import TraceContext
from outbox_local.invocation import InvocationResult, Outcome
from outbox_local.trace_journal import TraceJournal
from tests.support.events import event
from tests.support.inbox import eventbridge_event, sns_notification, sqs_record

HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"
INVOCATION = "Root=1-00000001-000000000000000000000001;Parent=0000000000000001;Sampled=0"


def stream_event(*images: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventSource": "aws:dynamodb",
                "eventName": "INSERT",
                "dynamodb": {"NewImage": image, "SequenceNumber": str(n)},
            }
            for n, image in enumerate(images, 1)
        ]
    }


def test_a_failed_publisher_invocation_hands_every_record_back_and_a_poison_row_is_passed_over() -> None:
    journal = TraceJournal()
    traced = event("o-1", 1).to_item() | TraceContext.given(HEADER).attributes()
    poison = event("o-2", 1).to_item() | {"payload": {"S": "{not json"}}
    failed = Outcome(InvocationResult(error_type="Sandbox.Timedout", error_message="timed out"))
    journal.record("publisher", INVOCATION, stream_event(traced, poison), failed)
    chain = journal.chain(traced["event_id"]["S"])
    assert chain is not None
    assert chain["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert chain["row"]["trace_header"] == HEADER
    assert [(p["function"], p["handed_back"], p["trace_id"]) for p in chain["publish"]] == [
        ("publisher", True, "1-00000001-000000000000000000000001")
    ]
    assert chain["request"] is None
    assert journal.chain(poison["event_id"]["S"]) is None


def test_each_path_is_told_from_the_message_body_and_a_malformed_one_passed_over() -> None:
    journal = TraceJournal()
    placed = event("o-1", 1)
    records = [
        sqs_record(placed.envelope_json()),
        sqs_record(sns_notification(placed.envelope_json())),
        sqs_record(json.dumps(eventbridge_event(placed.envelope()))),
        sqs_record("{not json"),
    ]
    answer = Outcome(
        InvocationResult(payload={"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]})
    )
    journal.record("consumer", INVOCATION, {"Records": records}, answer)
    chain = journal.chain(placed.event_id)
    assert chain is not None
    assert [(c["via"], c["handed_back"]) for c in chain["consumers"]] == [
        ("SNS topic (raw delivery)", False),
        ("SNS topic", True),
        ("EventBridge bus", False),
    ]
    assert chain["trace_id"] is None  # no row seen, nor trace context


def test_only_the_most_recent_events_are_kept() -> None:
    journal = TraceJournal(max_events=2)
    events = [event("o-1", seq) for seq in (1, 2, 3)]
    for each in events:
        journal.record(
            "publisher", INVOCATION, stream_event(each.to_item()), Outcome(InvocationResult(payload={}))
        )
    assert journal.chain(events[0].event_id) is None
    assert all(journal.chain(each.event_id) is not None for each in events[1:])

"""SQS batches, message by message: only failed and gapped messages are reported back to Lambda.

A standard queue's batch is processed record by record and every record that raised is returned in
`batchItemFailures` (Lambda deletes the others). A FIFO queue's batch stops at the first failure of each
message group: the rest of that group is reported too, unprocessed, so a group is never applied past a
message that will come again; other groups go on. A batch whose every message is reported is an answer, not
an invocation error; an event with no records is (`InvalidSqsEventError`).

This is what Powertools' `BatchProcessor` and `SqsFifoPartialProcessor(skip_group_on_error=True)` do (with
`raise_on_entire_batch_failure` off), written out: importing Powertools' batch utility costs a cold start its
event data classes and asyncio, about a fifth of an `import boto3`, for a loop and a set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from outbox.aws import INVOCATION_CALL_S
from outbox.errors import OutOfTimeError
from outbox_inbox.consumer import InboxConsumer
from outbox_inbox.errors import GapNotFilledError, InvalidSqsEventError

CALLS_PER_RECORD: Final = 8
"""At most: the inbox's two reads, twice (external effects, judged again past a gap), Powertools' record of
the call (two), the transaction, a dead-letter send. The external call itself must bound its own time."""
MIN_TIME_PER_RECORD_MS: Final = CALLS_PER_RECORD * INVOCATION_CALL_S * 1000
"""A record is started only with this much of the invocation left; later ones are handed back untouched."""


def handle_sqs_batch(
    event: Mapping[str, Any], consumer: InboxConsumer, context: Any = None
) -> dict[str, Any]:
    """The partial batch response for one SQS event (`{"batchItemFailures": [...]}`)."""
    records = event.get("Records")
    # Lambda never sends an SQS batch without records: anything else (an EventBridge event, say) is refused,
    # as Powertools' BatchProcessor does, rather than answered as though every message were applied.
    if not isinstance(records, list) or not records:
        raise InvalidSqsEventError("the event has no Records list: not an SQS batch")
    fifo = any(str(record.get("eventSourceARN", "")).endswith(".fifo") for record in records)
    consumer.register_lambda_context(context)
    failed: list[str] = []
    failed_groups: set[str] = set()
    for position, record in enumerate(records):
        group = (record.get("attributes") or {}).get("MessageGroupId") if fifo else None
        if group and group in failed_groups:
            failed.append(record["messageId"])  # after its group's failure: not started, handed back
            continue
        try:
            _consume(record, consumer, context, first=position == 0)
        except Exception:
            failed.append(record["messageId"])
            if group:
                failed_groups.add(group)
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}


def _consume(record: Mapping[str, Any], consumer: InboxConsumer, context: Any, *, first: bool) -> None:
    # The first record always runs (a timeout mid-way writes nothing: its transaction is atomic), so a batch
    # can never be handed back untouched forever.
    if not first and context is not None and context.get_remaining_time_in_millis() < MIN_TIME_PER_RECORD_MS:
        raise OutOfTimeError("too little time left in the invocation: handing the message back")
    try:
        consumer.consume_sqs_record(record)
    except GapNotFilledError:
        raise  # logged and counted by the consumer
    except Exception as error:
        # Only its id goes back to Lambda: say which message failed, and why by type only (a message text may
        # quote data), so one the redrive policy later moves can be traced.
        consumer.observe_failure(record["messageId"], error)
        raise

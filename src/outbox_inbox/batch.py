"""SQS batches through Powertools' batch processing: only failed and gapped messages are reported.

A standard queue's batch is processed record by record and every record that raised is returned in
`batchItemFailures` (Lambda deletes the others). A FIFO queue's batch stops at the first failure of each
message group (Powertools' `SqsFifoPartialProcessor` with `skip_group_on_error`): the rest of that group is
reported too, so a group is never applied past a message that will come again; other groups go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from outbox.aws import INVOCATION_CALL_S
from outbox.errors import OutOfTimeError
from outbox_inbox.consumer import InboxConsumer
from outbox_inbox.errors import GapNotFilledError
from outbox_inbox.inbox import Outcome

CALLS_PER_RECORD: Final = 8
"""At most: the inbox's two reads, twice (external effects, judged again past a gap), Powertools' record of
the call (two), the transaction, a dead-letter send. The external call itself must bound its own time."""
MIN_TIME_PER_RECORD_MS: Final = CALLS_PER_RECORD * INVOCATION_CALL_S * 1000
"""A record is started only with this much of the invocation left; later ones are handed back untouched."""


def handle_sqs_batch(
    event: Mapping[str, Any], consumer: InboxConsumer, context: Any = None
) -> dict[str, Any]:
    """The partial batch response for one SQS event (`{"batchItemFailures": [...]}`)."""
    records = event.get("Records") or []
    fifo = any(str(record.get("eventSourceARN", "")).endswith(".fifo") for record in records)
    processor: BatchProcessor = (
        SqsFifoPartialProcessor(skip_group_on_error=True) if fifo else BatchProcessor(EventType.SQS)
    )
    # A batch whose every message is handed back (all waiting for a predecessor, say) is an answer, not an
    # invocation error: report them all instead of failing the invocation. (Set on the processor: the FIFO
    # one takes no such argument.)
    processor.raise_on_entire_batch_failure = False
    consumer.register_lambda_context(context)

    started = False

    def record_handler(record: SQSRecord) -> Outcome:
        nonlocal started
        # The first record always runs (a timeout mid-way writes nothing: its transaction is atomic), so a
        # batch can never be handed back untouched forever.
        if (
            started
            and context is not None
            and context.get_remaining_time_in_millis() < MIN_TIME_PER_RECORD_MS
        ):
            raise OutOfTimeError("too little time left in the invocation: handing the message back")
        started = True
        try:
            return consumer.consume_sqs_record(record.raw_event)
        except GapNotFilledError:
            raise  # logged and counted by the consumer
        except Exception as error:
            # Powertools only keeps it for the batch response: say which message failed, and why by type only
            # (a message text may quote data), so one the redrive policy later moves can be traced.
            consumer.observe_failure(record.message_id, error)
            raise

    response: dict[str, Any] = dict(
        process_partial_response(
            event=dict(event), record_handler=record_handler, processor=processor, context=context
        )
    )
    return response

"""The sample's inbox consumers in the local runtime, on the synthesized app: events the publisher announces
reach each consumer's queue (the summary's through its topic filter, the ledger's through its bus rule),
its SQS mapping invokes its function, and its read model follows."""

from typing import Any

import pytest

from outbox import outputs
from outbox_local.runtime import LocalRuntime
from tests.support.aws import scan_all
from tests.support.events import event
from tests.support.inbox import cancelled, order_events


@pytest.fixture
def runtime(app_runtime: LocalRuntime) -> LocalRuntime:
    return app_runtime


def items(runtime: LocalRuntime, output: str) -> dict[str, dict[str, Any]]:
    table = runtime.outputs[output]
    return {item["pk"]["S"]: item for item in scan_all(runtime.client("dynamodb"), table)}


def test_published_events_reach_both_inbox_consumers_and_their_read_models(runtime: LocalRuntime) -> None:
    # Given the sample's consumers running locally: both of their SQS mappings are there
    assert len(runtime.queue_mappings) == 2
    dynamodb = runtime.client("dynamodb")
    outbox = runtime.outputs[outputs.OUTBOX_TABLE_NAME]
    placed, confirmed, *_ = order_events("o-1")
    other_type = event("o-2", 1, event_type="OrderNoted", payload={"order_id": "o-2"})

    # When an order's events are written and published (placed, confirmed, cancelled), and an event of a
    # type the summary's filter does not pass
    for written in (placed, confirmed, cancelled("o-1", 3), other_type):
        dynamodb.put_item(TableName=outbox, Item=written.to_item())
    runtime.drain_streams()

    # Then the summary (strict, every Order event type) shows the order cancelled at seq 3
    summary = items(runtime, outputs.ORDER_SUMMARY_TABLE_NAME)
    assert summary["order#o-1"]["status"] == {"S": "CANCELLED"}
    assert summary["order#o-1"]["last_seq"] == {"N": "3"}
    # And the filtered-out event never reached it (no record of it, nothing waiting in its queue)
    assert not [key for key in summary if "o-2" in key]
    # And the ledger (latest, OrderCancelled only) has the cancellation, seqs 1 and 2 never sent to it
    ledger = items(runtime, outputs.CANCELLATIONS_TABLE_NAME)
    assert ledger["cancellation#o-1"]["seq"] == {"N": "3"}
    assert [key for key in ledger if not key.startswith("order-cancellations#")] == ["cancellation#o-1"]
    # And every message was consumed: nothing in flight, nothing dead-lettered
    sqs = runtime.client("sqs")
    for mapping in runtime.queue_mappings:
        attributes = sqs.get_queue_attributes(QueueUrl=mapping.settings.queue_url, AttributeNames=["All"])
        assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
        assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"
    for output in (outputs.ORDER_SUMMARY_DEAD_LETTER_QUEUE_URL, outputs.CANCELLATIONS_DEAD_LETTER_QUEUE_URL):
        depth = sqs.get_queue_attributes(QueueUrl=runtime.outputs[output], AttributeNames=["All"])
        assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0"

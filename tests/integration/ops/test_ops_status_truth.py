"""`outbox status` tells the truth: healthy only while every pending event is within the sweeper's grace (and
then says what waits), degraded once one is past it, and the consumers' dead letters counted (every stack
output ending in DeadLetterQueueUrl, SQS's approximate depth, said so)."""

from __future__ import annotations

from datetime import timedelta

from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_status_and_failed import new


def test_events_pending_within_the_sweep_grace_are_healthy_and_the_status_says_they_wait(ops: Ops) -> None:
    # Given an event written 20 s ago that the stream has not published yet (no stream run since)
    ops.put(new("fresh", 1, age=timedelta(seconds=20), event_type="OrderNoted"))

    # When the operator asks for the status
    result = ops.cli("status", "--json")
    text = ops.cli("status")

    # Then it is healthy (the sweeper would not take it yet), and its headline says that one event waits
    assert (result.code, result.json["verdict"], result.json["pending"]) == (0, "healthy", 1)
    (reason,) = result.json["reasons"]
    assert reason.startswith("1 event(s) pending, the oldest 2")
    assert reason.endswith(" s: within the sweeper's 60 s grace, on their way out")
    assert text.code == 0
    assert text.out.startswith("HEALTHY: 1 event(s) pending, the oldest 2")
    assert "nothing waits" not in text.out


def test_an_event_pending_past_the_sweep_grace_is_never_healthy(ops: Ops) -> None:
    # Given an event written 90 s ago and not published: past the sweeper's 60 s grace
    key = ops.put(new("late", 1, age=timedelta(seconds=90), event_type="OrderNoted"))
    row = ops.row(key)

    # When the operator asks for the status
    result = ops.cli("status", "--json")

    # Then it is degraded (exit 3): the stream missed it, the sweeper should take it; nothing changed
    assert (result.code, result.json["verdict"]) == (3, "degraded")
    first = result.json["reasons"][0]
    assert first.startswith("the oldest pending event is 9")
    assert first.endswith(
        " s old, past the sweeper's 60 s grace: the stream did not publish it; the sweeper should take it on "
        "its next run"
    )
    assert ops.row(key) == row

    # And a sweeper configured with a longer grace (--sweep-grace) is not expected to have taken it yet
    longer = ops.cli("status", "--sweep-grace", "2m", "--json")
    assert (longer.code, longer.json["verdict"]) == (0, "healthy")


def test_a_consumers_dead_letters_degrade_the_status_with_their_approximate_depth(ops: Ops) -> None:
    # Given an event the order-summary consumer cannot apply (its payload is not the OrderPlaced schema): once
    # published, the consumer dead-letters it
    ops.put(new("dead", 1))
    ops.publish()

    # When the operator asks for the status
    result = ops.cli("status", "--json")
    text = ops.cli("status")

    # Then it is degraded by that dead-letter queue, named with its approximate depth and the runbook
    assert (result.code, result.json["verdict"]) == (3, "degraded")
    assert result.json["reasons"] == [
        "about 1 message(s) in OrderSummary's dead-letter queue (SQS's approximate count): the consumer gave "
        "up on them; see docs/runbook.md#consumerdeadletters"
    ]
    queues = {queue["consumer"]: queue for queue in result.json["consumer_dead_letter_queues"]}
    assert queues["OrderSummary"]["visible"] + queues["OrderSummary"]["in_flight"] == 1
    assert queues["OrderSummary"]["approximate"] is True
    assert (queues["Cancellations"]["visible"], queues["Cancellations"]["in_flight"]) == (0, 0)
    assert "dead letters, OrderSummary   1 visible, 0 in flight (approximate)" in text.out


def test_without_stack_the_command_finds_the_local_runtimes_stack_and_says_which(ops: Ops) -> None:
    # Given the local runtime, its stack registered in its CloudFormation
    stack = ops.runtime.options.stack_name

    # When the operator asks for the status without --stack
    result = ops.cli("status", "--json", discover=True)

    # Then it found the runtime's stack, said so on stderr, and read its outbox
    assert result.code == 0, result.err
    assert result.err == (
        f"outbox: stack {stack} (the only one in us-east-1 whose outputs name an outbox; --stack to choose)\n"
    )
    assert result.json["table"] == ops.table

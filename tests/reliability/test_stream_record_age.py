"""The stream mapping's record age (MaximumRecordAgeInSeconds 3,600) on the virtual clock: moto stamps its
records with the wall clock, the suite's stream re-stamps them with the virtual time they were written at
(tests.reliability.system), so a record an hour old in the schedule is an hour old to the mapping."""

from __future__ import annotations

import json

from tests.reliability.scenarios import drain_and_check, place_orders, statuses
from tests.reliability.system import SWEEPER, running_system


def test_a_record_older_than_an_hour_of_virtual_time_is_discarded_and_then_swept() -> None:
    with running_system(seed=20) as system:
        # Given the mapping not reading the stream while an order is placed
        system.stream_stalled = True
        (order_id,) = place_orders(system, 1, transitions=False)
        written = system.clock.seconds()
        # When 3,601 s of virtual time pass before it reads again
        system.clock.advance(3601)
        system.stream_stalled = False
        system.run_until(
            lambda: system.mapping.stats().discarded_records >= 1, deadline=system.clock.seconds() + 5
        )
        # Then the mapping discarded the record as too old (its on-failure message says RecordAgeExceeded)
        assert system.mapping.stats().discarded_records == 1
        messages = system.admin["sqs"].receive_message(
            QueueUrl=system.resources.on_failure_queue, MaxNumberOfMessages=10
        )["Messages"]
        conditions = [json.loads(m["Body"])["requestContext"]["condition"] for m in messages]
        assert conditions == ["RecordAgeExceeded"]
        assert system.clock.seconds() - written > 3600
        # And the sweeper published the event, the publisher never did
        drain_and_check(system)
        assert statuses(system) == {"OUT": 1}
        publishers = {
            (p.function, p.destination) for p in system.wire.published if order_id in p.aggregate_key
        }
        assert publishers == {(SWEEPER, "sns"), (SWEEPER, "eventbridge")}

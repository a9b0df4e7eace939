"""Every `outbox` command of the README's operations runbook runs as written, in the order a reader meets
them, against the local runtime holding what the runbook talks about: a FAILED event (`$EVENT_ID`, and a
second one for the skip, which comes after its redrive), an aggregate `Order#42` held behind a missing
`seq` 6, and a record the stream mapping discarded."""

from __future__ import annotations

import shlex
from datetime import timedelta

from outbox.model import RowKey
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import poisoned
from tests.integration.ops.test_ops_status_and_failed import new
from tests.support.readme import runbook_commands


def test_every_runbook_command_runs_as_written(ops: Ops) -> None:
    # Given what the runbook's commands act on
    _, _, event_id = poisoned(ops, "runbook")
    _, _, other_id = poisoned(ops, "runbook-skip")
    for seq in (1, 2, 3, 4, 5, 7):
        ops.put(new("42", seq, age=timedelta(days=1)))
    ops.publish()
    rule = ops.runtime.faults.arm("sns", "PublishBatch", error_code="AuthorizationError", http_status=403)
    ops.put(new("runbook-discarded", 1, age=timedelta(days=1)))
    ops.publish()
    ops.runtime.faults.disarm(rule)
    commands = runbook_commands()
    assert len(commands) >= 15, "the runbook lost its commands"

    # When each runs as written (the skip of a FAILED event gets the second one: the first was redriven)
    for command in commands:
        argv = shlex.split(command)[1:]
        if argv[:1] == ["skip"] and "--missing" not in argv:
            argv = [other_id if word == "$EVENT_ID" else word for word in argv]
        result = ops.cli(*[event_id if word == "$EVENT_ID" else word for word in argv])

        # Then it succeeds (status: whatever the verdict), with nothing on stderr
        assert result.code in (0, 3, 4), (command, result.err)
        assert result.err == "", (command, result.err)

    # And the runbook's fixes took: the FAILED event redriven, the other skipped, the gap released
    failed = {row["event_id"]: row for row in ops.cli("failed", "list", "--json").json["failed"]}
    assert event_id not in failed
    assert failed[other_id]["release_reason"] == "superseded by the next event"
    assert "predecessor_released_at" in ops.row(RowKey("Order#42", 7))

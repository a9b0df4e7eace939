"""Every `outbox` command of the operations runbook (docs/runbook.md) runs as written, in the order a reader
meets them, against the local runtime holding what the runbook talks about: a FAILED event (`$EVENT_ID`, and a
second one for the skip, which comes after its redrive), an aggregate `Order#42` held behind a FAILED event,
and a record the stream mapping discarded."""

from __future__ import annotations

import shlex
from datetime import timedelta

from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import discarded, poisoned
from tests.integration.ops.test_ops_status_and_failed import BAD_PAYLOAD, new
from tests.support.readme import runbook_commands


def test_every_runbook_command_runs_as_written(ops: Ops) -> None:
    # Given what the runbook's commands act on
    _, _, event_id = poisoned(ops, "runbook")
    other, _, other_id = poisoned(ops, "runbook-skip")
    for seq in (1, 2, 3, 4, 5):
        ops.put(new("42", seq, age=timedelta(days=1)))
    ops.put(new("42", 6, age=timedelta(days=1)), **BAD_PAYLOAD)
    ops.put(new("42", 7, age=timedelta(days=1)))
    ops.publish()
    discarded(ops, "runbook-discarded")
    commands = runbook_commands_as_argv()
    assert len(commands) >= 10, "the runbook lost its commands"

    # When each runs as written (the skip of a FAILED event gets the second one: the first was redriven)
    for argv in commands:
        acted_on = other_id if argv[:1] == ["skip"] else event_id
        result = ops.cli(*[acted_on if word == "$EVENT_ID" else word for word in argv])

        # Then it succeeds (status: whatever the verdict), with nothing on stderr
        assert result.code in (0, 3, 4), (argv, result.err)
        assert result.err == "", (argv, result.err)

    # And the runbook's fixes took: the FAILED event redriven, the other skipped (its row gone, the skip and
    # its reason in the audit)
    failed = {row["event_id"] for row in ops.cli("failed", "list", "--json").json["failed"]}
    assert event_id not in failed
    assert other_id not in failed
    assert ops.status_of(other) == "OUT"
    skips = [
        argv[argv.index("--reason") + 1]
        for argv in commands
        if argv[:1] == ["skip"] and "--dry-run" not in argv
    ]
    assert [(e["action"]["S"], e["reason"]["S"]) for e in ops.audit(other)] == [("skip", skips[-1])]


def runbook_commands_as_argv() -> list[list[str]]:
    """The runbook's commands, each as `outbox` would get its arguments."""
    return [shlex.split(command)[1:] for command in runbook_commands()]

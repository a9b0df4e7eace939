"""`outbox audit` and the audit entries `failed show` prints, through the real entry point, against the local
runtime: every redrive and skip, with who, when and why, kept after the event's row has left the table."""

from __future__ import annotations

from datetime import timedelta

from outbox.clock import parse_timestamp
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import MOTO_CALLER, fix_payload, poisoned

SECRET_PAYLOAD = "{not json"
"""The poison rows' payload (tests.integration.ops.test_ops_status_and_failed.BAD_PAYLOAD): data an
operator sees only when asking for it."""


def test_audit_lists_every_redrive_and_skip_with_who_when_and_why(ops: Ops) -> None:
    # Given A#1 poison, redriven without a fix (the sweeper fails it again), then skipped; and B#1 skipped
    a_first, _, a_event = poisoned(ops, "audit-a")
    assert ops.cli("redrive", "--event-id", a_event, "--reason", "try once more").code == 0
    ops.sweep()
    assert ops.status_of(a_first) == "FAILED"
    assert ops.cli("skip", a_event, "--reason", "cannot be repaired").code == 0
    b_first, _, b_event = poisoned(ops, "audit-b")
    assert ops.cli("skip", b_event, "--reason", "superseded").code == 0

    # When the operator lists what operators did
    result = ops.cli("audit", "--json")

    # Then each event's record holds its entries in the order they were made: action, who, why, and the
    # generation each acted on; the events' rows have left the table, their records have not
    assert result.code == 0, result.err
    records = result.json["audit"]
    assert [(r["aggregate_key"], r["seq"], r["event_id"]) for r in records] == [
        (a_first.aggregate_key, a_first.seq, a_event),
        (b_first.aggregate_key, b_first.seq, b_event),
    ]
    assert [
        [(e["action"], e["by"], e["reason"], e["generation"]) for e in r["entries"]] for r in records
    ] == [
        [("redrive", MOTO_CALLER, "try once more", 0), ("skip", MOTO_CALLER, "cannot be repaired", 1)],
        [("skip", MOTO_CALLER, "superseded", 0)],
    ]
    stamps = [parse_timestamp(entry["at"]) for record in records for entry in record["entries"]]
    assert stamps == sorted(stamps)
    assert (ops.status_of(a_first), ops.status_of(b_first)) == ("OUT", "OUT")

    # When the operator asks for one aggregate's
    only_b = ops.cli("audit", "--aggregate", b_first.aggregate_key, "--json")

    # Then only its record is listed
    assert [r["event_id"] for r in only_b.json["audit"]] == [b_event]

    # And the human form has a line per entry, with who and why
    text = ops.cli("audit").out.splitlines()
    assert text[0].split() == ["aggregate", "seq", "event_id", "at", "action", "by", "reason"]
    assert [line.split()[4] for line in text[1:]] == ["redrive", "skip", "skip"]
    reasons = ("try once more", "cannot be repaired", "superseded")
    assert all(line.endswith(reason) for line, reason in zip(text[1:], reasons, strict=True))
    assert all(MOTO_CALLER in line for line in text[1:])


def test_a_skip_entry_keeps_the_skipped_row_its_payload_shown_only_when_asked_for(ops: Ops) -> None:
    # Given a poison event the operator skipped: its row has left the table
    first, _, event_id = poisoned(ops, "kept")
    stored = ops.row(first)
    assert ops.cli("skip", event_id, "--reason", "superseded").code == 0
    assert ops.status_of(first) == "OUT"

    # When the operator lists the audit, without and with --show-payload
    plain = ops.cli("audit", "--json")
    with_payload = ops.cli("audit", "--json", "--show-payload")

    # Then the skip's entry keeps the row as it was (status, event, why it failed), its payload only if asked
    ((entry,),) = [record["entries"] for record in plain.json["audit"]]
    row = entry["row"]
    assert (row["status"], row["event_id"], row["last_error"]) == (
        stored["status"],
        stored["event_id"],
        stored["last_error"],
    )
    assert "payload" not in row
    assert SECRET_PAYLOAD not in plain.out
    ((shown,),) = [record["entries"] for record in with_payload.json["audit"]]
    assert shown["row"]["payload"] == {"S": SECRET_PAYLOAD}
    # And the human form never prints it
    assert SECRET_PAYLOAD not in ops.cli("audit", "--show-payload").out


def test_the_audit_record_of_a_redriven_event_stays_after_it_is_published(ops: Ops) -> None:
    # Given a FAILED event, fixed and redriven, then published by the sweeper: its row has left the table
    first, second, event_id = poisoned(ops, "published")
    fix_payload(ops, first)
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired").code == 0
    ops.sweep()
    assert (ops.status_of(first), ops.status_of(second)) == ("OUT", "OUT")

    # When the operator asks what was done to the aggregate
    result = ops.cli("audit", "--aggregate", first.aggregate_key, "--json")

    # Then the redrive is there, in order (not out of order): the record outlives the row
    (record,) = result.json["audit"]
    assert (record["event_id"], record["seq"]) == (event_id, first.seq)
    assert [(e["action"], e["reason"], e["out_of_order"]) for e in record["entries"]] == [
        ("redrive", "payload repaired", False)
    ]
    assert "row" not in record["entries"][0]


def test_failed_show_shows_the_audit_entries_of_the_event(ops: Ops) -> None:
    # Given a FAILED event redriven without a fix, and FAILED again at the sweeper's try
    first, _, event_id = poisoned(ops, "shown")
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "transient, surely").code == 0
    ops.sweep()
    assert ops.status_of(first) == "FAILED"

    # When the operator shows it
    shown = ops.cli("failed", "show", event_id, "--json")
    text = ops.cli("failed", "show", event_id).out

    # Then its audit record's entries come with it: who redrove it, when and why, and the generation it is now
    assert shown.code == 0, shown.err
    (entry,) = shown.json["audit"]
    assert (entry["action"], entry["by"], entry["reason"], entry["generation"]) == (
        "redrive",
        MOTO_CALLER,
        "transient, surely",
        0,
    )
    assert shown.json["generation"] == 1
    assert text.split("\naudit:\n", 1)[1].splitlines()[1].split()[1:] == [
        "redrive",
        MOTO_CALLER,
        "transient,",
        "surely",
    ]
    # And `failed list` keeps to the row: the audit record is read for `show` only
    (listed,) = ops.cli("failed", "list", "--json").json["failed"]
    assert listed["audit"] == []


def test_audit_of_an_outbox_no_operator_acted_on(ops: Ops) -> None:
    # Given a FAILED event no operator has acted on yet
    poisoned(ops, "untouched", age=timedelta(0))

    # When the operator lists the audit
    result = ops.cli("audit", "--json")

    # Then it is empty, and the human form says so
    assert (result.code, result.json) == (0, {"audit": []})
    assert ops.cli("audit").out == "no operator actions recorded\n"
    assert ops.cli("audit", "--aggregate", "Order#untouched", "--json").json == {"audit": []}

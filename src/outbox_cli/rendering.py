"""How the operations commands print for people: short aligned tables, the verdict first."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from botocore.exceptions import (
    BotoCoreError,
    ConnectionClosedError,
    ConnectionError,
    NoCredentialsError,
    NoRegionError,
)

from outbox.clock import format_timestamp
from outbox_ops.audit import AuditEntry, AuditRecord
from outbox_ops.failed import FailedRow
from outbox_ops.queues import QueueDepth
from outbox_ops.redrive import OperationReport
from outbox_ops.regions import RegionsReport
from outbox_ops.status import StatusReport


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return "\n".join(lines) + "\n"


def status(report: StatusReport) -> str:
    lines = [f"{report.verdict.value.upper()}: {report.reasons[0] if report.reasons else 'nothing waits'}"]
    lines += [f"  also: {reason}" for reason in report.reasons[1:]]
    age = "-" if report.oldest_pending_age_s is None else f"{report.oldest_pending_age_s:.0f} s"
    facts = [
        ("table", report.table),
        ("pending", f"{report.pending}{'' if report.pending_complete else '+'} (oldest {age})"),
        ("backing off", report.backing_off),
        ("held aggregates", report.held_count),
        ("failed", f"{report.failed} holding their aggregate, {report.failed_released} released"),
        ("poison queue", _queue(report.poison)),
        ("on-failure queue", _queue(report.on_failure)),
        *_dead_letters(report),
        ("published, last hour", "-" if report.published_last_hour is None else report.published_last_hour),
    ]
    for mapping in report.mappings or []:
        facts.append(("stream mapping", f"{mapping.state}, last result: {mapping.last_processing_result}"))
    if report.mappings is None:
        facts.append(("stream mapping", "not checked"))
    facts += [("unknown", what) for what in report.unknown]
    text = "\n".join(lines) + "\n\n" + table(["", ""], facts).split("\n", 1)[1]
    if report.held:
        text += "\nheld aggregates:\n" + table(
            ["aggregate", "waiting seq", "failed seq", "fix"],
            [(h.aggregate_key, h.waiting_seq, h.failed_seq, h.fix) for h in report.held],
        )
    if report.regions is not None:
        text += "\n" + regions(report.regions)
    return text


def regions(report: RegionsReport) -> str:
    """Each region's heartbeat as read here (age, state, what it takes and released, how far behind it saw
    each peer), then the origins taken over and by whom."""
    rows = []
    for heartbeat in report.heartbeats:
        age = heartbeat.age_s(report.checked_at)
        rows.append(
            (
                heartbeat.region + (" (home)" if heartbeat.region == report.home else ""),
                "never" if age is None else f"{age:.0f} s ago" + (" LOST" if report.lost(heartbeat) else ""),
                (heartbeat.state or "-")
                + ("" if heartbeat.since is None else f" since {format_timestamp(heartbeat.since)}"),
                ", ".join(heartbeat.taking) or "-",
                ", ".join(heartbeat.released) or "-",
                ", ".join(f"{peer} {behind:.0f} s" for peer, behind in heartbeat.behind_s().items()) or "-",
            )
        )
    text = f"regions (takeover after {report.takeover_after_s} s):\n" + table(
        ["region", "heartbeat", "state", "taking", "released", "saw peers behind by"], rows
    )
    taken = report.taken_over
    if taken:
        text += "\ntaken over:\n" + table(
            ["origin", "by", "since"], [(t.origin, t.by, format_timestamp(t.since)) for t in taken]
        )
    return text


def failed_rows(rows: Sequence[FailedRow]) -> str:
    if not rows:
        return "no FAILED events\n"
    return table(
        ["event_id", "aggregate", "seq", "event_type", "failed_at", "attempts", "holds", "last_error"],
        [
            (
                row.event_id or "-",
                row.key.aggregate_key,
                row.key.seq_text,
                row.event_type or "-",
                row.failed_at or "-",
                row.attempts,
                "yes" if row.holds_aggregate else f"no (released: {row.release_reason})",
                row.last_error or "-",
            )
            for row in rows
        ],
    )


def failed_row(row: FailedRow) -> str:
    facts: list[tuple[str, object]] = [
        ("event_id", row.event_id or "-"),
        ("aggregate", row.key.aggregate_key),
        ("seq", row.key.seq_text),
        ("event_type", row.event_type or "-"),
        ("occurred_at", row.occurred_at or "-"),
        ("failed_at", row.failed_at or "-"),
        ("attempts", row.attempts),
        ("last_error", row.last_error or "-"),
        ("holds its aggregate", "yes: later events wait for it" if row.holds_aggregate else "no"),
        ("generation", row.generation),
    ]
    if row.released_at is not None:
        facts.append(("released", f"{row.released_at}: {row.release_reason}"))
    if row.delivered_to:
        facts.append(("delivered to", ", ".join(row.delivered_to)))
    if row.payload is not None:
        facts.append(("payload", row.payload))
    text = table(["", ""], facts).split("\n", 1)[1]
    if row.audit:
        text += "\naudit:\n" + _entries(row.audit)
    return text


def audit(records: Sequence[AuditRecord]) -> str:
    if not records:
        return "no operator actions recorded\n"
    return table(
        ["aggregate", "seq", "event_id", "at", "action", "by", "reason"],
        [
            (
                record.key.aggregate_key,
                record.key.seq_text,
                record.event_id or "-",
                entry.at,
                entry.action + (" (out of order)" if entry.out_of_order else ""),
                entry.by,
                entry.reason,
            )
            for record in records
            for entry in record.entries
        ],
    )


def _entries(entries: Sequence[AuditEntry]) -> str:
    return table(
        ["at", "action", "by", "reason"],
        [(e.at, e.action + (" (out of order)" if e.out_of_order else ""), e.by, e.reason) for e in entries],
    )


def operation(report: OperationReport) -> str:
    head = "DRY RUN: nothing was changed; this is what the command would do\n" if report.dry_run else ""
    rows = table(
        ["aggregate", "seq", "event_id", "outcome", "detail"],
        [
            (
                r.key.aggregate_key if r.key else "-",
                r.key.seq if r.key else "-",
                r.event_id or "-",
                r.outcome.value,
                r.detail,
            )
            for r in report.rows
        ],
    )
    if report.dry_run:
        tail = [
            f"poison messages it would remove: {report.poison_messages_to_remove}",
            f"on-failure messages it would remove: {report.on_failure_messages_to_remove}",
        ]
    else:
        tail = [
            f"poison messages removed: {report.poison_messages_removed}",
            f"on-failure messages removed: {report.on_failure_messages_removed}",
        ]
    if report.messages_not_removed:
        tail.append(f"messages SQS did not delete (run again): {report.messages_not_removed}")
    if report.messages_hidden:
        tail.append(f"messages SQS did not hand back (visible within 5 min): {report.messages_hidden}")
    tail += [f"kept: {batch}" for batch in report.unmapped_batches]
    if report.poison_cleanup_error:
        tail.append(f"poison queue not cleaned up: {report.poison_cleanup_error}")
    if not report.dry_run and any(r.outcome.value == "redriven" for r in report.rows):
        tail.append("the sweeper publishes redriven events within its schedule: watch `outbox status`")
    return head + rows + "\n".join(tail) + "\n"


def _dead_letters(report: StatusReport) -> list[tuple[str, object]]:
    if not report.dead_letters:
        return [
            (
                "consumer dead letters",
                "none: the stack names no dead-letter queue (no output *DeadLetterQueueUrl)",
            )
        ]
    return [
        (
            f"dead letters, {found.queue.consumer}",
            "unknown (see above)" if found.depth is None else f"{_queue(found.depth)} (approximate)",
        )
        for found in report.dead_letters
    ]


def _queue(depth: QueueDepth | None) -> str:
    if depth is None:
        return "not checked (no queue known)"
    return f"{depth.visible} visible, {depth.in_flight} in flight"


def unanswered(error: BotoCoreError) -> str:
    """A call that never got AWS's answer, as one line naming its local cause where there is one."""
    endpoint = str(getattr(error, "kwargs", {}).get("endpoint_url") or "")
    if isinstance(error, NoRegionError):
        return "no AWS region is configured (AWS was not called): pass --region, or set AWS_REGION"
    if isinstance(error, NoCredentialsError):
        return (
            "no AWS credentials found (AWS was not called): configure them (aws configure, AWS_PROFILE), or "
            "pass --profile"
        )
    if isinstance(error, ConnectionError | ConnectionClosedError) and endpoint:
        if is_loopback(endpoint):
            return (
                f"nothing answers at {endpoint} ({type(error).__name__}): the local runtime is not running "
                "there; start it with `outbox local up`, or pass the --endpoint-url it prints"
            )
        return (
            f"nothing answers at {endpoint} ({type(error).__name__}): check --endpoint-url, --region and the "
            "network"
        )
    return f"AWS did not answer: {error}"


def is_loopback(url: str) -> bool:
    """The endpoint is this machine (where `outbox local up` runs)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

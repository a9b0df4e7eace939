"""The operations commands: `outbox status`, `failed list|show`, `redrive`, `skip`, `audit`.

Each works against real AWS (the default credential chain, `--region`, `--profile`) or the local runtime
(`--endpoint-url`, or AWS_ENDPOINT_URL), finds its table and queues from the stack's outputs (`--stack`, or
the one stack of the region whose outputs name an outbox, said on stderr; `--outbox PREFIX` for one of
several outboxes in a stack) or explicit flags, prints a table or `--json`, and exits non-zero with a
one-line reason when it fails (a call without an answer named by its local cause). The logic
is outbox_ops's; this module only parses, calls and prints. It never imports the local runtime.

Exit codes: 0 done; 1 failed, or some rows were refused; 2 bad usage. `status` exits 0 when healthy, 3 when
degraded, 4 when stuck.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from outbox.errors import OutboxError
from outbox_cli import arguments as argument_types
from outbox_cli import rendering
from outbox_ops.audit import AuditRecords
from outbox_ops.clients import OpsClients
from outbox_ops.failed import FailedFilter, FailedRows
from outbox_ops.redrive import OperationReport, Operations, Operator
from outbox_ops.resources import OutboxResources, discover_stack
from outbox_ops.status import StatusThresholds, Verdict, status

EXIT_FAILED = 1
EXIT_USAGE = 2
STATUS_EXIT = {Verdict.HEALTHY: 0, Verdict.DEGRADED: 3, Verdict.STUCK: 4}

Command = Callable[[argparse.Namespace, TextIO], int]


def add_commands(commands: Any) -> None:
    """Register the operations commands on the `outbox` parser's subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("where the outbox is")
    where.add_argument(
        "--region", type=argument_types.region, help="AWS region (default: your configuration's)"
    )
    where.add_argument(
        "--profile", type=argument_types.free_text, help="AWS profile (default: the default credential chain)"
    )
    where.add_argument(
        "--endpoint-url",
        type=argument_types.url,
        help="an AWS endpoint, e.g. the local runtime's (or AWS_ENDPOINT_URL)",
    )
    where.add_argument(
        "--stack",
        type=argument_types.stack,
        help="the stack whose outputs name it (default: the only one in the region that names an outbox)",
    )
    where.add_argument(
        "--outbox",
        type=argument_types.outputs_prefix,
        metavar="PREFIX",
        help="which of the stack's outboxes: its Outbox construct's outputs_prefix (default: the only one)",
    )
    where.add_argument(
        "--table",
        type=argument_types.table,
        help="the outbox table (instead of the stack's output; without --stack, no stack is looked for)",
    )
    where.add_argument("--poison-queue-url", type=argument_types.queue_url)
    where.add_argument("--on-failure-queue-url", type=argument_types.queue_url)
    where.add_argument("--publisher-function", type=argument_types.function)
    where.add_argument("--sweeper-function", type=argument_types.function)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    state = commands.add_parser("status", parents=[common], help="is anything stuck, what, since when")
    _status_arguments(state)

    failed = commands.add_parser("failed", help="FAILED events: what, when, why")
    failed_commands = failed.add_subparsers(dest="failed_command", required=True)
    listing = failed_commands.add_parser("list", parents=[common], help="list FAILED events")
    _filters(listing)
    listing.set_defaults(run=_failed_list)
    show = failed_commands.add_parser("show", parents=[common], help="one FAILED event, with its audit trail")
    show.add_argument("event_id", metavar="EVENT_ID", type=argument_types.identifier)
    show.add_argument("--show-payload", action="store_true", help="include the payload (it is data: care)")
    show.set_defaults(run=_failed_show)
    name_by_choices(failed_commands)

    redrive = commands.add_parser(
        "redrive", parents=[common], help="publish FAILED events again (same event_id), in order"
    )
    which = redrive.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--event-id", action="append", type=argument_types.identifier, help="this event (repeat for more)"
    )
    which.add_argument(
        "--aggregate",
        type=argument_types.identifier,
        help="every FAILED event of this aggregate key, e.g. Order#42",
    )
    which.add_argument("--all", action="store_true", help="every FAILED event matching the filters")
    which.add_argument(
        "--on-failure-queue", action="store_true", help="the rows behind the on-failure queue's messages"
    )
    redrive.add_argument(
        "--event-type", type=argument_types.free_text, help="only FAILED events of this type"
    )
    redrive.add_argument(
        "--error-contains",
        type=argument_types.free_text,
        help="only FAILED events whose last_error contains this",
    )
    _acting(redrive)
    redrive.add_argument(
        "--allow-out-of-order",
        action="store_true",
        help="redrive even if a later event of its aggregate may be out already",
    )
    redrive.set_defaults(run=_redrive)

    skip = commands.add_parser(
        "skip",
        parents=[common],
        help="release an aggregate held behind a FAILED event (it is never published)",
    )
    skip.add_argument(
        "event_id",
        metavar="EVENT_ID",
        type=argument_types.identifier,
        help="the FAILED event to skip: its row leaves the table, unpublished",
    )
    _acting(skip)
    skip.set_defaults(run=_skip)

    audit = commands.add_parser(
        "audit", parents=[common], help="what operators did: every redrive and skip, with who, when and why"
    )
    audit.add_argument(
        "--aggregate",
        type=argument_types.identifier,
        help="only this aggregate key, e.g. Order#42 (one Query; else a scan)",
    )
    audit.add_argument(
        "--show-payload", action="store_true", help="include skipped rows' payloads (data: care)"
    )
    audit.set_defaults(run=_audit)


def name_by_choices(subcommands: Any) -> None:
    """argparse names a missing subcommand by its `dest` (`failed_command`, an internal name): name it by the
    commands to choose from instead, as the usage line does."""
    subcommands.metavar = "{" + ",".join(subcommands.choices) + "}"


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--aggregate", type=argument_types.identifier, help="aggregate key, e.g. Order#42")
    parser.add_argument("--event-type", type=argument_types.free_text)
    parser.add_argument("--error-contains", type=argument_types.free_text)


def _acting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reason",
        type=argument_types.reason,
        required=True,
        help="why (recorded in each event's audit record, with who and when)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say exactly what would be done, change nothing"
    )


def run(command: Command, arguments: argparse.Namespace, out: TextIO) -> int:
    """Run an operations command: typed and AWS errors become one line on stderr and exit 1."""
    try:
        return command(arguments, out)
    except OutboxError as error:
        # The library's "X did not answer" wraps botocore's error: its cause is what the operator can act on.
        cause = error.__cause__
        print(
            f"outbox: {rendering.unanswered(cause) if isinstance(cause, BotoCoreError) else error}",
            file=sys.stderr,
        )
    except ClientError as error:
        details = error.response.get("Error", {})
        operation = getattr(error, "operation_name", "a call")
        print(
            f"outbox: AWS refused {operation}: {details.get('Code')}: {details.get('Message')}",
            file=sys.stderr,
        )
    except BotoCoreError as error:
        print(f"outbox: {rendering.unanswered(error)}", file=sys.stderr)
    except ResponseParserError as error:
        # Not a BotoCoreError: an answer botocore cannot read (an endpoint that is not AWS, a proxy's page).
        print(f"outbox: AWS's answer could not be read: {error}", file=sys.stderr)
    return EXIT_FAILED


def _status_arguments(state: argparse.ArgumentParser) -> None:
    state.add_argument(
        "--stuck-after",
        type=argument_types.duration,
        default=StatusThresholds().stuck_after,
        help="e.g. 15m (default)",
    )
    state.add_argument(
        "--degraded-after",
        type=argument_types.duration,
        default=StatusThresholds().degraded_after,
        help="e.g. 5m (default)",
    )
    state.add_argument(
        "--sweep-grace",
        type=argument_types.duration,
        default=StatusThresholds().sweep_grace,
        help="the sweeper's SWEEP_GRACE_SECONDS (60s, its default): a pending event older than it degrades",
    )
    state.add_argument(
        "--scan-for",
        type=argument_types.duration,
        default=StatusThresholds().scan_for,
        help="read the table for at most this long, e.g. 30s (default; past it the counts are lower bounds)",
    )
    state.add_argument(
        "--regions",
        type=argument_types.regions,
        help="an outbox across regions, home first, e.g. us-east-1,us-west-2 (default: the stack's "
        "OutboxRegions output): each region's heartbeat is shown",
    )
    state.add_argument(
        "--takeover-after",
        type=argument_types.duration,
        help="with regions, the takeover time, e.g. 10m (default: the stack's OutboxTakeoverAfterSeconds, "
        "else 10m)",
    )
    state.set_defaults(run=_status)


# --- the commands -----------------------------------------------------------------------------------------


def _connect(arguments: argparse.Namespace) -> tuple[OpsClients, OutboxResources]:
    clients = OpsClients.connect(
        region=arguments.region, profile=arguments.profile, endpoint_url=arguments.endpoint_url
    )
    explicit = {
        "table": arguments.table,
        "poison_queue_url": arguments.poison_queue_url,
        "on_failure_queue_url": arguments.on_failure_queue_url,
        "publisher_function": arguments.publisher_function,
        "sweeper_function": arguments.sweeper_function,
    }
    stack = arguments.stack
    if not stack and not arguments.table:
        stack = discover_stack(clients.cloudformation, arguments.outbox)
        print(
            f"outbox: stack {stack} (the only one in {clients.cloudformation.meta.region_name} whose outputs "
            "name an outbox; --stack to choose)",
            file=sys.stderr,
        )
    return clients, OutboxResources.find(clients.cloudformation, stack, explicit, outbox=arguments.outbox)


def _status(arguments: argparse.Namespace, out: TextIO) -> int:
    clients, resources = _connect(arguments)
    if arguments.regions:
        resources = replace(resources, regions=arguments.regions)
    if arguments.takeover_after:
        resources = replace(
            resources, takeover_after_seconds=str(int(arguments.takeover_after.total_seconds()))
        )
    thresholds = StatusThresholds(
        stuck_after=arguments.stuck_after,
        degraded_after=arguments.degraded_after,
        sweep_grace=arguments.sweep_grace,
        scan_for=arguments.scan_for,
    )
    report = status(clients, resources, thresholds=thresholds)
    _print(out, arguments, report.to_json(), rendering.status(report))
    return STATUS_EXIT[report.verdict]


def _failed_list(arguments: argparse.Namespace, out: TextIO) -> int:
    clients, resources = _connect(arguments)
    where = FailedFilter(
        aggregate_key=arguments.aggregate,
        event_type=arguments.event_type,
        error_contains=arguments.error_contains,
    )
    rows = FailedRows(clients.dynamodb, resources.table).select(where)
    _print(out, arguments, {"failed": [row.to_json() for row in rows]}, rendering.failed_rows(rows))
    return 0


def _failed_show(arguments: argparse.Namespace, out: TextIO) -> int:
    clients, resources = _connect(arguments)
    row = FailedRows(clients.dynamodb, resources.table).find(
        arguments.event_id, show_payload=arguments.show_payload
    )
    _print(out, arguments, row.to_json(), rendering.failed_row(row))
    return 0


def _audit(arguments: argparse.Namespace, out: TextIO) -> int:
    clients, resources = _connect(arguments)
    records = AuditRecords(clients.dynamodb, resources.table).select(arguments.aggregate)
    document = {"audit": [record.to_json(show_payload=arguments.show_payload) for record in records]}
    _print(out, arguments, document, rendering.audit(records))
    return 0


def _operator(arguments: argparse.Namespace, clients: OpsClients) -> Operator:
    return Operator(
        actor=clients.caller(),
        reason=arguments.reason,
        dry_run=arguments.dry_run,
        allow_out_of_order=getattr(arguments, "allow_out_of_order", False),
    )


def _redrive(arguments: argparse.Namespace, out: TextIO) -> int:
    if arguments.on_failure_queue and (arguments.event_type or arguments.error_contains):
        print(
            "outbox: --event-type and --error-contains filter FAILED rows, not --on-failure-queue",
            file=sys.stderr,
        )
        return EXIT_USAGE
    clients, resources = _connect(arguments)
    operator = _operator(arguments, clients)
    operations = Operations(clients, resources)
    if arguments.on_failure_queue:
        report = operations.redrive_on_failure_queue(operator)
    else:
        where = FailedFilter(
            event_ids=frozenset(arguments.event_id or ()),
            aggregate_key=arguments.aggregate,
            event_type=arguments.event_type,
            error_contains=arguments.error_contains,
        )
        report = operations.redrive_failed(where, operator)
    return _acted(out, arguments, report)


def _skip(arguments: argparse.Namespace, out: TextIO) -> int:
    clients, resources = _connect(arguments)
    report = Operations(clients, resources).skip_failed(arguments.event_id, _operator(arguments, clients))
    return _acted(out, arguments, report)


def _acted(out: TextIO, arguments: argparse.Namespace, report: OperationReport) -> int:
    _print(out, arguments, report.to_json(), rendering.operation(report))
    if report.refused:
        print(
            f"outbox: {len(report.refused)} row(s) not done (refused, not found or failed: see above); "
            "nothing changed for them",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not report.complete:
        print(
            "outbox: some queue messages were kept or not removed (see above): run it again", file=sys.stderr
        )
        return EXIT_FAILED
    return 0


def _print(out: TextIO, arguments: argparse.Namespace, document: Any, text: str) -> None:
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n" if arguments.json else text)

"""Bad arguments to the `outbox` command (its real `main`, in process, boto3 on moto): unknown commands and
flags, missing and malformed values, names of things that do not exist, contradictory choices.

Each argument list ends with a documented exit status (0 done, 1 failed or refused, 2 bad usage, 3 degraded,
4 stuck) and, when it fails, a reason on stderr; never a traceback. A command that fails, a dry run and a
read-only command change nothing in the table; no payload value (unless `--show-payload` asked for it) and no
credential shows in what the command prints.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.clock import utc_now
from outbox.model import OutboxStatus, RowKey
from outbox_cli import local_controls
from outbox_cli import main as cli
from outbox_cli.main import main
from outbox_ops.release import skip
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.row_updates import MarkFailed
from tests.hardening.checks import OUTBOX_KEY, TableState, judge, leaks_in, marker, restore
from tests.hardening.profiles import examples
from tests.hardening.strategies import tricky_text, unmarked_text
from tests.hardening.tally import Outcome, Source
from tests.integration.ops.conftest import Result
from tests.support.aws import REGION, Tables
from tests.support.events import event

CATEGORY = "cli-arguments"
EXIT_STATUSES = frozenset({0, 1, 2, 3, 4})
READ_ONLY = frozenset({"status", "failed", "audit", "local", "--help", "-h"})
SECRET_ENVIRONMENT = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@dataclass
class Outbox:
    """An outbox table on moto holding one row of each status (PUBLISHED: as an earlier release kept it), the
    FAILED one's payload full of markers, and the audit record of a skipped event whose payload (kept in the
    record) is full of markers too."""

    dynamodb: Any
    tables: Tables
    poison_queue_url: str
    failed_event_id: str
    pending_event_id: str
    baseline: TableState


@pytest.fixture(scope="module")
def outbox(dynamodb: Any, tables: Tables) -> Iterator[Outbox]:
    sqs = boto3.client("sqs", region_name=REGION)
    poison_queue_url = sqs.create_queue(QueueName="cli-poison")["QueueUrl"]
    failed = event("cli-failed", 1, payload={marker(1): [marker(2)], "note": marker(3)})
    skipped = event("cli-skipped", 1, payload={"note": marker(4)})
    pending, published = event("cli-pending", 1), event("cli-published", 1)
    for row in (failed, skipped, pending):
        dynamodb.put_item(TableName=tables.outbox, Item=row.to_item())
    dynamodb.put_item(TableName=tables.outbox, Item=published.with_status(OutboxStatus.PUBLISHED).to_item())
    keys = [RowKey(row.aggregate_key, row.seq) for row in (failed, skipped)]
    marks = [MarkFailed(key, "invalid_row: InvalidPayload", 1, utc_now()) for key in keys]
    assert DynamoDBRowUpdater(dynamodb, tables.outbox).apply(marks).done == keys
    skip(dynamodb, tables.outbox, keys[1], reason="superseded", actor="seed")
    with pytest.MonkeyPatch.context() as patch:
        # Credentials are secrets: none may ever be printed (moto takes any).
        for number, name in enumerate(SECRET_ENVIRONMENT, start=100):
            patch.setenv(name, marker(number))
        # (Each command builds its own boto3 session; tests/conftest.py gives them all one model loader, so an
        # input costs its calls, not reading the models again.)
        # No runtime runs here: `local up` and `demo` would start one, `local fault` would reach another
        # session's. What their arguments passed to stands in: a runtime that answers nothing.
        patch.setattr(cli, "_local_command", _no_runtime)
        patch.setattr(local_controls, "call", _no_runtime_answers)
        yield Outbox(
            dynamodb,
            tables,
            poison_queue_url,
            failed.event_id,
            pending.event_id,
            TableState.read(dynamodb, tables.outbox, OUTBOX_KEY),
        )


def _no_runtime(name: str, arguments: Any, out: Any) -> int:
    out.write(f"{name} would start here\n")
    return 0


def _no_runtime_answers(endpoint: str, *_request: Any) -> dict[str, Any]:
    raise local_controls.ControlError(f"no local runtime answers at {endpoint}")


def run(argv: list[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse refusing the arguments, or --help
            code = exit_.code if isinstance(exit_.code, int) else 2
    return Result(code, out.getvalue(), err.getvalue())


def invoke(outbox: Outbox, argv: list[str], *, source: Source) -> Result:
    """Runs `outbox ARGV`; judges its exit status, what it printed and the table; puts the table back."""
    result = run(argv)
    after = TableState.read(outbox.dynamodb, outbox.tables.outbox, OUTBOX_KEY)
    try:
        assert result.code in EXIT_STATUSES, (argv, result)
        assert "Traceback" not in result.err, (argv, result.err)
        if result.code in {1, 2}:
            assert result.err.strip(), f"{argv} failed without a reason"
        outcome = Outcome.REJECTED if result.code in {1, 2} else Outcome.ACCEPTED
        changes_allowed = result.code == 0 and not (
            "--dry-run" in argv or (argv[:1] and argv[0] in READ_ONLY) or not argv
        )
        partial = (
            [] if changes_allowed else sorted(f"{key} changed" for key in outbox.baseline.changed_keys(after))
        )
        printed = (
            {"stderr": result.err}
            if "--show-payload" in argv
            else {"stdout": result.out, "stderr": result.err}
        )
        judge(CATEGORY, outcome, source=source, partial_writes=partial, leaks=leaks_in(printed))
    finally:
        restore(outbox.dynamodb, outbox.baseline, after)
    return result


def _where(outbox: Outbox) -> list[str]:
    return [
        "--table",
        outbox.tables.outbox,
        "--poison-queue-url",
        outbox.poison_queue_url,
        "--region",
        REGION,
    ]


# --- Listed ---------------------------------------------------------------------------------------------

W = "{where}"
"""Stands for the flags that name the seeded table and poison queue."""
LISTED: list[tuple[str, list[str]]] = [
    ("no-command", []),
    ("unknown-command", ["explode"]),
    ("help", ["--help"]),
    ("status-bad-duration", ["status", "--stuck-after", "15 minutes", W]),
    ("status-zero-duration", ["status", "--stuck-after", "0m", W]),
    ("status-non-ascii-duration", ["status", "--stuck-after", "\u0661\u0665m", W]),
    ("status-fullwidth-duration", ["status", "--degraded-after", "\uff11\uff15m", W]),
    ("status-duration-past-timedelta", ["status", "--stuck-after", "99999999999d", W]),
    ("status-duration-5000-digits", ["status", "--degraded-after", "9" * 5000 + "s", W]),
    ("status-scan-for", ["status", "--scan-for", "1s", "--json", W]),
    ("status-scan-for-zero", ["status", "--scan-for", "0s", W]),
    ("failed-no-subcommand", ["failed", W]),
    ("failed-show-unknown-id", ["failed", "show", "00000000-0000-4000-8000-00000000dead", W]),
    ("failed-show-not-an-id", ["failed", "show", "../../etc/passwd", W]),
    ("failed-show-payload-asked", ["failed", "show", "{failed}", "--show-payload", W]),
    ("failed-show", ["failed", "show", "{failed}", W]),
    ("failed-list-json", ["failed", "list", "--json", W]),
    ("failed-list-odd-filter", ["failed", "list", "--aggregate", "\x00", "--error-contains", "%", W]),
    ("failed-reindex-gone", ["failed", "reindex", W]),
    ("audit", ["audit", W]),
    ("audit-json", ["audit", "--json", W]),
    ("audit-aggregate", ["audit", "--aggregate", "Order#cli-skipped", "--json", W]),
    ("audit-aggregate-odd", ["audit", "--aggregate", "\x00", W]),
    ("audit-aggregate-without-value", ["audit", W, "--aggregate"]),
    ("audit-payload-asked", ["audit", "--show-payload", "--json", W]),
    ("redrive-without-reason", ["redrive", "--all", W]),
    ("redrive-nothing-chosen", ["redrive", "--reason", "r", W]),
    ("redrive-two-choices", ["redrive", "--all", "--aggregate", "Order#x", "--reason", "r", W]),
    (
        "redrive-on-failure-with-filter",
        ["redrive", "--on-failure-queue", "--event-type", "X", "--reason", "r", W],
    ),
    ("redrive-unknown-id", ["redrive", "--event-id", "nope", "--reason", "r", W]),
    ("redrive-dry-run", ["redrive", "--all", "--reason", "r", "--dry-run", W]),
    ("redrive-empty-reason", ["redrive", "--all", "--reason", "", W]),
    ("skip-missing-gone", ["skip", "{failed}", "--missing", "Order#x", "2", "--reason", "r", W]),
    ("skip-unknown-event", ["skip", "00000000-0000-4000-8000-00000000dead", "--reason", "r", W]),
    ("skip-pending-event", ["skip", "{pending}", "--reason", "r", W]),
    ("skip-dry-run", ["skip", "{failed}", "--reason", "r", "--dry-run", W]),
    ("skip-without-event", ["skip", "--reason", "r", W]),
    ("purge-gone", ["purge-published", "--older-than", "1d", W]),
    ("unknown-flag", ["status", "--colour", W]),
    ("table-missing", ["status", "--table", "no-such-table"]),
    ("table-name-invalid", ["failed", "list", "--table", "a b"]),
    ("poison-queue-url-junk", ["status", W, "--poison-queue-url", "not a url"]),
    ("region-invalid", ["status", W, "--region", "not a region!"]),
    ("region-empty", ["status", W, "--region", ""]),
    ("local-env-region-empty", ["local", "env", "--region", ""]),
    ("profile-unknown", ["status", "--profile", "nobody", W]),
    ("no-table-no-stack", ["status", "--stack", ""]),
    ("stack-unknown", ["status", "--stack", "NoSuchStack"]),
    ("local-env", ["local", "env", "--endpoint-url", "http://127.0.0.1:1"]),
    ("skip-control-stack-empty-reason", ["skip", "{failed}", "--stack", "\x08", "--reason", ""]),
    ("status-stack-control", ["status", "--stack", "\x08"]),
    ("status-stack-too-long", ["status", "--stack", "a" * 129]),
    ("table-name-short", ["status", "--table", "ab"]),
    ("function-name-invalid", ["status", W, "--publisher-function", "a b"]),
    ("endpoint-url-junk", ["status", W, "--endpoint-url", "not a url"]),
    ("reason-control", ["skip", "{failed}", "--reason", "\x1b[2J", W]),
    ("reason-too-long", ["redrive", "--all", "--reason", "r" * 1025, W]),
    ("local-fault-times-fullwidth", ["local", "fault", "sns", "--times", "\uff13"]),
    ("local-fault-times-exponent", ["local", "fault", "sns", "--times", "1e23"]),
    ("local-fault-status-99999", ["local", "fault", "sns", "--status", "99999"]),
    ("local-fault-status-200", ["local", "fault", "sns", "--status", "200"]),
    ("local-fault-service-junk", ["local", "fault", "SNS!"]),
    ("local-fault-no-runtime", ["local", "fault", "sns", "--times", "3", "--status", "500"]),
    ("local-faults-endpoint-junk", ["local", "faults", "--endpoint-url", "127.0.0.1"]),
    ("local-up-port-fullwidth", ["local", "up", "--aws-port", "\uff18\uff10"]),
    ("local-up-speedup-inf", ["local", "up", "--schedule-speedup", "inf"]),
    ("local-up-host-junk", ["local", "up", "--host", "a host"]),
    ("demo-port-too-large", ["demo", "--api-port", "65536"]),
]


@pytest.mark.parametrize("argv", [argv for _, argv in LISTED], ids=[i for i, _ in LISTED])
def test_listed_arguments_end_with_a_documented_status_and_change_nothing_when_refused(
    outbox: Outbox, argv: list[str]
) -> None:
    # Given the seeded outbox / When `outbox` runs with the listed arguments / Then a documented exit status,
    # a reason when it fails, nothing changed when refused, no payload or credential printed
    event_ids = {"{failed}": outbox.failed_event_id, "{pending}": outbox.pending_event_id}
    arguments: list[str] = []
    for argument in argv:
        arguments += _where(outbox) if argument == W else [event_ids.get(argument, argument)]
    invoke(outbox, arguments, source=Source.LISTED)


# --- Generated ------------------------------------------------------------------------------------------

_REGION_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")
"""What botocore takes for a region name."""
values = st.one_of(unmarked_text, tricky_text).filter(lambda text: not text.startswith("-"))
# Up to more days than timedelta holds, and more digits than int() reads.
durations = st.one_of(
    st.from_regex(r"\s*[0-9]{1,6}\s*[smhdw]?\s*", fullmatch=True),
    st.builds(
        lambda number, unit: f"{number}{unit}",
        st.one_of(st.integers(min_value=0, max_value=10**40), st.just("9" * 5000)),
        st.sampled_from("smhd"),
    ),
    values,
)
queue_urls = st.builds(
    lambda name: f"https://sqs.{REGION}.amazonaws.com/123456789012/{name}", st.one_of(values, st.just("nope"))
)
# Whole numbers as typed: ASCII or not, signed, exponents, past every bound, and anything at all.
numbers = st.one_of(
    st.integers(min_value=-10, max_value=10**6).map(str),
    st.integers(min_value=0, max_value=10**40).map(str),
    st.sampled_from(("\uff13", "1e23", "99999", "65536", "4.5e2", "0", "599", "600", "2147483648")),
    values,
)
# Flags and the values each takes; a value may also be anything at all. No --endpoint-url: every call stays
# on moto, none goes to the network.
FLAGS: dict[str, st.SearchStrategy[str] | None] = {
    "--json": None,
    "--dry-run": None,
    "--all": None,
    "--show-payload": None,
    "--allow-out-of-order": None,
    "--on-failure-queue": None,
    "--reason": values,
    "--event-id": st.one_of(st.uuids().map(str), values),
    "--aggregate": st.one_of(st.sampled_from(("Order#cli-failed", "Order#cli-skipped")), values),
    "--event-type": values,
    "--error-contains": values,
    "--stuck-after": durations,
    "--degraded-after": durations,
    "--scan-for": durations,
    "--takeover-after": durations,
    "--regions": st.one_of(values, st.sampled_from(("us-east-1,us-west-2", "us-east-1", "us-east-1,,x"))),
    # Real regions, names botocore refuses, and none (a usage error). Not a well-formed name of no region:
    # moto has no backend for it and fails inside the client (AWS would not answer: a typed exit 1).
    "--region": st.one_of(
        st.sampled_from(("us-east-1", "eu-west-1", "not a region", "", " ")),
        values.filter(lambda text: not _REGION_NAME.fullmatch(text)),
    ),
    "--stack": st.one_of(values, st.from_regex(r"[A-Za-z][-A-Za-z0-9]{0,127}", fullmatch=True)),
    "--profile": values,
    "--table": st.one_of(values, st.from_regex(r"[A-Za-z0-9_.-]{1,258}", fullmatch=True)),
    "--poison-queue-url": st.one_of(values, queue_urls),
    "--on-failure-queue-url": st.one_of(values, queue_urls),
    "--publisher-function": st.one_of(values, st.from_regex(r"[A-Za-z0-9_-]{1,66}", fullmatch=True)),
    "--sweeper-function": st.one_of(values, st.from_regex(r"[A-Za-z0-9_-]{1,66}", fullmatch=True)),
    # Never a URL (no "://"): a call would leave moto for the network.
    "--endpoint-url": values.filter(lambda text: "://" not in text),
}
COMMANDS = (
    ["status"],
    ["failed", "list"],
    ["failed", "show"],
    ["audit"],
    ["redrive"],
    ["skip"],
    ["local", "env"],
)


LOCAL_FLAGS: dict[str, st.SearchStrategy[str]] = {
    "--times": numbers,
    "--status": numbers,
    "--for": durations,
    "--throttle": durations,
    "--error": st.one_of(values, st.sampled_from(("InternalError", "AWS.SimpleQueueService.X"))),
    "--endpoint-url": st.one_of(values, st.sampled_from(("http://127.0.0.1:1", "http://[::1]:99999"))),
    "--aws-port": numbers,
    "--api-port": numbers,
    "--schedule-speedup": st.one_of(numbers, st.floats().map(str)),
    "--max-environments": numbers,
    "--host": st.one_of(values, st.sampled_from(("127.0.0.1", "::1", "localhost"))),
    "--template": values,
}
LOCAL_COMMANDS = {
    ("local", "fault"): ("--times", "--status", "--for", "--throttle", "--error", "--endpoint-url"),
    ("local", "faults"): ("--endpoint-url",),
    ("local", "mappings"): ("--endpoint-url",),
    ("local", "up"): ("--aws-port", "--api-port", "--schedule-speedup", "--max-environments", "--host"),
    ("demo",): ("--aws-port", "--api-port", "--schedule-speedup", "--host", "--template"),
}


@st.composite
def local_argument_lists(draw: Callable[..., Any]) -> list[str]:
    """`local fault|faults|mappings|up` and `demo`: their numbers, names and endpoints; none reaches a runtime
    (the module's fixture stands in for one)."""
    command = draw(st.sampled_from(sorted(LOCAL_COMMANDS)))
    argv = list(command)
    if command == ("local", "fault"):
        argv.append(draw(st.one_of(st.sampled_from(("sns", "events", "dynamodb")), values)))
        if draw(st.booleans()):
            argv.append(draw(st.one_of(st.sampled_from(("PublishBatch", "*")), values)))
    for flag in draw(st.lists(st.sampled_from(LOCAL_COMMANDS[command]), max_size=4)):
        argv += [flag, draw(LOCAL_FLAGS[flag])]
    if argv[0] == "local" and argv[1] != "up" and "--endpoint-url" not in argv:
        argv += ["--endpoint-url", "http://127.0.0.1:1"]
    return argv


@st.composite
def argument_lists(draw: Callable[..., Any], outbox: Outbox) -> list[str]:
    argv = list(draw(st.sampled_from(COMMANDS)))
    if argv[-1] in {"show", "skip"}:
        argv.append(draw(st.one_of(st.just(outbox.failed_event_id), st.uuids().map(str), values)))
    for flag in draw(st.lists(st.sampled_from(sorted(FLAGS)), max_size=4)):
        argv.append(flag)
        taking = FLAGS[flag]
        if taking is not None:
            argv.append(draw(taking))
    if draw(st.integers(0, 4)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(values))
    if argv[0] != "local" and draw(st.integers(0, 9)) > 0:
        argv += ["--table", outbox.tables.outbox, "--poison-queue-url", outbox.poison_queue_url]
    if "--region" not in argv:
        argv += ["--region", REGION]
    return argv


@examples(1)
@given(data=st.data())
def test_generated_arguments_end_with_a_documented_status_and_change_nothing_when_refused(
    outbox: Outbox, data: st.DataObject
) -> None:
    # Given the seeded outbox / When `outbox` runs with generated arguments / Then a documented exit status,
    # a reason when it fails, nothing changed when refused, no payload or credential printed
    invoke(outbox, data.draw(argument_lists(outbox)), source=Source.GENERATED)


@examples(1)
@given(data=st.data())
def test_generated_local_arguments_end_with_a_documented_status_and_reach_no_runtime_when_refused(
    outbox: Outbox, data: st.DataObject
) -> None:
    # Given the seeded outbox / When `outbox local ...` or `outbox demo` runs with generated numbers, names
    # and endpoints / Then a documented exit status, a reason when it fails, nothing changed
    invoke(outbox, data.draw(local_argument_lists()), source=Source.GENERATED)

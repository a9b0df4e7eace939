"""The `outbox status` lines the `local up` banner prints: one for a stack's only outbox, one per outbox (each
with its `--outbox`) for a stack that holds several, so that each works as printed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from outbox_cli.local import describe


def runtime_with(stack_outputs: dict[str, str]) -> Any:
    """What `describe` reads of a running runtime: its options, endpoint and outputs, its one stack (nothing
    hosted)."""
    return SimpleNamespace(
        options=SimpleNamespace(
            region="us-east-1", stack_name="PaymentsStack", template_path="t.json", state_dir=None
        ),
        endpoint_url="http://127.0.0.1:4566",
        api_url=None,
        outputs=stack_outputs,
        stack=None,
        stacks={"PaymentsStack": None},
        regions=lambda: ["us-east-1"],
        host=None,
        mappings=[],
        queue_mappings=[],
        apis={},
        schedules=None,
    )


def status_lines(banner: str) -> list[str]:
    return [line.strip() for line in banner.splitlines() if " status --stack " in line]


def test_a_stack_with_one_outbox_gets_one_status_line_without_outbox() -> None:
    # Given a stack whose outputs name one outbox
    banner = describe(runtime_with({"OutboxTableName": "t", "PoisonQueueUrl": "q"}))

    # Then the banner prints one status command, naming the stack only
    assert status_lines(banner) == [
        "outbox status --stack PaymentsStack --endpoint-url http://127.0.0.1:4566 --region us-east-1"
    ]


def test_a_stack_with_two_outboxes_gets_a_status_line_per_outbox_each_naming_it() -> None:
    # Given a stack whose outputs name two outboxes, one without a prefix and one prefixed Refunds
    banner = describe(runtime_with({"OutboxTableName": "t", "RefundsOutboxTableName": "r"}))

    # Then each outbox has its own command, the unprefixed one selected by an empty (quoted) prefix
    where = "--endpoint-url http://127.0.0.1:4566 --region us-east-1"
    assert status_lines(banner) == [
        f"outbox status --stack PaymentsStack --outbox '' {where}",
        f"outbox status --stack PaymentsStack --outbox Refunds {where}",
    ]


def test_the_outputs_column_is_as_wide_as_the_longest_output_name() -> None:
    # Given a stack whose outputs have names of 2 and 30 characters (the sample's longest)
    banner = describe(runtime_with({"Ab": "short", "OrderSummaryDeadLetterQueueUrl": "long"}))

    # Then every value starts in the same column, two spaces after the longest name
    section = banner.split("  Outputs:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section == [f"    {'Ab':<30}  short", "    OrderSummaryDeadLetterQueueUrl  long"]


def test_the_banner_names_the_other_stacks_the_runtime_runs() -> None:
    # Given a runtime running its start-up stack and two more (deployed into it, or restored)
    runtime = runtime_with({})
    runtime.stacks = {"PaymentsStack": None, "OutboxStack": None, "Billing": None}

    # When its banner is printed, Then the others are named, with how to operate each
    assert "  Other stacks  OutboxStack, Billing (`outbox status --stack NAME` for each)" in describe(runtime)
    # and a runtime with its one stack names none
    assert "Other stacks" not in describe(runtime_with({}))


def test_the_banner_names_another_regions_stack_with_its_region() -> None:
    runtime = runtime_with({})
    runtime.stacks = {"PaymentsStack": None, "us-west-2/PaymentsStack": None}
    runtime.regions = lambda: ["us-east-1", "us-west-2"]
    runtime.replication = SimpleNamespace(tables={"payments": ("us-east-1", "us-west-2")}, lag_s=1.0)

    banner = describe(runtime)

    assert "  Other stacks  PaymentsStack in us-west-2 (`outbox status --stack NAME --region" in banner
    assert "  Regions       us-east-1, us-west-2: payments replicated after 1 s" in banner

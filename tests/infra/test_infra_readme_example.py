"""The README's own-stack example synthesizes as written, with the `Outbox` construct: a user's app of a few
lines, synthesized by the CDK CLI as docs/your-stack.md sets the project up, nothing printed, every output the
`outbox` command reads (tests/docs names this test for that block); and docs/inbox.md's consumer construct
example builds its consumer beside that outbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from outbox import outputs
from tests.infra.template_queries import function_by_handler, only, resources
from tests.support.readme import (
    INBOX,
    INBOX_SECTION,
    OWN_STACK_SECTION,
    cdk_json_app_command,
    python_example,
)
from tests.support.synth import CDK_CLI, cli_environment

OUTBOX_OUTPUTS = (
    outputs.OUTBOX_TABLE_NAME,
    outputs.OUTBOX_TABLE_STREAM_ARN,
    outputs.TOPIC_ARN,
    outputs.EVENT_BUS_NAME,
    outputs.EVENT_SOURCE,
    outputs.POISON_QUEUE_URL,
    outputs.ON_FAILURE_QUEUE_URL,
    outputs.ALARM_TOPIC_ARN,
    outputs.PUBLISHER_FUNCTION_NAME,
    outputs.SWEEPER_FUNCTION_NAME,
    outputs.DASHBOARD_NAME,
    outputs.OPERATOR_POLICY_ARN,
)
"""Contract 1 and 2 of issue 31: what `Outbox(self, "Outbox")` writes, by these exact keys."""


def test_the_readme_own_stack_example_synthesizes_silently_with_every_output(tmp_path: Path) -> None:
    # Given the README's example as the app.py of a project `cdk init app --language python` made, its
    # cdk.json's app line the one docs/your-stack.md gives
    example = python_example(OWN_STACK_SECTION)
    assert len(example.splitlines()) <= 20, "the README promises a whole app in at most 20 lines"
    environment = cli_environment()
    subprocess.run(  # noqa: S603 - the project's own CDK CLI, fixed arguments
        [str(CDK_CLI), "init", "app", "--language", "python", "--generate-only"],
        cwd=tmp_path,
        env=environment,
        check=True,
        capture_output=True,
    )
    cdk_json = {**json.loads((tmp_path / "cdk.json").read_text()), "app": cdk_json_app_command()}
    (tmp_path / "cdk.json").write_text(json.dumps(cdk_json, indent=2))
    (tmp_path / "app.py").write_text(example)
    outdir = tmp_path / "cdk.out"

    # When the CDK CLI synthesizes it, offline, with no variable of ours (cli_environment drops jsii's): what
    # keeps Node's end-of-life banner out is the app line's own (--no-notices: notices come from the network)
    result = subprocess.run(  # noqa: S603 - the project's own CDK CLI, fixed arguments
        [str(CDK_CLI), "synth", "--quiet", "--no-notices"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )

    # Then it synthesized and printed nothing: no warning, no open cdk-nag finding, no banner, no "feature
    # flags are not configured", no stray line; but the one empty line the CLI prints for a report of
    # acknowledged findings, as docs/your-stack.md says
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == ""
    assert result.stderr in ("", "\n"), result.stderr
    template: dict[str, Any] = json.loads((outdir / "PaymentsStack.template.json").read_text())
    # And the stack carries every output the `outbox` command finds the outbox by, under its exact name
    assert set(OUTBOX_OUTPUTS) <= set(template["Outputs"])
    # And the table has the `failed` index the `outbox failed` commands query, and the sweeper its schedule
    table_id, table = only(template, "AWS::DynamoDB::Table")
    assert [index["IndexName"] for index in table["Properties"]["GlobalSecondaryIndexes"]] == ["failed"]
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    sweeper_id, _ = function_by_handler(template, "outbox_sweeper.handler.handler")
    rules = resources(template, "AWS::Events::Rule").values()
    targets = [target["Arn"] for rule in rules for target in rule["Properties"].get("Targets", [])]
    assert {"Fn::GetAtt": [sweeper_id, "Arn"]} in targets


def test_the_inbox_consumer_construct_example_synthesizes_nag_clean_beside_an_outbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given docs/inbox.md's consumer handler as the user's shipments package, and its construct example
    package = tmp_path / "shipments"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "handler.py").write_text(python_example(INBOX_SECTION, document=INBOX))
    monkeypatch.syspath_prepend(str(tmp_path))
    example = python_example(INBOX_SECTION, 1, document=INBOX)
    from aws_cdk import App, Stack

    from outbox_cdk import Outbox, add_nag_checks

    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "ShipmentsStack")
    # The example's own words: "In your stack, beside its outbox (`outbox = Outbox(self, "Outbox")`)"
    names: dict[str, Any] = {"self": stack, "outbox": Outbox(stack, "Outbox")}

    # When it runs in that stack with cdk-nag attached, and the app is synthesized
    exec(compile(example, "docs/inbox.md consumer example", "exec"), names)  # noqa: S102 - the doc's own code
    add_nag_checks(app)
    template = app.synth().get_stack_by_name("ShipmentsStack").template

    # Then the consumer's function and table exist, subscribed to the outbox's topic with raw delivery, and
    # its dead-letter queue is an output `outbox status` counts
    function_by_handler(template, "shipments.handler.handler")
    only(template, "AWS::DynamoDB::Table", "Shipments")
    [subscription] = resources(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["RawMessageDelivery"] is True
    assert "ShipmentsDeadLetterQueueUrl" in template["Outputs"]

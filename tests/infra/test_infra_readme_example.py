"""The README's constructs example synthesizes as written: a user's own stack, their table, SNS only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.infra.template_queries import function_by_handler, only, resources
from tests.support.readme import python_example


def test_the_readme_constructs_example_synthesizes_nag_clean(tmp_path: Path) -> None:
    # Given the README's example as a user's app.py, in a directory of their own
    (tmp_path / "app.py").write_text(python_example("### Use the constructs in your own app"))
    outdir = tmp_path / "cdk.out"

    # When it runs as `cdk synth` runs an app (CDK_OUTDIR set), with cdk-nag attached as it says
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env={**os.environ, "CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
        capture_output=True,
        text=True,
        check=False,
    )

    # Then it synthesized (no open cdk-nag finding), and the publisher reads the user's table and only SNS
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((outdir / "ShipmentsStack.template.json").read_text())
    table_id, _ = only(template, "AWS::DynamoDB::Table", "ShipmentsOutbox")
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    environment = function_by_handler(template, "outbox_publisher.handler.handler")[1]["Properties"]
    assert "EVENT_BUS_NAME" not in environment["Environment"]["Variables"]
    assert not resources(template, "AWS::Events::EventBus")
    assert len(resources(template, "AWS::CloudWatch::Alarm")) == 8
    # and the sweeper runs on its schedule, scanning the table itself; the one index is the `failed` index
    # the example added for the operations commands
    sweeper_id, _ = function_by_handler(template, "outbox_sweeper.handler.handler")
    [rule] = resources(template, "AWS::Events::Rule").values()
    assert [target["Arn"] for target in rule["Properties"]["Targets"]] == [
        {"Fn::GetAtt": [sweeper_id, "Arn"]}
    ]
    [index] = template["Resources"][table_id]["Properties"]["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "failed"


def test_the_readme_consumer_construct_example_synthesizes_nag_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the README's consumer handler as the user's shipments package, and its construct example
    package = tmp_path / "shipments"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "handler.py").write_text(python_example("## Consuming events: the inbox"))
    monkeypatch.syspath_prepend(str(tmp_path))
    example = python_example("## Consuming events: the inbox", 1)
    from aws_cdk import App, Stack

    from outbox_cdk.destinations import OutboxDestinations
    from outbox_cdk.monitoring import AlarmTopic
    from outbox_cdk.nag import add_nag_checks

    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "ShipmentsStack")
    names: dict[str, Any] = {
        "self": stack,
        "destinations": OutboxDestinations(stack, "Destinations"),
        "monitoring": SimpleNamespace(alarm_topic=AlarmTopic(stack, "Alarms").topic),
    }

    # When it runs in a stack with cdk-nag attached, and the app is synthesized
    exec(compile(example, "README consumer example", "exec"), names)  # noqa: S102 - the README's own code
    add_nag_checks(app)
    template = app.synth().get_stack_by_name("ShipmentsStack").template

    # Then the consumer's queue, dead-letter queue, table and function exist, subscribed with raw delivery
    function_by_handler(template, "shipments.handler.handler")
    only(template, "AWS::DynamoDB::Table", "Shipments")
    [subscription] = resources(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["RawMessageDelivery"] is True
    assert len(resources(template, "AWS::SQS::Queue")) == 2

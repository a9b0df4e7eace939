"""Several stacks in one runtime, each under its own name: a stack added while the runtime runs gets its own
resources, functions, API and mappings, and one taken away stops running without touching the others."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from outbox_local.errors import ProvisioningError, RuntimeStateError
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime, StackDefinition
from outbox_local.template import Template
from tests.support.local_templates import HANDLERS, options, template, write_template


def post_item(api_url: str, item_id: str) -> int:
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{api_url}/items",
        data=json.dumps({"id": item_id, "behaviour": "ok"}).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return int(response.status)


def delivered(runtime: LocalRuntime, outputs: dict[str, Any]) -> list[str]:
    return [message["Body"] for message in receive_all(runtime.client("sqs"), outputs["DeliveredUrl"])]


@pytest.mark.parametrize("background", [False, True], ids=["driven", "background"])
def test_a_second_stack_runs_beside_the_first_under_its_own_name_and_leaves_it_when_detached(
    tmp_path: Path, background: bool
) -> None:
    # Given a runtime started with a template, and the same template added as a second stack while it runs
    path = write_template(tmp_path, template())
    with LocalRuntime(options(path, background=background)) as runtime:
        first = runtime.stacks[runtime.options.stack_name]
        second = runtime.create_stack(StackDefinition("SecondStack", renamed_bus(path), code_root=HANDLERS))

        # When an item is posted to each stack's own API
        second_api = runtime.apis[second.api_ids[0]].url
        assert post_item(runtime.api_url or "", "first-1") == 201
        assert post_item(second_api, "second-1") == 201
        settle(runtime, background)

        # Then each stack has resources, an API and a mapping of its own: each item reached its own stack only
        assert first.outputs["TableName"] != second.outputs["TableName"]
        assert first.api_ids != second.api_ids
        assert [runner.name for runner in runtime.mappings] == ["Mapping", "Mapping"]
        to_first, to_second = (
            " ".join(delivered(runtime, first.outputs)),
            " ".join(delivered(runtime, second.outputs)),
        )
        assert "first-1" in to_first
        assert "second-1" not in to_first
        assert "second-1" in to_second
        assert "first-1" not in to_second
        assert runtime.stack is first.provisioned  # the start-up stack stays the one the CLI reports

        # When the second stack is detached, and an item is written to its table directly
        runtime.detach_stack("SecondStack")
        runtime.client("dynamodb").put_item(
            TableName=second.outputs["TableName"], Item={"pk": {"S": "orphan"}, "behaviour": {"S": "ok"}}
        )
        assert post_item(runtime.api_url or "", "first-2") == 201
        settle(runtime, background)

        # Then nothing of it runs any more (its mapping, API and functions are gone), its table keeps its
        # data, and the first stack goes on as before
        assert [runner.name for runner in runtime.mappings] == ["Mapping"]
        assert delivered(runtime, second.outputs) == []
        assert second.api_ids[0] not in runtime.apis
        with pytest.raises(Exception, match="no function"):
            runtime.host.find(second.provisioned.functions[0].arn)  # type: ignore[union-attr]
        assert "first-2" in " ".join(delivered(runtime, first.outputs))
        assert runtime.client("dynamodb").get_item(
            TableName=second.outputs["TableName"], Key={"pk": {"S": "orphan"}}
        )["Item"]


def test_a_stack_name_is_held_once(tmp_path: Path) -> None:
    # Given a runtime holding its start-up stack
    path = write_template(tmp_path, template())
    with LocalRuntime(options(path)) as runtime:
        # When a stack of the same name is created, or one it does not hold is detached
        # Then each is refused, naming the stack, and the runtime still holds the one stack
        with pytest.raises(RuntimeStateError, match=runtime.options.stack_name):
            runtime.create_stack(StackDefinition(runtime.options.stack_name, Template.load(path)))
        with pytest.raises(RuntimeStateError, match="NoSuchStack"):
            runtime.detach_stack("NoSuchStack")
        assert list(runtime.stacks) == [runtime.options.stack_name]


def test_a_runtime_without_a_template_starts_empty(tmp_path: Path) -> None:
    # Given no template at start-up
    with LocalRuntime(options(None)) as runtime:
        # Then the AWS endpoint answers, with no stack, no function and no API
        assert runtime.stacks == {}
        assert runtime.stack is None
        assert runtime.outputs == {}
        assert runtime.api_url is None
        assert runtime.client("sqs").list_queues().get("QueueUrls", []) == []


def renamed_bus(path: Path) -> Template:
    """The template with its one explicit name changed: two stacks cannot share a bus name, on AWS either."""
    body = json.loads(path.read_text())
    body["Resources"]["Bus"]["Properties"]["Name"] = "second-bus"
    return Template.from_body(body, path)


def test_a_second_stack_that_names_a_resource_the_first_holds_is_refused_with_the_aws_error(
    tmp_path: Path,
) -> None:
    # Given a runtime holding its start-up stack, whose bus has an explicit name
    path = write_template(tmp_path, template())
    with LocalRuntime(options(path)) as runtime:
        # When a second stack of the same template is created
        # Then it is refused with the error AWS gives, naming the resource
        with pytest.raises(ProvisioningError, match=r"Bus .* already exists"):
            runtime.create_stack(StackDefinition("SecondStack", Template.load(path), code_root=HANDLERS))
        assert list(runtime.stacks) == [runtime.options.stack_name]


def settle(runtime: LocalRuntime, background: bool) -> None:
    if background:
        assert runtime.wait_until_idle(30)
    else:
        runtime.drain_streams()

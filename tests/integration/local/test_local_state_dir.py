"""A runtime started with a state directory (`RuntimeOptions.state_dir`, `outbox local up --state-dir`): the
sample app stopped cleanly and started again keeps its orders, delivers what was left undelivered (and
nothing twice), keeps a subscription the user made; `--fresh` starts empty; a second runtime on the same
directory is refused with the way out; a changed template is applied in place, as `cdk deploy` would, or
refused when it cannot be."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from outbox_local.persistence import StateDirError
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.orders import place_order_over_http
from tests.support.synth import Synthesized


def place_order(runtime: LocalRuntime) -> dict[str, Any]:
    order, _headers = place_order_over_http(runtime.api_url or "")
    return order


def order_status(runtime: LocalRuntime, order_id: str) -> int:
    try:
        with urllib.request.urlopen(f"{runtime.api_url}/orders/{order_id}", timeout=30) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def received(runtime: LocalRuntime, queue_url: str) -> list[str]:
    sqs = runtime.client("sqs")
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return sorted(json.loads(message["Body"])["event_id"] for message in messages)


def subscribed_queue(runtime: LocalRuntime) -> str:
    """A queue of the user's, subscribed to the sample's topic with raw delivery: its URL."""
    sqs = runtime.client("sqs")
    queue_url: str = sqs.create_queue(QueueName="mine")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    runtime.client("sns").subscribe(
        TopicArn=runtime.outputs["TopicArn"],
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return queue_url


@pytest.fixture
def options(synthesized: Synthesized, tmp_path: Path) -> RuntimeOptions:
    return RuntimeOptions(
        template_path=synthesized.template_path,
        background=False,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
        state_dir=tmp_path / "state",
    )


def test_a_clean_stop_and_start_keeps_orders_subscriptions_and_undelivered_events(
    options: RuntimeOptions,
) -> None:
    # Given the sample app with a queue the user subscribed to its topic, one order delivered to it, and one
    # acknowledged by the API but not yet published when the runtime stops
    with LocalRuntime(options) as first:
        assert not first.restored
        sqs = first.client("sqs")
        queue_url = subscribed_queue(first)
        delivered = place_order(first)
        first.drain_streams()
        assert received(first, queue_url) == [delivered["event_id"]]
        sqs.purge_queue(QueueUrl=queue_url)
        pending = place_order(first)

    # When a runtime starts again on the same state directory
    with LocalRuntime(options) as second:
        # Then it restored: both orders are there, the pending event is delivered to the user's queue, and
        # the one delivered before is not delivered again (a clean stop saves the mapping's position)
        assert second.restored
        assert order_status(second, delivered["order_id"]) == 200
        assert order_status(second, pending["order_id"]) == 200
        second.drain_streams()
        assert received(second, queue_url) == [pending["event_id"]]

        # And while nothing is served, nothing is written again (a cut each second finds nothing new)
        assert second.persistence is not None
        second.persistence.wait_saved()  # what the test's own receive did
        saves = second.persistence.saves
        time.sleep(2.2)
        assert second.persistence.saves == saves

        # And a second runtime on the same directory is refused, naming the way out
        with pytest.raises(StateDirError, match=r"in use by another `outbox local up`.*--state-dir"):
            LocalRuntime(options).start()

    # When it starts with --fresh, Then it is empty again
    with LocalRuntime(replace(options, fresh_state=True)) as fresh:
        assert not fresh.restored
        assert order_status(fresh, delivered["order_id"]) == 404


def changed_template(synthesized: Synthesized, directory: Path, change: Any) -> Path:
    """The sample's template with `change` applied to its body, written beside the assets it names."""
    body = json.loads(synthesized.template_path.read_text(encoding="utf-8"))
    change(body["Resources"])
    path = synthesized.template_path.parent / f"{directory.name}.template.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def test_a_template_changed_since_the_state_was_saved_is_applied_in_place(
    options: RuntimeOptions, synthesized: Synthesized, tmp_path: Path
) -> None:
    # Given state saved from the sample's template, with an order placed and its event delivered to a queue
    # the user subscribed to the topic
    with LocalRuntime(options) as first:
        sqs = first.client("sqs")
        queue_url = subscribed_queue(first)
        placed = place_order(first)
        first.drain_streams()
        assert received(first, queue_url) == [placed["event_id"]]
        sqs.purge_queue(QueueUrl=queue_url)
    api = "OrdersApiHandlerFunction0ABAF884"

    def new_setting(resources: dict[str, Any]) -> None:
        resources[api]["Properties"]["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] = "ERROR"

    changed = changed_template(synthesized, tmp_path, new_setting)

    # When a runtime starts on the same directory with the changed template (`cdk synth` ran meanwhile)
    with LocalRuntime(replace(options, template_path=changed)) as second:
        # Then it restored the data and runs the new template, as a `cdk deploy` of it would have made it:
        # the order is there, the function has its new setting, and the stack records the update
        assert second.restored
        assert order_status(second, placed["order_id"]) == 200
        function = next(spec for spec in second.host.functions if spec.logical_id == api)  # type: ignore[union-attr]
        assert function.environment["POWERTOOLS_LOG_LEVEL"] == "ERROR"
        cloudformation = second.client("cloudformation")
        assert cloudformation.describe_stacks(StackName="OutboxStack")["Stacks"][0]["StackStatus"] == (
            "UPDATE_COMPLETE"
        )
        # and nothing was published again by the update (the mapping kept its position); a new order is
        second.drain_streams()
        assert received(second, queue_url) == []
        again = place_order(second)
        second.drain_streams()
        assert received(second, queue_url) == [again["event_id"]]


def test_a_template_change_that_cannot_be_made_in_place_is_refused_and_changes_nothing(
    options: RuntimeOptions, synthesized: Synthesized, tmp_path: Path
) -> None:
    # Given state saved from the sample's template, with an order placed
    with LocalRuntime(options) as first:
        placed = place_order(first)

    def new_key(resources: dict[str, Any]) -> None:
        table = resources["TablesOrdersTable57E15B04"]["Properties"]
        table["KeySchema"][0]["AttributeName"] = "other_pk"
        table["AttributeDefinitions"][0]["AttributeName"] = "other_pk"

    changed = changed_template(synthesized, tmp_path, new_key)

    # When a runtime starts on the same directory with a template that changes a table's key, Then it is
    # refused, naming the resource, the property and the way out
    with pytest.raises(StateDirError, match=r"TablesOrdersTable57E15B04.*KeySchema.*--fresh"):
        LocalRuntime(replace(options, template_path=changed)).start()

    # And the saved state is as it was: the original template starts on it, the order still there
    with LocalRuntime(options) as again:
        assert again.restored
        assert order_status(again, placed["order_id"]) == 200


def test_a_restart_notifies_no_alarm_change_that_did_not_happen(options: RuntimeOptions) -> None:
    # Given the sample's alarms evaluated once (each notified INSUFFICIENT_DATA -> OK, as CloudWatch does)
    with LocalRuntime(options) as first:
        assert first.evaluate_alarms()

    # When the runtime starts again from its state directory and evaluates them
    with LocalRuntime(options) as second:
        assert second.restored

        # Then no alarm moved: their states were kept, and nothing is notified twice
        assert second.evaluate_alarms() == []

"""Least privilege, provably: every function of the synthesized app runs through its paths in the local
runtime while every AWS call it makes is recorded as the IAM action AWS would check; each role must grant
each recorded action, and grant nothing its function never calls (bar what the Lambda service itself calls
with the role, each named below with why). Run on the template with AWS's own keys, and on the one with a
customer-managed key (`-c kms_key=customer`), where a call on a resource under the key also needs the KMS
actions AWS checks for it (tests.support.iam.key_actions)."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import pytest
from botocore.client import BaseClient

from outbox import outputs
from outbox.model import OutboxEvent
from outbox.offloading import Offloader
from outbox.s3_payloads import S3PayloadStore
from outbox_cdk.constants import PAYLOAD_PREFIX
from outbox_local.faults import INTERNAL_USER_AGENT
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from outbox_local.schedules import Schedule
from outbox_sweeper.config import ENV_SWEEP_MAX_ROWS
from tests.infra.template_queries import function_by_handler, role_of, statements_of_role
from tests.support.aws import event_rows
from tests.support.events import event
from tests.support.iam import CustomerKeyed, customer_keyed, iam_actions, key_actions, mapping_key_actions
from tests.support.orders import http_event, place_body
from tests.support.synth import Synthesized

# What the Lambda service calls with a function's role, not the function's code.
SERVICE_CALLS = {
    "logs:CreateLogStream": "Lambda writes the function's logs",
    "logs:PutLogEvents": "Lambda writes the function's logs",
    "xray:PutTraceSegments": "active tracing",
    "xray:PutTelemetryRecords": "active tracing",
    "dynamodb:DescribeStream": "the stream event source mapping polls the stream",
    "dynamodb:GetRecords": "the stream event source mapping polls the stream",
    "dynamodb:GetShardIterator": "the stream event source mapping polls the stream",
    "dynamodb:ListStreams": "the stream event source mapping polls the stream",
    "sqs:ReceiveMessage": "the SQS event source mapping polls the queue",
    "sqs:DeleteMessage": "the SQS event source mapping deletes what the function processed",
    "sqs:ChangeMessageVisibility": "the SQS event source mapping",
    "sqs:GetQueueAttributes": "the SQS event source mapping",
    "sqs:GetQueueUrl": "the SQS event source mapping",
}
# What the Lambda service calls on a customer-managed key with a function's role, only for a function whose
# event source is under the key (tests.support.iam.mapping_key_actions), not for every role as above.
SERVICE_KEY_CALLS = {"kms:Decrypt": "an event source mapping decrypts what it reads from its queue or stream"}
# What a role holds for the answers S3 gives, not for a call: without s3:ListBucket a GetObject or HeadObject
# of a missing key answers 403, which the publisher retries forever, instead of 404 (poison, with its reason).
PERMISSIONS_ONLY = {
    "s3:ListBucket": "a missing stored envelope reads as missing (outbox_cdk.payloads.grant_payload_reads)",
}
HANDLERS = {
    "orders_api.handler.handler": "orders api",
    "outbox_publisher.handler.handler": "publisher",
    "outbox_sweeper.handler.handler": "sweeper",
    "order_consumers.summary_handler.handler": "order summary",
    "order_consumers.cancellations_handler.handler": "cancellations",
}


# One row per sweep run: a run stops in the middle of an aggregate, and the next one resumes there and, unless
# this process settled the row before, must read the predecessor of the first row it finds (the order gate's
# BatchGetItem), as a run does after a long outage.
ROWS_PER_SWEEP = 1
MOST_SWEEPS = 10


@pytest.fixture(params=["synthesized", "customer_key"], ids=["aws-owned-keys", "customer-key"])
def app(request: pytest.FixtureRequest) -> Synthesized:
    """The sample app as `cdk synth` writes it, and as `cdk synth -c kms_key=customer` does."""
    synthesized: Synthesized = request.getfixturevalue(request.param)
    return synthesized


@pytest.fixture
def runtime(app: Synthesized) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        template_path=app.template_path,
        background=False,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true", ENV_SWEEP_MAX_ROWS: str(ROWS_PER_SWEEP)},
    )
    with LocalRuntime(options) as started:
        yield started


@pytest.fixture
def keyed(runtime: LocalRuntime) -> CustomerKeyed:
    """What the provisioned stack holds under a customer-managed key (nothing, with AWS's own keys)."""
    return customer_keyed(runtime.client)


@pytest.fixture
def called(
    runtime: LocalRuntime, keyed: CustomerKeyed, monkeypatch: pytest.MonkeyPatch
) -> dict[str, set[str]]:
    """Handler -> the IAM actions its invocations needed, recorded at botocore's call boundary: each call's
    own, and the KMS actions it implies on a resource under a customer-managed key."""
    assert runtime.host is not None
    host = runtime.host
    # A context variable, not a thread-local: the row updater's calls run on its threads, in a copy of the
    # invocation's context (outbox_publisher.dynamodb_rows).
    current: ContextVar[str | None] = ContextVar("handler", default=None)
    actions: dict[str, set[str]] = defaultdict(set)
    make_api_call = BaseClient._make_api_call
    invoke = host.invoke

    def recording_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
        handler = current.get()
        # The runtime's own clients (e.g. the EMF metrics it forwards) do what AWS itself would: not recorded.
        internal = INTERNAL_USER_AGENT in (client.meta.config.user_agent_extra or "")
        if handler is not None and not internal:
            service = client.meta.service_model.service_name
            actions[handler].update(
                iam_actions(service, operation, params), key_actions(service, operation, params, keyed)
            )
        return make_api_call(client, operation, params)

    def invoking(name_or_arn: str, event: Any) -> Any:
        token = current.set(host.find(name_or_arn).handler)
        try:
            return invoke(name_or_arn, event)
        finally:
            current.reset(token)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording_call)
    monkeypatch.setattr(host, "invoke", invoking)
    return actions


def function_named(runtime: LocalRuntime, handler: str) -> str:
    assert runtime.host is not None
    return next(spec.name for spec in runtime.host.functions if spec.handler == handler)


def exercise(runtime: LocalRuntime) -> None:
    """Every path the functions' code takes to AWS: orders through the API (with an idempotency key),
    publishing to both destinations (settling each row), a poison row (its FAILED mark), an event whose
    predecessor is not in the batch (the gate's read), the sweeper's runs on its scheduled input (its cursor,
    its scan, claims, settles, a poison row, a run resuming in the middle of an aggregate), and a message each
    consumer cannot read (its dead-letter queue)."""
    api = function_named(runtime, "orders_api.handler.handler")
    created = runtime.invoke(
        api, http_event("POST", "/orders", body=place_body(), headers={"Idempotency-Key": str(uuid.uuid4())})
    )
    order_id = json.loads(created.payload["body"])["order_id"]
    runtime.invoke(api, http_event("GET", f"/orders/{order_id}"))
    # Confirm with the version it saw (one Update of the order), cancel without (read, then Put)
    runtime.invoke(
        api, http_event("POST", f"/orders/{order_id}/confirm", body={}, headers={"If-Match": '"1"'})
    )
    runtime.invoke(api, http_event("POST", f"/orders/{order_id}/cancel", body={}))
    dynamodb = runtime.client("dynamodb")
    outbox = runtime.outputs[outputs.OUTBOX_TABLE_NAME]
    poison = {**event("poison", 1).to_item(), "payload": {"S": "{not json"}}
    dynamodb.put_item(TableName=outbox, Item=poison)
    later: OutboxEvent = event("later", 2)
    dynamodb.put_item(TableName=outbox, Item=later.to_item())
    # An event too large for its row, as another writer stores it: the publisher checks its envelope, each
    # sample consumer resolves its claim check (the topic's and the bus's).
    store = stored_envelopes(runtime)
    large = event("large", 1, event_type="OrderCancelled", payload={"document": "x" * LARGE_BYTES})
    dynamodb.put_item(TableName=outbox, Item=Offloader(store).row_of(large))
    runtime.drain_streams()
    # Rows the stream has not delivered yet, older than the grace (events occur two days back): the sweeper
    # publishes two events of one aggregate in order, over two runs; poisons the first event of another, and
    # in the next run, resuming behind it, reads it (FAILED) and holds the second for an operator.
    for row in (
        event("swept", 1).to_item(),
        event("swept", 2).to_item(),
        {**event("swept-poison", 1).to_item(), "payload": {"S": "{not json"}},
        event("swept-poison", 2).to_item(),
        Offloader(store).row_of(event("swept-large", 1, payload={"document": "x" * LARGE_BYTES})),
    ):
        dynamodb.put_item(TableName=outbox, Item=row)
    sweeper = function_named(runtime, "outbox_sweeper.handler.handler")
    [schedule] = [s for s in schedules(runtime) if s.function_arn.endswith(f":{sweeper}")]
    for _ in range(MOST_SWEEPS):
        swept = runtime.invoke(sweeper, schedule.target_input)
        assert not swept.failed, swept.error_message
        if swept.payload["pass_complete"] and swept.payload["due"] == 0:
            break
    # Every event is out (its row settled, gone), poisoned (a FAILED row, kept for an operator) or held behind
    # a poisoned one
    statuses = {
        (row["aggregate_key"]["S"], row["seq"]["N"]): row["status"]["S"]
        for row in event_rows(dynamodb, outbox)
    }
    assert statuses == {
        ("Order#poison", "1"): "FAILED",
        ("Order#swept-poison", "1"): "FAILED",
        ("Order#swept-poison", "2"): "PENDING",
    }
    sqs = runtime.client("sqs")
    for mapping in runtime.queue_mappings:
        sqs.send_message(QueueUrl=mapping.settings.queue_url, MessageBody="not an envelope")
    runtime.drain_streams()


LARGE_BYTES = 300_000
"""Over the sample topic's and bus's 256 KB: a claim check on both."""


def stored_envelopes(runtime: LocalRuntime) -> S3PayloadStore:
    """The sample's payload store, as a writer of large events uses it."""
    [bucket] = [name for _, kind, name in runtime.resource_names() if kind == "AWS::S3::Bucket"]
    return S3PayloadStore(runtime.client("s3"), bucket, prefix=PAYLOAD_PREFIX)


def schedules(runtime: LocalRuntime) -> list[Schedule]:
    assert runtime.schedules is not None
    return runtime.schedules.schedules


def service_key_needs(runtime: LocalRuntime, keyed: CustomerKeyed) -> dict[str, set[str]]:
    """Handler -> what its event source mappings need on a customer-managed key (the Lambda service's calls
    with its role)."""
    assert runtime.host is not None
    assert runtime.stack is not None
    sources = [(m.function_arn, m.settings.stream_arn) for m in runtime.stack.mappings]
    sources += [(m.settings.function_arn, m.settings.queue_arn) for m in runtime.stack.queue_mappings]
    needs: dict[str, set[str]] = defaultdict(set)
    for function_arn, source_arn in sources:
        needs[runtime.host.find(function_arn).handler].update(mapping_key_actions(source_arn, keyed))
    return needs


def test_each_role_grants_exactly_what_its_function_calls(
    runtime: LocalRuntime, called: dict[str, set[str]], keyed: CustomerKeyed, app: Synthesized
) -> None:
    # Given every function run through its paths, its AWS calls recorded
    exercise(runtime)
    template = app.template
    service_needs = service_key_needs(runtime, keyed)
    for handler, label in HANDLERS.items():
        # When the actions its role grants are compared with those its code called
        statements = statements_of_role(template, role_of(function_by_handler(template, handler)[1]))
        granted = {
            action
            for s in statements
            for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        }
        needed = called[handler]
        service_needed = service_needs[handler]
        assert service_needed <= set(SERVICE_KEY_CALLS), (
            f"{label}: a service call on the key without a reason"
        )
        # Then it was granted every one, and grants nothing else but what the Lambda service calls with it
        assert needed, f"{label} made no AWS call: the scenario does not exercise it"
        assert needed - granted == set(), f"{label} calls what its role lacks"
        assert service_needed - granted == set(), f"{label}'s event source needs what its role lacks"
        unused = granted - needed - service_needed - set(SERVICE_CALLS) - set(PERMISSIONS_ONLY)
        assert unused == set(), f"{label}'s role grants what its code never calls"

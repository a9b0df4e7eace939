"""Bad configuration: the environment every function reads once at start-up (publisher, sweeper, inbox
consumers, Orders API), with variables missing, empty, malformed, out of range or contradicting each other.

Each environment gives a configuration or a `ConfigurationError` naming the variable; never another
exception. A configuration fault fails the function loudly, before any record or message is touched: never a
poison record, never a dead letter, nothing written. No credential or other secret of the environment shows in
an error message or a log line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from order_consumers import summary_handler
from orders_api import handler as orders_handler
from orders_api.config import OrdersApiConfig
from outbox.aws import client as cached_client
from outbox.aws import invocation_client
from outbox.errors import ConfigurationError
from outbox_inbox.config import ConsumerConfig
from outbox_publisher import handler as publisher_handler
from outbox_publisher.config import PublisherConfig
from outbox_sweeper import handler as sweeper_handler
from outbox_sweeper.config import SweeperConfig
from tests.hardening.checks import OUTBOX_KEY, TableState, captured, judge, leaks_in, marker
from tests.hardening.profiles import examples
from tests.hardening.strategies import json_text, tricky_text, unmarked_json_values, unmarked_text
from tests.hardening.tally import Outcome, Source
from tests.support.aws import REGION, Tables
from tests.support.events import event
from tests.support.inbox import create_inbox_table, sqs_record
from tests.support.lambda_context import FakeLambdaContext
from tests.support.orders import http_event, place_body

CATEGORY = "environment"
TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:outbox-events"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/poison"
GOOD = {
    "OUTBOX_TABLE_NAME": "outbox",
    "ORDERS_TABLE_NAME": "orders",
    "TOPIC_ARN": TOPIC_ARN,
    "EVENT_BUS_NAME": "outbox-bus",
    "EVENT_SOURCE": "shop.orders",
    "POISON_QUEUE_URL": QUEUE_URL,
    "INBOX_TABLE_NAME": "inbox",
    "INBOX_CONSUMER": "summary",
    "INBOX_DEAD_LETTER_QUEUE_URL": QUEUE_URL,
}
# What a function's environment holds besides its configuration: never to be repeated in an error or a log.
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": marker(1),
    "AWS_SESSION_TOKEN": marker(2),
    "DATABASE_PASSWORD": marker(3),
    "STRIPE_API_KEY": marker(4),
}
Loader = Callable[[Mapping[str, str]], object]
LOADERS: dict[str, Loader] = {
    "publisher": PublisherConfig.from_env,
    "sweeper": SweeperConfig.from_env,
    "inbox": ConsumerConfig.from_environment,
    "orders-api": OrdersApiConfig.from_env,
}


def load(name: str, env: Mapping[str, str], *, source: Source) -> None:
    """Loads the configuration; judges the answer and whether any secret leaked into it or the log."""
    loader = LOADERS[name]
    error: ConfigurationError | None = None
    with captured() as output:
        try:
            loader({**env, **SECRETS})
        except ConfigurationError as refused:  # typed; anything else fails the test
            error = refused
    if error is not None:
        assert str(error), f"{name}: a ConfigurationError without a message"
    outcome = Outcome.REJECTED if error is not None else Outcome.ACCEPTED
    judge(CATEGORY, outcome, source=source, leaks=leaks_in({**output.places, "error": str(error or "")}))


# --- Listed ---------------------------------------------------------------------------------------------

LISTED: list[tuple[str, str, dict[str, str]]] = [
    ("publisher-nothing", "publisher", {}),
    ("publisher-no-destination", "publisher", GOOD | {"TOPIC_ARN": "", "EVENT_BUS_NAME": ""}),
    ("publisher-table-blank", "publisher", GOOD | {"OUTBOX_TABLE_NAME": "   "}),
    (
        "publisher-table-arn-of-a-queue",
        "publisher",
        GOOD | {"OUTBOX_TABLE_NAME": "arn:aws:sqs:us-east-1:1:q"},
    ),
    ("publisher-topic-not-an-arn", "publisher", GOOD | {"TOPIC_ARN": "outbox-events"}),
    ("publisher-bus-without-source", "publisher", GOOD | {"EVENT_SOURCE": ""}),
    ("publisher-reserved-source", "publisher", GOOD | {"EVENT_SOURCE": "aws.orders"}),
    ("publisher-routes-not-json", "publisher", GOOD | {"OUTBOX_ROUTES": "{routes"}),
    ("publisher-routes-a-list", "publisher", GOOD | {"OUTBOX_ROUTES": "[]"}),
    ("publisher-routes-unknown-key", "publisher", GOOD | {"OUTBOX_ROUTES": '{"rutes": []}'}),
    ("publisher-routes-kinesis", "publisher", GOOD | {"OUTBOX_ROUTES": '{"default": ["kinesis"]}'}),
    (
        "publisher-routes-not-configured",
        "publisher",
        GOOD | {"EVENT_BUS_NAME": "", "OUTBOX_ROUTES": '{"default": ["eventbridge"]}'},
    ),
    (
        "publisher-routes-bad-policy",
        "publisher",
        GOOD | {"OUTBOX_ROUTES": '{"routes": [{"destinations": [], "on_poison": "drop"}]}'},
    ),
    ("publisher-grace-underscores", "publisher", GOOD | {"SWEEP_GRACE_SECONDS": "1_000"}),
    ("publisher-grace-past-timedelta", "publisher", GOOD | {"SWEEP_GRACE_SECONDS": "1" + "0" * 20}),
    ("publisher-routes-100000-deep", "publisher", GOOD | {"OUTBOX_ROUTES": "[" * 100_000 + "]" * 100_000}),
    ("publisher-grace-below-minimum", "publisher", GOOD | {"SWEEP_GRACE_SECONDS": "29"}),
    ("publisher-grace-text", "publisher", GOOD | {"SWEEP_GRACE_SECONDS": "a minute"}),
    ("sweeper-max-rows-zero", "sweeper", GOOD | {"SWEEP_MAX_ROWS": "0"}),
    (
        "sweeper-backoff-inverted",
        "sweeper",
        GOOD | {"SWEEP_BACKOFF_BASE_SECONDS": "100", "SWEEP_BACKOFF_MAX_SECONDS": "10"},
    ),
    ("sweeper-attempts-text", "sweeper", GOOD | {"SWEEP_MAX_ATTEMPTS": "many"}),
    ("sweeper-fail-after-past-timedelta", "sweeper", GOOD | {"SWEEP_FAIL_AFTER_SECONDS": "1" + "0" * 20}),
    ("sweeper-max-rows-5000-digits", "sweeper", GOOD | {"SWEEP_MAX_ROWS": "9" * 5000}),
    ("sweeper-segments-zero", "sweeper", GOOD | {"SWEEP_SEGMENTS": "0"}),
    ("sweeper-segments-past-maximum", "sweeper", GOOD | {"SWEEP_SEGMENTS": "51"}),
    ("sweeper-segments-fraction", "sweeper", GOOD | {"SWEEP_SEGMENTS": "1.5"}),
    ("sweeper-segments-arabic-indic", "sweeper", GOOD | {"SWEEP_SEGMENTS": "\u0663"}),
    ("sweeper-segments-5000-digits", "sweeper", GOOD | {"SWEEP_SEGMENTS": "9" * 5000}),
    ("inbox-nothing", "inbox", {}),
    ("inbox-ordering-unknown", "inbox", GOOD | {"INBOX_ORDERING": "fifo"}),
    ("inbox-gap-timeout-unknown", "inbox", GOOD | {"INBOX_ON_GAP_TIMEOUT": "drop"}),
    ("inbox-consumer-with-hash", "inbox", GOOD | {"INBOX_CONSUMER": "a#b"}),
    ("inbox-window-zero", "inbox", GOOD | {"INBOX_DEDUPE_WINDOW_SECONDS": "0"}),
    ("inbox-wait-negative", "inbox", GOOD | {"INBOX_MAX_GAP_WAIT_SECONDS": "-1"}),
    ("inbox-window-past-timedelta", "inbox", GOOD | {"INBOX_DEDUPE_WINDOW_SECONDS": "1" + "0" * 20}),
    ("inbox-wait-arabic-indic", "inbox", GOOD | {"INBOX_MAX_GAP_WAIT_SECONDS": "\u0663\u0660"}),
    ("orders-api-nothing", "orders-api", {}),
    ("orders-api-blank", "orders-api", {"ORDERS_TABLE_NAME": " ", "OUTBOX_TABLE_NAME": "\t"}),
]


@pytest.mark.parametrize(("loader", "env"), [(n, e) for _, n, e in LISTED], ids=[i for i, _, _ in LISTED])
def test_listed_environments_give_a_configuration_or_a_configuration_error(
    loader: str, env: dict[str, str]
) -> None:
    # Given / When a function's configuration is read from the listed environment / Then typed, no secret
    load(loader, env, source=Source.LISTED)


# --- A configuration fault is loud, never poison -------------------------------------------------------


@pytest.fixture
def deployed_environment(monkeypatch: pytest.MonkeyPatch, tables: Tables) -> Iterator[None]:
    """The functions' process-wide state as at a cold start, under an environment with secrets in it."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(publisher_handler, "_publisher", None)
    monkeypatch.setattr(sweeper_handler, "_sweeper", None)
    monkeypatch.setattr(summary_handler.function, "_consumer", None)
    orders_handler.set_service(None)
    cached_client.cache_clear()
    invocation_client.cache_clear()
    yield
    orders_handler.set_service(None)
    cached_client.cache_clear()
    invocation_client.cache_clear()


@dataclass(frozen=True)
class Stores:
    """Where a misconfigured function could write: a queue (poison, dead letters) and an inbox table."""

    queue_url: str
    inbox_table: str


@pytest.fixture(scope="module")
def stores(dynamodb: Any) -> Stores:
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="environment-queue")["QueueUrl"]
    return Stores(queue_url, create_inbox_table(dynamodb, "environment-inbox"))


PENDING = event("environment", 1)
FAULTS: dict[str, tuple[dict[str, str], Callable[[], object]]] = {
    "publisher": (
        {"OUTBOX_ROUTES": '{"default": ["kinesis"]}'},
        lambda: publisher_handler.handler(
            {
                "Records": [
                    {
                        "eventName": "INSERT",
                        "dynamodb": {"SequenceNumber": "1", "NewImage": PENDING.to_item()},
                    }
                ]
            },
            FakeLambdaContext(),
        ),
    ),
    "sweeper": ({"SWEEP_MAX_ROWS": "-1"}, lambda: sweeper_handler.handler({}, FakeLambdaContext())),
    "consumer": (
        {"INBOX_ORDERING": "fifo"},
        lambda: summary_handler.handler(
            {"Records": [sqs_record(PENDING.envelope_json())]}, FakeLambdaContext()
        ),
    ),
}


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
@pytest.mark.usefixtures("deployed_environment")
@pytest.mark.parametrize("function", sorted(FAULTS))
def test_a_configuration_fault_fails_the_function_before_anything_is_poisoned_or_written(
    monkeypatch: pytest.MonkeyPatch,
    dynamodb: Any,
    tables: Tables,
    stores: Stores,
    function: str,
) -> None:
    # Given a function deployed with a configuration fault, and a pending event for it to handle
    fault, invoke = FAULTS[function]
    places = {"POISON_QUEUE_URL": stores.queue_url, "INBOX_DEAD_LETTER_QUEUE_URL": stores.queue_url}
    for name, value in (GOOD | places | {"INBOX_TABLE_NAME": stores.inbox_table} | fault).items():
        monkeypatch.setenv(name, value)
    dynamodb.put_item(TableName=tables.outbox, Item=PENDING.to_item())
    before = {
        table: TableState.read(dynamodb, table, key)
        for table, key in ((tables.outbox, OUTBOX_KEY), (stores.inbox_table, ("pk",)))
    }
    # When it is invoked
    with captured() as output, pytest.raises(ConfigurationError) as raised:
        invoke()
    # Then it fails loudly with the typed error: nothing poisoned, dead-lettered or written, no secret shown
    sqs = boto3.client("sqs", region_name=REGION)
    messages = sqs.receive_message(QueueUrl=stores.queue_url, MaxNumberOfMessages=10).get("Messages", [])
    partial = [f"{len(messages)} message(s) sent to the poison or dead-letter queue"] if messages else []
    for table, state in before.items():
        partial += [
            f"{key} changed"
            for key in sorted(state.changed_keys(TableState.read(dynamodb, table, state.key_names)))
        ]
    judge(
        CATEGORY,
        Outcome.REJECTED,
        source=Source.LISTED,
        partial_writes=partial,
        leaks=leaks_in({**output.places, "error": str(raised.value)}),
    )
    dynamodb.delete_item(TableName=tables.outbox, Key={name: PENDING.to_item()[name] for name in OUTBOX_KEY})


@pytest.mark.usefixtures("deployed_environment")
def test_an_orders_api_without_its_tables_answers_a_generic_500_and_logs_the_configuration_error(
    monkeypatch: pytest.MonkeyPatch, dynamodb: Any, tables: Tables
) -> None:
    # Given the Orders API deployed without OUTBOX_TABLE_NAME
    monkeypatch.setenv("ORDERS_TABLE_NAME", tables.orders)
    monkeypatch.delenv("OUTBOX_TABLE_NAME", raising=False)
    before = TableState.read(dynamodb, tables.orders, ("pk",))
    # When an order is posted
    with captured() as output:
        response = orders_handler.handler(
            http_event("POST", "/orders", body=place_body()), FakeLambdaContext()
        )
    # Then a 500 that says nothing of the internals, the log names the configuration error, nothing written
    assert response["statusCode"] == 500
    assert any(extras.get("error_type") == "ConfigurationError" for _, extras in output.events)
    partial = [
        f"{key} changed"
        for key in sorted(before.changed_keys(TableState.read(dynamodb, tables.orders, ("pk",))))
    ]
    judge(
        CATEGORY,
        Outcome.REJECTED,
        source=Source.LISTED,
        partial_writes=partial,
        leaks=leaks_in(output.places),
    )


# --- Generated ------------------------------------------------------------------------------------------

# Numbers of every spelling, up to past what a timedelta holds (about 10^9 days) and what int() reads.
numbers = st.one_of(
    st.integers(min_value=-1000, max_value=10**8).map(str),
    st.integers(min_value=10**8, max_value=10**40).map(str),
    st.sampled_from(
        (
            "",
            " ",
            "0",
            "1.5",
            "1e3",
            "\u0663\u0660",
            "\uff13\uff10",
            "1_000",
            "+60",
            " 60 ",
            "0x3c",
            "9" * 5000,
        )
    ),
)
texts = st.one_of(unmarked_text, tricky_text)
routes = st.one_of(
    unmarked_json_values.map(json_text),
    st.builds(
        lambda default, route: json.dumps({"default": default, "routes": [route]}),
        st.lists(st.sampled_from(("sns", "eventbridge", "kinesis", "")), max_size=3),
        st.dictionaries(
            st.sampled_from(("aggregate_type", "event_type", "destinations", "on_poison", "extra")),
            st.one_of(texts, st.lists(st.sampled_from(("sns", "eventbridge")), max_size=2)),
            max_size=4,
        ),
    ),
    st.just("[" * 100_000 + "]" * 100_000),
    texts,
)
VARIABLES: dict[str, st.SearchStrategy[str]] = {
    "OUTBOX_TABLE_NAME": st.one_of(
        st.just("outbox"), st.just("arn:aws:dynamodb:us-east-1:123456789012:table/outbox"), texts
    ),
    "ORDERS_TABLE_NAME": st.one_of(st.just("orders"), texts),
    "TOPIC_ARN": st.one_of(st.just(TOPIC_ARN), st.just(TOPIC_ARN + ".fifo"), texts),
    "EVENT_BUS_NAME": st.one_of(st.just("outbox-bus"), texts),
    "EVENT_SOURCE": st.one_of(st.just("shop.orders"), st.just("aws.x"), texts),
    "POISON_QUEUE_URL": st.one_of(st.just(QUEUE_URL), texts),
    "OUTBOX_ROUTES": routes,
    "SWEEP_GRACE_SECONDS": numbers,
    "SWEEP_MAX_ROWS": numbers,
    "SWEEP_SEGMENTS": numbers,
    "SWEEP_BACKOFF_BASE_SECONDS": numbers,
    "SWEEP_BACKOFF_MAX_SECONDS": numbers,
    "SWEEP_MAX_ATTEMPTS": numbers,
    "SWEEP_FAIL_AFTER_SECONDS": numbers,
    "INBOX_TABLE_NAME": st.one_of(st.just("inbox"), texts),
    "INBOX_CONSUMER": st.one_of(st.just("summary"), texts),
    "INBOX_ORDERING": st.one_of(
        st.sampled_from(("strict", "latest", "unordered", "STRICT", " latest ")), texts
    ),
    "INBOX_DEDUPE_WINDOW_SECONDS": numbers,
    "INBOX_MAX_GAP_WAIT_SECONDS": numbers,
    "INBOX_ON_GAP_TIMEOUT": st.one_of(st.sampled_from(("dead-letter", "apply")), texts),
    "INBOX_DEAD_LETTER_QUEUE_URL": st.one_of(st.just(QUEUE_URL), texts),
}


@st.composite
def environments(draw: Callable[..., Any]) -> dict[str, str]:
    """A good environment with a few variables changed or removed."""
    env = dict(GOOD)
    for name in draw(st.lists(st.sampled_from(sorted(VARIABLES)), max_size=4, unique=True)):
        if draw(st.integers(0, 3)) == 0:
            env.pop(name, None)
        else:
            env[name] = draw(VARIABLES[name])
    return {name: value.replace("\x00", "") for name, value in env.items()}


@examples(10)
@given(loader=st.sampled_from(sorted(LOADERS)), env=environments())
def test_generated_environments_give_a_configuration_or_a_configuration_error(
    loader: str, env: dict[str, str]
) -> None:
    # Given / When a function's configuration is read from a generated environment / Then typed, no secret
    load(loader, env, source=Source.GENERATED)

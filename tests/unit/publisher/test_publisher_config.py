"""Publisher configuration: parsed once from the environment, every mistake caught at start-up."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from outbox.errors import ConfigurationError
from outbox_publisher.config import PublisherConfig
from outbox_publisher.routing import Destination, Router

TOPIC = "arn:aws:sns:us-east-1:123456789012:outbox-events"
BASE = {
    "OUTBOX_TABLE_NAME": "outbox",
    "POISON_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/poison",
    "TOPIC_ARN": TOPIC,
    "EVENT_BUS_NAME": "outbox-bus",
    "EVENT_SOURCE": "shop.orders",
}
BOTH = (Destination.SNS, Destination.EVENTBRIDGE)


def test_a_full_environment_parses_with_defaults() -> None:
    # Given every variable but the optional ones
    # When it is parsed
    config = PublisherConfig.from_env(BASE)

    # Then every event goes everywhere, and the topic is standard
    assert config.destinations == BOTH
    assert config.router.destinations_for("Order", "OrderPlaced") == BOTH
    assert not config.fifo_topic
    assert config.sweep_grace == timedelta(seconds=60)


@pytest.mark.parametrize(
    "table",
    [
        "outbox",
        "arn:aws:dynamodb:us-east-1:123456789012:table/outbox",
        "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/outbox",
    ],
)
def test_the_table_is_named_by_its_name_or_its_arn(table: str) -> None:
    # Given the table by name or by ARN (DynamoDB accepts both)
    # When the environment is parsed
    config = PublisherConfig.from_env(BASE | {"OUTBOX_TABLE_NAME": table})

    # Then the publisher knows the table's name (stream records name it)
    assert config.table_name == "outbox"


def test_a_fifo_topic_is_detected_by_its_arn() -> None:
    # Given a .fifo topic ARN
    # When it is parsed
    config = PublisherConfig.from_env(BASE | {"TOPIC_ARN": TOPIC + ".fifo"})

    # Then
    assert config.fifo_topic


def test_sns_alone_needs_no_event_source() -> None:
    # Given only a topic
    env = {k: v for k, v in BASE.items() if k not in ("EVENT_BUS_NAME", "EVENT_SOURCE")}

    # When it is parsed
    config = PublisherConfig.from_env(env)

    # Then the default route is SNS only
    assert config.router.destinations_for("Order", "X") == (Destination.SNS,)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"OUTBOX_TABLE_NAME": ""}, "OUTBOX_TABLE_NAME"),
        ({"POISON_QUEUE_URL": " "}, "POISON_QUEUE_URL"),
        ({"TOPIC_ARN": "", "EVENT_BUS_NAME": ""}, "nowhere to publish"),
        ({"EVENT_SOURCE": ""}, "EVENT_SOURCE"),
        ({"TOPIC_ARN": "outbox-events"}, "TOPIC_ARN must be a topic ARN"),
        ({"TOPIC_ARN": TOPIC.replace("outbox-events", "")}, "TOPIC_ARN must be a topic ARN"),
        ({"TOPIC_ARN": TOPIC + " # prod"}, "TOPIC_ARN must be a topic ARN"),
        ({"TOPIC_ARN": "arn:aws:sqs:us-east-1:123456789012:outbox-events"}, "TOPIC_ARN must be a topic ARN"),
        ({"TOPIC_ARN": "arn:aws:sns:us-east-1:1234:outbox-events"}, "TOPIC_ARN must be a topic ARN"),
        ({"OUTBOX_TABLE_NAME": "arn:aws:sqs:us-east-1:123456789012:outbox"}, "not a DynamoDB table's"),
        ({"OUTBOX_TABLE_NAME": "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/x"}, "table's"),
        ({"SWEEP_GRACE_SECONDS": "29"}, "SWEEP_GRACE_SECONDS must be at least 30"),
        ({"SWEEP_GRACE_SECONDS": "soon"}, "SWEEP_GRACE_SECONDS"),
        ({"OUTBOX_ROUTES": "{not json"}, "not valid JSON"),
        ({"OUTBOX_ROUTES": "[]"}, "must be a JSON object"),
        ({"OUTBOX_ROUTES": '{"route": []}'}, "unknown keys: route"),
        ({"OUTBOX_ROUTES": '{"routes": {}}'}, "routes must be a list"),
        ({"OUTBOX_ROUTES": '{"routes": ["sns"]}'}, r"routes\[0\] must be an object"),
        ({"OUTBOX_ROUTES": '{"routes": [{"aggregate_type": "Order"}]}'}, "needs 'destinations'"),
        ({"OUTBOX_ROUTES": '{"routes": [{"aggregate_type": 5, "destinations": []}]}'}, "non-empty string"),
        ({"OUTBOX_ROUTES": '{"routes": [{"aggregate": "Order", "destinations": []}]}'}, "unknown keys"),
        ({"OUTBOX_ROUTES": '{"routes": [{"destinations": ["kinesis"]}]}'}, "unknown destination 'kinesis'"),
        ({"OUTBOX_ROUTES": '{"default": ["sqs"]}'}, "unknown destination 'sqs'"),
        ({"OUTBOX_ROUTES": '{"default": "sns"}'}, "list of destination names"),
        (
            {"OUTBOX_ROUTES": '{"routes": [{"destinations": ["sns"], "on_poison": "skip"}]}'},
            r"on_poison must be 'hold' or 'continue'",
        ),
    ],
)
def test_bad_configuration_fails_at_start_up(change: dict[str, str], message: str) -> None:
    # Given an environment with one mistake
    # When it is parsed
    # Then a ConfigurationError names it
    with pytest.raises(ConfigurationError, match=message):
        PublisherConfig.from_env(BASE | change)


def test_a_route_to_a_destination_that_is_not_configured_fails_at_start_up() -> None:
    # Given no bus, and a route to EventBridge
    env = {k: v for k, v in BASE.items() if k not in ("EVENT_BUS_NAME", "EVENT_SOURCE")}
    routes = {"routes": [{"aggregate_type": "Order", "destinations": ["eventbridge"]}]}

    # When it is parsed
    # Then it is refused, naming the missing variable
    with pytest.raises(ConfigurationError, match="not configured \\(EVENT_BUS_NAME is not set\\)"):
        PublisherConfig.from_env(env | {"OUTBOX_ROUTES": json.dumps(routes)})


def test_routes_match_in_order_with_optional_matchers_and_a_default() -> None:
    # Given routes by event type, by aggregate type, by both, and an empty default
    routes = {
        "routes": [
            {"aggregate_type": "Order", "event_type": "OrderPlaced", "destinations": ["eventbridge", "sns"]},
            {"event_type": "OrderPlaced", "destinations": ["sns"]},
            {"aggregate_type": "Order", "destinations": ["eventbridge"]},
        ],
        "default": [],
    }

    # When they are parsed
    router = Router.parse(json.dumps(routes), BOTH)

    # Then the first match wins, destinations are in canonical order, and unmatched events have none
    assert router.destinations_for("Order", "OrderPlaced") == BOTH
    assert router.destinations_for("Quote", "OrderPlaced") == (Destination.SNS,)
    assert router.destinations_for("Order", "OrderShipped") == (Destination.EVENTBRIDGE,)
    assert router.destinations_for("Customer", "CustomerRenamed") == ()


def test_without_a_default_unmatched_events_go_everywhere_configured() -> None:
    # Given one route and no default
    router = Router.parse('{"routes": [{"aggregate_type": "Order", "destinations": ["sns"]}]}', BOTH)

    # When an unmatched event is routed
    # Then it goes to every configured destination
    assert router.destinations_for("Customer", "X") == BOTH


@pytest.mark.parametrize(
    "topic_arn",
    [
        "arn:aws-cn:sns:cn-north-1:123456789012:outbox_events",
        "arn:aws-us-gov:sns:us-gov-west-1:123456789012:Outbox-Events.fifo",
    ],
)
def test_topic_arns_of_every_partition_are_accepted(topic_arn: str) -> None:
    # Given a topic ARN of another partition
    # When it is parsed
    config = PublisherConfig.from_env(BASE | {"TOPIC_ARN": topic_arn})

    # Then it is the topic
    assert config.topic_arn == topic_arn

"""The `cdk -c key=value` knobs become typed props (no synthesis needed)."""

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from infra.stack import OutboxStackProps


def _props(context: dict[str, str]) -> "OutboxStackProps":
    from aws_cdk import App

    from infra.app import props_from_context

    return props_from_context(App(context=context))


def test_defaults_are_safe_and_turn_on_the_sample_consumers() -> None:
    # Given no context
    # When props are built
    props = _props({})

    # Then data is retained, the topic is standard, the API keeps its reservation, samples are on
    assert props.tables.retain_data is True
    assert props.outbox.table_props is not None
    assert props.outbox.table_props.retain_data is True
    assert props.outbox.queues.retain_messages is True
    assert props.outbox.destinations.fifo_topic is False
    assert props.outbox.customer_managed_key is False
    assert props.orders_api.function.reserved_concurrency == 20
    assert props.orders_api.allow_unauthenticated is False
    assert props.alarm_topic_arn is None
    assert props.sample_consumers is True


def test_context_overrides_every_knob() -> None:
    # Given every knob set on the command line
    context = {
        "fifo_topic": "true",
        "sample_consumers": "false",
        "retain_data": "false",
        "event_source": "com.example.orders",
        "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:oncall",
        "api_reserved_concurrency": "none",
    }

    # When props are built
    props = _props(context)

    # Then each one lands in its typed prop
    assert props.outbox.destinations.fifo_topic is True
    assert props.sample_consumers is False
    assert props.tables.retain_data is False
    assert props.outbox.table_props is not None
    assert props.outbox.table_props.retain_data is False
    assert props.outbox.queues.retain_messages is False
    assert props.outbox.destinations.event_source == "com.example.orders"
    assert props.alarm_topic_arn == "arn:aws:sns:eu-west-1:123456789012:oncall"
    assert props.orders_api.function.reserved_concurrency is None


@pytest.mark.parametrize(
    "context",
    [{"fifo_topic": "maybe"}, {"event_source": "aws.orders"}, {"api_reserved_concurrency": "lots"}],
)
def test_bad_context_values_fail_fast(context: dict[str, str]) -> None:
    # Given a context value that cannot be right
    # When props are built
    # Then the app refuses to synthesize
    with pytest.raises(ValueError):  # noqa: PT011 - each case raises with its own message
        _props(context)

"""A consumer's configuration: read once from the environment, every fault loud."""

import pytest

from outbox.errors import ConfigurationError
from outbox_inbox import GapTimeout, Ordering
from outbox_inbox.config import ConsumerConfig

BASE = {
    "INBOX_TABLE_NAME": "summary",
    "INBOX_CONSUMER": "order-summary",
    "INBOX_DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
}


def test_defaults_are_strict_ordering_a_seven_day_window_and_a_fifteen_minute_wait() -> None:
    config = ConsumerConfig.from_environment(BASE)
    assert config.inbox.ordering is Ordering.STRICT
    assert config.inbox.dedupe_window_s == 7 * 24 * 3600
    assert config.consumer.max_gap_wait_s == 900
    assert config.consumer.on_gap_timeout is GapTimeout.DEAD_LETTER


def test_every_setting_can_be_chosen() -> None:
    config = ConsumerConfig.from_environment(
        {
            **BASE,
            "INBOX_ORDERING": "latest",
            "INBOX_DEDUPE_WINDOW_SECONDS": "3600",
            "INBOX_MAX_GAP_WAIT_SECONDS": "60",
            "INBOX_ON_GAP_TIMEOUT": "apply",
        }
    )
    assert (config.inbox.ordering, config.inbox.dedupe_window_s) == (Ordering.LATEST, 3600)
    assert (config.consumer.max_gap_wait_s, config.consumer.on_gap_timeout) == (60, GapTimeout.APPLY)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"INBOX_TABLE_NAME": ""}, "environment variable INBOX_TABLE_NAME is required"),
        (
            {"INBOX_DEAD_LETTER_QUEUE_URL": " "},
            "environment variable INBOX_DEAD_LETTER_QUEUE_URL is required",
        ),
        ({"INBOX_ORDERING": "fifo"}, "INBOX_ORDERING must be one of strict, latest, unordered, got 'fifo'"),
        (
            {"INBOX_ON_GAP_TIMEOUT": "drop"},
            "INBOX_ON_GAP_TIMEOUT must be one of dead-letter, apply, got 'drop'",
        ),
        ({"INBOX_DEDUPE_WINDOW_SECONDS": "0"}, "INBOX_DEDUPE_WINDOW_SECONDS must be positive, got 0"),
        ({"INBOX_CONSUMER": "a#b"}, "the consumer name may not contain '#' (it prefixes the inbox keys)"),
    ],
)
def test_a_bad_configuration_fails_loudly(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        ConsumerConfig.from_environment({**BASE, **changes})
    assert str(error.value) == message


@pytest.mark.parametrize("name", ["INBOX_DEDUPE_WINDOW_SECONDS", "INBOX_MAX_GAP_WAIT_SECONDS"])
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        pytest.param("9" * 5000, "must be at most 3153600000", id="5000-digits"),
        pytest.param("1" + "0" * 20, "must be at most 3153600000", id="past-timedelta"),
        pytest.param("\u0663\u0660", "must be a whole number written with the digits 0-9", id="arabic-indic"),
        pytest.param("\uff13\uff10", "must be a whole number written with the digits 0-9", id="fullwidth"),
        pytest.param("1_000", "must be a whole number written with the digits 0-9", id="underscores"),
    ],
)
def test_huge_and_non_ascii_numbers_are_a_configuration_error(name: str, raw: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        ConsumerConfig.from_environment({**BASE, name: raw})
    assert str(error.value) == f"{name} {says}"

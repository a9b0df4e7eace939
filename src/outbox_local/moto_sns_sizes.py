"""SNS message sizes as AWS enforces them, while a local runtime (or the `outbox_moto` fixture) runs: corrects
moto 5.2, which refuses every message over 256 KiB and ignores a topic's `MaximumMessageSize`.

AWS checks each message (body plus attributes) against its topic's `MaximumMessageSize`: 262,144 bytes unless
set, from 1,024 to 1,048,576 ("Publishing large messages with Amazon SNS"). moto compares the body's length
in characters with a fixed 262,144 (`moto.sns.models.MAXIMUM_MESSAGE_LENGTH`). Here moto's own cap is raised
to AWS's largest and each publish is checked against its topic's size first, in UTF-8 bytes of the body and
attributes, with moto's own InvalidParameter error (docs/local.md, "Where moto differs from AWS").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import moto.sns.models
from moto.sns.exceptions import InvalidParameterValue

DEFAULT_TOPIC_BYTES = 262_144
LARGEST_TOPIC_BYTES = 1_048_576

_sns_models: Any = moto.sns.models


def topic_limit(topic: Any) -> int:
    """A moto topic's MaximumMessageSize (moto keeps an attribute it does not know under its snake-case
    name), or AWS's default."""
    value = getattr(topic, "maximum_message_size", None)
    try:
        return int(value) if value is not None else DEFAULT_TOPIC_BYTES
    except ValueError:
        return DEFAULT_TOPIC_BYTES


def message_bytes(message: str, attributes: Mapping[str, Any] | None) -> int:
    """The body and each attribute's name, type and value, in UTF-8 bytes, as SNS counts them."""
    size = len(message.encode())
    for name, value in (attributes or {}).items():
        size += len(name.encode())
        if isinstance(value, Mapping):
            size += sum(len(str(part).encode()) for part in value.values())
    return size


def _sized(publish: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(publish)
    def sized(self: Any, message: str, arn: str | None, *arguments: Any, **keywords: Any) -> str:
        topic = self.topics.get(arn) if arn is not None else None
        if topic is not None:
            attributes = keywords.get("message_attributes")
            if message_bytes(message, attributes) > topic_limit(topic):
                raise InvalidParameterValue(
                    "An error occurred (InvalidParameter) when calling the Publish operation: "
                    "Invalid parameter: Message too long"
                )
        return publish(self, message, arn, *arguments, **keywords)

    return sized


@contextmanager
def topic_message_sizes() -> Iterator[None]:
    """While in effect, moto's SNS accepts messages up to each topic's MaximumMessageSize, and no larger."""
    original_cap = _sns_models.MAXIMUM_MESSAGE_LENGTH
    original_publish = _sns_models.SNSBackend.publish
    _sns_models.MAXIMUM_MESSAGE_LENGTH = LARGEST_TOPIC_BYTES
    _sns_models.SNSBackend.publish = _sized(original_publish)
    try:
        yield
    finally:
        _sns_models.SNSBackend.publish = original_publish
        _sns_models.MAXIMUM_MESSAGE_LENGTH = original_cap

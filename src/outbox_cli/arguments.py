"""What each argument of the `outbox` command may be: argparse `type=` callables shared by every command.

A value that Python would read loosely (`int()` takes every Unicode digit, `1_000` and signs; `float()` takes
`inf`, `nan` and `1e23`), that has no upper bound, or that AWS would refuse with an error its client cannot
read (a control character in a stack name ends in botocore's ResponseParserError) is a usage error (exit 2)
naming the argument, before any call to AWS or to the local runtime. Names follow AWS's own naming rules;
free text (a reason, a filter) is printable and bounded.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from outbox.config import MAX_COUNT
from outbox.errors import InvalidNumberError
from outbox.numbers import positive_duration, positive_whole_number

MAX_ENVIRONMENTS: Final = 64
"""More worker processes per function than a laptop runs usefully; a larger number is a typo."""
MAX_SCHEDULE_SPEEDUP: Final = 3600.0
"""An hour of schedules a second: faster only spins the scheduler."""
MAX_TEXT: Final = 1024
"""The longest reason, filter or id taken: an audit record is one DynamoDB item; no id or key is longer."""

_PORT = re.compile(r"[0-9]{1,5}")
_DECIMAL = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
_DURATION = re.compile(r"\s*([0-9]+)\s*([smhd])\s*")
_UNITS = {
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}
# AWS's naming rules in ASCII classes (`\w` and `\d` would take any Unicode letter or digit).
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")  # botocore's own check
# Each takes a name or an ARN, as the AWS APIs the commands call do.
_STACK = re.compile(
    r"[A-Za-z][-A-Za-z0-9]{0,127}"
    r"|arn:aws[a-z-]*:cloudformation:[a-z0-9-]+:[0-9]{12}:stack/[A-Za-z][-A-Za-z0-9]{0,127}/[-A-Za-z0-9]{1,64}"
)
_TABLE = re.compile(r"(?:arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/)?[A-Za-z0-9_.-]{3,255}")
_FUNCTION = re.compile(
    r"(?:arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:|[0-9]{12}:function:)?"
    r"[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9_$-]{1,128})?"
)
_QUEUE_PATH = re.compile(r".*/[0-9]{12}/[A-Za-z0-9_-]{1,80}(?:\.fifo)?")
_OUTPUTS_PREFIX = re.compile(r"[A-Za-z0-9]{0,200}")  # an output's logical id is alphanumeric
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|[0-9A-Fa-f:.]{2,45}")
_SERVICE = re.compile(r"[a-z0-9-]{1,64}")
_OPERATION = re.compile(r"\*|[A-Za-z][A-Za-z0-9]{0,127}")
_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,127}")


def _refused(text: str, rule: str) -> argparse.ArgumentTypeError:
    # argparse prefixes "argument --flag:", so the message names the value and the rule only.
    return argparse.ArgumentTypeError(f"{text[:80]!r}{'…' if len(text) > 80 else ''} {rule}")


def _matching(pattern: re.Pattern[str], rule: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if pattern.fullmatch(text) is None:
            raise _refused(text, rule)
        return text

    return parse


# --- numbers ----------------------------------------------------------------------------------------------


def whole_number(minimum: int, maximum: int) -> Callable[[str], int]:
    """A whole number from `minimum` (at least 1) to `maximum`, in ASCII digits (outbox.numbers)."""

    def parse(text: str) -> int:
        try:
            value = positive_whole_number(text, maximum=maximum)
        except InvalidNumberError as error:
            raise _refused(text, f"is not a whole number from {minimum} to {maximum}: it {error}") from None
        if value < minimum:
            raise _refused(text, f"is not a whole number from {minimum} to {maximum}")
        return value

    return parse


max_environments = whole_number(1, MAX_ENVIRONMENTS)
"""`--max-environments`: 1 to 64."""
http_status = whole_number(400, 599)
"""`local fault --status`: an AWS error answers 4xx or 5xx (botocore reads no error from any other status)."""
times = whole_number(1, MAX_COUNT)
"""`local fault --times`: requests to fail, at most the largest count a setting takes."""


def port(text: str) -> int:
    """`--aws-port`, `--api-port`: 0 (any free port) to 65535, in ASCII digits; a larger one would fail only
    when the server binds it, after start-up."""
    if _PORT.fullmatch(text) is None or int(text) > 65535:
        raise _refused(text, "is not a port: 0 (any free port) to 65535")
    return int(text)


def schedule_speedup(text: str) -> float:
    """`--schedule-speedup`: a positive decimal number in ASCII digits (`float()` also reads Unicode digits,
    `inf`, `nan` and exponents), at most 3600."""
    if _DECIMAL.fullmatch(text) is None or not 0 < float(text) <= MAX_SCHEDULE_SPEEDUP:
        raise _refused(
            text, f"is not a speed-up: a number above 0 and at most {MAX_SCHEDULE_SPEEDUP:g} (e.g. 12.5)"
        )
    return float(text)


MAX_REPLICATION_LAG_S = 300.0


def replication_lag(text: str) -> float:
    """`--replication-lag`: seconds, a decimal number in ASCII digits from 0 to 300."""
    if _DECIMAL.fullmatch(text) is None or not 0 <= float(text) <= MAX_REPLICATION_LAG_S:
        raise _refused(
            text, f"is not a replication lag: seconds from 0 to {MAX_REPLICATION_LAG_S:g} (e.g. 1 or 0.5)"
        )
    return float(text)


def duration(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d` (ASCII digits, at most outbox.numbers.MAX_DURATION)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise _refused(text, "is not a duration like 90s, 15m, 12h or 30d")
    digits, unit = match.groups()
    if not digits.strip("0"):
        raise _refused(text, "is not a duration: a duration must be longer than 0")
    try:
        return positive_duration(digits, _UNITS[unit])
    except InvalidNumberError as error:
        raise _refused(text, f"is too long: a duration {error}{unit}") from None


# --- names ------------------------------------------------------------------------------------------------


def region(text: str) -> str:
    """A region's name as botocore checks it: botocore takes an empty one for none at all and builds
    endpoints without a region."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a region must be named, e.g. us-east-1")
    return _matching(_REGION, "is not a region's name, e.g. us-east-1")(text)


stack = _matching(
    _STACK, "is not a CloudFormation stack name (a letter, then up to 127 letters, digits or '-') or ARN"
)
outputs_prefix = _matching(
    _OUTPUTS_PREFIX, 'is not an outputs prefix: up to 200 letters or digits ("" for the default outbox\'s)'
)
"""`--outbox`: the Outbox construct's `outputs_prefix`, which starts each of its outputs' keys."""
table = _matching(_TABLE, "is not a DynamoDB table name (3 to 255 letters, digits, '_', '.' or '-') or ARN")
function = _matching(_FUNCTION, "is not a Lambda function's name (up to 64 letters, digits, '-', '_') or ARN")
service = _matching(_SERVICE, "is not a service's signing name, e.g. sns, events, dynamodb")
operation = _matching(_OPERATION, "is not an operation's name, e.g. PublishBatch, or * for every one")
error_code = _matching(_ERROR_CODE, "is not an AWS error code, e.g. InternalError")
host = _matching(_HOST, "is not a host name or IP address, e.g. 127.0.0.1")


def free_text(text: str) -> str:
    """Free text (a profile, a filter): 1 to 1024 printable characters (no
    control or format character: each is printed back, or compared, as given)."""
    if not text or len(text) > MAX_TEXT or not text.isprintable():
        raise _refused(text, f"must be 1 to {MAX_TEXT} printable characters")
    return text


def identifier(text: str) -> str:
    """An event id or an aggregate key, as another writer may have saved it: any 1 to 1024 characters but NUL
    (a key's id may hold any character the writer accepts; it is compared as given, and printed with repr)."""
    if not text or len(text) > MAX_TEXT or "\x00" in text:
        raise _refused(text, f"must be 1 to {MAX_TEXT} characters, without NUL")
    return text


def reason(value: str) -> str:
    """`--reason`: recorded with who and when in every audit record: something to read, on one line."""
    if not value.strip():
        raise argparse.ArgumentTypeError("a reason is required: it is recorded on every row changed")
    return free_text(value)


def url(text: str) -> str:
    """An endpoint: http(s)://host[:port][/path], printable ASCII without spaces."""
    if not (text.isascii() and text.isprintable()) or " " in text:
        raise _refused(text, "is not a URL like http://127.0.0.1:4566")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - reading it checks it: ValueError past 65535 or not a number
    except ValueError:
        raise _refused(text, "is not a URL like http://127.0.0.1:4566") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise _refused(text, "is not a URL like http://127.0.0.1:4566")
    return text


def queue_url(text: str) -> str:
    """An SQS queue's URL: an endpoint whose path ends in an account's id and a queue's name."""
    url(text)
    if _QUEUE_PATH.fullmatch(urlsplit(text).path) is None:
        raise _refused(text, "is not a queue URL like https://sqs.us-east-1.amazonaws.com/123456789012/name")
    return text


def path(text: str) -> Path:
    """A file's path: named, and without the NUL byte no system call takes."""
    if not text or "\x00" in text:
        raise _refused(text, "is not a file's path")
    return Path(text)

"""The process environment every measurement runs in: fake credentials, no real AWS, quiet output.

Set before any boto3 client exists: the counting figures run on moto in process, the CPU figures on clients
whose HTTP is canned, and neither may ever reach an account. Powertools' tracer is off (no X-Ray daemon
here); the cold-start probe turns it back on the way Lambda runs it (bench.cold_start).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parent.parent
"""The checkout: the fresh processes a measurement starts run in it."""
CHILD_PYTHONPATH = os.pathsep.join([str(ROOT / "functions"), str(ROOT)])
"""What those processes import from besides the installed library: the sample app and this checkout."""

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    # botocore >= 1.44.4 would send DynamoDB Streams calls to an endpoint moto does not serve.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}
POWERTOOLS = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "OutboxBench",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}


def use_fake_aws() -> None:
    """Point this process at nothing real: fake credentials, a fixed region, no profile or endpoint."""
    os.environ.update(FAKE_AWS | POWERTOOLS)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)


@contextmanager
def quiet() -> Iterator[None]:
    """Standard output goes nowhere meanwhile, at the file-descriptor level.

    The handlers under test log a JSON line and flush EMF metrics to stdout, as on Lambda. Powertools'
    handlers hold the stream they were created with, so swapping `sys.stdout` would miss them; the text is
    still formatted and written (that work is part of what the CPU figures measure), only not shown.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


class Captured:
    """What a `captured()` block wrote to standard output (filled in when the block ends)."""

    def __init__(self) -> None:
        self.data = b""


@contextmanager
def captured() -> Iterator[Captured]:
    """Like `quiet()`, but what is written is kept: a figure of the bytes a function logs."""
    sys.stdout.flush()
    saved = os.dup(1)
    result = Captured()
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield result
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            result.data = sink.read()

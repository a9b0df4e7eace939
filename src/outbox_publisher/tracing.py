"""The handlers' Powertools `Tracer`, and what it costs a cold start.

With tracing on (`Tracing: Active`), the tracer patches botocore only: the handlers call AWS through
botocore and nothing else, and Powertools' default (`patch_all`) would also import and patch requests,
sqlite3 and every other library the X-Ray SDK supports (~40 ms of a cold start) for calls never made.

With tracing off (by Powertools' own rule: `POWERTOOLS_TRACE_DISABLED`, or not on Lambda), Powertools
would still import the X-Ray SDK to use its recorder as a provider; off Lambda that builds its sampling
client, a botocore session (~250 ms). A disabled tracer never records anything, so it gets a provider that
does nothing instead, and the X-Ray SDK is never imported.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

TRACED_MODULES = ("botocore",)


class _NoSegment(BaseSegment):
    def close(self, end_time: int | None = None) -> None:
        return None

    def add_subsegment(self, subsegment: Any) -> None:
        return None

    def remove_subsegment(self, subsegment: Any) -> None:
        return None

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        return None


class _NoTracing(BaseProvider):
    """The provider of a disabled tracer: Powertools still opens a subsegment around the handler."""

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Generator[BaseSegment, None, None]:
        yield _NoSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> AsyncGenerator[BaseSegment, None]:
        yield _NoSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


def tracer(service: str | None = None) -> Tracer:
    """A Powertools tracer: patching botocore only when on, without the X-Ray SDK when off."""
    if Tracer._is_tracer_disabled():
        # Powertools keeps a disabled tracer disabled for the life of the process (its shared config), so
        # every later Tracer() shares this provider and records nothing, as it would have anyway.
        return Tracer(service=service, disabled=True, auto_patch=False, provider=_NoTracing())
    return Tracer(service=service, patch_modules=TRACED_MODULES)

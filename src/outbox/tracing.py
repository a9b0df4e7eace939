"""The handlers' Powertools `Tracer`, on this library's X-Ray recorder (outbox.xray) instead of the X-Ray SDK.

With tracing on (`Tracing: Active`), the tracer records the handler, the methods it decorates and every
botocore call as subsegments of Lambda's own segment (outbox.xray, outbox.xray_botocore). The handlers call
AWS through botocore and nothing else, so botocore is the one library patched.

With tracing off (by Powertools' own rule: `POWERTOOLS_TRACE_DISABLED`, or not on Lambda), Powertools still
opens a subsegment around the handler: a disabled tracer gets a provider that records nothing, and neither
recorder nor socket is made.

Needs Powertools (`aws-lambda-powertools`), which the functions get from its layer.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider

from outbox.xray import UNRECORDED, Recorder

TRACED_MODULES = ("botocore",)


class _NoTracing(BaseProvider):
    """The provider of a disabled tracer."""

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Iterator[Any]:
        yield UNRECORDED

    @asynccontextmanager
    async def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        yield UNRECORDED

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


@functools.cache
def recorder() -> Recorder:
    """The process's one recorder: botocore is patched once, whatever number of tracers share it."""
    return Recorder()


def tracer(service: str | None = None) -> Tracer:
    """A Powertools tracer: on the X-Ray recorder, patching botocore, when on; recording nothing when off."""
    if Tracer._is_tracer_disabled():
        # Powertools keeps a disabled tracer disabled for the life of the process (its shared config), so
        # every later Tracer() shares this provider and records nothing, as it would have anyway.
        return Tracer(service=service, disabled=True, auto_patch=False, provider=_NoTracing())
    # A Powertools provider by duck typing (outbox.xray needs no Powertools).
    return Tracer(service=service, patch_modules=TRACED_MODULES, provider=cast(BaseProvider, recorder()))

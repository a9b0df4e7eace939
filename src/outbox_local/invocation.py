"""What one invocation of a hosted function returned: its payload, or the error Lambda would report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InvocationResult:
    """What the function returned (`payload`) or that it raised (`error_type` and `error_message`)."""

    payload: Any = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error_type is not None

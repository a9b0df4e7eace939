"""The constructs' one error type: what was passed cannot work, said at synth with what to change."""

from __future__ import annotations


class OutboxConstructError(ValueError):
    """A construct was given something that would fail at deploy or at run time. Raised at synth."""

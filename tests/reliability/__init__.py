"""The reliability suite (issue 15): crash points, hand-found cases and random fault schedules, checked by one
invariant checker (docs/RELIABILITY.md)."""

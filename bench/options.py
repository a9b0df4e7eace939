"""The three ways of publishing that the cost figures compare (bench.cost per event, bench.fixed_cost per
month): this project's publisher, the naive one (bench/naive.py) and EventBridge Pipes."""

from __future__ import annotations

OURS, NAIVE, PIPES = "ours", "naive publisher", "EventBridge Pipes (one pipe per target)"

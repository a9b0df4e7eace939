"""How `outbox demo` tells what it does: numbered steps, lines, checks that must all hold, and figures."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TextIO


@dataclass
class Check:
    description: str
    passed: bool


@dataclass
class Narrator:
    out: TextIO
    checks: list[Check] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def step(self, number: int, total: int, title: str) -> None:
        self.out.write(f"\n[{number}/{total}] {title}\n")
        self.out.flush()

    def say(self, text: str) -> None:
        self.out.write(f"      {text}\n")
        self.out.flush()

    def check(self, description: str, passed: bool) -> bool:
        self.checks.append(Check(description, passed))
        self.say(f"{'ok  ' if passed else 'FAIL'} {description}")
        return passed


def percentiles(latencies: list[int]) -> str:
    if len(latencies) < 2:
        return "n/a"
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return f"{cuts[49]:.0f} ms / {cuts[98]:.0f} ms"

"""A figure: one measured number for ours and the baseline, with the floor or target it is read against.

Figures come in groups; a group says what its baseline is (the naive publisher, `import boto3`...). The
ratio is always ours / baseline. Floors and targets are reported, never asserted: this is a benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Figure:
    key: str
    """Stable id (the JSON's and the doc's), e.g. `publish.round_robin_100`."""
    label: str
    unit: str
    ours: float | None
    baseline: float | None = None
    floor: float | None = None
    """What AWS's own limits allow at best (e.g. 10 entries per publish call: 0.10 calls per event)."""
    target: float | None = None
    """Issue 14's target for `ours` (at most this), when it names one."""
    decimals: int = 2
    source: str = ""
    """How it was measured: which hooks or clock, and where capacity came from."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """The raw counts the figure was computed from."""

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.baseline:
            return None
        return self.ours / self.baseline

    @property
    def meets_target(self) -> bool | None:
        if self.target is None or self.ours is None:
            return None
        return self.ours <= self.target + 1e-9

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "unit": self.unit,
            "ours": self.ours,
            "baseline": self.baseline,
            "floor": self.floor,
            "target": self.target,
            "ratio": self.ratio,
            "meets_target": self.meets_target,
            "decimals": self.decimals,
            "source": self.source,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True)
class Group:
    key: str
    title: str
    baseline: str
    """What the baseline column holds in this group."""
    figures: Sequence[Figure]
    notes: Sequence[str] = ()
    command: str = ""
    """The command that reproduces this group alone."""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "baseline": self.baseline,
            "command": self.command,
            "notes": list(self.notes),
            "figures": [figure.to_json() for figure in self.figures],
        }


def per(count: float, events: int) -> float:
    return count / events if events else math.nan


def number(value: float | None, decimals: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{decimals}f}"


def floor_text(floor: float | None, target: float | None, decimals: int) -> str:
    """`0.10 (<= 0.11)`: the floor, and the target when it differs."""
    if floor is None and target is None:
        return "-"
    if floor is None:
        return f"<= {number(target, decimals)}"
    if target is None or math.isclose(floor, target):
        return number(floor, decimals)
    return f"{number(floor, decimals)} (<= {number(target, decimals)})"


def ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


TABLE_HEADER = ("figure", "ours", "baseline", "floor (target)", "ratio")


def table_rows(groups: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...] | str]:
    """The printed table's rows, from the JSON form of the groups: a group title is a plain string."""
    rows: list[tuple[str, ...] | str] = []
    for group in groups:
        rows.append(f"{group['title']} (baseline: {group['baseline']})")
        for figure in group["figures"]:
            decimals = figure["decimals"]
            unit = f" [{figure['unit']}]" if figure["unit"] else ""
            rows.append(
                (
                    f"  {figure['label']}{unit}",
                    number(figure["ours"], decimals),
                    number(figure["baseline"], decimals),
                    floor_text(figure["floor"], figure["target"], decimals),
                    ratio_text(figure["ratio"]),
                )
            )
    return rows


def render_table(groups: Sequence[Mapping[str, Any]]) -> str:
    rows = table_rows(groups)
    cells = [row for row in rows if isinstance(row, tuple)]
    widths = [max(len(row[column]) for row in [TABLE_HEADER, *cells]) for column in range(len(TABLE_HEADER))]

    def line(row: tuple[str, ...]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join(
            [first, *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        )

    out = [line(TABLE_HEADER), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    for row in rows:
        out.append(row if isinstance(row, str) else line(row))
    return "\n".join(out)

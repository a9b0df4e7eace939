"""bench.local_load's figures: what the run observed, against issue 12's targets, as JSON and as a table."""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TARGET_ORDERS_PER_S = 50.0
TARGET_API_GROWTH = 1.5
"""The last tenth's median API latency at most this many times the first tenth's."""
TARGET_RSS_BYTES = 1.5e9
DELIVERY_SLACK_S = 1.0
"""The p99 target: the stream mapping's batching window plus this."""


@dataclass
class Placed:
    """One order: when it was due, sent and answered (epoch seconds), the answer, and its event."""

    scheduled: float
    sent: float = 0.0
    done: float = 0.0
    status: int = 0
    event_id: str | None = None


@dataclass
class Seen:
    """What one subscriber queue received: each event's first delivery and its commit (epoch ms)."""

    sent_ms: dict[str, float] = field(default_factory=dict)
    occurred_at_ms: dict[str, float] = field(default_factory=dict)
    copies: int = 0


def build(
    arguments: argparse.Namespace,
    placed: list[Placed],
    *,
    queues: Mapping[str, Seen],
    window_s: float,
    peak_rss_bytes: int,
    peak_processes: int,
    mappings: Any,
    leftover: list[int],
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    """The figures, and each target met or not, as one JSON-ready document."""
    ok = [p for p in placed if p.status == 201]
    acknowledged = {p.event_id for p in ok if p.event_id is not None}
    tenth = max(1, len(placed) // 10)
    first, last = _latencies(placed[:tenth]), _latencies(placed[-tenth:])
    deliveries = {name: _deliveries(seen, acknowledged) for name, seen in queues.items()}
    on_both = set.intersection(*(set(seen.sent_ms) for seen in queues.values())) & acknowledged
    delivered_at = sorted(max(seen.sent_ms[e] for seen in queues.values()) / 1000 for e in on_both)
    sustained = _steady_rate(delivered_at)
    acknowledged_span = max(p.done for p in ok) - min(p.sent for p in ok) if ok else 0.0
    p99_target = window_s + DELIVERY_SLACK_S
    worst_p99 = max((d["p99_ms"] or float("inf")) for d in deliveries.values()) / 1000
    growth = last["p50_s"] / first["p50_s"] if first["p50_s"] else float("inf")
    return {
        "configuration": {
            "orders": arguments.orders,
            "rate": arguments.rate,
            "clients": arguments.clients,
            "template": str(arguments.template),
            "functions": "in process" if arguments.in_process else "worker processes",
            "max_environments": arguments.max_environments,
            "cpus": os.cpu_count(),
            "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg()),
        },
        "api": {
            "acknowledged": len(ok),
            "failed": len(placed) - len(ok),
            "acknowledged_per_s": len(ok) / acknowledged_span if acknowledged_span else 0.0,
            "client_lag_max_s": max((p.sent - p.scheduled for p in placed), default=0.0),
            "first_tenth": first,
            "last_tenth": last,
        },
        "delivery": {
            "on_both_queues": len(on_both),
            "sustained_orders_per_s": sustained,
            **deliveries,
        },
        "memory": {
            "peak_rss_bytes": peak_rss_bytes,
            "peak_processes": peak_processes,
            "left_running": leftover,
        },
        "mappings": mappings.get("mappings", []),
        "targets": {
            "sustained_orders_per_s": {
                "target": f">= {TARGET_ORDERS_PER_S:g}",
                "value": sustained,
                # deliveries come in batches (one per publisher invocation): allow 2% for the span's edges
                "met": sustained >= TARGET_ORDERS_PER_S * 0.98 and len(on_both) == len(placed),
            },
            "delivery_p99_s": {
                "target": f"<= {p99_target:g}",
                "value": worst_p99,
                "met": worst_p99 <= p99_target,
            },
            "api_last_tenth_over_first": {
                "target": f"<= {TARGET_API_GROWTH:g}",
                "value": growth,
                "met": growth <= TARGET_API_GROWTH,
            },
            "peak_rss_gb": {
                "target": f"< {TARGET_RSS_BYTES / 1e9:g}",
                "value": peak_rss_bytes / 1e9,
                "met": peak_rss_bytes < TARGET_RSS_BYTES,
            },
        },
    }


def _steady_rate(moments: list[float]) -> float:
    """Events per second in the middle 80% of them: the warm-up (cold starts) and the tail left out, which
    would read as a catch-up faster than the load, or a drain slower."""
    if len(moments) < 10:
        return 0.0
    first, last = len(moments) // 10, len(moments) * 9 // 10
    span = moments[last] - moments[first]
    return (last - first) / span if span > 0 else 0.0


def cpu_used(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, Any]:
    """CPU seconds each role used while the orders were placed and delivered, and its share of one core."""
    roles = {role: after[role] - before.get(role, 0.0) for role in after}
    return {
        "wall_s": wall_s,
        "seconds": dict(sorted(roles.items(), key=lambda item: -item[1])),
        "cores": {role: seconds / wall_s for role, seconds in roles.items()} if wall_s else {},
    }


def _latencies(placed: list[Placed]) -> dict[str, float]:
    durations = sorted(p.done - p.sent for p in placed if p.done)
    if not durations:
        return {"p50_s": 0.0, "mean_s": 0.0, "p99_s": 0.0}
    return {
        "p50_s": statistics.median(durations),
        "mean_s": statistics.fmean(durations),
        "p99_s": _percentile(durations, 99),
    }


def _deliveries(seen: Seen, acknowledged: set[str]) -> dict[str, Any]:
    latencies = sorted(
        seen.sent_ms[event_id] - seen.occurred_at_ms[event_id]
        for event_id in acknowledged
        if event_id in seen.sent_ms
    )
    return {
        "delivered": len(latencies),
        "duplicates": seen.copies - len(latencies),
        "p50_ms": _percentile(latencies, 50) if latencies else None,
        "p99_ms": _percentile(latencies, 99) if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
    }


def _percentile(ordered: list[float], percent: float) -> float:
    index = min(len(ordered) - 1, max(0, round(percent / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def table(report: dict[str, Any]) -> str:
    api, delivery, memory = report["api"], report["delivery"], report["memory"]
    configuration = report["configuration"]
    rows = [
        ("orders placed / acknowledged", f"{configuration['orders']} / {api['acknowledged']}"),
        ("offered rate / acknowledged", f"{configuration['rate']:g}/s / {api['acknowledged_per_s']:.1f}/s"),
        ("client lag (max)", f"{api['client_lag_max_s']:.2f} s"),
        ("delivered on both queues", f"{delivery['on_both_queues']}"),
        ("sustained (deliveries/s)", f"{delivery['sustained_orders_per_s']:.1f}/s"),
    ]
    for name in ("topic", "bus"):
        d = delivery[name]
        rows.append(
            (
                f"commit -> {name} queue p50 / p99 / max",
                f"{_ms(d['p50_ms'])} / {_ms(d['p99_ms'])} / {_ms(d['max_ms'])}",
            )
        )
        rows.append((f"duplicates on the {name} queue", str(d["duplicates"])))
    for name in ("first_tenth", "last_tenth"):
        t = api[name]
        rows.append(
            (
                f"API latency {name.replace('_', ' ')} p50 / mean / p99",
                f"{t['p50_s'] * 1000:.0f} / {t['mean_s'] * 1000:.0f} / {t['p99_s'] * 1000:.0f} ms",
            )
        )
    rows.append(
        (
            "peak memory (runtime + workers)",
            f"{memory['peak_rss_bytes'] / 1e6:.0f} MB in {memory['peak_processes']} processes",
        )
    )
    rows.append(("processes left after stop", str(len(memory["left_running"]))))
    rows.append(
        (
            "load average before / after",
            f"{configuration['load_average_before'][0]:.1f} / "
            f"{configuration['load_average_after'][0]:.1f} on {configuration['cpus']} CPUs",
        )
    )
    cpu = report.get("cpu", {})
    orders = max(1, configuration["orders"])
    for role, seconds in cpu.get("seconds", {}).items():
        rows.append(
            (
                f"CPU {_short(role)}",
                f"{seconds:.1f} s = {cpu['cores'][role]:.2f} core, {1000 * seconds / orders:.1f} ms/order",
            )
        )
    if cpu.get("seconds"):
        # What bounds the rate on this machine: every process shares its cores.
        total, cores = sum(cpu["seconds"].values()), sum(cpu["cores"].values())
        rows.append(
            ("CPU all processes", f"{total:.1f} s = {cores:.2f} core, {1000 * total / orders:.1f} ms/order")
        )
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    lines.append("")
    for name, target in report["targets"].items():
        value = target["value"]
        lines.append(
            f"{'met ' if target['met'] else 'MISSED'}  {name:<28} {value:.2f}  (target {target['target']})"
        )
    return "\n".join(lines)


def _short(role: str) -> str:
    """A function's name without the stack prefix and the hash CloudFormation adds."""
    return role.removeprefix("OutboxStack-").rsplit("-", 1)[0] if role.startswith("OutboxStack-") else role


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"

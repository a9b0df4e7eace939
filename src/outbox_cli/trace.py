"""`outbox trace EVENT_ID`: one event's trace in a running `outbox local up`, request -> row -> publish ->
consumer (`outbox_local.trace_journal`), from the runtime's controls. Standard library only."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from outbox_cli import arguments as argument_types
from outbox_cli import local_controls


def add_command(commands: Any) -> None:
    trace = commands.add_parser(
        "trace",
        help="one event's trace in a running `outbox local up`: request -> row -> publish -> consumer",
    )
    trace.add_argument("event_id", metavar="EVENT_ID", type=argument_types.identifier, help="the event's id")
    trace.add_argument("--json", action="store_true")
    local_controls.add_endpoint(trace)
    trace.set_defaults(run=print_trace)


def print_trace(arguments: argparse.Namespace, out: TextIO) -> int:
    def render() -> None:
        endpoint = local_controls.endpoint_of(arguments)
        chain = local_controls.call(endpoint, "GET", f"trace/{arguments.event_id}")
        out.write(json.dumps(chain, indent=2) + "\n" if arguments.json else "\n".join(lines(chain)) + "\n")

    return local_controls.run(render)


def lines(chain: dict[str, Any]) -> list[str]:
    """The chain as text, one step a line (and the consumer's log lines under it)."""
    row = chain.get("row") or {}
    head = f"event {chain['event_id']}"
    if row:
        head += f"  {row['event_type']}  {row['aggregate_key']} seq {row['seq']}"
        head += f"  correlation_id {row.get('correlation_id') or '-'}"
    text = [head, f"trace {chain.get('trace_id') or '- (the row carries no trace context)'}"]
    request = chain.get("request")
    if request:
        text.append(
            _step("request", request, f"{request['method']} {request['path']} -> {request['status']}")
        )
    elif row:
        text.append("  request   - (not an HTTP API request of this runtime, or forgotten)")
    if row:
        context = "  ".join(f"{name} {row[name]}" for name in ("trace_header", "traceparent") if name in row)
        text.append(f"  row       {context or 'no trace context'}")
    for publish in chain.get("publish", []):
        text.append(_step("publish", publish, "handed back" if publish["handed_back"] else "published"))
    for delivery in chain.get("consumers", []):
        outcome = "handed back" if delivery["handed_back"] else "consumed"
        carried = delivery.get("message_trace_header") or delivery.get("aws_trace_header")
        via = f"via {delivery['via']} ({delivery['queue']}): {outcome}"
        text.append(_step("consumer", delivery, via + (f"  carried {carried}" if carried else "")))
        for line in delivery.get("log", []):
            keys = "  ".join(f"{key} {line[key]}" for key in ("trace_id", "correlation_id") if key in line)
            text.append(f"            log {line.get('level', '')} {line.get('message', '')}  {keys}".rstrip())
    return text


def _step(name: str, step: dict[str, Any], what: str) -> str:
    return f"  {name:<9} {step['at']}  {step['function']}  {what}  (invocation trace {step.get('trace_id')})"

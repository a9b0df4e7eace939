"""`outbox local fault`, `outbox local faults`, `outbox local mappings`, `outbox local region` and
`outbox local regions`: the running runtime's controls
(`outbox_local.control_api`), reached over its AWS endpoint. Standard library only: they need neither moto
nor the runtime in this process, only a running `outbox local up`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TextIO

from outbox_cli import arguments as argument_types
from outbox_cli import rendering

LOCAL_PORT = 4566
LOCAL_ENDPOINT = f"http://127.0.0.1:{LOCAL_PORT}"
"""Where `outbox local up` serves the AWS endpoint by default."""
DEFAULT_REGION = "us-east-1"
"""`outbox local up`'s region unless `--region`."""
# A throttle as each service's API spells it, with the status it answers (botocore retries both).
THROTTLE_CODES = {"sns": "Throttling", "sqs": "Throttling"}
DEFAULT_THROTTLE_CODE = "ThrottlingException"


class ControlError(Exception):
    """The runtime could not be reached, or refused the request."""


def add_commands(local_commands: Any) -> None:
    fault = local_commands.add_parser(
        "fault",
        help="make a service of a running `outbox local up` answer an AWS error (an outage, a throttle)",
    )
    fault.add_argument(
        "service",
        type=argument_types.service,
        help="the service's signing name: sns, events, sqs, dynamodb, lambda, ...",
    )
    fault.add_argument(
        "operation",
        nargs="?",
        default="*",
        type=argument_types.operation,
        help="e.g. PublishBatch (default: every operation)",
    )
    kind = fault.add_mutually_exclusive_group()
    kind.add_argument(
        "--throttle", type=argument_types.duration, metavar="DURATION", help="throttle it for this long (30s)"
    )
    kind.add_argument(
        "--error",
        type=argument_types.error_code,
        metavar="CODE",
        help="answer this error code (default InternalError)",
    )
    fault.add_argument(
        "--status", type=argument_types.http_status, help="its HTTP status (default 500; 400 for --throttle)"
    )
    fault.add_argument(
        "--for", dest="for_", type=argument_types.duration, metavar="DURATION", help="then stop by itself"
    )
    fault.add_argument("--times", type=argument_types.times, help="fail only this many requests")
    add_endpoint(fault)
    fault.set_defaults(run=arm)

    faults = local_commands.add_parser("faults", help="the armed faults of a running `outbox local up`")
    faults.add_argument("--clear", action="store_true", help="disarm them all")
    faults.add_argument("--json", action="store_true")
    add_endpoint(faults)
    faults.set_defaults(run=list_faults)

    mappings = local_commands.add_parser(
        "mappings", help="each event source mapping's backlog, iterator age, invocations and failures"
    )
    mappings.add_argument("--json", action="store_true")
    add_endpoint(mappings)
    mappings.set_defaults(run=list_mappings)

    region = local_commands.add_parser(
        "region",
        help="cut a region off (its functions, mappings and schedules stop, replication queues), or back",
    )
    region.add_argument("action", choices=["cut", "restore"])
    region.add_argument("region", type=argument_types.region, help="e.g. us-west-2")
    add_endpoint(region)
    region.set_defaults(run=change_region)

    regions = local_commands.add_parser(
        "regions", help="the regions of a running `outbox local up`: which are cut off, replication queued"
    )
    regions.add_argument(
        "--lag",
        type=argument_types.replication_lag,
        metavar="SECONDS",
        help="first set the replication lag (the writes queued included): a replication lag fault",
    )
    regions.add_argument("--json", action="store_true")
    add_endpoint(regions)
    regions.set_defaults(run=list_regions)


def add_env_arguments(env: argparse.ArgumentParser) -> None:
    """`outbox local env`: the running runtime's exports, or those of the endpoint given."""
    env.add_argument(
        "--endpoint-url",
        type=argument_types.url,
        help="the runtime's AWS endpoint (default: the one `outbox local up` running now serves)",
    )
    env.add_argument(
        "--region",
        type=argument_types.region,
        help="its region (default: the running runtime's; us-east-1 for an endpoint no runtime announced)",
    )


def print_env(arguments: argparse.Namespace, out: TextIO) -> int:
    """The exports for the runtime running now (its own file says where: `outbox_local.state`), or for the
    endpoint given. On stderr, which `eval "$(outbox local env)"` shows, what that runtime runs."""
    from outbox_local import state  # noqa: PLC0415 - standard library only: no moto
    from outbox_local.endpoint import exports  # noqa: PLC0415

    running = state.running()
    if arguments.endpoint_url:
        given = arguments.endpoint_url.rstrip("/")
        matching = [runtime for runtime in running if runtime.endpoint_url == given]
    else:
        matching = running
    if arguments.endpoint_url is None and not matching:
        print(
            "outbox: no `outbox local up` is running (for this user): start one, "
            "or pass --endpoint-url for an endpoint of your own",
            file=sys.stderr,
        )
        return 1
    if len(matching) > 1:
        listed = "; ".join(f"{runtime.stack_name} at {runtime.endpoint_url}" for runtime in matching)
        print(f"outbox: several local runtimes are running ({listed}): pass --endpoint-url", file=sys.stderr)
        return 1
    if matching:
        (runtime,) = matching
        if arguments.region and arguments.region != runtime.region:
            print(
                f"outbox: the runtime at {runtime.endpoint_url} runs in {runtime.region}, "
                f"not {arguments.region}",
                file=sys.stderr,
            )
            return 1
        api = f", HTTP API {runtime.api_url}" if runtime.api_url else ""
        print(
            f"# outbox local up (pid {runtime.pid}): stack {runtime.stack_name}, region {runtime.region}, "
            f"AWS endpoint {runtime.endpoint_url}{api}",
            file=sys.stderr,
        )
        out.write(exports(runtime.endpoint_url, runtime.region))
        return 0
    out.write(exports(arguments.endpoint_url, arguments.region or DEFAULT_REGION))
    return 0


def arm(arguments: argparse.Namespace, out: TextIO) -> int:
    request: dict[str, Any] = {"service": arguments.service, "operation": arguments.operation}
    lasting = arguments.throttle or arguments.for_
    if arguments.throttle is not None:
        request["error_code"] = THROTTLE_CODES.get(arguments.service, DEFAULT_THROTTLE_CODE)
        request["http_status"] = arguments.status or 400
    else:
        request["error_code"] = arguments.error or "InternalError"
        request["http_status"] = arguments.status or 500
    if lasting is not None:
        request["duration_s"] = lasting.total_seconds()
    if arguments.times is not None:
        request["times"] = arguments.times
    return run(lambda: _render_faults(call(endpoint_of(arguments), "POST", "faults", request), out))


def list_faults(arguments: argparse.Namespace, out: TextIO) -> int:
    method = "DELETE" if arguments.clear else "GET"
    return run(lambda: _render_faults(call(endpoint_of(arguments), method, "faults"), out, arguments.json))


def list_mappings(arguments: argparse.Namespace, out: TextIO) -> int:
    def render() -> None:
        mappings = call(endpoint_of(arguments), "GET", "mappings")["mappings"]
        if arguments.json:
            out.write(json.dumps(mappings, indent=2) + "\n")
            return
        headers = [
            "mapping",
            "kind",
            "function",
            "backlog",
            "iterator age",
            "invocations",
            "failed",
            "result",
        ]
        rows = [
            [
                m["name"],
                m["kind"],
                m["function"],
                m["backlog"],
                f"{m['iterator_age_s']} s" if "iterator_age_s" in m else "-",
                m["invocations"],
                m["failed_invocations"],
                m.get("last_processing_result", "-"),
            ]
            for m in mappings
        ]
        out.write(rendering.table(headers, rows) + "\n")

    return run(render)


def change_region(arguments: argparse.Namespace, out: TextIO) -> int:
    body = {"region": arguments.region}
    path = f"regions/{arguments.action}"
    return run(lambda: _render_regions(call(endpoint_of(arguments), "POST", path, body), out))


def list_regions(arguments: argparse.Namespace, out: TextIO) -> int:
    def render() -> None:
        endpoint = endpoint_of(arguments)
        if arguments.lag is not None:
            answer = call(endpoint, "POST", "regions/lag", {"seconds": arguments.lag})
        else:
            answer = call(endpoint, "GET", "regions")
        _render_regions(answer, out, arguments.json)

    return run(render)


def _render_regions(answer: dict[str, Any], out: TextIO, as_json: bool = False) -> None:
    if as_json:
        out.write(json.dumps(answer, indent=2) + "\n")
        return
    cut = set(answer["cut"])
    for region in answer["regions"]:
        out.write(f"{region}  {'cut off' if region in cut else 'up'}\n")
    out.write(f"cut off: {', '.join(sorted(cut)) or 'none'}\n")
    queued, lag = answer["replication_pending"], answer["replication_lag_s"]
    out.write(f"replication: {queued} write(s) queued, lag {lag:g} s\n")


def _render_faults(answer: dict[str, Any], out: TextIO, as_json: bool = False) -> None:
    faults = answer["faults"]
    if as_json:
        out.write(json.dumps(faults, indent=2) + "\n")
        return
    if not faults:
        out.write("no faults armed\n")
        return
    headers = ["service", "operation", "answers", "left", "injected", "active"]
    rows = [
        [
            f["service"],
            f["operation"],
            f"{f['http_status']} {f['error_code']}",
            _left(f),
            f["injected"],
            "yes" if f["active"] else "no",
        ]
        for f in faults
    ]
    out.write(rendering.table(headers, rows) + "\n")


def _left(fault: dict[str, Any]) -> str:
    parts = []
    if fault["seconds_left"] is not None:
        parts.append(f"{fault['seconds_left']} s")
    if fault["remaining"] is not None:
        parts.append(f"{fault['remaining']} requests")
    return ", ".join(parts) or "until cleared"


def add_endpoint(parser: argparse.ArgumentParser) -> None:
    # A terminal pointed at the runtime (`eval "$(outbox local env)"`) has AWS_ENDPOINT_URL: use it (checked
    # as the argument is: argparse applies `type` to a default given as text).
    parser.add_argument(
        "--endpoint-url",
        type=argument_types.url,
        default=os.environ.get("AWS_ENDPOINT_URL") or None,
        help="the runtime's AWS endpoint (default: $AWS_ENDPOINT_URL, else the one `outbox local up` running "
        f"now serves, else {LOCAL_ENDPOINT})",
    )


def endpoint_of(arguments: argparse.Namespace) -> str:
    """The endpoint given (or $AWS_ENDPOINT_URL); else the one runtime running now (`outbox_local.state`);
    else the default port."""
    if arguments.endpoint_url:
        return str(arguments.endpoint_url)
    from outbox_local import state  # noqa: PLC0415 - standard library only: no moto

    running = state.running()
    if len(running) > 1:
        listed = ", ".join(runtime.endpoint_url for runtime in running)
        raise ControlError(f"several local runtimes are running ({listed}): pass --endpoint-url")
    return running[0].endpoint_url if running else LOCAL_ENDPOINT


def call(endpoint: str, method: str, path: str, body: object = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - a developer's own local endpoint
        f"{endpoint.rstrip('/')}/_outbox/{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as error:
        try:
            detail = json.loads(error.read() or b"{}").get("error", error.reason)
        except ValueError:
            detail = f"HTTP {error.code}"
        raise ControlError(f"the local runtime refused it: {detail}") from None
    except (urllib.error.URLError, OSError) as error:
        raise ControlError(
            f"no local runtime answers at {endpoint} ({error}): is `outbox local up` running?"
        ) from None


def run(action: Callable[[], None]) -> int:
    try:
        action()
    except ControlError as error:
        print(f"outbox: {error}", file=sys.stderr)
        return 1
    return 0

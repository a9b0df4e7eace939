"""The local commands: `outbox local up` (run the synthesized stack until Ctrl-C) and `outbox demo`, and the
arguments only `local up` has.

Importing this module loads neither moto nor the runtime (they load when a command runs), so the parser of
`outbox` can take `local up`'s arguments from here (`add_up_arguments`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from outbox_cli import arguments as argument_types

if TYPE_CHECKING:
    from outbox_local.runtime import LocalRuntime, RuntimeOptions

DEFAULT_MAX_ENVIRONMENTS = 4
"""Execution environments per function at most, unless its ReservedConcurrentExecutions is lower: the machine
is a laptop, not a fleet."""


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    """How `local up` runs the functions (docs/local.md, "Execution environments")."""
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--in-process",
        action="store_true",
        help="run every function in this process, one invocation at a time (e.g. for a debugger)",
    )
    how.add_argument(
        "--max-environments",
        type=argument_types.max_environments,
        metavar="N",
        help=f"worker processes per function at most (default {DEFAULT_MAX_ENVIRONMENTS}; "
        "ReservedConcurrentExecutions may lower it)",
    )


def options(arguments: argparse.Namespace, *, background: bool) -> RuntimeOptions:
    """The runtime's options from the command line. Functions run in worker processes, concurrently as in
    Lambda, unless `--in-process` (an argument of `local up` only: the demo always uses workers)."""
    from outbox_local.runtime import RuntimeOptions  # noqa: PLC0415 - moto loads only when a command runs

    in_process = getattr(arguments, "in_process", False)
    max_environments = getattr(arguments, "max_environments", None) or DEFAULT_MAX_ENVIRONMENTS
    return RuntimeOptions(
        template_path=arguments.template,
        region=arguments.region,
        host=arguments.host,
        aws_port=arguments.aws_port,
        api_port=arguments.api_port,
        schedule_speedup=arguments.schedule_speedup,
        background=background,
        max_environments=None if in_process else max_environments,
    )


def demo(arguments: argparse.Namespace, out: TextIO) -> int:
    from outbox_cli.demo import run_demo  # noqa: PLC0415 - moto loads only when a command runs

    return run_demo(options(arguments, background=True), out)


def local_up(arguments: argparse.Namespace, out: TextIO) -> int:
    logging.basicConfig(
        level=logging.INFO if arguments.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(message)s",
    )
    stop = threading.Event()

    def request_stop(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    from outbox_local.runtime import LocalRuntime  # noqa: PLC0415 - moto loads only when a command runs

    runtime = LocalRuntime(options(arguments, background=True))
    runtime.start()
    try:
        out.write(describe(runtime))
        out.write("ready: press Ctrl-C to stop\n")
        out.flush()
        # A wait with a timeout keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        runtime.stop()
    out.write("stopped\n")
    return 0


def describe(runtime: LocalRuntime) -> str:
    """What a developer needs to point tools at the local stack."""
    from outbox_local.endpoint import exports  # noqa: PLC0415

    region = runtime.options.region
    lines = [
        "outbox local runtime (moto, no AWS account)",
        f"  AWS endpoint  {runtime.endpoint_url}",
        f"  Orders API    {runtime.api_url or '(no HTTP API in the template)'}",
        "",
        '  Point any AWS SDK or the AWS CLI at it (or: eval "$(outbox local env)"):',
        *(f"    {line}" for line in exports(runtime.endpoint_url, region).splitlines()),
        "  and operate it as a deployed stack (docs/operations.md):",
        f"    outbox status --endpoint-url {runtime.endpoint_url} --region {region}",
        "",
        "  Outputs:",
        *(f"    {name:<28} {value}" for name, value in runtime.outputs.items()),
        "",
        "  Running locally:",
    ]
    for spec in runtime.host.functions if runtime.host else []:
        lines.append(f"    function  {spec.name}  ({spec.handler})")
    for mapping in runtime.mappings:
        lines.append(f"    stream    {mapping.name} -> {mapping.settings.function_arn.rsplit(':', 1)[-1]}")
    for queue_mapping in runtime.queue_mappings:
        function = queue_mapping.settings.function_arn.rsplit(":", 1)[-1]
        queue = queue_mapping.settings.queue_arn.rsplit(":", 1)[-1]
        lines.append(f"    queue     {queue} -> {function}")
    for api in runtime.apis.values():
        for route in api.routes:
            lines.append(f"    route     {route.route_key:<28} {api.url}")
    for schedule in runtime.schedules.schedules if runtime.schedules else []:
        lines.append(f"    schedule  {schedule.rule_name} {schedule.expression}")
    return "\n".join(lines) + "\n\n"

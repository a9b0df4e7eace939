"""The `outbox` command: `outbox local up` runs the stack locally; `outbox demo` narrates a scenario on it."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from outbox_local.errors import LocalRuntimeError
from outbox_local.runtime import LOCAL_CREDENTIALS, LocalRuntime, RuntimeOptions

DEFAULT_TEMPLATE = Path("cdk.out/OutboxStack.template.json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="outbox", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the local runtime (moto, no AWS account)")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = local_commands.add_parser("up", help="run the synthesized stack locally until Ctrl-C")
    _runtime_arguments(up, aws_port=4566, api_port=8080)
    up.add_argument("--verbose", action="store_true", help="log the runtime's own activity")

    demo = commands.add_parser(
        "demo", help="run a narrated scenario on the local runtime and check invariants"
    )
    _runtime_arguments(demo, aws_port=0, api_port=0)
    return parser


def _runtime_arguments(parser: argparse.ArgumentParser, *, aws_port: int, api_port: int) -> None:
    parser.add_argument(
        "--template", type=Path, default=DEFAULT_TEMPLATE, help="synthesized template (cdk.out)"
    )
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--aws-port", type=int, default=aws_port, help="AWS endpoint port (0: any free port)")
    parser.add_argument("--api-port", type=int, default=api_port, help="HTTP API port (0: any free port)")
    parser.add_argument(
        "--schedule-speedup", type=float, default=1.0, help="fire rate(...) schedules this many times faster"
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    try:
        if arguments.command == "demo":
            from outbox_cli.demo import run_demo  # noqa: PLC0415 - only the demo needs its imports

            return run_demo(_options(arguments, background=True), sys.stdout)
        return local_up(arguments, sys.stdout)
    except LocalRuntimeError as error:
        print(f"outbox: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


def _options(arguments: argparse.Namespace, *, background: bool) -> RuntimeOptions:
    return RuntimeOptions(
        template_path=arguments.template,
        region=arguments.region,
        host=arguments.host,
        aws_port=arguments.aws_port,
        api_port=arguments.api_port,
        schedule_speedup=arguments.schedule_speedup,
        background=background,
    )


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
    runtime = LocalRuntime(_options(arguments, background=True))
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
    region = runtime.options.region
    lines = [
        "outbox local runtime (moto, no AWS account)",
        f"  AWS endpoint  {runtime.endpoint_url}",
        f"  Orders API    {runtime.api_url or '(no HTTP API in the template)'}",
        "",
        "  Point any AWS SDK or the AWS CLI at it:",
        f"    export AWS_ENDPOINT_URL={runtime.endpoint_url} AWS_REGION={region} AWS_DEFAULT_REGION={region} "
        f"AWS_ACCESS_KEY_ID={LOCAL_CREDENTIALS['aws_access_key_id']} "
        f"AWS_SECRET_ACCESS_KEY={LOCAL_CREDENTIALS['aws_secret_access_key']} "
        "AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled",
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
    for api in runtime.apis.values():
        for route in api.routes:
            lines.append(f"    route     {route.route_key:<28} {api.url}")
    for schedule in runtime.schedules.schedules if runtime.schedules else []:
        lines.append(f"    schedule  {schedule.rule_name} {schedule.expression}")
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())

"""The `outbox` command: operate an outbox (`status`, `failed`, `redrive`, `skip`, `audit`), run
the stack locally (`local up`), watch a narrated scenario on it (`demo`), follow one event's trace in it
(`trace`), or check event schemas (`schemas`).

Each command imports what it needs when it runs: `outbox --help`, and every command that talks to AWS,
loads neither the local runtime nor moto. The local commands need the `local` extra
(`pip install 'dynamodb-outbox[local]'`) and say so when it is missing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from outbox_cli import arguments as argument_types
from outbox_cli import local_controls, operations, schemas, trace
from outbox_cli.local import add_up_arguments

# What the local commands import beyond the base install.
LOCAL_EXTRA_MODULES = frozenset({"moto", "werkzeug", "flask", "aws_lambda_powertools", "aws_xray_sdk"})

Command = Callable[[argparse.Namespace, TextIO], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="outbox", description=__doc__.split("\n\n", 1)[0].replace("\n", " ")
    )
    commands = parser.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the local runtime (moto, no AWS account)")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = local_commands.add_parser("up", help="run the synthesized stack locally until Ctrl-C")
    _runtime_arguments(up, aws_port=local_controls.LOCAL_PORT, api_port=8080)
    add_up_arguments(up)
    up.add_argument("--verbose", action="store_true", help="log the runtime's own activity")
    up.set_defaults(run=_local_up)
    env = local_commands.add_parser(
        "env", help="print the exports that point a shell (SDKs, AWS CLI) at a running `outbox local up`"
    )
    local_controls.add_env_arguments(env)
    env.set_defaults(run=local_controls.print_env)
    local_controls.add_commands(local_commands)
    operations.name_by_choices(local_commands)

    demo = commands.add_parser(
        "demo", help="run a narrated scenario on the local runtime and check invariants"
    )
    _runtime_arguments(demo, aws_port=0, api_port=0)
    demo.set_defaults(run=_demo)
    trace.add_command(commands)
    operations.add_commands(commands)
    schemas.add_commands(commands)
    operations.name_by_choices(commands)
    return parser


def _runtime_arguments(parser: argparse.ArgumentParser, *, aws_port: int, api_port: int) -> None:
    parser.add_argument(
        "--template",
        type=argument_types.path,
        help="synthesized template (default: cdk.out's only *.template.json; when it holds several, the "
        "sample's OutboxStack if there, else name one)",
    )
    parser.add_argument("--region", type=argument_types.region, default="us-east-1")
    parser.add_argument("--host", type=argument_types.host, default="127.0.0.1")
    parser.add_argument(
        "--aws-port", type=argument_types.port, default=aws_port, help="AWS endpoint port (0: any free port)"
    )
    parser.add_argument(
        "--api-port", type=argument_types.port, default=api_port, help="HTTP API port (0: any free port)"
    )
    parser.add_argument(
        "--schedule-speedup",
        type=argument_types.schedule_speedup,
        default=1.0,
        help="fire rate(...) schedules this many times faster",
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    command: Command = arguments.run
    if arguments.command in {"local", "demo", "trace", "schemas"}:
        return command(arguments, sys.stdout)
    return operations.run(command, arguments, sys.stdout)


def _local_up(arguments: argparse.Namespace, out: TextIO) -> int:
    return _local_command("local_up", arguments, out)


def _demo(arguments: argparse.Namespace, out: TextIO) -> int:
    return _local_command("demo", arguments, out)


def _local_command(name: str, arguments: argparse.Namespace, out: TextIO) -> int:
    try:
        # The local runtime loads moto: only when asked for, and here, where a missing extra is told apart
        import outbox_local.runtime  # noqa: F401, PLC0415
        from outbox_cli import local  # noqa: PLC0415
        from outbox_local.errors import LocalRuntimeError  # noqa: PLC0415
    except ModuleNotFoundError as error:
        if error.name is None or error.name.partition(".")[0] not in LOCAL_EXTRA_MODULES:
            raise
        print(
            f"outbox: the local runtime needs {error.name}: pip install 'dynamodb-outbox[local]'",
            file=sys.stderr,
        )
        return 2
    try:
        run: Command = getattr(local, name)
        return run(arguments, out)
    except LocalRuntimeError as error:
        print(f"outbox: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

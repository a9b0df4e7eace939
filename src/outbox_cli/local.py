"""The local commands: `outbox local up` (run the synthesized stack until Ctrl-C) and `outbox demo`, and the
arguments only `local up` has.

Importing this module loads neither moto nor the runtime (they load when a command runs), so the parser of
`outbox` can take `local up`'s arguments from here (`add_up_arguments`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from outbox_cli import arguments as argument_types
from outbox_ops.resources import outbox_prefixes

if TYPE_CHECKING:
    from outbox_local.runtime import LocalRuntime, RuntimeOptions

CDK_OUT = Path("cdk.out")
DEFAULT_STATE_DIR = Path(".outbox") / "local"
"""Where `local up` keeps its state unless told otherwise: in the project, beside cdk.out."""
DEFAULT_MAX_ENVIRONMENTS = 4
"""Execution environments per function at most, unless its ReservedConcurrentExecutions is lower: the machine
is a laptop, not a fleet."""


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    """How `local up` runs the functions (docs/local.md, "Execution environments"), and under which name."""
    parser.add_argument(
        "--stack-name",
        type=argument_types.stack,
        help="the stack's name (default: the template's, e.g. PaymentsStack for PaymentsStack.template.json)",
    )
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--state-dir",
        type=argument_types.path,
        metavar="DIR",
        help="keep tables, queues, topics, subscriptions, buses, mappings' positions and alarms here, "
        f"across a stop or a crash (default {DEFAULT_STATE_DIR})",
    )
    kept.add_argument(
        "--no-state", action="store_true", help="keep nothing: each start is a fresh one, in memory only"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="discard the state directory's saved state and start empty"
    )
    parser.add_argument(
        "--no-stack",
        action="store_true",
        help="start with no stack, ready for `cdk bootstrap` and `cdk deploy` (docs/local.md); the default "
        "when cdk.out holds no template",
    )
    parser.add_argument(
        "--all-stacks",
        action="store_true",
        help="start every stack of cdk.out (its manifest), each in the region its environment names, the "
        "first one's region the runtime's (an app deployed to several regions: docs/local.md)",
    )
    parser.add_argument(
        "--replication-lag",
        type=argument_types.replication_lag,
        metavar="SECONDS",
        help="how long a global table's write takes to reach its other replicas (default 1, AWS's typical)",
    )
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
    Lambda, unless `--in-process` (an argument of `local up` only: the demo always uses workers). Without
    `--template`, cdk.out's template (`find_template`); the stack is named as its file, unless
    `--stack-name`. `local up` with `--no-stack`, or with no template in cdk.out, starts with no stack."""
    from outbox_local.errors import TemplateError  # noqa: PLC0415
    from outbox_local.runtime import RuntimeOptions  # noqa: PLC0415 - moto loads only when a command runs
    from outbox_local.template import find_template, stack_name_of  # noqa: PLC0415

    no_stack = getattr(arguments, "no_stack", False)
    if no_stack and arguments.template:
        raise TemplateError("--no-stack starts with no stack, --template with one: pass one of them")
    if getattr(arguments, "all_stacks", False):
        return _all_stacks(arguments, background=background)
    template = arguments.template
    if template is None and not no_stack:
        # `local up` (the only command with --no-stack) may start empty, to deploy into; the demo may not.
        local_up = hasattr(arguments, "no_stack")
        template = find_template(CDK_OUT) if not local_up or _any_template(CDK_OUT) else None
    in_process = getattr(arguments, "in_process", False)
    max_environments = getattr(arguments, "max_environments", None) or DEFAULT_MAX_ENVIRONMENTS
    # Only `local up` keeps state (the demo always starts fresh, in memory).
    keeps_state = hasattr(arguments, "no_state") and not arguments.no_state
    stack_name = getattr(arguments, "stack_name", None)
    return RuntimeOptions(
        template_path=template,
        stack_name=stack_name or (stack_name_of(template) if template else "OutboxStack"),
        region=arguments.region,
        host=arguments.host,
        aws_port=arguments.aws_port,
        api_port=arguments.api_port,
        schedule_speedup=arguments.schedule_speedup,
        background=background,
        max_environments=None if in_process else max_environments,
        state_dir=(arguments.state_dir or DEFAULT_STATE_DIR) if keeps_state else None,
        fresh_state=getattr(arguments, "fresh", False),
        replication_lag_s=lag if (lag := getattr(arguments, "replication_lag", None)) is not None else 1.0,
    )


def _all_stacks(arguments: argparse.Namespace, *, background: bool) -> RuntimeOptions:
    """`local up --all-stacks`: every stack of cdk.out, the first (in dependency order) as the start-up stack,
    its region the runtime's."""
    from outbox_local.cloud_assembly import assembly_stacks  # noqa: PLC0415
    from outbox_local.errors import TemplateError  # noqa: PLC0415
    from outbox_local.runtime_options import StartStack  # noqa: PLC0415

    if arguments.template or getattr(arguments, "no_stack", False) or getattr(arguments, "stack_name", None):
        raise TemplateError(
            "--all-stacks starts cdk.out's stacks: pass neither --template, --no-stack nor --stack-name"
        )
    first, *rest = assembly_stacks(CDK_OUT)
    region = first.region or arguments.region
    first_only = {
        "all_stacks": False,
        "region": region,
        "template": first.template_path,
        "stack_name": first.name,
    }
    single = options(argparse.Namespace(**{**vars(arguments), **first_only}), background=background)
    return dataclasses.replace(
        single,
        more_stacks=tuple(StartStack(stack.template_path, stack.name, stack.region) for stack in rest),
    )


def _any_template(cdk_out: Path) -> bool:
    from outbox_local.template import TEMPLATE_SUFFIX  # noqa: PLC0415

    return any(cdk_out.glob(f"*{TEMPLATE_SUFFIX}"))


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
    if getattr(arguments, "no_state", False) and getattr(arguments, "fresh", False):
        sys.stderr.write(
            "outbox local up: --fresh discards a state directory's state; --no-state keeps none\n"
        )
        return 2
    from outbox_local import state  # noqa: PLC0415 - moto loads only when a command runs
    from outbox_local.runtime import LocalRuntime  # noqa: PLC0415

    runtime = LocalRuntime(options(arguments, background=True))
    runtime.start()
    announced = None
    try:
        # Announced before the banner: a shell that runs `outbox local env` once it reads "ready" finds it.
        announced = state.RuntimeState(
            endpoint_url=runtime.endpoint_url,
            aws_port=int(runtime.endpoint_url.rsplit(":", 1)[1]),
            region=runtime.options.region,
            # Named by what it started with: no stack, ready for `cdk deploy` (which may add several).
            stack_name=runtime.options.stack_name if runtime.options.template_path else "(none yet)",
            template=str(runtime.options.template_path or ""),
            pid=os.getpid(),
            api_url=runtime.api_url,
        )
        state.announce(announced)
        out.write(describe(runtime, launcher()))
        out.write("ready: press Ctrl-C to stop\n")
        out.flush()
        # A wait with a timeout keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        if announced is not None:
            state.withdraw(announced)
        runtime.stop()
    out.write(f"stopped; {runtime.state_figures}\n" if runtime.state_figures else "stopped\n")
    return 0


def launcher(argv0: str | None = None, cwd: Path | None = None) -> str:
    """How a fresh shell (no venv on PATH) runs this same `outbox`: the venv's script by its path (relative
    to the current directory when under it, as `.venv/bin/outbox`), plain `outbox` when it is installed
    outside a venv (pipx, a system install: on PATH), else this interpreter with `-m outbox_cli.main`."""
    here = Path.cwd() if cwd is None else cwd
    script = Path(sys.argv[0] if argv0 is None else argv0)
    if script.stem == "outbox" and script.is_file():
        in_venv = sys.prefix != sys.base_prefix
        if in_venv and script.absolute().parent.resolve() == (Path(sys.prefix) / "bin").resolve():
            return _shown(script.absolute(), here)
        return "outbox"
    return f"{_shown(Path(sys.executable), here)} -m outbox_cli.main"


def _shown(path: Path, cwd: Path) -> str:
    try:
        relative = path.relative_to(cwd)
    except ValueError:
        return shlex.quote(str(path))
    return shlex.quote(str(relative))


RESOURCE_KINDS = (
    ("AWS::DynamoDB::Table", "table", "tables"),
    ("AWS::DynamoDB::GlobalTable", "global table", "global tables"),
    ("AWS::Lambda::Function", "function", "functions"),
    ("AWS::SNS::Topic", "topic", "topics"),
    ("AWS::Events::EventBus", "event bus", "event buses"),
    ("AWS::SQS::Queue", "queue", "queues"),
    ("AWS::ApiGatewayV2::Api", "HTTP API", "HTTP APIs"),
    ("AWS::CloudWatch::Alarm", "alarm", "alarms"),
)
"""What the banner counts, in this order (the template's other resources serve these)."""


def holdings(runtime: LocalRuntime) -> str:
    """What the stack holds, counted: "2 tables, 3 functions, 1 topic, 4 queues, no HTTP API"."""
    kinds = [kind for _, (kind, _resource) in (runtime.stack.resources.items() if runtime.stack else [])]
    parts = []
    for kind, one, several in RESOURCE_KINDS:
        count = kinds.count(kind)
        if count:
            parts.append(f"{count} {one if count == 1 else several}")
    if "AWS::ApiGatewayV2::Api" not in kinds:
        parts.append("no HTTP API")
    return ", ".join(parts)


def _stack_named(key: str) -> str:
    """A stack as the banner names it, from where the runtime holds it (`outbox_local.stacks.stack_key`): its
    name, and its region when it is not the runtime's."""
    region, _, name = key.rpartition("/")
    return f"{name} in {region}" if region else name


def _regions_line(runtime: LocalRuntime) -> list[str]:
    """With stacks or replicas in several regions: which, and how they are replicated."""
    regions = runtime.regions()
    if len(regions) < 2:
        return []
    replicated = ", ".join(sorted(runtime.replication.tables)) or "no global table"
    return [
        f"  Regions       {', '.join(regions)}: {replicated} replicated after "
        f"{runtime.replication.lag_s:g} s (`outbox local region cut REGION` cuts one off)"
    ]


def describe(runtime: LocalRuntime, command: str = "outbox") -> str:
    """What a developer needs to point tools at the local stack; `command` runs `outbox` in a fresh shell."""
    from outbox_local.endpoint import exports  # noqa: PLC0415
    from outbox_local.template import ACCOUNT_ID  # noqa: PLC0415

    region, endpoint = runtime.options.region, runtime.endpoint_url
    # Its own endpoint: with several runtimes running, a bare `local env` cannot tell which one is meant.
    env_command = f"{command} local env --endpoint-url {endpoint}"
    if runtime.options.template_path is None:
        held = ", ".join(runtime.stacks) if runtime.stacks else ""
        return (
            "\n".join(
                [
                    "outbox local runtime (moto, no AWS account): "
                    + (f"stacks {held} (from the state directory)" if held else "no stack yet"),
                    f"  AWS endpoint  {runtime.endpoint_url}  (region {region})",
                    f"  State         {_state(runtime)}",
                    "",
                    f'  Point any AWS SDK, the AWS CLI or the CDK CLI at it (or: eval "$({env_command})"):',
                    *(f"    {line}" for line in exports(runtime.endpoint_url, region).splitlines()),
                    '  and deploy into it (docs/local.md, "`cdk deploy` into the running runtime"):',
                    f"    cdk bootstrap aws://{ACCOUNT_ID}/{region}",
                    "    cdk deploy STACK --require-approval never",
                ]
            )
            + "\n\n"
        )
    stack = runtime.options.stack_name
    hint = " --region REGION" if any("/" in key for key in runtime.stacks) else ""
    # The outputs' column is as wide as their longest name (the sample's CancellationsDeadLetterQueueUrl: 31).
    width = max((len(name) for name in runtime.outputs), default=0)
    lines = [
        f"outbox local runtime (moto, no AWS account): stack {stack}",
        f"  Template      {runtime.options.template_path}",
        f"  Resources     {holdings(runtime)}",
        f"  AWS endpoint  {runtime.endpoint_url}  (region {region})",
        f"  State         {_state(runtime)}",
        *_regions_line(runtime),
        *([f"  HTTP API      {runtime.api_url}"] if runtime.api_url else []),
        "",
        f'  Point any AWS SDK or the AWS CLI at it (or: eval "$({env_command})"):',
        *(f"    {line}" for line in exports(runtime.endpoint_url, region).splitlines()),
        "  and operate it as a deployed stack (docs/operations.md), from any shell:",
        *(
            f"    {command} status --stack {stack}{selected} --endpoint-url {endpoint} --region {region}"
            for selected in _outbox_flags(runtime.outputs)
        ),
        "",
        "  Outputs:" if runtime.outputs else "  Outputs: none in the template",
        *(f"    {name:<{width}}  {value}" for name, value in runtime.outputs.items()),
        "",
        *(
            [f"  Other stacks  {', '.join(other)} (`outbox status --stack NAME{hint}` for each)", ""]
            if (other := [_stack_named(key) for key in runtime.stacks if key != stack])
            else []
        ),
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


def _state(runtime: LocalRuntime) -> str:
    state_dir = runtime.options.state_dir
    if state_dir is None:
        return "in memory only: nothing is kept when it stops"
    how = "restored from its last snapshot" if runtime.restored else "started empty"
    return f"{state_dir} ({how}; kept across a stop or a crash, --fresh discards it)"


def _outbox_flags(stack_outputs: Mapping[str, str]) -> list[str]:
    """`--outbox PREFIX` for each outbox of a stack that holds several (none for one, or none at all)."""
    prefixes = outbox_prefixes(stack_outputs)
    return [f" --outbox {shlex.quote(prefix)}" for prefix in prefixes] if len(prefixes) > 1 else [""]

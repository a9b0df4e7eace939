"""Every shell command of README.md and docs/*.md runs as a reader would run it, so a doc that drifts fails.

Each command (tests/support/doc_commands.py: the lines of ```bash blocks and the `$ ` lines of ```console
blocks) is one of:

- marked in the doc as needing a real AWS account (`# needs AWS: ...`): not run;
- the build itself (`make demo`, `make test`, `make setup synth`): its targets must exist in the Makefile,
  and are not run again from inside the build;
- a run of the benchmark's groups (`python -m bench --only ...`): `make bench`'s own; tests/bench runs its
  harness;
- a pytest run of the suite's own tests (`.venv/bin/pytest -q tests/reliability`): its paths must exist, and
  `make test` runs those tests itself;
- `outbox local up`: the one runtime this module starts (tests/docs/conftest.py), on free ports, from the
  synthesized app; the output docs/local.md shows for it is compared with what it printed;
- an `outbox` command of the operations runbook (docs/runbook.md): run, as written and in order, by
  tests/integration/ops/test_ops_readme_runbook.py;
- creating the project's virtual environment (`python3 -m venv .venv`): the build's, checked as `make setup`
  is (tests/packaging installs into a fresh venv);
- anything else: run here, each block in one new bash shell as a reader opens one (tests/docs/conftest.py: no
  venv on PATH, no variable exported, a home of its own), from the clone, against that runtime. A command
  reaches the runtime only through what its doc shows: an `--endpoint-url`, or `eval "$(outbox local env)"`.

What a command needs the docs cannot know is filled in from the explicit tables below: the runtime's free
ports instead of the default ones the docs show, `<OutputName>` from the stack's outputs, a few times, the
clone's path, and the ids of the events the operations examples act on. A `pip install` is resolved, not
installed (`--dry-run`): the venv stays as `make setup` made it. Every command must exit 0, or with the code
its doc documents; where the doc shows what it prints, the parts that stay the same from run to run must be
there.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.docs.conftest import VENV_BIN, DocsRuntime
from tests.support.doc_commands import (
    NEEDS_AWS,
    OTHER_LANGUAGES,
    Block,
    Command,
    all_blocks,
    shell_blocks,
)
from tests.support.local_templates import REPOSITORY
from tests.support.readme import RUNBOOK, runbook_commands

# With the packaging test: the suite's modules that run pip and processes of their own, one after the other.
pytestmark = pytest.mark.xdist_group("packaging")

RUNBOOK_TEST = REPOSITORY / "tests" / "integration" / "ops" / "test_ops_readme_runbook.py"
LOCAL_UP = re.compile(r"(\.venv/bin/)?outbox local up( &)?")
CREATE_VENV = re.compile(r"python3? -m venv \.venv")

DEFAULT_ENDPOINT = "http://127.0.0.1:4566"
DEFAULT_API_HOST = "localhost:8080"
DEFAULT_API_URL = "http://127.0.0.1:8080"
DEFAULT_TEMPLATE = "cdk.out/OutboxStack.template.json"

DOCUMENTED_EXIT_CODES = {"outbox status": {0, 3, 4}}
"""`outbox status` exits 0 healthy, 3 degraded, 4 stuck (docs/operations.md, docs/runbook.md)."""

NOTHING_TO_ACT_ON = {
    'outbox redrive --all --error-contains AuthorizationError --reason "…"': "no FAILED row matches",
}
"""Examples of docs/operations.md for outboxes other than the one here (no event failed with
AuthorizationError): they run, find nothing, and say so (exit 1)."""


def example_values(runtime: DocsRuntime) -> dict[str, str]:
    """The docs' placeholders and what stands for them here."""
    now = datetime.now(UTC).replace(microsecond=0)
    return {
        # docs/local.md's metric query
        "<an hour ago, e.g. 2026-01-01T09:00:00Z>": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "<now>": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        # docs/operations.md's events: the one its redrive examples redrive, the one its skip example skips
        "0b6c…": runtime.world.redrive_event_id,
        "0b6d…": runtime.world.skip_event_id,
        **{f"<{name}>": value for name, value in runtime.outputs.items()},
        # README.md's and docs/your-stack.md's install from a clone
        "<path-to-clone>": str(REPOSITORY),
    }


def is_build(command: Command) -> bool:
    return command.text.split()[0] == "make" or CREATE_VENV.fullmatch(command.text) is not None


def is_benchmark(command: Command) -> bool:
    """A run of the benchmark's groups (`python -m bench ...`): `make bench`'s, minutes long; tests/bench runs
    its harness at a tiny size."""
    words = command.text.split()
    return words[words.index("-m") + 1 : words.index("-m") + 2] == ["bench"] if "-m" in words else False


def suite_paths(command: Command) -> list[str] | None:
    """The test paths of a pytest run of the suite's own tests (`make test` runs them itself), else None."""
    words = command.text.split()
    paths = [word for word in words[1:] if not word.startswith("-")]
    if words[0].removeprefix(".venv/bin/") != "pytest" or not paths:
        return None
    return paths if all(path.startswith("tests/") for path in paths) else None


def is_local_up(command: Command) -> bool:
    return LOCAL_UP.fullmatch(command.text) is not None


def run_elsewhere(block: Block, command: Command) -> bool:
    return (
        command.needs_aws
        or is_build(command)
        or is_benchmark(command)
        or suite_paths(command) is not None
        or is_local_up(command)
        or in_runbook(block, command)
    )


def in_runbook(block: Block, command: Command) -> bool:
    return block.path == RUNBOOK and command.text in runbook_commands()


def runnable_blocks() -> list[Block]:
    return [block for block in shell_blocks() if any(not run_elsewhere(block, c) for c in block.commands)]


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", (REPOSITORY / "Makefile").read_text(), re.MULTILINE))


def targets_local_runtime(block: Block) -> bool:
    return any("outbox local" in command.text for command in block.commands)


def as_run_here(command: Command, block: Block, runtime: DocsRuntime) -> str:
    """The command with what only this run knows filled in, and nothing else added."""
    text = command.text.replace(DEFAULT_ENDPOINT, runtime.endpoint)
    text = text.replace(
        DEFAULT_API_HOST, runtime.api_url.removeprefix("http://").replace("127.0.0.1", "localhost")
    )
    for placeholder, value in example_values(runtime).items():
        text = text.replace(placeholder, value)
    unknown = re.findall(r"<[^<>]+>", text)
    assert not unknown, f"{block.name}: `{command.text}`: no value for {unknown}: rewrite it, or add one"
    words = text.split()
    if words[0].endswith("pip") and words[1:2] == ["install"]:
        # Resolved and checked, not installed: the venv stays as `make setup` made it (and offline).
        text += " --dry-run --no-build-isolation"
    if words[0].endswith("/aws") and targets_local_runtime(block):
        # AWS CLI v1 ignores AWS_ENDPOINT_URL for SQS: the doc must pass the endpoint itself.
        assert "--endpoint-url" in text, f"{block.name}: `{command.text}` needs --endpoint-url (CLI v1)"
    return text


@dataclass(frozen=True)
class Ran:
    command: Command
    run_as: str
    code: int
    out: str
    err: str

    def problem(self) -> str | None:
        """Why this run does not match the doc, or None."""
        without_venv = self.command.text.removeprefix(".venv/bin/")
        refusal = NOTHING_TO_ACT_ON.get(without_venv)
        if refusal is not None:
            return (
                None if self.code == 1 and refusal in self.err else self.said(f"expected exit 1, {refusal!r}")
            )
        codes = next(
            (c for prefix, c in DOCUMENTED_EXIT_CODES.items() if without_venv.startswith(prefix)), {0}
        )
        if self.code not in codes:
            return self.said(f"exit {self.code}, not {sorted(codes)}")
        missing = [pair for pair in shown_pairs(self.command.shown_output) if pair not in self.out]
        return self.said(f"the output lacks what the doc shows: {missing}") if missing else None

    def said(self, why: str) -> str:
        return f"`{self.command.text}` (run as `{self.run_as}`): {why}\n{self.out[-2000:]}{self.err[-2000:]}"


def shown_pairs(shown: str) -> list[str]:
    """The stable parts of a response a doc shows as `# {"order_id":"4bd1…","status":"PLACED",…}`: the pairs
    whose value it does not elide."""
    return [pair for pair in re.findall(r'"\w+":(?:"[^"]*"|[\w.]+)', shown) if "…" not in pair]


def run_block(block: Block, runtime: DocsRuntime, directory: Path) -> list[Ran]:
    """One bash shell for the block; each command's exit code and output kept apart."""
    commands = [command for command in block.commands if not run_elsewhere(block, command)]
    run_as = [as_run_here(command, block, runtime) for command in commands]
    script = [f"cd {REPOSITORY}"] + [
        f"{{ {text}\n}} >{directory}/{n}.out 2>{directory}/{n}.err </dev/null; echo $? >{directory}/{n}.code"
        for n, text in enumerate(run_as)
    ]
    subprocess.run(  # noqa: S603 - the docs' own commands, in a shell as a reader runs them
        ["/bin/bash", "-c", "\n".join(script)],
        env=runtime.environment,
        timeout=300,
        check=False,
    )
    return [
        Ran(
            command,
            text,
            int((directory / f"{n}.code").read_text() or -1),
            (directory / f"{n}.out").read_text(),
            (directory / f"{n}.err").read_text(),
        )
        for n, (command, text) in enumerate(zip(commands, run_as, strict=True))
    ]


def test_every_fenced_block_says_what_it_holds() -> None:
    # Given every fenced block of the docs, When their languages are read, Then each is shell (run here) or
    # one that holds no command: a command in a block of no language would be neither run nor marked
    unknown = [
        f"{b.name} {b.language!r}"
        for b in all_blocks()
        if not b.is_shell and b.language not in OTHER_LANGUAGES
    ]
    assert not unknown, f"name the language of these blocks (bash or console for commands): {unknown}"


def test_every_command_is_run_or_marked() -> None:
    # Given every command of the docs
    blocks = shell_blocks()
    commands = [(block, command) for block in blocks for command in block.commands]

    # Then the build's own are Makefile targets, the suite's own pytest runs name its tests (`make test` runs
    # them), the runbook's have their test, and the rest run here
    targets = makefile_targets()
    for block, command in commands:
        if is_build(command) and command.text.startswith("make"):
            assert set(command.text.split()[1:]) <= targets, f"{block.name}: `{command.text}`: no such target"
        for path in suite_paths(command) or ():
            assert (REPOSITORY / path).exists(), f"{block.name}: `{command.text}`: no such test path"
    assert RUNBOOK_TEST.exists(), "docs/runbook.md's `outbox` commands are run by that test"
    run_here = [c for b, c in commands if not run_elsewhere(b, c)]
    assert len(run_here) >= 25, "the docs lost their commands, or this test stopped finding them"
    # And a comment that says a command needs AWS in other words is no marker: that command would be run
    misspelt = [
        c.text for _, c in commands if re.search(r"\bneeds? (an? )?AWS", c.comment, re.I) and not c.needs_aws
    ]
    assert not misspelt, f"start their comment with `# {NEEDS_AWS}`: {misspelt}"


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.name)
def test_the_commands_of_the_block_run_as_written(
    block: Block, docs_runtime: DocsRuntime, tmp_path: Path
) -> None:
    # When the block's commands run in one shell against the local runtime
    try:
        ran = run_block(block, docs_runtime, tmp_path)
    finally:
        # (a fault a block arms never outlives it)
        clear_faults(docs_runtime)

    # Then each exits as its doc says, printing what the doc shows
    problems = [problem for result in ran if (problem := result.problem())]
    assert not problems, "\n\n".join(problems)


def clear_faults(runtime: DocsRuntime) -> None:
    subprocess.run(  # noqa: S603 - our own CLI
        [str(VENV_BIN / "outbox"), "local", "faults", "--clear", "--endpoint-url", runtime.endpoint],
        capture_output=True,
        check=True,
    )


def test_outbox_local_up_prints_what_the_docs_show(docs_runtime: DocsRuntime) -> None:
    # Given what `outbox local up` printed, on the default ports and cdk.out's template, as the docs show it
    printed = docs_runtime.printed.replace(docs_runtime.endpoint, DEFAULT_ENDPOINT)
    printed = printed.replace(str(docs_runtime.template), DEFAULT_TEMPLATE)
    printed_lines = printed.replace(docs_runtime.api_url, DEFAULT_API_URL).splitlines()
    shown = [(b, c) for b in shell_blocks() for c in b.commands if is_local_up(c) and c.shown_output]
    assert shown, "docs/local.md shows what `outbox local up` prints"

    # Then every line the docs show is printed, in the same order (`...` stands for lines left out)
    for block, command in shown:
        position = 0
        for line in command.shown_output.splitlines():
            if line.strip() == "...":
                continue
            assert line in printed_lines[position:], (
                f"{block.name}: not printed (after line {position}): {line!r}"
            )
            position = printed_lines.index(line, position) + 1


def test_outbox_local_env_in_a_fresh_shell_prints_the_running_runtime_s_exports(
    docs_runtime: DocsRuntime,
) -> None:
    # When `outbox local env` runs as the docs show it, in a fresh shell, with no endpoint given
    printed = subprocess.run(
        [".venv/bin/outbox", "local", "env"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPOSITORY,
        env=docs_runtime.environment,
    ).stdout

    # Then it exports the endpoint of the runtime running now (not the default port), and says in one line
    # that the AWS CLI v1 needs it on every command
    assert f"export AWS_ENDPOINT_URL={docs_runtime.endpoint}\n" in printed
    [note] = [line for line in printed.splitlines() if not line.startswith("export ")]
    assert note.startswith("# AWS CLI v1")
    assert f"--endpoint-url {docs_runtime.endpoint}" in note


def test_the_status_example_shows_the_rows_outbox_status_prints(docs_runtime: DocsRuntime) -> None:
    # Given the example of docs/operations.md, "`outbox status`", and what `outbox status` prints here
    section = (REPOSITORY / "docs" / "operations.md").read_text().split("## `outbox status`", 1)[1]
    example = section.split("```text\n", 1)[1].split("```", 1)[0]
    printed = subprocess.run(  # noqa: S603 - our own CLI
        [".venv/bin/outbox", "status", "--stack", "OutboxStack", "--endpoint-url", docs_runtime.endpoint],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
        env=docs_runtime.environment,
    ).stdout

    # Then the figures' names are the same, in the same order (the verdict's lines and the values vary)
    def figures(text: str) -> list[str]:
        table = text.split("\n\n")[1]
        return [re.split(r"\s{2,}", line, maxsplit=1)[0] for line in table.splitlines() if line.strip()]

    assert figures(example) == figures(printed)

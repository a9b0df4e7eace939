"""Every Python block of README.md and docs/*.md is run or synthesized, as a reader would use it.

A whole CDK app (a block that ends in `app.synth()`) is synthesized here with the real CDK CLI, offline, in a
directory of its own, as a reader's app: its `cdk.json` is the one `cdk init app --language python` writes,
with the `app` line docs/your-stack.md gives it, run with the project's venv activated (the README's
`source .venv/bin/activate`), and a block that opens with `# <path>.py` is that file of the app
(docs/your-stack.md's handler). Each app is synthesized once, all at once, here or (the README's) by the
test this module names for it, the same way. Every other block is run by the test this module names for it:
the library example against moto, the consumer's handler and construct in process.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.conftest import VENV_BIN, fresh_environment
from tests.support.doc_commands import DOCUMENTS, REPOSITORY, Block, all_blocks
from tests.support.readme import cdk_json_app_command
from tests.support.synth import CDK_CLI

# With the other modules of tests/docs and the packaging test: processes of their own, one after the other.
pytestmark = pytest.mark.xdist_group("packaging")

FILE_HEADER = re.compile(r"^# (?P<path>[\w/]+\.py)\b")
STACK = re.compile(r'^\w+\(app, "(?P<name>\w+)"\)$', re.MULTILINE)

RUN_BY = {
    ("README.md", "## The library from your own Lambda", 0): "tests/integration/test_readme_example.py",
    # Synthesized there by the CDK CLI as here (cdk init's cdk.json, the docs' app line), with what it builds
    ("README.md", "## Your own stack", 0): "tests/infra/test_infra_readme_example.py",
    (
        "docs/inbox.md",
        "# Consuming events: the inbox",
        0,
    ): "tests/integration/inbox/test_inbox_readme_example.py",
    ("docs/inbox.md", "# Consuming events: the inbox", 1): "tests/infra/test_infra_readme_example.py",
    ("docs/schemas.md", "## The writer checks every event", 0): "tests/unit/outbox/test_outbox_schemas.py",
}
"""Blocks that another test runs or synthesizes: (document, the heading they are under, their place there from
0) and that test. The README's own-stack app is synthesized once, there, as an app is here, and checked for
what it builds."""


@dataclass(frozen=True)
class PythonBlock:
    block: Block
    heading: str
    index: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (str(self.block.path.relative_to(REPOSITORY)), self.heading, self.index)

    @property
    def code(self) -> str:
        return "\n".join(self.block.lines) + "\n"

    @property
    def is_app(self) -> bool:
        return self.code.rstrip().endswith("app.synth()")

    @property
    def file(self) -> str | None:
        """The path of the app's file this block is (`# payments/handler.py: ...`), or None."""
        found = FILE_HEADER.match(self.code)
        return found.group("path") if found and not self.is_app else None


def headings(lines: list[str]) -> list[tuple[int, str]]:
    """The Markdown headings of a document, with their line (from 1): none inside a fenced block."""
    found: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append((number, line))
    return found


def python_blocks() -> list[PythonBlock]:
    found: list[PythonBlock] = []
    for path in DOCUMENTS:
        titles = headings(path.read_text(encoding="utf-8").splitlines())
        counts: dict[str, int] = {}
        for block in (b for b in all_blocks() if b.path == path and b.language == "python"):
            heading = [title for line, title in titles if line < block.line][-1]
            found.append(PythonBlock(block, heading, counts.get(heading, 0)))
            counts[heading] = counts.get(heading, 0) + 1
    return found


def synthesized_here(block: PythonBlock) -> bool:
    return block.is_app and block.key not in RUN_BY


def test_every_python_block_is_an_app_synthesized_here_or_run_by_its_test() -> None:
    blocks = python_blocks()
    assert len([b for b in blocks if b.is_app]) >= 2, "the README's and docs/your-stack.md's apps"
    documents_with_apps = {block.block.path for block in blocks if synthesized_here(block)}
    for block in blocks:
        if synthesized_here(block) or (block.file is not None and block.block.path in documents_with_apps):
            continue  # synthesized here: an app, or a file of its document's app
        test = RUN_BY.get(block.key)
        assert test is not None, f"{block.block.name}: a Python block no test runs: {block.key}"
        assert (REPOSITORY / test).exists(), f"{block.block.name}: {test} is gone"
    # And no test is named for a block that is no longer there
    assert set(RUN_BY) <= {block.key for block in blocks}


def test_every_cdk_app_of_the_docs_synthesizes_with_the_cdk_cli(tmp_path: Path) -> None:
    # Given each whole app of the docs in a directory of its own, with the files its document shows
    blocks = python_blocks()
    apps = [block for block in blocks if synthesized_here(block)]
    environment = fresh_environment(tmp_path / "home")
    environment["PATH"] = f"{VENV_BIN}:{environment['PATH']}"  # `source .venv/bin/activate`
    environment["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    environment["CDK_DISABLE_VERSION_CHECK"] = "1"  # offline: no version check, no telemetry
    environment["CDK_DISABLE_CLI_TELEMETRY"] = "1"
    # A reader's cdk.json: what `cdk init` writes (its feature flags), with the app line the docs give
    initialized = tmp_path / "init"  # cdk init takes an empty directory only
    initialized.mkdir()
    subprocess.run(  # noqa: S603 - the pinned CDK CLI, fixed arguments
        [str(CDK_CLI), "init", "app", "--language", "python", "--generate-only"],
        cwd=initialized,
        env=environment,
        check=True,
        capture_output=True,
    )
    cdk_json = {**json.loads((initialized / "cdk.json").read_text()), "app": cdk_json_app_command()}
    running = []
    for number, app in enumerate(apps):
        directory = tmp_path / f"app{number}"
        directory.mkdir()
        (directory / "app.py").write_text(app.code)
        (directory / "cdk.json").write_text(json.dumps(cdk_json))
        for part in (b for b in blocks if b.file and b.block.path == app.block.path):
            assert part.file is not None
            target = directory / part.file
            target.parent.mkdir(parents=True, exist_ok=True)
            (target.parent / "__init__.py").touch()
            target.write_text(part.code)
        # When the CDK CLI synthesizes it, offline (--no-notices: notices come from the network)
        process = subprocess.Popen(  # noqa: S603 - the pinned CDK CLI on the docs' own app
            [str(CDK_CLI), "synth", "--quiet", "--no-notices", "--output", "cdk.out"],
            cwd=directory,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running.append((app, directory, process))

    # Then each synthesized its stack, and said nothing: no warning, no stray line, no banner (but the one
    # empty line docs/your-stack.md says the CLI prints for a report of acknowledged cdk-nag findings)
    for app, directory, process in running:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, f"{app.block.name}: {err[-3000:]}"
        [stack] = STACK.findall(app.code)
        assert (directory / "cdk.out" / f"{stack}.template.json").exists(), app.block.name
        assert out == "", f"{app.block.name}: the synth printed {out[:1000]!r}"
        assert err in ("", "\n"), f"{app.block.name}: the synth printed {err[:1000]!r}"

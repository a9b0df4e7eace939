"""Code blocks of README.md and docs/*.md, so tests run their examples exactly as a reader would copy them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.aws import endpoint_environment

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"
RUNBOOK = DOCS / "runbook.md"
INBOX = DOCS / "inbox.md"
YOUR_STACK = DOCS / "your-stack.md"

LIBRARY_SECTION = "## The library from your own Lambda"
OWN_STACK_SECTION = "## Your own stack"
INBOX_SECTION = "# Consuming events: the inbox"
WRITER_SECTION = "## A writer function of yours"
CDK_JSON_SECTION = "## Your app's `cdk.json`"


def python_example(section: str, number: int = 0, document: Path = README, language: str = "python") -> str:
    """The `number`th (from 0) ```python block (or block of `language`) under the heading `section` of
    `document`, up to the next heading of the same level or above ("## The library from your own Lambda")."""
    level = len(section.split(" ", 1)[0])
    blocks: list[list[str]] = []
    inside, fenced = False, None
    for line in document.read_text().splitlines():
        if fenced is None and re.match(r"#{1,6} ", line):
            if inside and len(line.split(" ", 1)[0]) <= level:
                break
            inside = inside or line == section
        elif inside and line.lstrip().startswith("```"):
            fenced = None if fenced is not None else line.strip()[3:]
            if fenced == language:
                blocks.append([])
        elif inside and fenced == language:
            blocks[-1].append(line)
    assert blocks, f"{document.name} lost its section {section!r}, or its examples"
    assert len(blocks) > number, f"{document.name} lost the example of {section!r}"
    return "\n".join(blocks[number]) + "\n"


def cdk_json_app_command() -> str:
    """The `app` line docs/your-stack.md gives a user's cdk.json (the rest is what `cdk init` writes)."""
    command: str = json.loads(python_example(CDK_JSON_SECTION, document=YOUR_STACK, language="json"))["app"]
    return command


def library_example() -> str:
    return python_example(LIBRARY_SECTION)


def run_library_example(python: str, directory: Path, endpoint: str) -> subprocess.CompletedProcess[str]:
    """The example as `example.py` in `directory`, run by `python` against `endpoint` (no PYTHONPATH): the
    endpoint stands in for the AWS account its comment says it needs."""
    script = directory / "example.py"
    script.write_text(library_example())
    return subprocess.run(  # noqa: S603 - a given interpreter, the README's own example
        [python, str(script)],
        cwd=directory,
        env=endpoint_environment(endpoint),
        capture_output=True,
        text=True,
        check=False,
    )


def runbook_commands() -> list[str]:
    """Every `outbox ...` command of the operations runbook (docs/runbook.md), in the order a reader meets
    them: the lines of its ```bash blocks and its inline `outbox ...` code spans."""
    text = RUNBOOK.read_text()
    commands: list[str] = []
    for block, inline in re.findall(r"```bash\n(.*?)```|`(outbox [^`]+)`", text, re.DOTALL):
        if inline:
            commands.append(inline)
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith("outbox "):
                commands.append(command)
    return commands

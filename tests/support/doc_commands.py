"""The shell commands of README.md and docs/*.md, read as a reader copies them, so tests/docs can run them.

A command is a line of a ```bash block (continuation lines joined, its trailing comment apart), or a `$ ` line
of a ```console block, whose other lines are the output it shows. A command whose trailing comment starts
with `needs AWS` is marked in the doc itself as one that only a real AWS account can run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
DOCUMENTS = (REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md")))

SHELL_LANGUAGES = frozenset({"bash", "sh"})
CONSOLE_LANGUAGE = "console"
# What the other blocks hold: none of these is run as shell.
OTHER_LANGUAGES = frozenset({"python", "json", "http", "text"})

NEEDS_AWS = "needs AWS"
"""The marker: `cdk deploy ...   # needs AWS: ...` (docs/developing.md says so to readers)."""

OPENING_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>\S*)\s*$")
CLOSING_FENCE = re.compile(r"^\s*```\s*$")


@dataclass(frozen=True)
class Command:
    text: str
    """As a shell runs it: continuation lines joined, the trailing comment removed."""
    comment: str = ""
    shown_output: str = ""
    """What the doc shows it prints: the output lines of a console block, or a `# {...}` line after it."""

    @property
    def needs_aws(self) -> bool:
        return self.comment.startswith(NEEDS_AWS)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """The line of its opening fence, from 1."""
    language: str
    lines: tuple[str, ...]
    """Its text, without the fences and the indentation of a block inside a list item."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPOSITORY)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES or self.language == CONSOLE_LANGUAGE

    @property
    def commands(self) -> tuple[Command, ...]:
        if self.language == CONSOLE_LANGUAGE:
            return console_commands(self.lines)
        if self.language in SHELL_LANGUAGES:
            return shell_commands(self.lines)
        return ()


def fenced_blocks(path: Path) -> list[Block]:
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = OPENING_FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines)) if CLOSING_FENCE.match(lines[j])), None)
        assert end is not None, f"{path.name}:{index + 1}: a fenced block that never closes"
        indent = len(opening.group("indent"))
        body = tuple(line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end])
        blocks.append(Block(path, index + 1, opening.group("language"), body))
        index = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in fenced_blocks(path)]


def shell_blocks() -> list[Block]:
    return [block for block in all_blocks() if block.is_shell]


def split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing comment, which a `#` starting a word outside quotes opens (as in bash)."""
    quote = ""
    for position, character in enumerate(line):
        if quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#" and (position == 0 or line[position - 1].isspace()):
            return line[:position].rstrip(), line[position + 1 :].strip()
    return line.rstrip(), ""


def joined(lines: tuple[str, ...]) -> list[str]:
    """Lines ending with a backslash continue on the next one, as in the shell."""
    logical: list[str] = []
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        logical.append(pending + line.strip() if pending else line)
        pending = ""
    if pending:
        logical.append(pending.rstrip())
    return logical


def shell_commands(lines: tuple[str, ...]) -> tuple[Command, ...]:
    commands: list[Command] = []
    for line in joined(lines):
        text, comment = split_comment(line.strip())
        if text:
            commands.append(Command(text, comment))
        elif comment.startswith("{") and commands and not commands[-1].shown_output:
            # `# {"order_id": ...}` under a command: the response it prints
            commands[-1] = Command(commands[-1].text, commands[-1].comment, comment)
    return tuple(commands)


def console_commands(lines: tuple[str, ...]) -> tuple[Command, ...]:
    commands: list[Command] = []
    output: list[str] = []
    for line in [*lines, "$ "]:
        if not line.startswith("$ "):
            output.append(line)
            continue
        if commands:
            last = commands[-1]
            commands[-1] = Command(last.text, last.comment, "\n".join(output))
        output = []
        text, comment = split_comment(line[2:].strip())
        if text:
            commands.append(Command(text, comment))
    return tuple(commands)

"""Code blocks of the README, so tests run its examples exactly as a reader would copy them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.aws import endpoint_environment

README = Path(__file__).resolve().parents[2] / "README.md"


def python_example(section: str, number: int = 0) -> str:
    """The `number`th (from 0) ```python block after the heading `section` ("### Use the library from your
    own Lambda")."""
    text = README.read_text().split(section, 1)
    assert len(text) == 2, f"the README lost its section {section!r}"
    blocks = re.findall(r"```python\n(.*?)```", text[1], re.DOTALL)
    assert len(blocks) > number, f"the README lost the example of {section!r}"
    block: str = blocks[number]
    return block


def library_example() -> str:
    return python_example("### Use the library from your own Lambda")


def run_library_example(python: str, directory: Path, endpoint: str) -> subprocess.CompletedProcess[str]:
    """The example as `example.py` in `directory`, run by `python` against `endpoint` (no PYTHONPATH)."""
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
    """Every `outbox ...` command of the operations runbook, in the order a reader meets them: the lines of
    its ```bash blocks and its inline `outbox ...` code spans."""
    text = README.read_text().split("## Operations runbook", 1)[1].split("\n## ", 1)[0]
    commands: list[str] = []
    for block, inline in re.findall(r"```bash\n(.*?)```|`(outbox [^`]+)`", text, re.DOTALL):
        if inline:
            commands.append(inline)
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith("outbox "):
                commands.append(command)
    return commands

"""Code blocks of the README, so tests run its examples exactly as a reader would copy them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_example(section: str) -> str:
    """The first ```python block after the heading `section` ("### Use the library from your own Lambda")."""
    text = README.read_text().split(section, 1)
    assert len(text) == 2, f"the README lost its section {section!r}"
    match = re.search(r"```python\n(.*?)```", text[1], re.DOTALL)
    assert match, f"the README lost the example of {section!r}"
    return match.group(1)

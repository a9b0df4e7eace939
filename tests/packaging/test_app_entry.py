"""app.py (what cdk.json runs as `python3 app.py`) run by a Python without the CDK: a newcomer who did not
activate the venv is told so, instead of a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def test_app_py_without_the_cdk_installed_says_to_activate_the_venv() -> None:
    # Given a Python that sees no installed package (-S: no site-packages), as the system's python3 is
    # When it runs app.py as cdk.json would
    result = subprocess.run(
        [sys.executable, "-S", "app.py"], cwd=REPOSITORY, capture_output=True, text=True, check=False
    )

    # Then it fails with one line naming what is missing and the way out, and no traceback
    assert result.returncode == 1
    assert result.stderr.startswith("app.py: aws_cdk is not installed for ")
    assert "source .venv/bin/activate" in result.stderr
    assert "Traceback" not in result.stderr

"""The runtime fixture: a local runtime on the hand-written template of tests/support/local_templates.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import options, template, write_template


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(options(write_template(tmp_path, template()))) as started:
        yield started

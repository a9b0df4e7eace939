"""The reliability suite's profile and tally (docs/RELIABILITY.md).

`RELIABILITY_PROFILE=fast` (the default, what `make test` runs): a few dozen schedules, fixed seeds. `long`
(`make reliability`): `RELIABILITY_SCHEDULES` schedules (1,000 by default), each process writing what every
schedule did to `RELIABILITY_TALLY_DIR` as it ends, for `python -m tests.reliability.report`.
"""

from __future__ import annotations

import os

import pytest

from tests.reliability import tally


def pytest_sessionfinish(session: pytest.Session) -> None:
    tally.write_at_exit(os.environ.get("PYTEST_XDIST_WORKER", "main"))

"""Each hosted function runs its own code: its code root first, its own modules, kept between invocations."""

from __future__ import annotations

import sys
from pathlib import Path

from outbox_local.functions import FunctionHost, FunctionSpec
from outbox_local.invocation import Outcome


def _asset(root: Path, value: str, *, extra: bool) -> Path:
    """An asset holding package `shared`: its own VALUE, a handler, and for one of them one more module."""
    package = root / "shared"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"VALUE = {value!r}\n")
    (package / "handler.py").write_text(
        "import shared\n"
        "CALLS = []\n" + ("from shared import only_here\n" if extra else "") + "def handle(event, context):\n"
        "    CALLS.append(event)\n"
        "    return {'value': shared.VALUE, 'calls': len(CALLS)}\n"
    )
    if extra:
        (package / "only_here.py").write_text("")
    return root


def test_two_functions_shipping_different_copies_of_one_package_each_run_their_own(tmp_path: Path) -> None:
    # Given two functions whose assets both hold a package `shared`, with different content
    first = _asset(tmp_path / "a", "first", extra=True)
    second = _asset(tmp_path / "b", "second", extra=False)
    host = FunctionHost({})
    host.register(FunctionSpec("A", "a", "arn:a", "shared.handler.handle", first))
    host.register(FunctionSpec("B", "b", "arn:b", "shared.handler.handle", second))
    host.open()
    try:
        # When each is invoked, twice, interleaved
        results = [host.invoke(name, {}).payload for name in ("a", "b", "a", "b")]

        # Then each ran its own copy, and kept its module state between its own invocations
        assert results == [
            {"value": "first", "calls": 1},
            {"value": "second", "calls": 1},
            {"value": "first", "calls": 2},
            {"value": "second", "calls": 2},
        ]
        # and every module each loaded came from its own asset; only the first has `only_here`
        for name, root in (("a", first), ("b", second)):
            files = host.modules_of(name)
            assert files
            assert all(str(file).startswith(str(root)) for file in files.values()), files
        assert "shared.only_here" in host.modules_of("a")
        assert "shared.only_here" not in host.modules_of("b")
        # and between invocations the process itself sees neither copy
        assert "shared" not in sys.modules
        assert str(first) not in sys.path
    finally:
        host.close()


def test_in_process_each_invocation_has_its_own_trace_header_and_a_logger_made_earlier_is_still_heard(
    tmp_path: Path,
) -> None:
    # Given a function whose module makes a logger on stdout at import (in its first invocation), as
    # Powertools' Logger does, and logs the invocation's X-Ray header
    package = tmp_path / "traced"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "handler.py").write_text(
        "import logging, os, sys\n"
        "log = logging.getLogger('traced-test')\n"
        "log.addHandler(logging.StreamHandler(sys.stdout))\n"
        "log.setLevel(logging.INFO)\n"
        "log.propagate = False\n"
        "def handle(event, context):\n"
        "    log.info('header %s', os.environ['_X_AMZN_TRACE_ID'])\n"
    )
    seen: list[tuple[str, str]] = []

    def record(name: str, header: str, _event: object, outcome: Outcome) -> None:
        seen.append((header, outcome.output))

    host = FunctionHost({}, on_invocation=record)
    host.register(FunctionSpec("T", "t", "arn:t", "traced.handler.handle", tmp_path))
    host.open()
    try:
        # When it is invoked twice
        host.invoke("t", {})
        host.invoke("t", {})
    finally:
        host.close()
    # Then each invocation had a header of its own, and what each logged is handed over with it
    assert len({header for header, _ in seen}) == 2
    assert [output for _, output in seen] == [f"header {header}\n" for header, _ in seen]

"""One cold start, in a fresh process bench.cold_start starts: `python -m bench.cold_start_probe TARGET`.

Times (perf_counter, wall clock as Lambda bills an init) the import of the target's handler module, then the
wiring its first invocation does (configuration read, boto3 clients built), and prints them as one JSON line.
The baseline target `boto3` is `import boto3` alone. It imports nothing of its own before the clock starts
(sys, time and importlib are loaded by the interpreter already; typing and collections.abc are not, so they
are imported for the type checker only), so every target pays for its own imports.

With a stage (`python -m bench.cold_start_probe TARGET STAGE`, STAGE one of `start`, `import`, `wired`) it
stops after that stage and leaves at once (`os._exit`: no interpreter teardown, whose cost grows with what was
imported). bench.cold_start counts the instructions of each stage under valgrind: the difference between two
stages is what the one between them executed, whatever the load on the machine.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

TARGETS: dict[str, tuple[str, Callable[[Any], object] | None]] = {
    "boto3": ("boto3", None),
    "publisher": ("outbox_publisher.handler", lambda module: module.publisher()),
    "sweeper": ("outbox_sweeper.handler", lambda module: module.sweeper()),
    "orders_api": ("orders_api.handler", lambda module: module.get_service()),
    "inbox_consumer": ("order_consumers.summary_handler", lambda module: module.function.consumer()),
}


STAGES = ("start", "import", "wired")
"""Where a staged run stops: before the import, after it, after the wiring."""


def _stop_after(stage: str, stop: str | None) -> None:
    if stage == stop:
        sys.stdout.flush()
        os._exit(0)


def main(argv: list[str]) -> int:
    module_name, wire = TARGETS[argv[0]]
    stop = argv[1] if len(argv) > 1 else None
    if stop is not None and stop not in STAGES:
        raise SystemExit(f"unknown stage {stop!r}: one of {', '.join(STAGES)}")
    _stop_after("start", stop)
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    imported = time.perf_counter()
    _stop_after("import", stop)
    if wire is not None:
        wire(module)
    wired = time.perf_counter()
    _stop_after("wired", stop)
    import_ms, wired_ms = (imported - started) * 1000, (wired - started) * 1000
    sys.stdout.write(f'{{"import_ms": {import_ms:.3f}, "import_and_wiring_ms": {wired_ms:.3f}}}\n')
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

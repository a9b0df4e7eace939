"""One cold start, in a fresh process bench.cold_start starts: `python -m bench.cold_start_probe TARGET`.

Times (perf_counter, wall clock as Lambda bills an init) the import of the target's handler module, then the
wiring its first invocation does (configuration read, boto3 clients built), and prints them as one JSON line.
The baseline target `boto3` is `import boto3` alone. It imports nothing of its own before the clock starts
(sys, time and importlib are loaded by the interpreter already; typing and collections.abc are not, so they
are imported for the type checker only), so every target pays for its own imports.
"""

from __future__ import annotations

import importlib
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


def main(argv: list[str]) -> int:
    module_name, wire = TARGETS[argv[0]]
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    imported = time.perf_counter()
    if wire is not None:
        wire(module)
    wired = time.perf_counter()
    import_ms, wired_ms = (imported - started) * 1000, (wired - started) * 1000
    sys.stdout.write(f'{{"import_ms": {import_ms:.3f}, "import_and_wiring_ms": {wired_ms:.3f}}}\n')
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

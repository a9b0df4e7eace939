"""One publisher on stub clients, in a fresh process bench.cpu_figures counts under valgrind:
`python -m bench.cpu_probe {ours|naive} BATCH RUNS` hands the publisher the Lambda event of BATCH round-robin
records (the one bench.cpu_figures times) RUNS times, each wholly published (else it fails), then leaves
at once (`os._exit`: no teardown).

Two counts, of 1 and of 1 + k runs, differ by exactly k batches' work: imports, wiring and the first run's
one-time caches cancel out, what is left is per record. It reads only what the harness has had since its
first run (bench.cpu_figures' `ours`, `naive` and `lambda_batch`, bench.stubs, bench.scenarios), so the same
probe also counts the code issue 14 started from (bench.targets.CPU_STUBBED_START_RATIO).
"""

from __future__ import annotations

import os
import sys

from bench.environment import use_fake_aws

use_fake_aws()  # before the handlers' modules: their Powertools objects read the environment on import

from bench.cpu_figures import AGGREGATES, lambda_batch, naive, ours  # noqa: E402 - after the environment
from bench.environment import quiet  # noqa: E402
from bench.scenarios import round_robin  # noqa: E402
from bench.stubs import stub_clients  # noqa: E402


def run(which: str, size: int, runs: int) -> None:
    """The `which` publisher on stub clients, handed the batch `runs` times; fails if it hands any back, or
    (ours) leaves any unsettled: a publisher that fails its records does less work."""
    clients = stub_clients()
    handler = {"ours": ours, "naive": naive}[which](clients)
    event = lambda_batch(round_robin(size, AGGREGATES, prefix=f"cpu{size}"))
    with quiet():
        for _ in range(runs):
            settled = clients["dynamodb"].deleted
            answer = handler(event)
            if answer != {"batchItemFailures": []}:
                raise SystemExit(f"the {which} publisher handed records back: {answer}")
            # A destination's failure hands nothing back (its events wait for the sweeper): count the settles.
            if which == "ours" and clients["dynamodb"].deleted - settled != size:
                raise SystemExit(f"our publisher did not settle every record of the batch of {size}")


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    sys.stdout.flush()
    os._exit(0)

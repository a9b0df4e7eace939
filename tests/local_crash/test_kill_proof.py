"""The kill proof: `outbox local up --state-dir` under a load of about 8 requests a second through its HTTP
API (orders placed and confirmed), killed with SIGKILL at random points and started again each time; then
the promise is checked over the whole run (`tests.local_crash.promise`): every acknowledged event delivered
on both destinations (to queues the test subscribed itself before the first kill), in order per order,
nothing invented, duplicates counted. The profile sets the number of kills (`tests.local_crash.profiles`);
the figures go to `$LOCAL_CRASH_REPORT` when set (`make local-crash` prints them)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from random import Random

from tests.local_crash.harness import (
    Load,
    Runtime,
    Watcher,
    environment_ready,
    orders_table,
    running,
    subscribe_own_queues,
)
from tests.local_crash.profiles import REPORT_VARIABLE, profile
from tests.local_crash.promise import broken, check
from tests.support.synth import Synthesized

DRAIN_TIMEOUT_S = 120.0


def test_nothing_acknowledged_is_lost_across_sigkills(synthesized: Synthesized, tmp_path: Path) -> None:
    chosen = profile()
    random = Random(chosen.seed)  # noqa: S311 - a reproducible schedule of kills, not a secret
    environment_ready()
    started = time.monotonic()

    # Given `outbox local up` keeping its state in a directory, two queues of the test's own subscribed to
    # the stack's topic and bus, and a load placing and confirming orders over the HTTP API
    runtime = Runtime(synthesized.template_path, tmp_path / "state", tmp_path)
    runtime.start()
    topic_queue, bus_queue = subscribe_own_queues(runtime)
    load = Load(runtime, chosen.rate, random)
    watchers = {
        "topic": Watcher(runtime, topic_queue, bus=False),
        "bus": Watcher(runtime, bus_queue, bus=True),
    }
    with running(load, *watchers.values()):
        # When it is killed with SIGKILL at random points under that load, and started again each time
        for _ in range(chosen.kills):
            time.sleep(random.uniform(*chosen.running_s))
            runtime.kill()
            runtime.start()
        time.sleep(random.uniform(*chosen.running_s))
        load.stop()

        # Then, once every acknowledged event has had the time to arrive on both queues
        wanted = {a.event_id for a in load.acknowledged}
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline and not all(
            wanted <= {d.event_id for d in watcher.seen()} for watcher in watchers.values()
        ):
            time.sleep(0.5)
        time.sleep(1.0)  # what a last moment brings: duplicates are counted, not ignored
    orders = orders_table(runtime)
    stopped = runtime.stop()

    # Then the promise held over the whole run: nothing acknowledged lost, nothing invented, order kept
    summary = check(load.acknowledged, {name: w.deliveries for name, w in watchers.items()}, orders)
    summary |= {
        "profile": chosen.name,
        "seed": chosen.seed,
        "kills": chosen.kills,
        "restored_starts": sum(runtime.restored),
        "start_s": {"first": round(runtime.starts[0], 2), "restarts_max": round(max(runtime.starts[1:]), 2)},
        "requests_failed": load.failed_requests,
        "requests_refused": load.refused_requests,
        "last_stop": stopped.rsplit("stopped; ", 1)[-1].strip() if "stopped; " in stopped else "",
        "wall_s": round(time.monotonic() - started, 1),
    }
    if os.environ.get(REPORT_VARIABLE):
        report = Path(os.environ[REPORT_VARIABLE])
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    assert broken(summary) == [], json.dumps(summary, indent=2)
    assert summary["restored_starts"] == chosen.kills  # every restart restored, none started empty
    assert summary["acknowledged_events"] > 0

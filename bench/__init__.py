"""Benchmarks (issue 14): calls, capacity, CPU, cold start, cost per million events; and the local load run.

`make bench` (`python -m bench`) measures our publisher, the naive per-record publisher (`bench.naive`, a
baseline, not product code) and the write path in one run, runs `bench.local_load` (the local runtime under
load, end to end), prints one table, writes `bench/results.json` and renders docs/BENCHMARKS.md's tables from
that JSON (`bench.render_doc`). It stays a benchmark: nothing here asserts a timing. Importing this package
imports nothing, so the cold-start probe (`bench.cold_start_probe`) can run from inside it.
"""

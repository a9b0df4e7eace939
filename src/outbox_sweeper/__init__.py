"""The sweeper: a scheduled Lambda that publishes what the stream did not.

Rows stay PENDING when the stream mapping gave up on them (discarded after its retries or record age), when
the stream trimmed them (a mapping disabled or stalled for more than 24 hours), when a destination did not
take the event, when settling failed after publishing, when the order gate held them, or when a redrive set
them PENDING again. The table holds exactly what is not out yet, so the sweeper finds them all by reading it
(a scan, from where the last run stopped), takes each aggregate from its lowest row, claims the rows
(outbox_publisher.leases) and publishes them through the very engine the stream publisher uses: same
envelope, same `event_id`, same routing, same order gate.

- `config`: the environment, parsed and validated once.
- `census`: what a scan finds: counts, the oldest pending row, held aggregates, the due rows (pure).
- `scan`, `cursor`, `failed_index`: the DynamoDB adapters: the scan, the saved position, the failed index.
- `sweep`: one run: which rows, claims, the engine, backoff and the cutoff; the figures it reports.
- `handler`: the Lambda entry point (Powertools metrics emitted on every run, also when idle).
"""

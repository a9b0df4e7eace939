"""The sweeper: a scheduled Lambda that publishes what the stream did not.

Rows stay PENDING when the stream mapping gave up on them (discarded after its retries or record age), when
the stream trimmed them (a mapping disabled or stalled for more than 24 hours), when marking failed after
publishing, when the order gate held them, or when a redrive set them PENDING again. The sweeper finds them
through the sparse `pending` index (never a table scan), oldest first, takes each aggregate from its lowest
pending `seq`, claims the rows (outbox.leases) and publishes them through the very engine the stream
publisher uses: same envelope, same `event_id`, same routing, same order gate.

- `config`: the environment, parsed and validated once.
- `pending`: the pending index (DynamoDB adapter): what is due, how many are pending, the oldest.
- `sweep`: one run: which rows, claims, the engine, backoff and the cutoff; the figures it reports.
- `handler`: the Lambda entry point (Powertools metrics emitted on every run, also when idle).
"""

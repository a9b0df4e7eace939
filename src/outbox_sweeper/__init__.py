"""The sweeper: a scheduled Lambda that publishes what the stream did not.

Rows stay PENDING when the stream mapping gave up on them (retries, record age), the stream trimmed them (a
mapping stalled for more than 24 hours), a destination did not take the event, settling failed after
publishing, the order gate held them, or a redrive set them PENDING again. The table holds exactly what is
not out yet, so the sweeper finds them all by scanning it (`scan`, from where the last run stopped:
`cursor`), picks the due rows (`census`), claims them (`leases`) and publishes them through the very
engine the stream publisher uses: same envelope, same `event_id`, same routing, same order gate (`sweep`).
"""

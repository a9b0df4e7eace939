"""Issue 14's and issue 29's targets and AWS's floors, in one place: reported beside each figure, never
asserted."""

from __future__ import annotations

# --- AWS floors ---------------------------------------------------------------------------------
ENTRIES_PER_PUBLISH_CALL = 10
"""SNS PublishBatch and EventBridge PutEvents take at most 10 entries: 0.10 calls per event at best."""
ACTIONS_PER_TRANSACTION = 100
"""TransactWriteItems takes at most 100 actions: 0.01 settle calls per event at best (at twice the capacity of
a standard write)."""
KEYS_PER_BATCH_GET = 100
"""BatchGetItem takes at most 100 keys."""
PUBLISH_CALLS_FLOOR = 1 / ENTRIES_PER_PUBLISH_CALL
SETTLE_CALLS_FLOOR = 1 / ACTIONS_PER_TRANSACTION
SETTLE_WCU_FLOOR = 1.0
"""One standard write of a row up to 1 KB."""
COMMAND_CALLS_FLOOR = 1.0
"""One TransactWriteItems per order command."""

# --- Issue 14's targets ---------------------------------------------------------------------------
PUBLISH_CALLS_TARGET = 0.11
"""Publish calls per event per destination, in any interleave."""
SETTLE_CALLS_TARGET = 0.05
"""Issue 14's marking calls per event, carried over to the settles that replaced the marks (issue 29 settles
each row with a conditional DeleteItem: one call per row, by design; see docs/BENCHMARKS.md)."""
SETTLE_WCU_TARGET = 1.0
"""Settle (formerly marking) WCU per row."""
GATE_READS_TARGET = 0.02
"""Order-gate read calls per event, healthy path."""
GATE_RCU_TARGET = 1.0
"""Order-gate RCU per event, healthy path."""
COMMAND_CALLS_TARGET = 1.0
"""DynamoDB calls per order command, common path."""
ROW_BYTES_TARGET = 1024
"""Outbox row size for the sample events."""
LIFECYCLE_WCU_KEYED_TARGET = 7.0
"""Issue 14's WCU per event lifecycle, business row included; issue 29 names no keyed figure, so a command
with an Idempotency-Key is still read against this one."""

# --- Issue 29's targets ---------------------------------------------------------------------------
OUTBOX_ROW_WRU_TARGET = 3.0
"""The outbox row's whole life: 2 WRU in the business transaction, 1 to settle it."""
LIFECYCLE_WCU_TARGET = 5.0
"""WCU per event lifecycle, business row included, without an Idempotency-Key (7 before issue 29)."""
HEALTHY_OTHER_WCU_TARGET = 0.0
"""No write on the healthy path besides the row's transaction and its settle."""
OUTAGE_EXTRA_COPIES_TARGET = 1.0
"""Extra copies of an event on the healthy destination after a 60 s outage of the other one, at most."""

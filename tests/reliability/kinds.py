"""The random schedules' fault kinds and what each one's effective count counts (tests.reliability.schedules
arms them; the report, which runs without the product on its path, reads only this)."""

from __future__ import annotations

EFFECTIVE_UNITS: dict[str, str] = {
    "sns_throttled": "requests failed",
    "sns_5xx": "requests failed",
    "eventbridge_throttled": "requests failed",
    "eventbridge_5xx": "requests failed",
    "sns_authorization": "requests failed",
    "poison_queue_down": "requests failed",
    "dynamodb_outage": "requests failed",
    "dynamodb_row_updates": "requests failed",
    "both_5xx": "requests failed",
    "s3_5xx": "requests failed",
    "s3_throttled": "requests failed",
    "sns_outage": "requests failed",
    "eventbridge_outage": "requests failed",
    "sns_entries": "entries failed",
    "eventbridge_entries": "entries failed",
    "publisher_crash": "crash points fired",
    "publisher_timeout": "crash points fired",
    "sweeper_crash": "crash points fired",
    "consumer_crash": "crash points fired",
    "stream_gap": "stream records trimmed",
    "foreign_poison": "poison rows parked",
    "foreign_unstreamed": "unstreamed rows swept",
    "large_payloads": "claim checks published",
    "s3_missing": "poison rows parked",
    "duplicate_deliveries": "extra copies delivered",
    "reordered_deliveries": "deliveries overtaken",
}
"""Fault kind -> the unit of its effective count (0: armed for nothing)."""
REGION_UNITS: dict[str, str] = {
    "region_loss": "origins taken over",
    "region_return": "regions back",
    "replication_lag": "writes held back",
}
"""The two-region schedules' kinds (tests.reliability.region_schedules), the same way."""
ALL_UNITS: dict[str, str] = {**EFFECTIVE_UNITS, **REGION_UNITS}

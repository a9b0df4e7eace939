"""Reading a function's partial batch response (`ReportBatchItemFailures`), for streams and queues alike.

AWS documents the same conditions for DynamoDB/Kinesis streams ("Configuring partial batch response") and
for SQS ("Handling errors for an SQS event source in Lambda", "Success and failure conditions"):

- a complete success: an empty or null `batchItemFailures` list, an empty or null response;
- a complete failure: an empty-string or null `itemIdentifier`, an entry with a bad key name, and (SQS) an
  `itemIdentifier` that names no message of the batch. The streams' documentation does not list that last
  case; the emulator cannot checkpoint at a record that is not there, so it fails the batch as well.

Judgement calls (AWS documents neither): a `batchItemFailures` that is not a list fails the whole batch; a
response that is not a JSON object (a bare string, say) has no `batchItemFailures` and counts as success.
"""

from __future__ import annotations

from collections.abc import Sequence


def reported_failures(response: object, identifiers: Sequence[str]) -> list[int] | None:
    """Positions, in `identifiers`, of the items the response reports as failed.

    [] is a complete success; None means the response fails the whole batch.
    """
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if failures is None or failures == []:
        return []
    if not isinstance(failures, list):
        return None
    positions = []
    for entry in failures:
        identifier = entry.get("itemIdentifier") if isinstance(entry, dict) else None
        if not isinstance(identifier, str) or identifier not in identifiers:
            return None
        positions.append(identifiers.index(identifier))
    return positions

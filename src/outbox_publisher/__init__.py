"""The outbox publisher: announces outbox rows on SNS and/or EventBridge, in order, exactly as stored.

Ports and adapters: `engine` is the stream-independent publishing algorithm, fed by `stream` (Lambda's
stream records) and by the sweeper, and reaching AWS only through its ports (`ports`, `row_updates`,
`predecessors`); only the boto3 adapters (`adapters`, `dynamodb_rows`, `predecessors`' reader) and `handler`
know boto3 and Lambda. docs/publisher.md, "How publishing works", maps each module.
"""

"""The outbox publisher: announces outbox rows on SNS and/or EventBridge, in order, exactly as stored.

Layers (ports and adapters: only `adapters` and `handler` know boto3 and Lambda):

- `engine`: the stream-independent publishing engine. It takes outbox rows in order, routes them,
  batches them across distinct aggregates, publishes with retries, classifies failures (transient or
  permanent), sends poison to the poison queue, marks rows, and stops at the first transient failure.
  The stream publisher uses it today; the sweeper will reuse it unchanged.
- `adapters`: SNS, EventBridge and SQS through boto3 (the only modules here that import it). Rows are
  marked by the core library's `outbox.marking`.
- `stream`: the DynamoDB-stream layer: Lambda records in, candidates to the engine, batchItemFailures out.
- `handler`: the Lambda entry point, wiring the above with Powertools.
"""

"""The outbox publisher: announces outbox rows on SNS and/or EventBridge, in order, exactly as stored.

Layers (ports and adapters: only `adapters` and `handler` know boto3 and Lambda):

- `engine`: the stream-independent publishing algorithm. It takes outbox rows in order (`candidates`),
  routes them (`routing`), batches them across distinct aggregates, sends each batch with retries
  (`delivery`), classifies failures, parks poison on the poison queue (`poison`), marks rows, stops at
  the first transient failure, and says what happened (`report`). It needs only its ports (`ports`):
  the stream publisher feeds it today, the sweeper will reuse it unchanged.
- `messages`: the wire format and sizes of SNS and EventBridge entries; `retry`: backoff and deadline.
- `adapters`: SNS, EventBridge and SQS through boto3 (the only modules here that import it). Rows are
  marked by the core library's `outbox.marking`.
- `stream`: the DynamoDB-stream layer: Lambda records in, candidates to the engine, batchItemFailures out.
- `config`: the environment, parsed and validated once; `handler`: the Lambda entry point, wiring the
  above with Powertools.
"""

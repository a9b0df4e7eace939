"""The outbox publisher: announces outbox rows on SNS and/or EventBridge, in order, exactly as stored.

Layers (ports and adapters: only the adapters and `handler` know boto3 and Lambda):

- `engine`: the stream-independent publishing algorithm. It takes outbox rows in order (`candidates`), holds
  each until its predecessor is out (`gate`, `predecessors`), routes them (`routing`), batches them across
  distinct aggregates (`planning`, `waves`), sends each batch to each destination with retries (`delivery`),
  judges each event (`verdicts`), parks poison on the poison queue (`poison`, `poisoning`), settles or fails
  the rows (`outcome_updates`, `row_updates`), remembers what it settled (`memory`), and says what happened
  (`report`). It needs only its ports (`ports`, `row_updates.RowUpdater`, `predecessors.PredecessorReader`):
  the stream publisher and the sweeper feed it.
- `messages`: the wire format and sizes of SNS and EventBridge entries; `retry`: backoff and deadline.
- `adapters` (SNS, EventBridge, SQS), `dynamodb_rows` (settles, FAILED marks, parks) and `predecessors`'
  reader: boto3, the only modules here that import it.
- `stream`: the DynamoDB-stream layer: Lambda records in, candidates to the engine, batchItemFailures out.
- `config`: the environment, parsed and validated once; `handler`: the Lambda entry point, wiring the
  above with Powertools.
"""

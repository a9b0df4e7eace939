"""The Orders domain, the sample business the stack ships with.

`model` (the Order aggregate and its transitions), `commands` (strict parsing of requests),
`service` (OrderService and its repository port), `repository` (the DynamoDB adapter: one
TransactWriteItems per command: order + outbox event + idempotency record), `errors`.
"""

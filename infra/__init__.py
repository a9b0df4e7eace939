"""The sample app's CDK code: the `OutboxStack` that `make demo` runs locally and `cdk deploy` ships.

It composes the reusable constructs of `outbox_cdk` with the sample's own parts: the Orders table and
HTTP API (the business side that writes events) and sample consumers of the topic and the bus.
"""

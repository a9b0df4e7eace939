"""Operating an outbox: what is stuck, since when, and the fixes that cannot make it worse.

The `outbox` command's operations (`status`, `failed`, `redrive`, `skip`, `audit`) are thin over
this package, so tests and your own tooling run exactly what an operator runs. Everything here talks to AWS
through the clients it is given (`OpsClients`): real AWS, or the local runtime through its endpoint.
"""

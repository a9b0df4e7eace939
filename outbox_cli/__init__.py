"""The `outbox` command line."""

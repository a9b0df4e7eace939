"""The Orders API Lambda: API Gateway HTTP API (payload v2) -> OrderService."""

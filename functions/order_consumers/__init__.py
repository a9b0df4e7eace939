"""The sample's consumers: an order-summary read model and a cancellations ledger, each through an inbox."""

"""CDK app for the Transactional Outbox on DynamoDB Streams: one construct per capability."""

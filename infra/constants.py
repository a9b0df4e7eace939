"""Every name, size and threshold the CDK app uses, in one place.

Other code relies on some of these (handlers read the environment variable names, the local runtime
reads the Output names): change them only together with their readers.
"""

from __future__ import annotations

from typing import Final

# --- Stack -----------------------------------------------------------------------------------
STACK_ID: Final = "OutboxStack"

# --- Lambda packaging ------------------------------------------------------------------------
# `functions/` is the asset root: its top-level packages are importable exactly as in Lambda.
FUNCTIONS_ASSET_DIR: Final = "functions"
# Files that must never ship in the deployment package (caches, build metadata, local tooling).
ASSET_EXCLUDES: Final = (
    "**/__pycache__",
    "**/*.pyc",
    "**/*.egg-info",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "**/tests",
)
ORDERS_API_HANDLER: Final = "orders_api.handler.handler"
PUBLISHER_HANDLER: Final = "outbox_publisher.handler.handler"

# Powertools comes from its public layer, resolved at deploy time from the SSM public parameter
# AWS publishes per Powertools release (`/aws/service/powertools/python/{arch}/{python}/{version}`).
# Pinned to the same version as requirements-dev.txt so local tests and Lambda run the same code.
POWERTOOLS_VERSION: Final = "3.37.0"
POWERTOOLS_LAYER_SSM_PARAMETER: Final = (
    f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
)
# CloudFormation parameter that overrides the SSM lookup with an explicit layer version ARN
# (a region where the per-version parameter is missing, a partition like aws-cn, or a local runtime).
POWERTOOLS_LAYER_ARN_PARAMETER: Final = "PowertoolsLayerArn"

# --- Observability contract shared with the handlers ------------------------------------------
METRICS_NAMESPACE: Final = "Outbox"
METRICS_SERVICE_DIMENSION: Final = "service"
ORDERS_API_SERVICE: Final = "orders-api"
PUBLISHER_SERVICE: Final = "outbox-publisher"
SWEEPER_SERVICE: Final = "outbox-sweeper"
LOG_LEVEL: Final = "INFO"

METRIC_EVENTS_PUBLISHED: Final = "EventsPublished"
METRIC_EVENTS_FAILED: Final = "EventsFailed"
METRIC_POISON_EVENTS: Final = "PoisonEvents"
METRIC_PUBLISH_LATENCY_MS: Final = "PublishLatencyMs"
METRIC_RECORDS_SKIPPED: Final = "RecordsSkipped"
METRIC_OLDEST_PENDING_AGE_SECONDS: Final = "OldestPendingAgeSeconds"

# --- Environment variable names the handlers read ----------------------------------------------
ENV_ORDERS_TABLE_NAME: Final = "ORDERS_TABLE_NAME"
ENV_OUTBOX_TABLE_NAME: Final = "OUTBOX_TABLE_NAME"
ENV_TOPIC_ARN: Final = "TOPIC_ARN"
ENV_EVENT_BUS_NAME: Final = "EVENT_BUS_NAME"
ENV_EVENT_SOURCE: Final = "EVENT_SOURCE"
ENV_POISON_QUEUE_URL: Final = "POISON_QUEUE_URL"
ENV_OUTBOX_ROUTES: Final = "OUTBOX_ROUTES"
ENV_PUBLISHED_RETENTION_DAYS: Final = "PUBLISHED_RETENTION_DAYS"
ENV_POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"

# --- Tables (attribute names are the public outbox row contract, GUIDE §2) ----------------------
ORDERS_PARTITION_KEY: Final = "pk"
OUTBOX_PARTITION_KEY: Final = "aggregate_key"
OUTBOX_SORT_KEY: Final = "seq"
TTL_ATTRIBUTE: Final = "expires_at"
# Sparse index: the library sets `pending_shard` only while a row is PENDING, so the index holds
# exactly the rows a sweeper has to look at, oldest first within a shard.
PENDING_INDEX_NAME: Final = "pending"
PENDING_INDEX_PARTITION_KEY: Final = "pending_shard"
PENDING_INDEX_SORT_KEY: Final = "occurred_at"

# --- Functions -------------------------------------------------------------------------------
ORDERS_API_MEMORY_MB: Final = 256
ORDERS_API_TIMEOUT_SECONDS: Final = 10
# Caps the API's share of account concurrency and the write rate it can push into the two tables.
ORDERS_API_RESERVED_CONCURRENCY: Final = 20
PUBLISHER_MEMORY_MB: Final = 512
# A batch of 100 records is at most 10 SNS + 10 EventBridge batch calls plus the status updates.
PUBLISHER_TIMEOUT_SECONDS: Final = 60
DEFAULT_PUBLISHED_RETENTION_DAYS: Final = 7
LOG_RETENTION_DAYS: Final = 30

# --- Orders HTTP API ---------------------------------------------------------------------------
API_THROTTLE_RATE_LIMIT: Final = 50
API_THROTTLE_BURST_LIMIT: Final = 100
ORDERS_API_ROUTES: Final = (
    ("POST", "/orders"),
    ("GET", "/orders/{id}"),
    ("POST", "/orders/{id}/confirm"),
    ("POST", "/orders/{id}/cancel"),
)

# --- Stream mapping defaults (GUIDE §3) ---------------------------------------------------------
STREAM_BATCH_SIZE: Final = 100
STREAM_MAX_BATCHING_WINDOW_SECONDS: Final = 1
# Bounded, never -1: one poison record must not block its shard for the stream's whole 24 h.
STREAM_MAX_RETRY_ATTEMPTS: Final = 10
STREAM_MAX_RECORD_AGE_SECONDS: Final = 3600
# 1 keeps one poller per shard; >1 still keeps order per partition key (aggregate) only.
STREAM_PARALLELIZATION_FACTOR: Final = 1
STREAM_INSERT_EVENT_NAME: Final = "INSERT"

# --- Destinations ------------------------------------------------------------------------------
DEFAULT_EVENT_SOURCE: Final = "outbox.orders"
EVENT_ARCHIVE_RETENTION_DAYS: Final = 30
# The AWS-managed SNS key: enough for a topic only Lambda publishes to (see destinations.py).
SNS_AWS_MANAGED_KEY_ALIAS: Final = "alias/aws/sns"
QUEUE_RETENTION_DAYS: Final = 14
POISON_QUEUE_MAX_MESSAGE_BYTES: Final = 1_048_576

# --- Monitoring --------------------------------------------------------------------------------
ALARM_PERIOD_MINUTES: Final = 1
ITERATOR_AGE_THRESHOLD_MS: Final = 300_000
ITERATOR_AGE_EVALUATION_PERIODS: Final = 5
QUEUE_DEPTH_THRESHOLD: Final = 1
PUBLISHER_ERRORS_THRESHOLD: Final = 1
PUBLISHER_ERRORS_EVALUATION_PERIODS: Final = 5
PUBLISHER_ERRORS_DATAPOINTS_TO_ALARM: Final = 3
OLDEST_PENDING_AGE_THRESHOLD_SECONDS: Final = 900
DASHBOARD_NAME_SUFFIX: Final = "outbox"

# --- Outputs (stable: the README and the local runtime use these names) --------------------------
OUTPUT_ORDERS_TABLE_NAME: Final = "OrdersTableName"
OUTPUT_OUTBOX_TABLE_NAME: Final = "OutboxTableName"
OUTPUT_OUTBOX_TABLE_STREAM_ARN: Final = "OutboxTableStreamArn"
OUTPUT_API_URL: Final = "ApiUrl"
OUTPUT_TOPIC_ARN: Final = "TopicArn"
OUTPUT_EVENT_BUS_NAME: Final = "EventBusName"
OUTPUT_EVENT_SOURCE: Final = "EventSource"
OUTPUT_POISON_QUEUE_URL: Final = "PoisonQueueUrl"
OUTPUT_ON_FAILURE_QUEUE_URL: Final = "OnFailureQueueUrl"
OUTPUT_ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
OUTPUT_ORDERS_API_FUNCTION_NAME: Final = "OrdersApiFunctionName"
OUTPUT_PUBLISHER_FUNCTION_NAME: Final = "PublisherFunctionName"
OUTPUT_DASHBOARD_NAME: Final = "DashboardName"
OUTPUT_SAMPLE_TOPIC_CONSUMER_QUEUE_URL: Final = "SampleTopicConsumerQueueUrl"
OUTPUT_SAMPLE_BUS_CONSUMER_QUEUE_URL: Final = "SampleBusConsumerQueueUrl"

# --- IAM: exactly what each function calls (tests assert these lists) ----------------------------
# TransactWriteItems has no IAM action of its own: DynamoDB authorizes each item in it by its kind
# (Put -> PutItem, Update -> UpdateItem, ConditionCheck -> ConditionCheckItem). The API's transaction
# only Puts (order and idempotency record on Orders, the event on Outbox; a confirm/cancel is a Put
# conditioned on the version) and it reads orders with GetItem. Add an action here only together
# with the code that calls it.
ORDERS_API_ORDERS_TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:PutItem")
ORDERS_API_OUTBOX_TABLE_ACTIONS: Final = ("dynamodb:PutItem",)
PUBLISHER_OUTBOX_TABLE_ACTIONS: Final = ("dynamodb:UpdateItem",)
# What the Lambda stream poller calls with the function's role (DynamoDB developer guide,
# "IAM policy to allow a Lambda function to access DynamoDB stream records"): scoped to the stream.
STREAM_READ_ACTIONS: Final = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)
QUEUE_SEND_ACTIONS: Final = ("sqs:SendMessage",)
LOG_WRITE_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")

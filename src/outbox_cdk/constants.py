"""The constructs' defaults: sizes, thresholds and AWS action lists, in one place.

Names the Lambda code relies on are not here but imported from where the code defines them: table keys
from `outbox.model`, environment variables from each function's configuration module, metric names from
`outbox.metrics`, stream-mapping limits and defaults from `outbox.stream_mapping`.
"""

from __future__ import annotations

from typing import Final

# --- Lambda packaging ------------------------------------------------------------------------
PUBLISHER_HANDLER: Final = "outbox_publisher.handler.handler"
SWEEPER_HANDLER: Final = "outbox_sweeper.handler.handler"

# Powertools comes from its public layer, resolved at deploy time from the SSM public parameter
# AWS publishes per Powertools release (`/aws/service/powertools/python/{arch}/{python}/{version}`).
# The same release as the `local` extra in pyproject.toml, so local runs and Lambda run the same code
# (a test keeps the two equal).
POWERTOOLS_VERSION: Final = "3.37.0"
POWERTOOLS_LAYER_SSM_PARAMETER: Final = (
    f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
)
# CloudFormation parameter that overrides the SSM lookup with an explicit layer version ARN
# (a region where the per-version parameter is missing, a partition like aws-cn, or a local runtime).
POWERTOOLS_LAYER_ARN_PARAMETER: Final = "PowertoolsLayerArn"

# Powertools reads these; every function sets them.
ENV_POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"
LOG_LEVEL: Final = "INFO"

# --- Functions -------------------------------------------------------------------------------
FUNCTION_MEMORY_MB: Final = 256
FUNCTION_TIMEOUT_SECONDS: Final = 10
PUBLISHER_MEMORY_MB: Final = 512
# A batch of 100 records is at most 10 SNS + 10 EventBridge batch calls plus the status updates.
PUBLISHER_TIMEOUT_SECONDS: Final = 60
SWEEPER_MEMORY_MB: Final = 512
# A run reads the table, then claims, publishes and settles up to SWEEP_MAX_ROWS rows.
SWEEPER_TIMEOUT_SECONDS: Final = 120
# The scan keeps 30 s for the rest of the run (outbox_sweeper.sweep), the engine 11 s at the end.
SWEEPER_MIN_TIMEOUT_SECONDS: Final = 60
# Schedule targets per rule (EventBridge's limit): the sweeper's segments take one each.
SCHEDULE_TARGETS_PER_RULE: Final = 5
SWEEP_SCHEDULE_MINUTES: Final = 1

# --- Destinations and queues -------------------------------------------------------------------
DEFAULT_EVENT_SOURCE: Final = "outbox.orders"
EVENT_ARCHIVE_RETENTION_DAYS: Final = 30
# The AWS-managed SNS key: enough for a topic only Lambda publishes to (see destinations.py).
SNS_AWS_MANAGED_KEY_ALIAS: Final = "alias/aws/sns"
QUEUE_RETENTION_DAYS: Final = 14

# --- Monitoring --------------------------------------------------------------------------------
ALARM_PERIOD_MINUTES: Final = 1
ITERATOR_AGE_THRESHOLD_MS: Final = 300_000
ITERATOR_AGE_EVALUATION_PERIODS: Final = 5
QUEUE_DEPTH_THRESHOLD: Final = 1
PUBLISHER_ERRORS_THRESHOLD: Final = 1
PUBLISHER_ERRORS_EVALUATION_PERIODS: Final = 5
PUBLISHER_ERRORS_DATAPOINTS_TO_ALARM: Final = 3
OLDEST_PENDING_AGE_THRESHOLD_SECONDS: Final = 900
OLDEST_PENDING_AGE_EVALUATION_PERIODS: Final = 5
# Any aggregate held behind a FAILED event needs an operator.
HELD_AGGREGATES_THRESHOLD: Final = 1
# Any break of the row contract by another writer is a bug in that writer.
WRITER_CONTRACT_VIOLATIONS_THRESHOLD: Final = 1
SWEEPER_ERRORS_THRESHOLD: Final = 1
SWEEPER_ERRORS_EVALUATION_PERIODS: Final = 5
SWEEPER_ERRORS_DATAPOINTS_TO_ALARM: Final = 3

# --- IAM: exactly what each function calls (tests assert these lists) ----------------------------
# Add an action here only together with the code that calls it.
# The order gate reads predecessors (BatchGetItem); a settle is a conditional DeleteItem; claims, parks and
# FAILED marks are conditional UpdateItems.
PUBLISHER_OUTBOX_TABLE_ACTIONS: Final = (
    "dynamodb:BatchGetItem",
    "dynamodb:DeleteItem",
    "dynamodb:UpdateItem",
)
# The sweeper does all the publisher does to rows, scans the table, and reads and saves its cursor there
# (GetItem, PutItem).
SWEEPER_OUTBOX_TABLE_ACTIONS: Final = tuple(
    sorted({*PUBLISHER_OUTBOX_TABLE_ACTIONS, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Scan"})
)
# What the sweeper of an outbox across regions reads in every other region's replica of the table: the
# `#taken#` records each taker wrote there (outbox_publisher.region_store.DynamoDBRegionStore.read_taken).
SWEEPER_PEER_REPLICA_ACTIONS: Final = ("dynamodb:BatchGetItem",)
# What the Lambda stream poller calls with the function's role (DynamoDB developer guide,
# "IAM policy to allow a Lambda function to access DynamoDB stream records"): scoped to the stream.
STREAM_READ_ACTIONS: Final = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)
QUEUE_SEND_ACTIONS: Final = ("sqs:SendMessage",)
# A writer appends rows with a conditional Put in its transaction (outbox.OutboxWriter): `Outbox.grant_write`.
WRITER_TABLE_ACTIONS: Final = ("dynamodb:PutItem",)
# With customer-managed keys: DynamoDB encrypts and decrypts items and stream records with the table's key
# on the caller's behalf; SQS needs a data key to encrypt each message sent. Scoped to each key.
TABLE_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey")
QUEUE_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey")
# Publishing to a topic under a customer-managed key (SNS developer guide: the publisher needs both).
TOPIC_PUBLISH_ACTIONS: Final = ("sns:Publish",)  # PublishBatch is authorized as Publish
TOPIC_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey")
# Reading alone (an operator's read-only policy): DynamoDB decrypts with the table's key, SQS with a queue's.
TABLE_READ_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:DescribeKey")
QUEUE_RECEIVE_KEY_ACTIONS: Final = ("kms:Decrypt",)
# Each role's use of a key is held to the requests one service makes for it (kms:ViaService): DynamoDB for a
# table's key (its stream's records included), SQS for a queue's, SNS for a topic's. With that service's own
# permissions scoped to the resources the role touches, the key serves those alone.
VIA_DYNAMODB: Final = "dynamodb"
VIA_SQS: Final = "sqs"
VIA_SNS: Final = "sns"
VIA_S3: Final = "s3"
# What an SQS event source mapping does with the function's role (CDK's SqsEventSource grants the same).
QUEUE_CONSUME_ACTIONS: Final = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
)
LOG_WRITE_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")

# --- The customer-managed key (outbox_cdk.encryption): what each AWS service may do with it ----------
# CloudWatch Logs encrypting and reading a log group's events (CloudWatch Logs user guide, "Encrypt log
# data in CloudWatch Logs using AWS KMS").
LOGS_KEY_ACTIONS: Final = (
    "kms:Decrypt*",
    "kms:Describe*",
    "kms:Encrypt*",
    "kms:GenerateDataKey*",
    "kms:ReEncrypt*",
)
# SNS and EventBridge sending to a queue under the key (SQS developer guide, "Configure KMS permissions for
# AWS services").
QUEUE_DELIVERY_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey")
# CloudWatch alarm actions publishing to a topic under the key (as the alarm topic's own key allows).
ALARM_TOPIC_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey*")
# EventBridge keeping an archive's events under the key (EventBridge user guide, "Encrypting EventBridge
# archives"); DescribeKey, which carries no encryption context, in a statement of its own.
ARCHIVE_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey", "kms:ReEncrypt*")
ARCHIVE_DESCRIBE_KEY_ACTIONS: Final = ("kms:DescribeKey",)

# --- Inbox consumers (outbox_cdk.consumers) ------------------------------------------------------
CONSUMER_TIMEOUT_SECONDS: Final = 30
CONSUMER_BATCH_SIZE: Final = 10
# An SQS event source mapping's maximum concurrency: AWS takes 2 to 1000.
CONSUMER_MAX_CONCURRENCY_LIMITS: Final = (2, 1000)
# AWS: "set the source queue's visibility timeout to at least six times the timeout of your function".
CONSUMER_VISIBILITY_TIMEOUT_FACTOR: Final = 6
# Receives beyond the gap wait's own, for transient failures (throttling, a timeout) before the redrive.
CONSUMER_SPARE_RECEIVES: Final = 3
# The inbox puts processed-event records and updates the aggregate's last seq (PutItem, UpdateItem: its
# TransactWriteItems is authorized per action). An effect that also deletes or checks items needs those
# actions too (`InboxConsumerProps.effect_actions`). With external effects the inbox reads its records first
# (GetItem), and Powertools' idempotency reads, writes and, when a call fails, deletes its own record
# (GetItem, PutItem, UpdateItem, DeleteItem).
INBOX_TABLE_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:UpdateItem")
INBOX_EXTERNAL_EFFECT_ACTIONS: Final = ("dynamodb:DeleteItem", "dynamodb:GetItem")

# --- Large payloads (outbox_cdk.payloads) -------------------------------------------------------------
# A stored envelope must outlive everything that may still read it: a consumer's queue and its dead-letter
# queue (14 days at most, counted from the first enqueue), and a replay from the bus's archive (30 days) that
# then waits in a queue; plus a day for the stream and the sweeper. A FAILED row must be redriven within it,
# else its redrive finds no object and marks it FAILED again, with that reason.
PAYLOAD_RETENTION_DAYS: Final = EVENT_ARCHIVE_RETENTION_DAYS + QUEUE_RETENTION_DAYS + 1
# The bucket's prefix for stored envelopes (outbox.payload_refs.object_key names each by event and write).
PAYLOAD_PREFIX: Final = "envelopes/"
# Writers put objects; readers (publisher, sweeper, consumers) get them, and list the bucket, without which
# S3 answers a missing key with 403 AccessDenied (retried forever) instead of 404 NoSuchKey (poison).
PAYLOAD_WRITE_ACTIONS: Final = ("s3:PutObject",)
PAYLOAD_READ_ACTIONS: Final = ("s3:GetObject",)
PAYLOAD_LIST_ACTIONS: Final = ("s3:ListBucket",)
# SSE-KMS under a customer-managed key: a PutObject needs a data key, a GetObject its decryption.
PAYLOAD_WRITE_KEY_ACTIONS: Final = ("kms:GenerateDataKey",)
PAYLOAD_READ_KEY_ACTIONS: Final = ("kms:Decrypt",)
# Denied to everyone on the stored envelopes of a retained bucket (outbox_cdk.payloads).
PAYLOAD_DELETE_ACTIONS: Final = ("s3:DeleteObject", "s3:DeleteObjectVersion")

"""AWS's published prices the cost figures use: one place, each with its source.

US East (N. Virginia), on-demand list prices, free tiers left out (a cost per million events should not
depend on how much else the account does). The official pricing pages (`source`) could not be opened from
the machine that wrote this; every price was checked against the pages in `checked_against`, which quote
them, on the date below. Re-check them before relying on a figure.
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKED_ON = "2026-12-01"
REGION = "us-east-1 (US East, N. Virginia)"


@dataclass(frozen=True)
class Price:
    usd: float
    per: int
    """The price is for this many units."""
    unit: str
    source: str
    checked_against: tuple[str, ...] = ()

    @property
    def per_unit(self) -> float:
        return self.usd / self.per

    def to_json(self) -> dict[str, object]:
        return {
            "usd": self.usd,
            "per": self.per,
            "unit": self.unit,
            "source": self.source,
            "checked_against": list(self.checked_against),
        }


SNS_REQUEST = Price(
    0.50,
    1_000_000,
    "SNS publish requests, standard topic; each 64 KB chunk of published data is one request (PublishBatch "
    "included: its whole payload is chunked)",
    "https://aws.amazon.com/sns/pricing/",
    (
        "https://www.factualminds.com/blog/amazon-sns-pricing-publishes-fanout-protocols/ (2026-06)",
        "https://docs.aws.amazon.com/sns/latest/dg/sns-batch-api-actions.html (batching cuts cost up to 10x)",
    ),
)
SNS_TO_SQS_DELIVERY = Price(
    0.0,
    1_000_000,
    "SNS deliveries to SQS subscriptions: no charge",
    "https://aws.amazon.com/sns/pricing/",
    ("https://www.factualminds.com/blog/amazon-sns-pricing-publishes-fanout-protocols/ (2026-06)",),
)
EVENTBRIDGE_EVENT = Price(
    1.00,
    1_000_000,
    "EventBridge custom events put on a bus; each 64 KB chunk of an entry is one event, however many entries "
    "share a PutEvents call",
    "https://aws.amazon.com/eventbridge/pricing/",
    (
        "https://cloudburn.io/blog/amazon-eventbridge-pricing (2026-03)",
        "https://hykell.com/uncategorized/aws-eventbridge-pricing-and-cost-management",
    ),
)
PIPES_REQUEST = Price(
    0.40,
    1_000_000,
    "EventBridge Pipes requests, after filtering; each 64 KB chunk is one request",
    "https://aws.amazon.com/eventbridge/pricing/",
    (
        "https://cloudburn.io/blog/amazon-eventbridge-pricing (2026-03)",
        "https://awsnegotiations.com/eventbridge-pipes-cost",
    ),
)
DYNAMODB_WRITE_REQUEST_UNIT = Price(
    0.625,
    1_000_000,
    "DynamoDB on-demand write request units, Standard table class (after the 2024-11 price cut)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ("https://airbyte.com/data-engineering-resources/dynamodb-pricing (2025-07)",),
)
DYNAMODB_READ_REQUEST_UNIT = Price(
    0.125,
    1_000_000,
    "DynamoDB on-demand read request units, Standard table class (after the 2024-11 price cut)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ("https://airbyte.com/data-engineering-resources/dynamodb-pricing (2025-07)",),
)
DYNAMODB_STREAMS_READ_BY_LAMBDA = Price(
    0.0,
    1_000_000,
    "DynamoDB Streams GetRecords made by Lambda event source mappings: free (other consumers pay per "
    "GetRecords after 2.5 million a month)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ("https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CostOptimization_StreamsUsage.html",),
)
LAMBDA_REQUEST = Price(
    0.20,
    1_000_000,
    "Lambda requests (invocations)",
    "https://aws.amazon.com/lambda/pricing/",
    ("https://cloudchipr.com/blog/aws-lambda-pricing",),
)
LAMBDA_ARM64_GB_SECOND = Price(
    0.0000133334,
    1,
    "Lambda duration, arm64, per GB-second (first 7.5 billion GB-s a month)",
    "https://aws.amazon.com/lambda/pricing/",
    ("https://cloudchipr.com/blog/aws-lambda-pricing",),
)

FACTUALMINDS_CLOUDWATCH = (
    "https://www.factualminds.com/blog/amazon-cloudwatch-pricing-metrics-logs-alarms-dashboards/ (2026-06)"
)
CLOUDWATCH_LOGS_INGESTED = Price(
    0.50,
    1024**3,
    "CloudWatch Logs data ingested, Standard log class, per GB (what the functions write to standard output)",
    "https://aws.amazon.com/cloudwatch/pricing/",
    (
        FACTUALMINDS_CLOUDWATCH,
        "https://signoz.io/guides/cloudwatch-pricing (2026-02)",
    ),
)
CLOUDWATCH_CUSTOM_METRIC = Price(
    0.30,
    1,
    "CloudWatch custom metric per month (first 10,000; each namespace, name and dimension values is one; EMF "
    "metrics included)",
    "https://aws.amazon.com/cloudwatch/pricing/",
    ("https://signoz.io/guides/cloudwatch-pricing (2026-02)",),
)
CLOUDWATCH_ALARM = Price(
    0.10,
    1,
    "CloudWatch standard-resolution alarm (one metric) per month",
    "https://aws.amazon.com/cloudwatch/pricing/",
    (FACTUALMINDS_CLOUDWATCH,),
)
CLOUDWATCH_DASHBOARD = Price(
    3.00,
    1,
    "CloudWatch dashboard per month (beyond the free tier's three)",
    "https://aws.amazon.com/cloudwatch/pricing/",
    (FACTUALMINDS_CLOUDWATCH,),
)
XRAY_TRACE_RECORDED = Price(
    5.00,
    1_000_000,
    "X-Ray traces recorded (the functions deploy with Tracing: Active; the default sampling rule records the "
    "first request each second and 5% of the others)",
    "https://aws.amazon.com/xray/pricing/",
    ("https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html",),
)
DYNAMODB_STREAMS_READ = Price(
    0.02,
    100_000,
    "DynamoDB Streams read request units (GetRecords) by readers other than Lambda, after 2.5 million free a "
    "month",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    ("https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CostOptimization_StreamsUsage.html",),
)

ALL = {
    "sns_request": SNS_REQUEST,
    "sns_to_sqs_delivery": SNS_TO_SQS_DELIVERY,
    "eventbridge_event": EVENTBRIDGE_EVENT,
    "pipes_request": PIPES_REQUEST,
    "dynamodb_wru": DYNAMODB_WRITE_REQUEST_UNIT,
    "dynamodb_rru": DYNAMODB_READ_REQUEST_UNIT,
    "dynamodb_streams_read_by_lambda": DYNAMODB_STREAMS_READ_BY_LAMBDA,
    "lambda_request": LAMBDA_REQUEST,
    "lambda_arm64_gb_second": LAMBDA_ARM64_GB_SECOND,
    "cloudwatch_logs_ingested": CLOUDWATCH_LOGS_INGESTED,
    "cloudwatch_custom_metric": CLOUDWATCH_CUSTOM_METRIC,
    "cloudwatch_alarm": CLOUDWATCH_ALARM,
    "cloudwatch_dashboard": CLOUDWATCH_DASHBOARD,
    "xray_trace_recorded": XRAY_TRACE_RECORDED,
    "dynamodb_streams_read": DYNAMODB_STREAMS_READ,
}


def dollars(usd: float) -> str:
    """A price as written on AWS's pages: no exponent (0.0000133334, not 1.33334e-05)."""
    return f"{usd:.10f}".rstrip("0").rstrip(".")


S3_PUT_REQUEST = Price(
    0.005,
    1_000,
    "S3 Standard PUT, COPY, POST, LIST requests",
    "https://aws.amazon.com/s3/pricing/",
    (
        "https://www.cloudkaramchari.com/blog/understanding-per-1000-put-copy-post-or-list-requests-in-amazon-s3-pricing/",
    ),
)
S3_GET_REQUEST = Price(
    0.0004,
    1_000,
    "S3 Standard GET, SELECT and all other requests (HeadObject included)",
    "https://aws.amazon.com/s3/pricing/",
    ("https://handbook.vantage.sh/aws/services/s3-pricing",),
)
S3_STANDARD_GB_MONTH = Price(
    0.023,
    1,
    "S3 Standard storage, first 50 TB, per GB-month (objects are billed until their lifecycle expiration)",
    "https://aws.amazon.com/s3/pricing/",
    ("https://handbook.vantage.sh/aws/services/s3-pricing",),
)

"""`AWS::Lambda::EventSourceMapping` on an SQS queue, checked as Lambda checks it, run by
`outbox_local.queue_mapping`.

What Lambda refuses (the stream-only properties, `BatchSize` and batching-window bounds, FIFO limits, response
types, `ScalingConfig.MaximumConcurrency` outside 2..1000, filters on keys other than `body`, a queue whose
visibility timeout is shorter than the function's timeout) is refused at start-up, as CloudFormation would
fail the stack; docs/local.md, "SQS queue mappings: what runs as on AWS", lists each rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from outbox import stream_mapping
from outbox_local.errors import FilterPatternError, UnsupportedResourceError
from outbox_local.filtering import QUEUE_FILTER_KEYS, FilterCriteria
from outbox_local.provisioning.context import (
    CFN_BOOLEANS,
    ProvisioningContext,
    QueueMappingSpec,
    cfn_bool,
    check,
)
from outbox_local.queue_mapping import DEFAULT_BATCH_SIZE, QueueMappingSettings
from outbox_local.template import ResolvedResource, Resource

PROPERTIES = {
    "FunctionName",
    "EventSourceArn",
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "FunctionResponseTypes",
    "FilterCriteria",
    "Enabled",
    "ScalingConfig",
}
IGNORED = {"Tags", "MetricsConfig"}
STREAM_ONLY = {
    "StartingPosition",
    "StartingPositionTimestamp",
    "MaximumRetryAttempts",
    "MaximumRecordAgeInSeconds",
    "BisectBatchOnFunctionError",
    "ParallelizationFactor",
    "DestinationConfig",
    "TumblingWindowInSeconds",
}
FIFO_MAX_BATCH_SIZE = 10
UNWINDOWED_MAX_BATCH_SIZE = 10
MAXIMUM_CONCURRENCY = stream_mapping.Range(2, 1000)


def provision(
    ctx: ProvisioningContext,
    resource: Resource,
    p: Mapping[str, Any],
    *,
    function_arn: str,
    mapping_uuid: str,
) -> ResolvedResource:
    where = f"{resource.logical_id} (AWS::Lambda::EventSourceMapping)"
    stream_only = sorted(set(p) & STREAM_ONLY)
    if stream_only:
        raise UnsupportedResourceError(
            f"{where}: {', '.join(stream_only)} apply only to stream sources; Lambda refuses them for an "
            "SQS queue"
        )
    check(resource, p, PROPERTIES, IGNORED)
    queue_arn = str(p["EventSourceArn"])
    problems = violations(p, fifo=queue_arn.endswith(".fifo"))
    try:
        filters = FilterCriteria.from_template(p.get("FilterCriteria"))
    except FilterPatternError as error:
        problems.append(str(error))
        filters = FilterCriteria()
    for pattern in filters.patterns:
        others = sorted(set(pattern.pattern) - QUEUE_FILTER_KEYS)
        if others:
            problems.append(
                f"filter {json.dumps(pattern.pattern)} uses {', '.join(others)}: Lambda filters SQS "
                "messages on the body key only"
            )
    if problems:
        raise UnsupportedResourceError(f"{where}: {'; '.join(problems)}")
    sqs = ctx.clients("sqs")
    queue_url = str(sqs.get_queue_url(QueueName=queue_arn.rsplit(":", 1)[-1])["QueueUrl"])
    _check_visibility_timeout(ctx, where, sqs, queue_url, function_arn)
    settings = QueueMappingSettings(
        function_arn=function_arn,
        queue_arn=queue_arn,
        queue_url=queue_url,
        batch_size=int(p.get("BatchSize", DEFAULT_BATCH_SIZE)),
        maximum_batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
        report_batch_item_failures="ReportBatchItemFailures" in p.get("FunctionResponseTypes", []),
        filters=filters,
    )
    concurrency = (p.get("ScalingConfig") or {}).get("MaximumConcurrency")
    ctx.stack.queue_mappings.append(
        QueueMappingSpec(
            logical_id=resource.logical_id,
            settings=settings,
            enabled=cfn_bool(p.get("Enabled", True)),
            uuid=mapping_uuid,
            filter_patterns=tuple(
                str(entry["Pattern"]) for entry in (p.get("FilterCriteria") or {}).get("Filters", [])
            ),
            maximum_concurrency=None if concurrency is None else int(concurrency),
        )
    )
    return ResolvedResource(ref=mapping_uuid, attributes={"Id": mapping_uuid})


def violations(p: Mapping[str, Any], *, fifo: bool) -> list[str]:
    """What Lambda would refuse in an SQS mapping's settings, one message each."""
    # The ranges every event source shares (BatchSize 1..10,000, window 0..300) are defined once.
    problems = stream_mapping.violations(
        {key: p[key] for key in ("BatchSize", "MaximumBatchingWindowInSeconds") if key in p}
    )
    if not problems:
        batch_size = int(p.get("BatchSize", DEFAULT_BATCH_SIZE))
        window = int(p.get("MaximumBatchingWindowInSeconds", 0))
        if fifo and batch_size > FIFO_MAX_BATCH_SIZE:
            problems.append(
                f"BatchSize must be at most {FIFO_MAX_BATCH_SIZE} for a FIFO queue, got {batch_size}"
            )
        if fifo and window > 0:
            problems.append("MaximumBatchingWindowInSeconds is not supported for FIFO queues")
        if not fifo and batch_size > UNWINDOWED_MAX_BATCH_SIZE and window < 1:
            problems.append(
                f"BatchSize {batch_size} (more than {UNWINDOWED_MAX_BATCH_SIZE}) needs "
                "MaximumBatchingWindowInSeconds of at least 1"
            )
    if "Enabled" in p and (not isinstance(p["Enabled"], bool | str) or p["Enabled"] not in CFN_BOOLEANS):
        problems.append(f"Enabled {p['Enabled']!r} is not a boolean")
    response_types = p.get("FunctionResponseTypes", [])
    if not isinstance(response_types, list) or set(response_types) - {"ReportBatchItemFailures"}:
        problems.append(
            f"FunctionResponseTypes must list only ReportBatchItemFailures, got {response_types!r}"
        )
    problems.extend(_scaling_violations(p.get("ScalingConfig")))
    return problems


def _scaling_violations(scaling: object) -> list[str]:
    if scaling is None:
        return []
    if not isinstance(scaling, dict) or set(scaling) - {"MaximumConcurrency"}:
        return [f"ScalingConfig supports only MaximumConcurrency, got {scaling!r}"]
    value = scaling.get("MaximumConcurrency")
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        return [f"ScalingConfig.MaximumConcurrency must be a whole number, got {value!r}"]
    if not MAXIMUM_CONCURRENCY.allows(int(value)):
        return [f"ScalingConfig.MaximumConcurrency must be {MAXIMUM_CONCURRENCY.describe()}, got {value!r}"]
    return []


def _check_visibility_timeout(
    ctx: ProvisioningContext, where: str, sqs: Any, queue_url: str, function_arn: str
) -> None:
    """Lambda refuses a mapping whose queue would hand a message out again while the function may still be
    processing it. A function from outside the template is not known here, so it is not checked."""
    function = next((spec for spec in ctx.stack.functions if spec.arn == function_arn), None)
    if function is None:
        return
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"])
    visibility = int(attributes["Attributes"]["VisibilityTimeout"])
    if visibility < function.timeout_s:
        raise UnsupportedResourceError(
            f"{where}: Queue visibility timeout: {visibility} seconds is less than Function timeout: "
            f"{function.timeout_s:g} seconds"
        )

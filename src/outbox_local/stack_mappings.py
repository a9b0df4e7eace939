"""A stack's event source mappings as the runtime runs them: a runner per enabled mapping, and what Lambda's
ListEventSourceMappings shows of each (enabled or not)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from outbox_local.event_source_mapping_api import PublishedMapping, PublishedQueueMapping
from outbox_local.functions import FunctionHost
from outbox_local.invocation import InvocationResult
from outbox_local.moto_streams import InProcessStreams
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.stacks import DeployedStack
from outbox_local.stream_poller import StreamMappingRunner, destination_sender

MAX_CONCURRENT_BATCHES = 1000
"""A queue mapping's concurrency without ScalingConfig: Lambda's most (the function's own limit is lower)."""


def attach_mappings(
    deployed: DeployedStack,
    host: FunctionHost,
    internal_client: Callable[[str], Any],
    clock: Callable[[], float],
    region: str,
    *,
    resume_after: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Fill `deployed`'s runners and published mappings from what provisioning made. A stream mapping named
    in `resume_after` reads each shard after the checkpoint given, not from its starting position."""
    for mapping in deployed.provisioned.mappings:
        runner = None
        if mapping.enabled:
            destination = mapping.settings.on_failure_destination_arn
            runner = StreamMappingRunner(
                mapping.logical_id,
                mapping.settings,
                streams_client=InProcessStreams(region),
                invoke=_invoker(host, mapping.function_arn),
                send_to_destination=destination_sender(internal_client, destination) if destination else None,
                clock=clock,
                region=region,
                starting_position=mapping.starting_position,
                resume_after=(resume_after or {}).get(mapping.logical_id),
            )
            deployed.mappings.append(runner)
        deployed.published.append(PublishedMapping(mapping, runner, last_modified=clock()))
    for queue_mapping in deployed.provisioned.queue_mappings:
        queue_runner = None
        if queue_mapping.enabled:
            queue_runner = QueueMappingRunner(
                queue_mapping.logical_id,
                queue_mapping.settings,
                sqs_client=internal_client("sqs"),
                invoke=_invoker(host, queue_mapping.settings.function_arn),
                clock=clock,
                # As Lambda scales a queue's pollers: up to the function's concurrency and the mapping's
                # ScalingConfig.MaximumConcurrency.
                max_concurrent_batches=min(
                    host.concurrency(queue_mapping.settings.function_arn),
                    queue_mapping.maximum_concurrency or MAX_CONCURRENT_BATCHES,
                ),
            )
            deployed.queue_mappings.append(queue_runner)
        deployed.published.append(PublishedQueueMapping(queue_mapping, queue_runner, last_modified=clock()))


def _invoker(host: FunctionHost, function_arn: str) -> Callable[[dict[str, Any]], InvocationResult]:
    def invoke(event: dict[str, Any]) -> InvocationResult:
        return host.invoke(function_arn, event)

    return invoke

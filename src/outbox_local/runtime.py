"""The local runtime: one object that starts everything the template describes, and stops it cleanly."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from outbox_local.alarms import AlarmEvaluator, Transition
from outbox_local.aws_server import LocalAwsServer
from outbox_local.control_api import ControlApi, mapping_report
from outbox_local.emf_metrics import EmfMetricsForwarder
from outbox_local.endpoint import LOCAL_CREDENTIALS, environment
from outbox_local.errors import RuntimeStateError
from outbox_local.event_source_mapping_api import (
    EventSourceMappingApi,
    Published,
    PublishedMapping,
    PublishedQueueMapping,
)
from outbox_local.faults import INTERNAL_USER_AGENT, FaultInjector
from outbox_local.functions import FunctionHost
from outbox_local.http_api import HttpApiServer, Route
from outbox_local.invocation import InvocationResult
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.poll_activity import PollActivity
from outbox_local.provisioning import ProvisionedStack, Provisioner
from outbox_local.provisioning.cloudformation import register_stack, stack_outputs
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.schedules import ScheduleRunner
from outbox_local.stream_mapping import StepKind
from outbox_local.stream_poller import StreamMappingRunner, destination_sender, iterator_age_ms
from outbox_local.template import Resolver, Template

logger = logging.getLogger("outbox_local.runtime")
_WAIT_STEP_S = 0.05
ALARM_TICK_S = 1.0


@dataclass(frozen=True)
class RuntimeOptions:
    template_path: Path
    region: str = "us-east-1"
    stack_name: str = "OutboxStack"
    host: str = "127.0.0.1"
    aws_port: int = 0
    api_port: int = 0
    background: bool = True
    """Poll streams and queues and fire schedules on a thread. Tests set False and drive `drain_streams()`
    instead."""
    poll_interval_s: float = 0.05
    retry_delay_s: float = 0.2
    schedule_speedup: float = 1.0
    function_environment: Mapping[str, str] = field(default_factory=dict)
    """Variables set in every function on top of the template's (e.g. a log level for the demo)."""
    code_root: Path | None = None
    parameter_values: Mapping[str, str] = field(default_factory=dict)


class VirtualClock:
    """Wall-clock time that a caller driving the runtime step by step may move forward instead of sleeping."""

    def __init__(self) -> None:
        self._offset = 0.0

    def __call__(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds


class LocalRuntime:
    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        self.clock = VirtualClock()
        self._clock = self.clock
        self.faults = FaultInjector()
        self.event_source_mappings = EventSourceMappingApi()
        """What the AWS endpoint answers to Lambda's ListEventSourceMappings and GetEventSourceMapping."""
        self._server: LocalAwsServer | None = None
        self._clients: dict[str, Any] = {}
        self.apis: dict[str, HttpApiServer] = {}
        self.host: FunctionHost | None = None
        self.mappings: list[StreamMappingRunner] = []
        """The DynamoDB stream mappings the runtime runs."""
        self.queue_mappings: list[QueueMappingRunner] = []
        """The SQS queue mappings the runtime runs."""
        self.schedules: ScheduleRunner | None = None
        self.alarms: AlarmEvaluator | None = None
        """The template's alarms, evaluated by `evaluate_alarms()` (each second in the background)."""
        self._alarms_due = 0.0
        self._rounds = PollActivity()
        """Rounds of the background poller (every mapping polled once): what `wait_until_idle` waits on."""
        self.stack: ProvisionedStack | None = None
        self.outputs: dict[str, Any] = {}
        self._stop = threading.Event()
        self._corrections = contextlib.ExitStack()
        self._poller: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> LocalRuntime:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeStateError("the runtime is already started")
        template = Template.load(self.options.template_path)
        # A runtime started again after stop() must not keep the previous start's mappings (their clients are
        # closed and they would poll the stream a second time).
        self.mappings = []
        self.queue_mappings = []
        self.outputs = {}
        self._stop.clear()
        # moto's TransactWriteItems is not atomic for a stream reader: corrected while the runtime runs.
        self._corrections = contextlib.ExitStack()
        self._corrections.enter_context(atomic_transactions())
        self._server = LocalAwsServer(
            self.faults,
            self.options.host,
            self.options.aws_port,
            event_source_mappings=self.event_source_mappings,
            control=ControlApi(self.faults, lambda: mapping_report(self.mappings, self.queue_mappings)),
        )
        self._server.start()
        try:
            self._reset_moto()
            self._provision(template)
            if self.options.background:
                self._poller = threading.Thread(target=self._poll_forever, name="outbox-local-poller")
                self._poller.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
            self._poller = None
        for api in self.apis.values():
            api.stop()
        self.apis.clear()
        if self.host is not None:
            self.host.close()
        self.event_source_mappings.clear()
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._corrections.close()

    # --- what a user of the runtime needs ------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeStateError("the runtime is not started")
        return self._server.endpoint_url

    @property
    def api_url(self) -> str | None:
        return next((api.url for api in self.apis.values()), None)

    def client(self, service: str) -> Any:
        """A boto3 client on the local endpoint (cached; closed when the runtime stops). Armed faults apply to
        it as to the functions' own clients."""
        return self._client(service, internal=False)

    def _internal_client(self, service: str) -> Any:
        """A client for what AWS itself does around the functions (the mappings' polls and deletes, the
        on-failure sends, provisioning, metrics): a fault armed on a service never fails these, so an outage
        hits the functions' calls, as on AWS."""
        return self._client(service, internal=True)

    def _client(self, service: str, *, internal: bool) -> Any:
        key = f"{service}/internal" if internal else service
        if key not in self._clients:
            self._clients[key] = boto3.client(
                service,
                endpoint_url=self.endpoint_url,
                region_name=self.options.region,
                config=Config(
                    retries={"mode": "standard", "total_max_attempts": 3},
                    user_agent_extra=INTERNAL_USER_AGENT if internal else None,
                ),
                **LOCAL_CREDENTIALS,
            )
        return self._clients[key]

    def invoke(self, function: str, event: Any) -> InvocationResult:
        if self.host is None:
            raise RuntimeStateError("the runtime is not started")
        return self.host.invoke(function, event)

    def drain_streams(self, max_steps: int = 10_000) -> None:
        """Run every event source mapping, streams and queues, until nothing is left to do (for callers
        driving without a thread).

        When a mapping only waits (batching window, retry delay), the virtual clock moves forward instead of
        the caller sleeping, so tests stay fast and deterministic. A queue message left invisible by a
        failed invocation is not work: it comes back when moto's visibility timeout (real time) ends.
        """
        if self.options.background:
            raise RuntimeStateError("drain_streams drives the mappings itself: start with background=False")
        for _ in range(max_steps):
            reports = [report for mapping in self._pollers() for report in mapping.poll_once()]
            if all(report.kind is StepKind.IDLE for report in reports):
                return
            if all(report.kind in {StepKind.IDLE, StepKind.WAITING} for report in reports):
                self.clock.advance(_WAIT_STEP_S)
        raise RuntimeStateError(f"event source mappings still busy after {max_steps} steps")

    def wait_until_idle(self, timeout_s: float) -> bool:
        """With the background poller: block until a whole round of polls, started after this call, found
        nothing to do in any mapping. One round for all: a mapping idle on its own may still get work from a
        function another mapping invokes later in the same round."""
        return self._rounds.wait_until_idle(timeout_s, after=self._rounds.mark())

    def resource_names(self) -> list[tuple[str, str, str]]:
        """(logical id, type, physical id) of every provisioned resource."""
        if self.stack is None:
            return []
        return [(lid, kind, res.ref) for lid, (kind, res) in self.stack.resources.items()]

    def function_environment(self) -> dict[str, str]:
        """What every hosted function gets on top of its template variables."""
        return {**environment(self.endpoint_url, self.options.region), "POWERTOOLS_TRACE_DISABLED": "true"}

    # --- internals -----------------------------------------------------------------------------------

    def _reset_moto(self) -> None:
        # moto's backends are process-wide: start from an empty account, as a fresh stack would.
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - our own loopback server
            pass

    def _provision(self, template: Template) -> None:
        resolver = Resolver(
            template,
            region=self.options.region,
            stack_name=self.options.stack_name,
            parameter_values=self.options.parameter_values,
        )
        provisioner = Provisioner(
            template,
            resolver,
            self._internal_client,
            code_root_override=self.options.code_root,
            api_endpoint=self._open_api,
            retry_delay_s=self.options.retry_delay_s,
        )
        self.stack = provisioner.provision()
        # Created here, on the starting thread: invocations run on the poller's and the API's threads.
        metrics = EmfMetricsForwarder(self._internal_client("cloudwatch"))
        self.host = FunctionHost(
            self.function_environment(), self.options.function_environment, on_output=metrics.forward
        )
        for spec in self.stack.functions:
            self.host.register(spec)
        self.host.open()
        stages = {
            str(resource.properties.get("ApiId", {}).get("Ref")): str(resource.properties.get("StageName"))
            for resource in template.resources.values()
            if resource.type == "AWS::ApiGatewayV2::Stage"
        }
        for route in self.stack.routes:
            api = self.apis[self.stack.resources[route.api_logical_id][1].ref]
            api.stage = stages.get(route.api_logical_id, "$default")
            api.add_route(Route(route.route_key, route.function_arn))
        host = self.host
        published: list[Published] = []
        for mapping in self.stack.mappings:
            runner = None
            if mapping.enabled:
                destination = mapping.settings.on_failure_destination_arn
                runner = StreamMappingRunner(
                    mapping.logical_id,
                    mapping.settings,
                    streams_client=self._internal_client("dynamodbstreams"),
                    invoke=_invoker(host, mapping.function_arn),
                    send_to_destination=destination_sender(self._internal_client, destination)
                    if destination
                    else None,
                    clock=self._clock,
                    region=self.options.region,
                    starting_position=mapping.starting_position,
                )
                self.mappings.append(runner)
            published.append(PublishedMapping(mapping, runner, last_modified=self._clock()))
        for queue_mapping in self.stack.queue_mappings:
            queue_runner = None
            if queue_mapping.enabled:
                queue_runner = QueueMappingRunner(
                    queue_mapping.logical_id,
                    queue_mapping.settings,
                    sqs_client=self._internal_client("sqs"),
                    invoke=_invoker(host, queue_mapping.settings.function_arn),
                    clock=self._clock,
                )
                self.queue_mappings.append(queue_runner)
            published.append(PublishedQueueMapping(queue_mapping, queue_runner, last_modified=self._clock()))
        self.event_source_mappings.publish(published)
        self.schedules = ScheduleRunner(
            host.invoke, time.monotonic, region=self.options.region, speedup=self.options.schedule_speedup
        )
        self.alarms = AlarmEvaluator(
            self._internal_client("cloudwatch"),
            self._internal_client("sqs"),
            self._internal_client("sns"),
            iterator_age_ms=lambda function: iterator_age_ms(self.mappings, function),
            errors=lambda function: host.errors[function],
            clock=self._clock,
            speedup=self.options.schedule_speedup,
        )
        for schedule in self.stack.schedules:
            self.schedules.add(
                schedule.rule_name,
                schedule.rule_arn,
                schedule.expression,
                schedule.function_arn,
                schedule.target_input,
            )
        self.outputs = {name: self._output(resolver, spec) for name, spec in template.outputs.items()}
        description = template.body.get("Description")
        register_stack(
            self._internal_client("cloudformation"),
            self.options.stack_name,
            stack_outputs(template, resolver, self.outputs),
            description=description if isinstance(description, str) else None,
        )
        for api in self.apis.values():
            api.start()

    def _open_api(self, api_id: str) -> str:
        port = self.options.api_port if not self.apis else 0
        api = HttpApiServer(api_id, self._invoke_for_api, host=self.options.host, port=port)
        self.apis[api_id] = api
        return api.url

    def _invoke_for_api(self, function_arn: str, event: dict[str, Any]) -> InvocationResult:
        if self.host is None:
            raise RuntimeStateError("the runtime is not started")
        return self.host.invoke(function_arn, event)

    def _output(self, resolver: Resolver, spec: Mapping[str, Any]) -> Any:
        value = resolver.resolve(spec.get("Value"))
        if isinstance(value, str):
            # CDK builds API URLs as https://{apiId}.execute-api.{region}.{suffix}/: point them at localhost.
            for api_id, api in self.apis.items():
                remote = f"https://{api_id}.execute-api.{self.options.region}.amazonaws.com"
                value = value.replace(remote, api.url)
        return value

    def evaluate_alarms(self) -> list[Transition]:
        """Evaluate every alarm now (the background poller does it each second)."""
        if self.alarms is None:
            raise RuntimeStateError("the runtime is not started")
        return self.alarms.tick()

    def _pollers(self) -> list[StreamMappingRunner | QueueMappingRunner]:
        return [*self.mappings, *self.queue_mappings]

    def _poll_forever(self) -> None:
        while not self._stop.is_set():
            busy = False
            this_round = self._rounds.begin()
            idle = True
            for mapping in self._pollers():
                try:
                    reports = mapping.poll_once()
                except Exception:
                    logger.exception("event source mapping %s failed to poll", mapping.name)
                    idle = False
                    continue
                busy = busy or any(r.kind not in {StepKind.IDLE, StepKind.WAITING} for r in reports)
                idle = idle and all(r.kind is StepKind.IDLE for r in reports)
            self._rounds.end(this_round, idle=idle)
            if self.schedules is not None:
                self.schedules.tick()
            if self.alarms is not None and time.monotonic() >= self._alarms_due:
                self._alarms_due = time.monotonic() + ALARM_TICK_S
                try:
                    self.alarms.tick()
                except Exception:
                    logger.exception("the alarms could not be evaluated")
            if not busy:
                self._stop.wait(self.options.poll_interval_s)


def _invoker(host: FunctionHost, function_arn: str) -> Callable[[dict[str, Any]], InvocationResult]:
    def invoke(event: dict[str, Any]) -> InvocationResult:
        return host.invoke(function_arn, event)

    return invoke

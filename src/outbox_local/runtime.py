"""The local runtime: one object that starts everything the template describes, and stops it cleanly."""

from __future__ import annotations

import contextlib
import logging
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.config import Config

from outbox.aws import TIMEOUT_SCALE_VARIABLE
from outbox_local.alarms import AlarmEvaluator, Transition
from outbox_local.aws_server import LocalAwsServer
from outbox_local.background import Background
from outbox_local.control_api import ControlApi, mapping_report
from outbox_local.emf_metrics import EmfMetricsForwarder
from outbox_local.endpoint import LOCAL_CREDENTIALS, environment
from outbox_local.errors import EndpointUnavailableError, RuntimeStateError
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
from outbox_local.moto_isolation import isolated_requests
from outbox_local.moto_performance import lighter_moto
from outbox_local.moto_sns_sizes import topic_message_sizes
from outbox_local.moto_streams import InProcessStreams
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.persistence import Persistence, StateNotSavedError, moto_state
from outbox_local.persistence.runtime_state import SavedRuntime, SavedStack, mapping_key, same_stack
from outbox_local.provisioning import ProvisionedStack, Provisioner
from outbox_local.provisioning.cloudformation import register_stack, stack_outputs
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.runtime_options import RuntimeOptions, VirtualClock
from outbox_local.schedules import ScheduleRunner
from outbox_local.stream_mapping import NOTHING_DONE, StepKind
from outbox_local.stream_poller import (
    ShardPosition,
    StreamMappingRunner,
    destination_sender,
    iterator_age_ms,
)
from outbox_local.template import Resolver, Template
from outbox_local.trace_journal import TraceJournal

__all__ = ["ALARM_TICK_S", "LocalRuntime", "RuntimeOptions", "VirtualClock"]

logger = logging.getLogger("outbox_local.runtime")
_WAIT_STEP_S = 0.05
_LEAST_ADVANCE_S = 0.001
"""drain_streams always moves the clock on while waiting, so a due time a rounding short is still reached."""
ALARM_TICK_S = 1.0
MAX_CONCURRENT_BATCHES = 1000
"""A queue mapping's concurrency without ScalingConfig: Lambda's most (the function's own limit is lower)."""


class LocalRuntime:
    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        self.clock = VirtualClock()
        self._clock = self.clock
        self.faults = FaultInjector()
        self.traces = TraceJournal()  # what `outbox trace EVENT_ID` shows
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
        self._metrics: EmfMetricsForwarder | None = None
        self._background: Background | None = None
        self.stack: ProvisionedStack | None = None
        self._template_body: Mapping[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self._corrections = contextlib.ExitStack()
        self.persistence: Persistence | None = None
        """Set when started with a state directory (`outbox_local.persistence`)."""
        self._resume_at: dict[str, tuple[ShardPosition, ...]] = {}
        self.restored = False
        """Started from a state directory's snapshot (not provisioned anew)."""
        self.state_figures = ""
        """What keeping the state cost, once stopped (`Persistence.figures`)."""

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
        snapshot = None
        self.restored = False
        # A runtime started again after stop() must not keep the previous start's mappings (their clients are
        # closed and they would poll the stream a second time).
        self.mappings = []
        self.queue_mappings = []
        self.outputs = {}
        # moto's TransactWriteItems is not atomic for a stream reader and it isolates no request from another
        # (both corrected while the runtime runs); its hot paths under load cost much (made cheap).
        self._corrections = contextlib.ExitStack()
        self._corrections.enter_context(atomic_transactions())
        self._corrections.enter_context(isolated_requests())
        self._corrections.enter_context(topic_message_sizes())
        self._corrections.enter_context(lighter_moto())
        # --- state that survives: claim the directory, read what to restore (before anything listens)
        saved: SavedRuntime | None = None
        self.persistence = None
        if self.options.state_dir is not None:
            self.persistence = Persistence(self.options.state_dir, fresh=self.options.fresh_state)
            try:
                snapshot = self.persistence.open()
            except BaseException:
                self.persistence.close()
                self.persistence = None
                self._corrections.close()
                raise
            saved = snapshot.runtime if snapshot is not None else None
            if saved is not None:
                same_stack(saved.stacks[0], self.options.stack_name, template.body, str(template.path))
        self._server = LocalAwsServer(
            self.faults,
            self.options.host,
            self.options.aws_port,
            event_source_mappings=self.event_source_mappings,
            control=ControlApi(
                self.faults,
                lambda: mapping_report(self.mappings, self.queue_mappings),
                lambda: {"region": self.options.region, "stack_name": self.options.stack_name},
                self.traces.chain,
            ),
            cut=self.persistence.wrap if self.persistence is not None else None,
        )
        try:
            self._server.start()
            self._reset_moto()
            if saved is not None and snapshot is not None:
                moto_state.restore(snapshot.moto)
                self._resume_at = dict(saved.positions)
                self._restore(template, saved.stacks[0])
                self.restored = True
            else:
                self._provision(template)
            if self.persistence is not None:
                self.persistence.start(self._saved_runtime)
            if self.options.background:
                self._background = Background(
                    self._pollers(),
                    fire_schedules=self.schedules.tick if self.schedules else lambda: 0,
                    evaluate_alarms=self.evaluate_alarms,
                    poll_interval_s=self.options.poll_interval_s,
                    alarm_interval_s=ALARM_TICK_S,
                )
                self._background.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._background is not None:
            self._background.request_stop()
        for api in self.apis.values():
            api.stop()
        self.apis.clear()
        if self.host is not None:
            # Before waiting for the pollers: closing ends the worker processes, so an invocation under way
            # fails at once instead of holding Ctrl-C up until its function's timeout.
            self.host.close()
        if self._background is not None:
            self._background.join()
            self._background = None
        if self.persistence is not None:
            # Nothing runs any more: the last cut holds everything done, then the directory is let go.
            self.persistence.close()
            self.state_figures = self.persistence.figures()
            self.persistence = None
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
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
            if all(report.kind in NOTHING_DONE for report in reports):
                # On to when something is next due (a window's end, a retry, a throttle's back-off).
                due = [report.due_at for report in reports if report.due_at is not None]
                wait = min(due) - self.clock() if due else _WAIT_STEP_S
                self.clock.advance(max(wait, _LEAST_ADVANCE_S))
        raise RuntimeStateError(f"event source mappings still busy after {max_steps} steps")

    def wait_until_idle(self, timeout_s: float) -> bool:
        """In the background: block until every mapping was idle at once, after this call and after any work
        (`outbox_local.background`)."""
        if self._background is None:
            raise RuntimeStateError("wait_until_idle waits for the background threads: use background=True")
        return self._background.wait_until_idle(timeout_s)

    def resource_names(self) -> list[tuple[str, str, str]]:
        """(logical id, type, physical id) of every provisioned resource."""
        if self.stack is None:
            return []
        return [(lid, kind, res.ref) for lid, (kind, res) in self.stack.resources.items()]

    def function_environment(self) -> dict[str, str]:
        """What every hosted function gets on top of its template variables."""
        return {
            **environment(self.endpoint_url, self.options.region),
            "POWERTOOLS_TRACE_DISABLED": "true",
            TIMEOUT_SCALE_VARIABLE: str(self.options.timeout_scale),
        }

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
        self._attach(template, resolver, provisioner.provision())
        description = template.body.get("Description")
        register_stack(
            self._internal_client("cloudformation"),
            self.options.stack_name,
            stack_outputs(template, resolver, self.outputs),
            description=description if isinstance(description, str) else None,
        )
        for api in self.apis.values():
            api.start()

    def _restore(self, template: Template, saved: SavedStack) -> None:
        """Run a stack moto's restored backends already hold: nothing provisioned (its stack in
        CloudFormation included), the HTTP APIs served again, the outputs resolved again on them."""
        resolver = Resolver(
            template,
            region=self.options.region,
            stack_name=self.options.stack_name,
            parameter_values=self.options.parameter_values,
        )
        for logical_id, (kind, resolved) in saved.provisioned.resources.items():
            resolver.resources[logical_id] = resolved
            if kind == "AWS::ApiGatewayV2::Api":
                self._open_api(resolved.ref)
        self._attach(template, resolver, saved.provisioned)
        for api in self.apis.values():
            api.start()

    def _saved_runtime(self) -> SavedRuntime:
        """The runtime's part of a cut (read while no request runs: `outbox_local.persistence`)."""
        if self.stack is None:
            raise RuntimeStateError("the runtime is not started")
        stack = SavedStack(
            name=self.options.stack_name,
            template_body=self._template_body,
            template_path=str(self.options.template_path),
            parameter_values=dict(self.options.parameter_values),
            provisioned=self.stack,
        )
        positions = {**self._resume_at}
        for runner in self.mappings:
            positions[mapping_key(self.options.stack_name, runner.name)] = tuple(runner.positions())
        return SavedRuntime(stacks=(stack,), positions=positions)

    def _attach(self, template: Template, resolver: Resolver, stack: ProvisionedStack) -> None:
        """The runtime's side of a provisioned stack: functions, mappings, routes, schedules, alarms."""
        self.stack = stack
        self._template_body = template.body
        # Created here, on the starting thread: invocations run on the pollers' and the API's threads.
        metrics = EmfMetricsForwarder(
            self._internal_client("cloudwatch"), in_background=self.options.background
        )
        self._metrics = metrics
        self.host = FunctionHost(
            self.function_environment(),
            self.options.function_environment,
            on_output=metrics.forward,
            max_environments=self.options.max_environments,
            on_invocation=self.traces.record,
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
            key = mapping_key(self.options.stack_name, mapping.logical_id)
            runner = None
            if mapping.enabled:
                destination = mapping.settings.on_failure_destination_arn
                runner = StreamMappingRunner(
                    mapping.logical_id,
                    mapping.settings,
                    streams_client=InProcessStreams(
                        self.options.region,
                        visible=self.persistence.visible if self.persistence is not None else None,
                    ),
                    invoke=_invoker(host, mapping.function_arn),
                    send_to_destination=destination_sender(self._internal_client, destination)
                    if destination
                    else None,
                    clock=self._clock,
                    region=self.options.region,
                    starting_position=mapping.starting_position,
                    resume_at=self._resume_at.get(key, ()),
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
                    # As Lambda scales a queue's pollers: up to the function's concurrency and the mapping's
                    # ScalingConfig.MaximumConcurrency.
                    max_concurrent_batches=min(
                        host.concurrency(queue_mapping.settings.function_arn),
                        queue_mapping.maximum_concurrency or MAX_CONCURRENT_BATCHES,
                    ),
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

    def _open_api(self, api_id: str) -> str:
        port = self.options.api_port if not self.apis else 0
        try:
            api = HttpApiServer(api_id, self._invoke_for_api, host=self.options.host, port=port)
        except OSError as error:
            raise EndpointUnavailableError(
                f"the local runtime cannot serve the HTTP API {api_id} on {self.options.host}:{port}: "
                f"{error.strerror or error}. Is another `outbox local up` running? Stop it, or pass "
                "--api-port 0 for a free port"
            ) from None
        self.apis[api_id] = api
        return api.url

    def _invoke_for_api(self, function_arn: str, event: dict[str, Any]) -> InvocationResult:
        if self.host is None:
            raise RuntimeStateError("the runtime is not started")
        result = self.host.invoke(function_arn, event)
        if self.persistence is not None:
            # Durable answers: what the invocation did is on disk before the client hears of it.
            try:
                self.persistence.wait_saved()
            except StateNotSavedError as error:
                return InvocationResult(error_type=type(error).__name__, error_message=str(error))
        return result

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


def _invoker(host: FunctionHost, function_arn: str) -> Callable[[dict[str, Any]], InvocationResult]:
    def invoke(event: dict[str, Any]) -> InvocationResult:
        return host.invoke(function_arn, event)

    return invoke

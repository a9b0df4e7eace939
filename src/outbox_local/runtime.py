"""The local runtime: one object that starts everything the template describes, and stops it cleanly."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from outbox.aws import TIMEOUT_SCALE_VARIABLE
from outbox_local.alarms import AlarmEvaluator, RegionalAlarms, Transition
from outbox_local.aws_server import LocalAwsServer
from outbox_local.background import Background
from outbox_local.cloudformation.api import CloudFormationApi
from outbox_local.cloudformation.deployer import RuntimeStackHost
from outbox_local.cloudformation.service import CloudFormationService
from outbox_local.control_api import ControlApi, mapping_report
from outbox_local.drain import drain
from outbox_local.emf_metrics import EmfMetricsForwarder
from outbox_local.endpoint import environment
from outbox_local.endpoint_clients import EndpointClients
from outbox_local.errors import RuntimeStateError
from outbox_local.event_source_mapping_api import (
    EventSourceMappingApi,
)
from outbox_local.faults import FaultInjector
from outbox_local.functions import FunctionHost
from outbox_local.http_api import HttpApiServer
from outbox_local.invocation import InvocationResult
from outbox_local.local_apis import LocalApis
from outbox_local.moto_isolation import isolated_requests
from outbox_local.moto_performance import lighter_moto
from outbox_local.moto_sns_sizes import topic_message_sizes
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.persistence import Persistence
from outbox_local.persistence.runtime_state import (
    keep_runtime,
    open_state,
    restore_moto,
    resume_runtime,
    start_up_stack,
)
from outbox_local.provisioning import ProvisionedStack
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.region_cuts import RegionCuts
from outbox_local.replication import Replicator
from outbox_local.runtime_options import RuntimeOptions, VirtualClock
from outbox_local.schedules import ScheduleRunner
from outbox_local.stack_set import StackSet
from outbox_local.stacks import DeployedStack, StackDefinition
from outbox_local.stream_poller import StreamMappingRunner, iterator_age_ms
from outbox_local.template import Template
from outbox_local.trace_journal import TraceJournal

__all__ = [
    "ALARM_TICK_S",
    "DeployedStack",
    "LocalRuntime",
    "RuntimeOptions",
    "StackDefinition",
    "VirtualClock",
]

logger = logging.getLogger("outbox_local.runtime")
ALARM_TICK_S = 1.0


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
        self._clients = EndpointClients(lambda: self.endpoint_url, options.region)
        self._apis = LocalApis(self._invoke_for_api, host=options.host, first_port=options.api_port)
        self.host: FunctionHost | None = None
        self._stack_set: StackSet | None = None
        self._work_dir: tempfile.TemporaryDirectory[str] | None = None
        self.schedules: ScheduleRunner | None = None
        self.alarms: AlarmEvaluator | None = None
        """The template's alarms, evaluated by `evaluate_alarms()` (each second in the background)."""
        self.regional_alarms = RegionalAlarms(self._alarm_evaluator)
        """The alarms of the stacks of other regions than the runtime's."""
        self._metrics: EmfMetricsForwarder | None = None
        self._background: Background | None = None
        self._corrections = contextlib.ExitStack()
        self.replication = Replicator(
            lambda region: self._internal_client("dynamodb", region),
            lag_s=options.replication_lag_s,
            clock=self.clock,
        )
        """Between the replicas of the stacks' global tables (`outbox_local.replication`): on a thread of its
        own in the background, stepped by `drain_streams()` otherwise."""
        self._cuts = RegionCuts(
            self.replication, options.region, stacks=lambda: self._stack_set, host=lambda: self.host
        )
        """Regions cut off (`cut_region`): their functions, pollers and schedules stop, replication queues."""
        self.persistence: Persistence | None = None  # with a state directory (`outbox_local.persistence`)
        self.restored = False  # started from a state directory's snapshot
        self.state_figures = ""  # what keeping the state cost, once stopped
        # CloudFormation on the AWS endpoint (`cdk deploy` into the runtime): stacks' events, change sets.
        self.cloudformation = CloudFormationService(
            RuntimeStackHost(self, self._internal_client, self._started_stacks)
        )

    # --- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> LocalRuntime:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeStateError("the runtime is already started")
        template = Template.load(self.options.template_path) if self.options.template_path else None
        self.persistence, snapshot = open_state(self.options)
        self.restored = snapshot is not None
        # moto's TransactWriteItems is not atomic for a stream reader and it isolates no request from another
        # (both corrected while the runtime runs); its hot paths under load cost much (made cheap).
        self._corrections = contextlib.ExitStack()
        self._corrections.enter_context(atomic_transactions())
        self._corrections.enter_context(isolated_requests())
        self._corrections.enter_context(topic_message_sizes())
        self._corrections.enter_context(lighter_moto())
        self._server = LocalAwsServer(
            self.faults,
            self.options.host,
            self.options.aws_port,
            event_source_mappings=self.event_source_mappings,
            cloudformation=CloudFormationApi(self.cloudformation),
            control=ControlApi(
                self.faults,
                lambda: mapping_report(self.mappings, self.queue_mappings),
                lambda: {"region": self.options.region, "stack_name": self.options.stack_name},
                self.traces.chain,
                regions=self._cuts,
            ),
            cut=self.persistence.wrap if self.persistence is not None else None,
        )
        self.cloudformation.forget()  # a start after stop(): the earlier start's stacks are gone
        self.replication.reset()
        self._cuts.clear()
        try:
            restore_moto(snapshot)  # moto's backends are process-wide: an empty account, or the saved one
            self._server.start()
            self._open_machinery()
            if snapshot is not None:
                resume_runtime(snapshot, self, self._started_stacks(), self._apis)
            if template is not None:
                start_up_stack(self, template, self.options.stack_name, None)
            for more in self.options.more_stacks:
                region = None if more.region in {None, self.options.region} else more.region
                start_up_stack(self, Template.load(more.template_path), more.name, region)
            if self.persistence is not None:
                keep_runtime(self.persistence, self, self._apis)
            if self._background is not None:
                self._background.start()
                self.replication.start(self.options.poll_interval_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # First: an operation under way (a deploy) ends while everything it attaches to still runs.
        self.cloudformation.close()
        if self._background is not None:
            self._background.request_stop()
        self._apis.stop()
        if self.host is not None:
            # Before waiting for the pollers: closing ends the worker processes, so an invocation under way
            # fails at once instead of holding Ctrl-C up until its function's timeout.
            self.host.close()
        if self._background is not None:
            self._background.join()
            self._background = None
        self.replication.stop()
        if self.persistence is not None:
            # Nothing runs any more: a last cut holds everything done, then the directory is let go.
            self.persistence.close()
            self.state_figures = self.persistence.figures()
            self.persistence = None
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        self.event_source_mappings.clear()
        # A runtime started again after stop() must not keep this start's stacks (their mappings' clients are
        # closed and they would poll the stream a second time).
        self._stack_set = None
        self._clients.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._corrections.close()
        if self._work_dir is not None:
            self._work_dir.cleanup()
            self._work_dir = None

    # --- what a user of the runtime needs ------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeStateError("the runtime is not started")
        return self._server.endpoint_url

    @property
    def work_dir(self) -> Path:
        """Where the runtime keeps files: the state directory, or a temporary one for this run."""
        if self.options.state_dir is not None:
            self.options.state_dir.mkdir(parents=True, exist_ok=True)
            return self.options.state_dir
        if self._work_dir is None:
            self._work_dir = tempfile.TemporaryDirectory(prefix="outbox-local-")
        return Path(self._work_dir.name)

    @property
    def stack(self) -> ProvisionedStack | None:
        """What the start-up stack (`options.stack_name`, else the first) became, if any."""
        main = self._main_stack()
        return main.provisioned if main is not None else None

    @property
    def outputs(self) -> dict[str, Any]:
        """The start-up stack's resolved outputs."""
        main = self._main_stack()
        return main.outputs if main is not None else {}

    def _main_stack(self) -> DeployedStack | None:
        stacks = self.stacks
        return stacks.get(self.options.stack_name) or next(iter(stacks.values()), None)

    @property
    def mappings(self) -> list[StreamMappingRunner]:
        """The DynamoDB stream mappings the runtime runs, every stack's."""
        return [runner for deployed in list(self.stacks.values()) for runner in deployed.mappings]

    @property
    def queue_mappings(self) -> list[QueueMappingRunner]:
        """The SQS queue mappings the runtime runs, every stack's."""
        return [runner for deployed in list(self.stacks.values()) for runner in deployed.queue_mappings]

    @property
    def api_url(self) -> str | None:
        """The start-up stack's HTTP API (its first), if it has one."""
        main = self._main_stack()
        ids = main.api_ids if main else []
        served = [self._apis.servers[i].url for i in ids if i in self._apis.servers]
        return served[0] if served else None

    @property
    def apis(self) -> dict[str, HttpApiServer]:
        """Every stack's HTTP APIs, by API id."""
        return self._apis.servers

    def client(self, service: str) -> Any:
        """A boto3 client on the local endpoint (cached; closed when the runtime stops). Armed faults apply to
        it as to the functions' own clients."""
        return self._clients.client(service)

    def _internal_client(self, service: str, region: str | None = None) -> Any:
        """A client armed faults never fail: an outage hits the functions' calls, as on AWS. In the runtime's
        region unless another is named."""
        return self._clients.client(service, internal=True, region=region)

    def invoke(self, function: str, event: Any) -> InvocationResult:
        if self.host is None:
            raise RuntimeStateError("the runtime is not started")
        return self.host.invoke(function, event)

    def drain_streams(self, max_steps: int = 10_000) -> None:
        """Run every event source mapping, streams and queues, until nothing is left to do (for callers
        driving without a thread).

        Runs `drain.drain`: the virtual clock moves forward instead of the caller waiting.
        """
        if self.options.background:
            raise RuntimeStateError("drain_streams drives the mappings itself: start with background=False")
        drain(self._cuts.pollers, self.replication, self.persistence, self.clock, max_steps)

    def wait_until_idle(self, timeout_s: float) -> bool:
        """In the background: block until every mapping was idle at once, after this call and after any work
        (`outbox_local.background`)."""
        if self._background is None:
            raise RuntimeStateError("wait_until_idle waits for the background threads: use background=True")
        return self._background.wait_until_idle(timeout_s)

    def resource_names(self) -> list[tuple[str, str, str]]:
        """(logical id, type, physical id) of every resource the start-up stack provisioned."""
        stack = self.stack
        if stack is None:
            return []
        return [(lid, kind, res.ref) for lid, (kind, res) in stack.resources.items()]

    def function_environment(self) -> dict[str, str]:
        """What every hosted function gets on top of its template variables."""
        return {
            **environment(self.endpoint_url, self.options.region),
            "POWERTOOLS_TRACE_DISABLED": "true",
            TIMEOUT_SCALE_VARIABLE: str(self.options.timeout_scale),
        }

    # --- internals -----------------------------------------------------------------------------------

    def _open_machinery(self) -> None:
        """What every stack's functions, mappings, schedules and alarms share."""
        # Created here, on the starting thread: invocations run on the pollers' and the API's threads.
        metrics = EmfMetricsForwarder(
            self._internal_client("cloudwatch"),
            in_background=self.options.background,
            regional=lambda function: self._internal_client("cloudwatch", self._cuts.of_function(function)),
        )
        self._metrics = metrics
        host = FunctionHost(
            self.function_environment(),
            self.options.function_environment,
            on_output=metrics.forward,
            max_environments=self.options.max_environments,
            on_invocation=self.traces.record,
            region_cut=self._cuts.is_cut,
        )
        self.host = host
        host.open()
        self.schedules = ScheduleRunner(
            host.invoke,
            time.monotonic,
            region=self.options.region,
            speedup=self.options.schedule_speedup,
            paused=lambda function_arn: self._cuts.is_cut(function_arn.split(":")[3]),
        )
        self.alarms = self._alarm_evaluator(None)
        self.regional_alarms = RegionalAlarms(self._alarm_evaluator)
        if self.options.background:
            self._background = Background(
                [],
                fire_schedules=self.schedules.tick,
                evaluate_alarms=self.evaluate_alarms,
                poll_interval_s=self.options.poll_interval_s,
                alarm_interval_s=ALARM_TICK_S,
                paused=lambda poller: self._cuts.of_poller(poller) in self.cut_regions,
            )
        self._stack_set = StackSet(
            host=host,
            schedules=self.schedules,
            background=self._background,
            apis=self._apis,
            event_source_mappings=self.event_source_mappings,
            clients=self._internal_client,
            clock=self._clock,
            region=self.options.region,
            retry_delay_s=self.options.retry_delay_s,
            visible=self.persistence.visible if self.persistence is not None else None,
            regional_clients=self._internal_client,
            global_tables=self.replication,
        )

    # --- stacks (`outbox_local.stack_set`) ---------------------------------------------------------

    @property
    def stacks(self) -> dict[str, DeployedStack]:
        """The stacks the runtime holds, by name, in the order they were created."""
        return self._stack_set.stacks if self._stack_set is not None else {}

    @property
    def stacks_lock(self) -> threading.RLock:
        """Held while a stack is created, attached or detached (`stack_set.StackSet.attach` runs a restored
        one)."""
        return self._started_stacks().lock

    def create_stack(self, definition: StackDefinition) -> DeployedStack:
        return self._started_stacks().create(definition)

    def detach_stack(self, name: str) -> DeployedStack:
        return self._started_stacks().detach(name)

    def _started_stacks(self) -> StackSet:
        if self._stack_set is None:
            raise RuntimeStateError("the runtime is not started")
        return self._stack_set

    def _invoke_for_api(self, function_arn: str, event: dict[str, Any]) -> InvocationResult:
        if self.host is None:
            raise RuntimeStateError("the runtime is not started")
        result = self.host.invoke(function_arn, event)
        # Durable answers: what the invocation did is on disk before the client hears of it.
        return self.persistence.durable(result) if self.persistence is not None else result

    def evaluate_alarms(self) -> list[Transition]:
        """Evaluate every alarm now, in every region (the background poller does it each second)."""
        if self.alarms is None:
            raise RuntimeStateError("the runtime is not started")
        # CloudWatch of a region cut off is down too: its alarms are not evaluated.
        transitions = [] if self._cuts.is_cut(self.options.region) else self.alarms.tick()
        others = [r for r in self.regions() if r != self.options.region and not self._cuts.is_cut(r)]
        return transitions + self.regional_alarms.tick(others)

    def _alarm_evaluator(self, region: str | None) -> AlarmEvaluator:
        """The alarms of one region (None: the runtime's)."""
        host = self.host
        if host is None:
            raise RuntimeStateError("the runtime is not started")
        return AlarmEvaluator(
            self._internal_client("cloudwatch", region),
            self._internal_client("sqs", region),
            self._internal_client("sns", region),
            iterator_age_ms=lambda function: iterator_age_ms(self.mappings, function),
            errors=lambda function: host.errors[function],
            clock=self._clock,
            speedup=self.options.schedule_speedup,
        )

    # --- regions (`outbox_local.region_cuts`; a region cut off: docs/local.md, "Two regions locally") -----

    def cut_region(self, region: str) -> None:
        """Cut `region` off, as in a regional outage (`RegionCuts.cut_region`)."""
        self._cuts.cut_region(region)

    def restore_region(self, region: str) -> None:
        """Bring `region` back (`RegionCuts.restore_region`)."""
        self._cuts.restore_region(region)

    @property
    def cut_regions(self) -> frozenset[str]:
        return self._cuts.regions

    def regions(self) -> list[str]:
        """The regions the runtime holds something in: its own, its stacks', its global tables' replicas."""
        return self._cuts.held()

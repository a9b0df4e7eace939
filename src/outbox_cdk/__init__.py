"""CDK constructs of the Transactional Outbox.

The whole pattern in one construct (table, publisher, sweeper, destinations, failure queues, monitoring,
operator policy, the stack outputs the `outbox` commands read)::

    from outbox_cdk import Outbox, OutboxProps

    outbox = Outbox(self, "Outbox")          # or Outbox(self, "Outbox", OutboxProps(...))
    writer = lambda_.Function(..., environment=dict(outbox.writer_environment))  # OUTBOX_TABLE_NAME
    outbox.grant_write(writer)               # what the library's writer needs on the table, nothing more

Or compose the finer constructs yourself::

    from outbox_cdk import OutboxMonitoring, OutboxPublisher, OutboxSweeper, OutboxTable

    table = OutboxTable(self, "Outbox")                  # or your own table with a NEW_IMAGE stream
    publisher = OutboxPublisher(self, "Publisher", table=table, topic=my_topic)   # SNS, EventBridge or both
    sweeper = OutboxSweeper(self, "Sweeper", publisher=publisher)    # what the stream strands, in order
    OutboxMonitoring(self, "Monitoring", publisher_function=publisher.function,
                     poison_queue=publisher.poison_queue, on_failure_queue=publisher.on_failure_queue,
                     sweeper_function=sweeper.function)

Every construct takes safe defaults a caller can override; docs/your-stack.md has complete
examples (one `Outbox`, a writer function of yours, the finer constructs).
"""

from outbox_cdk.checkov import Invocation, ServiceKeyAcknowledgements, acknowledge_checkov
from outbox_cdk.destinations import DestinationsProps, OutboxDestinations
from outbox_cdk.encryption import OutboxKey, allow_outbox_services
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, PowertoolsLayer, PythonFunction, powertools_layer
from outbox_cdk.monitoring import AlarmThresholds, AlarmTopic, OutboxMonitoring
from outbox_cdk.nag import acknowledge, add_nag_checks
from outbox_cdk.operators import OperatorAccess, OutboxOperatorPolicy
from outbox_cdk.outbox import Outbox, OutboxProps
from outbox_cdk.publisher import OutboxPublisher, PublisherSettings, StreamMappingProps
from outbox_cdk.queues import FailureQueues, FailureQueuesProps
from outbox_cdk.regions import OutboxRegions
from outbox_cdk.replica import OutboxReplica, OutboxReplicaProps
from outbox_cdk.sweeper import OutboxSweeper, SweeperSettings
from outbox_cdk.table import DataTableProps, OutboxGlobalTable, OutboxTable, add_failed_index
from outbox_publisher.routing import Destination, Route
from outbox_sweeper.config import SweepSettings

__all__ = [
    "AlarmThresholds",
    "AlarmTopic",
    "DataTableProps",
    "Destination",
    "DestinationsProps",
    "FailureQueues",
    "FailureQueuesProps",
    "FunctionSettings",
    "Invocation",
    "OperatorAccess",
    "Outbox",
    "OutboxConstructError",
    "OutboxDestinations",
    "OutboxGlobalTable",
    "OutboxKey",
    "OutboxMonitoring",
    "OutboxOperatorPolicy",
    "OutboxProps",
    "OutboxPublisher",
    "OutboxRegions",
    "OutboxReplica",
    "OutboxReplicaProps",
    "OutboxSweeper",
    "OutboxTable",
    "PowertoolsLayer",
    "PublisherSettings",
    "PythonFunction",
    "Route",
    "ServiceKeyAcknowledgements",
    "StreamMappingProps",
    "SweepSettings",
    "SweeperSettings",
    "acknowledge",
    "acknowledge_checkov",
    "add_failed_index",
    "add_nag_checks",
    "allow_outbox_services",
    "powertools_layer",
]

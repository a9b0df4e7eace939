"""Where published events go: an SNS topic (standard or FIFO), an EventBridge bus with an archive, or both."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from outbox_cdk import constants as c
from outbox_cdk.encryption import key_reference
from outbox_cdk.errors import OutboxConstructError
from outbox_publisher.config import event_source_problem


@dataclass(frozen=True)
class DestinationsProps:
    """Destinations of the outbox publisher. Both by default; either can be left out."""

    topic: bool = True
    event_bus: bool = True
    # FIFO keeps order per aggregate (MessageGroupId = aggregate_key) and dedupes on event_id for
    # 5 minutes; subscribers must then be FIFO queues too.
    fifo_topic: bool = False
    # EventBridge `Source` of every event; rules match on it. Must not start with "aws.".
    event_source: str = c.DEFAULT_EVENT_SOURCE
    # None: CloudFormation generates a unique bus name (read it from the EventBusName output).
    event_bus_name: str | None = None
    archive_retention: Duration = field(default_factory=lambda: Duration.days(c.EVENT_ARCHIVE_RETENTION_DAYS))
    # None: the topic under the AWS-managed SNS key, the bus and the archive under AWS-owned keys. A
    # customer-managed key for all three must let EventBridge keep archives with it (OutboxKey does).
    encryption_key: kms.IKey | None = None

    def __post_init__(self) -> None:
        if not self.topic and not self.event_bus:
            raise OutboxConstructError(
                "keep the topic, the event bus or both: the publisher needs somewhere to publish"
            )
        if problem := event_source_problem(self.event_source):
            raise OutboxConstructError(problem)


class OutboxDestinations(Construct):
    """The SNS topic and the EventBridge bus the publisher announces events on.

    By default the topic is encrypted with the AWS-managed SNS key: only the publisher Lambda (an IAM
    principal of this account) publishes to it, and SNS decrypts for delivery itself, so a
    customer-managed key adds cost and a key policy, for those who need every resource under their own
    key (`DestinationsProps.encryption_key`: topic, bus and archive).
    The bus is encrypted at rest by EventBridge; its archive keeps this source's events so they
    can be replayed to a consumer that lost them.
    """

    def __init__(self, scope: Construct, construct_id: str, props: DestinationsProps | None = None) -> None:
        super().__init__(scope, construct_id)
        props = props or DestinationsProps()
        self.event_source = props.event_source
        self.fifo = props.fifo_topic
        self.topic: sns.Topic | None = None
        self.event_bus: events.EventBus | None = None
        self.archive: events.Archive | None = None
        if props.topic:
            self.topic = sns.Topic(
                self,
                "Topic",
                fifo=True if props.fifo_topic else None,
                # The publisher sets MessageDeduplicationId = event_id; content-based dedup would
                # merge two distinct events that happen to have the same body.
                content_based_deduplication=False if props.fifo_topic else None,
                master_key=props.encryption_key
                or kms.Alias.from_alias_name(self, "SnsAwsManagedKey", c.SNS_AWS_MANAGED_KEY_ALIAS),
                enforce_ssl=True,
            )
        if props.event_bus:
            # Given the key, CDK's EventBus states its own use in the key policy: this bus only.
            self.event_bus = events.EventBus(
                self, "EventBus", event_bus_name=props.event_bus_name, kms_key=props.encryption_key
            )
            # As `event_bus.archive(...)` makes it, but it may take a key, by reference (key_reference).
            self.archive = events.Archive(
                self.event_bus,
                "Archive",
                source_event_bus=self.event_bus,
                description="Outbox events, kept for replay",
                event_pattern=events.EventPattern(source=[props.event_source]),
                retention=props.archive_retention,
                kms_key=(
                    None
                    if props.encryption_key is None
                    else key_reference(self, "ArchiveKey", props.encryption_key)
                ),
            )

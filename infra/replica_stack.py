"""A replica region's stack of the sample's multi-region variant (`cdk synth -c regions=HOME,REPLICA,...`):
the `OutboxReplica` over that region's replica of the home stack's global outbox table. The Orders API and the
sample consumers run in the home region only (the Orders table is not a global table)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aspects, Stack
from constructs import Construct

from outbox_cdk.checkov import ServiceKeyAcknowledgements
from outbox_cdk.outbox import OutboxProps
from outbox_cdk.regions import OutboxRegions
from outbox_cdk.replica import OutboxReplica, OutboxReplicaProps


class OutboxReplicaStack(Stack):
    """One replica region's publisher, sweeper, destinations, alarms and outputs (the `outbox` commands read
    them with `--stack <this stack> --region <its region>`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        regions: OutboxRegions,
        table_name: str,
        outbox: OutboxProps,
        **stack_kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **stack_kwargs)
        Aspects.of(self).add(ServiceKeyAcknowledgements())
        self.replica = OutboxReplica(
            self, "Outbox", OutboxReplicaProps(regions=regions, table_name=table_name, outbox=outbox)
        )

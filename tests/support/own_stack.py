"""A user's own stack, as the README's own-app snippet builds it from the project's finer constructs (its own
outbox table, SNS only), with the outputs the `outbox` commands read, under the name `PaymentsStack`:
synthesized into a directory as `cdk synth` writes cdk.out, for the local runtime to run under its own name.

One output carries a prefix (`Refunds...`) and one a name of the user's choosing: the runtime must report
every output the template declares, whatever its name.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.synth import CLI_CONTEXT

STACK_NAME = "PaymentsStack"
OWN_OUTPUT = "PaymentsLedgerHint"
PREFIXED_OUTPUT = "RefundsOutboxTableName"

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def synthesize_payments_stack(outdir: Path) -> Path:
    """Synthesize the stack into `outdir`; returns its template's path (`PaymentsStack.template.json`)."""
    from aws_cdk import App, CfnOutput, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sns as sns
    from constructs import Construct

    from outbox import outputs
    from outbox_cdk import OutboxMonitoring, OutboxPublisher, OutboxSweeper, add_failed_index, add_nag_checks

    class PaymentsStack(Stack):
        def __init__(self, scope: Construct, construct_id: str) -> None:
            super().__init__(scope, construct_id)
            table = dynamodb.Table(
                self,
                "PaymentsOutbox",
                partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name="seq", type=dynamodb.AttributeType.NUMBER),
                stream=dynamodb.StreamViewType.NEW_IMAGE,
                time_to_live_attribute="expires_at",
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
            )
            add_failed_index(table)
            topic = sns.Topic(self, "PaymentEvents", enforce_ssl=True)
            publisher = OutboxPublisher(self, "Publisher", table=table, topic=topic)
            sweeper = OutboxSweeper(self, "Sweeper", publisher=publisher)
            OutboxMonitoring(
                self,
                "Monitoring",
                publisher_function=publisher.function,
                sweeper_function=sweeper.function,
                poison_queue=publisher.poison_queue,
                on_failure_queue=publisher.on_failure_queue,
            )
            # What the user added by hand so that `outbox status` finds the outbox.
            for name, value in {
                outputs.OUTBOX_TABLE_NAME: table.table_name,
                outputs.TOPIC_ARN: topic.topic_arn,
                outputs.POISON_QUEUE_URL: publisher.poison_queue.queue_url,
                outputs.ON_FAILURE_QUEUE_URL: publisher.on_failure_queue.queue_url,
                outputs.PUBLISHER_FUNCTION_NAME: publisher.function.function_name,
                outputs.SWEEPER_FUNCTION_NAME: sweeper.function.function_name,
                PREFIXED_OUTPUT: table.table_name,
                OWN_OUTPUT: f"{table.table_name} holds the payments' events",
            }.items():
                CfnOutput(self, name, value=value)

    app = App(outdir=str(outdir), context=CLI_CONTEXT)
    PaymentsStack(app, STACK_NAME)
    add_nag_checks(app)
    app.synth()
    return outdir / f"{STACK_NAME}.template.json"

"""cdk-nag (3.x) wiring: the AwsSolutions pack runs on every synth and fails it on any finding
that is not acknowledged with a reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from outbox_cdk.errors import OutboxConstructError

# An acknowledgement must say *why* the finding does not apply; short stock phrases do not.
MIN_REASON_LENGTH = 40


def add_nag_checks(app: App) -> None:
    """Run the AwsSolutions rule pack on the whole app at synth time."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


# Acknowledgement IDs carry the reporting plugin's name, as CDK's validation report prints them.
AWS_SOLUTIONS = "AwsSolutions"
CFN_VALIDATE = "CloudFormation-Validate"


def acknowledge(construct: IConstruct, rule_id: str, reason: str, *, plugin: str = AWS_SOLUTIONS) -> None:
    """Acknowledge one finding (e.g. ``AwsSolutions-IAM5[Resource::*]``) on ``construct``
    and everything under it.

    Raises ValueError on a reason too short to explain anything, so a lazy acknowledgement
    fails at synth time instead of in review.
    """
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise OutboxConstructError(f"acknowledgement of {rule_id} needs a real reason, got {reason!r}")
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{plugin}::{rule_id}", reason=reason))

"""cdk-nag (3.x) wiring: the AwsSolutions pack runs on every synth and fails it on any finding, warning-level
ones included, that is not acknowledged with a reason.

CDK fails a synth on a plugin's report only while the report has an error-level finding once any finding was
acknowledged (its `collectSuppressions`), so the pack's warning-level rules (AwsSolutions-DDB3, -SQS3, ...)
would pass unseen. `add_nag_checks` registers the pack through a plugin of the same name that reports every
finding the pack makes as an error, its description saying it was a warning.
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import (
    Acknowledgment,
    App,
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolation,
    Validations,
)
from cdk_nag import AwsSolutionsChecks, NagPack
from constructs import IConstruct

from outbox_cdk.errors import OutboxConstructError

# An acknowledgement must say *why* the finding does not apply; short stock phrases do not.
MIN_REASON_LENGTH = 40


def add_nag_checks(app: App) -> None:
    """Run the AwsSolutions rule pack on the whole app at synth time; any finding not acknowledged
    (`acknowledge`), warning-level or error-level, fails the synth."""
    Validations.of(app).add_plugins(FailOnWarnings(app, AwsSolutionsChecks(app)))


WARNING = "warning"
ERROR = "error"


@jsii.implements(IPolicyValidationPlugin)
class FailOnWarnings:
    """A cdk-nag pack as a validation plugin of the same name whose every finding is an error: acknowledged
    findings are suppressed by CDK as before (their IDs carry the plugin's name), the rest fail the synth."""

    def __init__(self, app: App, pack: NagPack) -> None:
        self._app = app
        self._pack = pack

    @property
    def name(self) -> str:
        return str(self._pack.name)

    @property
    def version(self) -> str | None:
        return self._pack.version

    @property
    def rule_ids(self) -> list[str] | None:
        return self._pack.rule_ids

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        # The pack's public entry point for a construct tree: the context CDK hands a plugin written in Python
        # arrives as a plain struct, without the tree the pack reads.
        report = self._pack.validate_scope(self._app)
        violations = [_as_error(violation) for violation in report.violations]
        return PolicyValidationPluginReport(success=not violations, violations=violations)


def _as_error(violation: PolicyViolation) -> PolicyViolation:
    if violation.severity != WARNING:
        return violation
    fields: dict[str, Any] = {
        "rule_name": violation.rule_name,
        "description": f"{violation.description} (a warning-level rule: add_nag_checks fails on it too)",
        "violating_resources": violation.violating_resources,
        "severity": ERROR,
        "fix": violation.fix,
        "rule_metadata": violation.rule_metadata,
    }
    return PolicyViolation(**fields)


# Acknowledgement IDs carry the reporting plugin's name, as CDK's validation report prints them.
AWS_SOLUTIONS = "AwsSolutions"
CFN_VALIDATE = "CloudFormation-Validate"


def acknowledge(construct: IConstruct, rule_id: str, reason: str, *, plugin: str = AWS_SOLUTIONS) -> None:
    """Acknowledge one finding (e.g. ``AwsSolutions-IAM5[Resource::*]``) on ``construct``
    and everything under it.

    Raises OutboxConstructError on a reason too short to explain anything, so a lazy acknowledgement
    fails at synth time instead of in review.
    """
    require_reason(rule_id, reason)
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{plugin}::{rule_id}", reason=reason))


def require_reason(rule_id: str, reason: str) -> None:
    """Raises OutboxConstructError on a reason too short to explain anything: every rule set's
    acknowledgements are held to it."""
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise OutboxConstructError(f"acknowledgement of {rule_id} needs a real reason, got {reason!r}")

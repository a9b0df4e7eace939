"""cdk-nag runs on every synth, fails it on a finding, and every acknowledgement explains itself."""

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.synth import Synthesized

TRIVIAL_REASONS = {"ok", "n/a", "na", "todo", "fine", "not needed", "suppressed", "ignore", "acknowledged"}


def _acknowledgements(synthesized: Synthesized) -> list[tuple[str, str, str]]:
    from aws_cdk import Validations

    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    found = []
    for construct in synthesized.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                for rule_id, reason in entry.data.items():
                    found.append((construct.node.path, rule_id, reason))
    return found


def test_synth_ran_aws_solutions_checks_with_no_open_finding(synthesized: Synthesized) -> None:
    # Given the session's synthesis (it would have raised on an unacknowledged finding)
    # When the validation report is read
    reports = {r["pluginName"]: r for r in synthesized.validation_report["pluginReports"]}

    # Then AwsSolutions ran, passed, and every finding it raised was acknowledged
    assert reports["AwsSolutions"]["conclusion"] == "success"
    assert reports["AwsSolutions"]["violations"] == []
    assert reports["AwsSolutions"]["suppressedViolations"]


def test_every_acknowledgement_has_a_real_reason(synthesized: Synthesized) -> None:
    # Given every acknowledgement recorded in the construct tree
    acknowledgements = _acknowledgements(synthesized)
    assert acknowledgements

    # When their reasons are inspected
    # Then each is a sentence that explains, not a stock phrase
    for path, rule_id, reason in acknowledgements:
        assert reason.strip().lower().rstrip(".") not in TRIVIAL_REASONS, (path, rule_id)
        assert len(reason) >= 40, (path, rule_id, reason)
        assert len(reason.split()) >= 8, (path, rule_id, reason)


def test_every_acknowledgement_matches_a_real_finding(synthesized: Synthesized) -> None:
    # Given the acknowledgements and the findings they suppressed
    acknowledged = {(path, rule_id) for path, rule_id, _ in _acknowledgements(synthesized)}
    used = {
        (v["acknowledgedAt"], v["acknowledgedId"])
        for report in synthesized.validation_report["pluginReports"]
        for v in report.get("suppressedViolations", [])
    }

    # When compared
    # Then none is stale: each one silences a finding that really occurs
    assert acknowledged == used


def test_an_unacknowledged_finding_fails_the_synth() -> None:
    # Given an app with the same nag wiring and a queue that breaks two AwsSolutions rules
    from aws_cdk import App, Stack
    from aws_cdk import aws_sqs as sqs

    from outbox_cdk.nag import add_nag_checks

    app = App()
    sqs.Queue(Stack(app, "NagProbe"), "PlainQueue")
    add_nag_checks(app)

    # When it is synthesized
    # Then synthesis fails
    with pytest.raises(RuntimeError, match=r"ValidationFailed(.|\n)*AwsSolutions::AwsSolutions-SQS4"):
        app.synth()


def _app_with_a_warning_level_finding(tmp_path: Path) -> Any:
    """A table without point-in-time recovery (AwsSolutions-DDB3, a warning-level rule) beside a queue whose
    error-level finding is acknowledged: once anything is acknowledged, CDK fails a synth on error-level
    findings only."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sqs as sqs

    from outbox_cdk.nag import acknowledge

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "NagProbe")
    dynamodb.Table(
        stack,
        "NoRecovery",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
    )
    queue = sqs.Queue(stack, "Queue", enforce_ssl=True, encryption=sqs.QueueEncryption.SQS_MANAGED)
    acknowledge(
        queue, "AwsSolutions-SQS3", "A probe queue of this test: nothing ever reads it, so nothing fails"
    )
    return app


def test_a_warning_level_finding_fails_the_synth(tmp_path: Path) -> None:
    # Given an app whose only open finding is warning-level, with add_nag_checks attached
    from outbox_cdk.nag import add_nag_checks

    app = _app_with_a_warning_level_finding(tmp_path)
    add_nag_checks(app)

    # When it is synthesized
    # Then synthesis fails on that finding, saying it was a warning-level rule
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed.*warning-level rule.*AwsSolutions-DDB3"):
        app.synth()


def test_the_pack_alone_lets_that_warning_pass(tmp_path: Path) -> None:
    # Given the same app with the AwsSolutions pack registered as cdk-nag's docs show (why add_nag_checks
    # wraps it: if this ever fails, cdk-nag or CDK fail on warnings themselves and the wrapper can go)
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    app = _app_with_a_warning_level_finding(tmp_path)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))

    # When it is synthesized
    app.synth()

    # Then it passed with the warning open in its report
    report = json.loads((tmp_path / "validation-report.json").read_text())
    [nag] = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert [v["ruleName"] for v in nag["violations"]] == ["AwsSolutions-DDB3"]


@pytest.mark.parametrize("reason", ["", "ok", "not needed here"])
def test_acknowledge_refuses_a_reason_that_explains_nothing(reason: str) -> None:
    # Given any construct
    from aws_cdk import App

    from outbox_cdk.nag import acknowledge

    construct: Any = App()

    # When it is acknowledged without a real reason
    # Then the acknowledgement itself fails
    with pytest.raises(ValueError, match="real reason"):
        acknowledge(construct, "AwsSolutions-SQS3", reason)

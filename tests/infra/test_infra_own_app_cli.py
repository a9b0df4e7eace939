"""A user's own app of at most 20 lines (one `Outbox`) synthesizes with the real CDK CLI, as a user runs it,
without a single line of warning, banner or stray output, and gives the CLI what it reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from outbox import outputs
from tests.support.synth import CDK_CLI, USER_APP_COMMAND, cli_environment

# The whole app of contract 1: a stack of the user's with one Outbox, cdk-nag on.
USER_APP = """\
from aws_cdk import App, Stack
from constructs import Construct
from outbox_cdk import Outbox, add_nag_checks

class PaymentsStack(Stack):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        Outbox(self, "Outbox")

app = App()
PaymentsStack(app, "PaymentsStack")
add_nag_checks(app)
app.synth()
"""


def test_a_users_own_app_synthesizes_with_the_cdk_cli_printing_nothing(tmp_path: Path) -> None:
    # Given a project as `cdk init app --language python` makes it (its cdk.json sets the feature flags CDK
    # recommends), its app command carrying the jsii variable as the deploy docs say, the app as app.py
    assert len(USER_APP.splitlines()) <= 20
    environment = cli_environment()
    subprocess.run(  # noqa: S603 - the project's own CDK CLI, fixed arguments
        [str(CDK_CLI), "init", "app", "--language", "python", "--generate-only"],
        cwd=tmp_path,
        env=environment,
        check=True,
        capture_output=True,
    )
    cdk_json = json.loads((tmp_path / "cdk.json").read_text())
    cdk_json["app"] = USER_APP_COMMAND
    (tmp_path / "cdk.json").write_text(json.dumps(cdk_json, indent=2))
    (tmp_path / "app.py").write_text(USER_APP)

    # When the CDK CLI synthesizes it, offline and without an AWS account, as a newcomer's first `cdk synth`
    # (--no-notices: the notices come from the network, which tests never use)
    result = subprocess.run(  # noqa: S603 - the project's own CDK CLI, fixed arguments
        [str(CDK_CLI), "synth", "--quiet", "--no-notices"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )

    # Then it succeeds (cdk-nag found nothing) and prints nothing at all: no warning, no Node banner, no
    # "feature flags are not configured", no stray line
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == ""
    # All but one empty line, which the CLI itself prints for a validation report whose findings are all
    # acknowledged (the constructs' own, each with its reason): it renders that report as an empty message.
    assert result.stderr in ("", "\n"), result.stderr
    # and the stack has every output the `outbox` commands read, and the table the `failed` index
    template = json.loads((tmp_path / "cdk.out" / "PaymentsStack.template.json").read_text())
    assert set(outputs.OUTBOX_OUTPUTS) <= set(template["Outputs"])
    [table] = [r for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert [index["IndexName"] for index in table["Properties"]["GlobalSecondaryIndexes"]] == ["failed"]

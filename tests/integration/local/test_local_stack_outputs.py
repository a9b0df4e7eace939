"""The stack's outputs through CloudFormation: tools find the local stack's resources as on AWS, with plain
boto3 `describe_stacks` on the local endpoint (`outbox_local.provisioning.cloudformation`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from outbox_local.provisioning.cloudformation import output_text
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import options, template, write_template


def test_describe_stacks_answers_the_resolved_outputs_as_cloudformation_renders_them(tmp_path: Path) -> None:
    # Given a template whose outputs include a list value, a description and an export, started under its
    # own stack name
    body = template()
    body["Description"] = "items for the operations tests"
    body["Outputs"]["Zones"] = {
        "Description": "where the items live",
        "Value": {"Fn::GetAZs": ""},
        "Export": {"Name": {"Fn::Sub": "${AWS::StackName}-Zones"}},
    }
    body["Outputs"]["Parts"] = {"Value": {"Fn::Split": ["/", "a/b"]}}
    with (
        warnings.catch_warnings(record=True) as caught,
        LocalRuntime(options(write_template(tmp_path, body), stack_name="ItemsStack")) as runtime,
    ):
        warnings.simplefilter("always")

        # When a tool describes the stack through CloudFormation
        cloudformation = runtime.client("cloudformation")
        (stack,) = cloudformation.describe_stacks(StackName="ItemsStack")["Stacks"]

        # Then it is complete and holds exactly the outputs the runtime resolved, as strings
        assert stack["StackStatus"] == "CREATE_COMPLETE"
        assert stack["Description"] == "items for the operations tests"
        outputs = {output["OutputKey"]: output for output in stack["Outputs"]}
        assert {key: output["OutputValue"] for key, output in outputs.items()} == {
            key: output_text(value) for key, value in runtime.outputs.items()
        }
        assert outputs["Zones"]["OutputValue"] == "us-east-1a,us-east-1b,us-east-1c"
        assert outputs["Parts"]["OutputValue"] == "a,b"
        assert outputs["ApiUrl"]["OutputValue"] == f"{runtime.api_url}/"
        assert outputs["TableName"]["OutputValue"] == runtime.outputs["TableName"]
        assert outputs["Zones"]["Description"] == "where the items live"
        assert outputs["Zones"]["ExportName"] == "ItemsStack-Zones"
        exports = cloudformation.list_exports()["Exports"]
        assert [(export["Name"], export["Value"]) for export in exports] == [
            ("ItemsStack-Zones", "us-east-1a,us-east-1b,us-east-1c")
        ]
    # And registering the stack made moto warn about nothing (no placeholder resource)
    assert [str(warning.message) for warning in caught if "moto" in str(warning.message)] == []


def test_a_runtime_started_again_registers_its_stack_once_with_the_new_outputs(tmp_path: Path) -> None:
    # Given a runtime started and stopped once
    runtime = LocalRuntime(options(write_template(tmp_path, template())))
    runtime.start()
    runtime.stop()

    # When it starts again, Then CloudFormation knows one stack, under the default name, with this start's
    # outputs (its HTTP API listens on a port picked at this start)
    with runtime:
        (stack,) = runtime.client("cloudformation").describe_stacks()["Stacks"]
        assert stack["StackName"] == "OutboxStack"
        outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
        assert outputs["ApiUrl"] == runtime.outputs["ApiUrl"] == f"{runtime.api_url}/"


def test_output_values_render_as_cloudformation_strings() -> None:
    assert output_text("x") == "x"
    assert output_text(["a", 1, True]) == "a,1,true"
    assert output_text(3) == "3"
    assert output_text(False) == "false"

"""Unit tests of the local CloudFormation's pure parts: the query protocol, template text, the diff that
decides what an update does, parameters and rules. No server, no network."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from outbox_local.cloudformation import parameters, wire
from outbox_local.cloudformation.changes import (
    ADD,
    MODIFY,
    REMOVE,
    Deployed,
    refuse_what_cannot_change_in_place,
    resource_changes,
)
from outbox_local.cloudformation.host import RunningStack
from outbox_local.cloudformation.records import STOPPED_DURING, StackRecord, settled
from outbox_local.cloudformation.template_text import parse_body, s3_location
from outbox_local.errors import TemplateError, UnsupportedResourceError
from outbox_local.template import ResolvedResource, Resolver, Template

NS = {"cfn": wire.NAMESPACE}


def test_a_signed_request_names_its_region_and_service() -> None:
    # Given the Authorization header the SDKs send
    header = (
        "AWS4-HMAC-SHA256 Credential=testing/20261204/eu-west-1/cloudformation/aws4_request, "
        "SignedHeaders=host, Signature=abc"
    )
    # Then its credential scope says where and to whom it goes; an unsigned request names nothing
    assert wire.signed_for(header) == ("eu-west-1", "cloudformation")
    assert wire.signed_for("") is None


def test_flattened_lists_are_read_back_in_their_order() -> None:
    # Given a CreateChangeSet body as the query protocol flattens it (members out of order)
    request = wire.Request(
        "Action=CreateChangeSet&Parameters.member.2.ParameterKey=B&Parameters.member.2.UsePreviousValue=true"
        "&Parameters.member.1.ParameterKey=A&Parameters.member.1.ParameterValue=x%26y"
        "&Capabilities.member.1=CAPABILITY_IAM&UsePreviousTemplate=true"
    )
    # Then the members come back in their index order, values decoded
    assert request.action == "CreateChangeSet"
    assert request.members("Parameters") == [
        {"ParameterKey": "A", "ParameterValue": "x&y"},
        {"ParameterKey": "B", "UsePreviousValue": "true"},
    ]
    assert request.members("Capabilities") == ["CAPABILITY_IAM"]
    assert request.flag("UsePreviousTemplate") is True
    assert request.members("Tags") == []


def test_a_result_is_xml_with_lists_as_members_and_text_escaped() -> None:
    # When a result with a list, a nested map, a boolean, a None and markup is rendered
    body = wire.response(
        "DescribeStacks",
        {"Stacks": [{"StackName": "S<1>", "DisableRollback": False, "Gone": None, "Drift": {"A": "b"}}]},
    )
    # Then the XML holds each as the protocol shapes it (None left out)
    root = ET.fromstring(body)  # noqa: S314 - our own output
    member = root.find("cfn:DescribeStacksResult/cfn:Stacks/cfn:member", NS)
    assert member is not None
    assert member.findtext("cfn:StackName", namespaces=NS) == "S<1>"
    assert member.findtext("cfn:DisableRollback", namespaces=NS) == "false"
    assert member.find("cfn:Gone", NS) is None
    assert member.findtext("cfn:Drift/cfn:A", namespaces=NS) == "b"
    assert root.findtext("cfn:ResponseMetadata/cfn:RequestId", namespaces=NS)


def test_an_error_names_its_code_and_message() -> None:
    root = ET.fromstring(wire.error_response("ValidationError", "Stack with id X does not exist"))  # noqa: S314
    assert root.findtext("cfn:Error/cfn:Code", namespaces=NS) == "ValidationError"
    assert root.findtext("cfn:Error/cfn:Message", namespaces=NS) == "Stack with id X does not exist"
    assert root.findtext("cfn:Error/cfn:Type", namespaces=NS) == "Sender"


def test_yaml_templates_read_short_forms_and_keep_the_version_text() -> None:
    # Given a YAML template with short-form intrinsics and an unquoted date-like version
    text = (
        "AWSTemplateFormatVersion: 2010-09-09\n"
        "Resources:\n"
        "  Q:\n"
        "    Type: AWS::SQS::Queue\n"
        "    Properties:\n"
        "      QueueName: !Sub '${AWS::StackName}-q'\n"
        "      Tags: [{Key: a, Value: !GetAtt T.Arn}, {Key: b, Value: !If [C, !Ref P, x]}]\n"
    )
    body = parse_body(text)
    properties = body["Resources"]["Q"]["Properties"]
    # Then they read as the long forms the resolver knows
    assert body["AWSTemplateFormatVersion"] == "2010-09-09"
    assert properties["QueueName"] == {"Fn::Sub": "${AWS::StackName}-q"}
    assert properties["Tags"][0]["Value"] == {"Fn::GetAtt": ["T", "Arn"]}
    assert properties["Tags"][1]["Value"] == {"Fn::If": ["C", {"Ref": "P"}, "x"]}


@pytest.mark.parametrize("text", ["{not json: [", '{"Resources": []}', "just text"])
def test_text_that_is_no_template_is_refused(text: str) -> None:
    with pytest.raises(TemplateError, match="Template format error"):
        parse_body(text)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://s3.us-east-1.amazonaws.com/cdk-assets/abc.json", ("cdk-assets", "abc.json")),
        ("http://127.0.0.1:4566/b/dir/t.json", ("b", "dir/t.json")),
        ("https://b.s3.eu-west-1.amazonaws.com/k%20x.json", ("b", "k x.json")),
    ],
)
def test_template_urls_name_their_bucket_and_key(url: str, expected: tuple[str, str]) -> None:
    assert s3_location(url) == expected


def test_a_url_without_a_key_is_refused() -> None:
    with pytest.raises(TemplateError, match="names no S3 bucket and key"):
        s3_location("https://s3.us-east-1.amazonaws.com/only-bucket")


# --- the diff ---------------------------------------------------------------------------------------------

OLD: dict[str, Any] = {
    "Parameters": {"Size": {"Type": "String", "Default": "128"}},
    "Resources": {
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"BillingMode": "PAY_PER_REQUEST"}},
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "MemorySize": {"Ref": "Size"},
                "Environment": {"Variables": {"T": {"Ref": "Table"}}},
            },
        },
        "Old": {"Type": "AWS::SQS::Queue", "Properties": {}},
    },
}


def deployed(body: dict[str, Any] = OLD) -> Deployed:
    return Deployed(
        template=Template.from_body(body),
        parameter_values={"Size": "128"},
        resources={
            "Table": ("AWS::DynamoDB::Table", ResolvedResource("S-Table-1")),
            "Fn": ("AWS::Lambda::Function", ResolvedResource("S-Fn-1", {"Arn": "arn:fn"})),
            "Old": ("AWS::SQS::Queue", ResolvedResource("http://q/Old")),
        },
        region="us-east-1",
        stack_name="S",
    )


def with_resources(**resources: Any) -> dict[str, Any]:
    return {**OLD, "Resources": {**OLD["Resources"], **resources}}


def test_the_same_template_changes_nothing() -> None:
    assert resource_changes(deployed(), Template.from_body(OLD), {"Size": "128"}) == []


def test_a_new_stack_adds_every_resource_its_conditions_select() -> None:
    body = with_resources(Maybe={"Type": "AWS::SQS::Queue", "Condition": "No", "Properties": {}})
    body["Conditions"] = {"No": {"Fn::Equals": ["a", "b"]}}
    changes = resource_changes(None, Template.from_body(body), {})
    assert [(c.action, c.logical_id) for c in changes] == [(ADD, "Table"), (ADD, "Fn"), (ADD, "Old")]


def test_changed_parameters_added_and_removed_resources_are_told_apart() -> None:
    # Given a template that drops a queue, adds a topic, and a parameter that changes the function's memory
    body = {**OLD, "Resources": {**OLD["Resources"], "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}}}}
    del body["Resources"]["Old"]
    # When it is compared with the deployed stack
    changes = resource_changes(deployed(), Template.from_body(body), {"Size": "256"})
    # Then the function is modified (MemorySize only), the topic added, the queue removed; the table unchanged
    assert [(c.action, c.logical_id, c.properties) for c in changes] == [
        (MODIFY, "Fn", ("MemorySize",)),
        (ADD, "Topic", ()),
        (REMOVE, "Old", ()),
    ]
    refuse_what_cannot_change_in_place(changes)  # all of it can be applied in place


def test_a_change_the_runtime_cannot_apply_in_place_names_the_resource_and_property() -> None:
    # Given a template that changes the table's billing mode and a queue's type for a topic
    body = with_resources(
        Table={"Type": "AWS::DynamoDB::Table", "Properties": {"BillingMode": "PROVISIONED"}},
        Old={"Type": "AWS::SNS::Topic", "Properties": {}},
    )
    changes = resource_changes(deployed(), Template.from_body(body), {"Size": "128"})
    # Then the update is refused, naming both resources and what changed
    with pytest.raises(UnsupportedResourceError) as refused:
        refuse_what_cannot_change_in_place(changes)
    assert "Table (AWS::DynamoDB::Table): BillingMode" in str(refused.value)
    assert "Old (AWS::SNS::Topic): Type" in str(refused.value)


def test_a_property_referring_to_an_added_resource_counts_as_changed() -> None:
    # Given the function's variable now naming a table that does not exist yet
    body = with_resources(
        New={"Type": "AWS::DynamoDB::Table", "Properties": {}},
        Fn={
            "Type": "AWS::Lambda::Function",
            "Properties": {"MemorySize": {"Ref": "Size"}, "Environment": {"Ref": "New"}},
        },
    )
    changes = resource_changes(deployed(), Template.from_body(body), {"Size": "128"})
    assert (MODIFY, "Fn", ("Environment",)) in [(c.action, c.logical_id, c.properties) for c in changes]


# --- parameters and rules -----------------------------------------------------------------------------

PARAMETERS = Template.from_body(
    {
        "Parameters": {
            "Stage": {"Type": "String", "AllowedValues": ["dev", "prod"], "Default": "dev"},
            "Version": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk-bootstrap/q/version"},
            "Layer": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/aws/service/powertools/x"},
        },
        "Rules": {
            "CheckVersion": {
                "Assertions": [
                    {
                        "Assert": {"Fn::Not": [{"Fn::Contains": [["1", "2"], {"Ref": "Version"}]}]},
                        "AssertDescription": "CDK bootstrap stack version 6 required.",
                    }
                ]
            }
        },
        "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
    }
)


def test_ssm_typed_parameters_read_the_runtime_ssm_and_public_ones_are_placeholders() -> None:
    ssm = {"/cdk-bootstrap/q/version": "33"}
    values, resolved = parameters.settle(PARAMETERS, {}, {}, set(), ssm.get)
    assert values["Version"] == "/cdk-bootstrap/q/version"
    assert resolved["Version"] == "33"
    assert resolved["Layer"] == "local-ssm-value:/aws/service/powertools/x"


def test_an_unbootstrapped_environment_is_refused_as_cloudformation_refuses_it() -> None:
    with pytest.raises(
        parameters.ParameterError, match=r"Unable to fetch parameters \[/cdk-bootstrap/q/version\]"
    ):
        parameters.settle(PARAMETERS, {}, {}, set(), lambda _name: None)


def test_given_previous_and_disallowed_values() -> None:
    ssm = {"/cdk-bootstrap/q/version": "33"}
    values, _ = parameters.settle(PARAMETERS, {"Stage": "dev"}, {"Stage": "prod"}, {"Stage"}, ssm.get)
    assert values["Stage"] == "prod"  # UsePreviousValue wins
    with pytest.raises(parameters.ParameterError, match="AllowedValues"):
        parameters.settle(PARAMETERS, {"Stage": "qa"}, {}, set(), ssm.get)
    with pytest.raises(parameters.ParameterError, match=r"\[Nope\] do not exist"):
        parameters.settle(PARAMETERS, {"Nope": "1"}, {}, set(), ssm.get)


@pytest.mark.parametrize(("version", "holds"), [("33", True), ("2", False)])
def test_rules_hold_or_refuse_with_their_description(version: str, holds: bool) -> None:
    resolver = Resolver(
        PARAMETERS, region="us-east-1", stack_name="S", parameter_values={"Version": version, "Layer": "x"}
    )
    if holds:
        parameters.check_rules(PARAMETERS, resolver)
    else:
        with pytest.raises(parameters.ParameterError, match="version 6 required"):
            parameters.check_rules(PARAMETERS, resolver)


def test_import_value_reads_what_other_stacks_export() -> None:
    # Given a resolver that knows one export of another stack
    resolver = Resolver(PARAMETERS, region="us-east-1", stack_name="S", exports={"shared-url": "http://q"})
    # Then an import of it resolves, an import of anything else is refused as CloudFormation refuses it
    assert resolver.resolve({"Fn::ImportValue": "shared-url"}) == "http://q"
    with pytest.raises(TemplateError, match="No export named other found"):
        resolver.resolve({"Fn::ImportValue": "other"})


def test_a_record_saved_during_an_operation_becomes_what_the_restarted_runtime_runs() -> None:
    # Given records saved while an update and a create were under way (the snapshot holds stacks whole: the
    # updated one runs, the created one was not yet there), and one saved at rest
    body = Template.from_body({"Parameters": {"Version": {"Type": "String"}}, "Resources": {}})
    running = RunningStack("id-a", 1.0, Deployed(body, {"Version": "33"}, {}, "us-east-1", "A"))
    updating = StackRecord("A", "id-a", 1.0, parameters={"Version": "/cdk/version"})
    updating.event("CREATE_COMPLETE", 1.0)
    updating.event("UPDATE_IN_PROGRESS", 2.0)
    creating = StackRecord("B", "id-b", 3.0)
    creating.event("CREATE_IN_PROGRESS", 3.0)
    at_rest = StackRecord("C", "id-c", 1.0)
    at_rest.event("CREATE_COMPLETE", 1.0)

    # When the restarted runtime settles them
    a, b, c = settled(updating, running, 9.0), settled(creating, None, 9.0), settled(at_rest, None, 9.0)

    # Then the running stack's record describes what runs (its parameters as given), its history kept and
    # saying why it ends there; the stack that was being created is gone; the one at rest is as it was
    assert a is not None
    assert (a.status, a.parameters) == ("CREATE_COMPLETE", {"Version": "/cdk/version"})
    assert [event.status for event in a.events][:2] == ["CREATE_COMPLETE", "UPDATE_IN_PROGRESS"]
    assert a.events[-1].reason == STOPPED_DURING
    assert b is None
    assert c is at_rest

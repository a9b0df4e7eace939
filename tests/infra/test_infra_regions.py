"""One outbox across regions: the sample's multi-region variant (`cdk synth -c regions=us-east-1,us-west-2`),
synthesized once for the module with cdk-nag on (a finding fails it), and the single-region template kept as
it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox import outputs
from outbox import stream_mapping as mapping
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    only,
    resources,
    role_of,
    statements_of_role,
)
from tests.support.synth import cdk_json_context

PUBLISHER = "outbox_publisher.handler.handler"
SWEEPER = "outbox_sweeper.handler.handler"
HOME, REPLICA = "us-east-1", "us-west-2"
REPLICA_STACK = f"OutboxStack-{REPLICA}"
REGION_ENV = (
    "OUTBOX_REGION",
    "OUTBOX_REGIONS",
    "OUTBOX_TAKEOVER_AFTER_SECONDS",
    "OUTBOX_SWEEP_INTERVAL_SECONDS",
    "OUTBOX_SWEEPER_TIMEOUT_SECONDS",
)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from infra.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out.regions")
    app, _ = build_app({**cdk_json_context(), "regions": f"{HOME},{REPLICA}"}, outdir=str(outdir))
    assembly = app.synth()
    found: dict[str, Any] = {stack.stack_name: stack for stack in assembly.stacks}
    found["validation-report"] = json.loads((outdir / "validation-report.json").read_text())
    return found


@pytest.fixture(scope="module")
def home(stacks: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = stacks["OutboxStack"].template
    return template


@pytest.fixture(scope="module")
def replica(stacks: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = stacks[REPLICA_STACK].template
    return template


def _environment(template: dict[str, Any], handler: str) -> dict[str, Any]:
    _, function = function_by_handler(template, handler)
    variables: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return variables


def _patterns(template: dict[str, Any]) -> list[dict[str, Any]]:
    _, source = only(template, "AWS::Lambda::EventSourceMapping", "OutboxPublisher")
    return [json.loads(found["Pattern"]) for found in source["Properties"]["FilterCriteria"]["Filters"]]


def test_the_app_has_a_stack_per_region_the_replica_deployed_after_home(stacks: dict[str, Any]) -> None:
    # Given the sample synthesized with two regions
    # When its stacks are listed
    # Then the home stack (the sample's own name) is in us-east-1, the replica's in us-west-2, after home
    assert set(stacks) - {"validation-report"} == {"OutboxStack", REPLICA_STACK}
    assert stacks["OutboxStack"].environment.region == HOME
    assert stacks[REPLICA_STACK].environment.region == REPLICA
    assert "OutboxStack" in [dependency.id for dependency in stacks[REPLICA_STACK].dependencies]


def test_the_home_table_is_a_global_table_with_a_replica_per_region(home: dict[str, Any]) -> None:
    # Given the home stack
    # When its outbox table is read
    assert not resources(home, "AWS::DynamoDB::Table").keys() & {"OutboxTable"}
    _, table = only(home, "AWS::DynamoDB::GlobalTable", "OutboxTable")
    properties = table["Properties"]

    # Then it is a global table: both regions, new and old images, AWS's managed key, the failed index,
    # PITR and deletion protection in every replica, named for the replica stacks to find
    assert sorted(replica["Region"] for replica in properties["Replicas"]) == [HOME, REPLICA]
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert properties["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
    assert [index["IndexName"] for index in properties["GlobalSecondaryIndexes"]] == ["failed"]
    for replica in properties["Replicas"]:
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert replica["DeletionProtectionEnabled"] is True
    assert properties["TableName"] == "OutboxStack-Outbox-table"
    assert table["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("handler", [PUBLISHER, SWEEPER])
def test_each_region_functions_know_their_region_the_ring_and_the_takeover_time(
    home: dict[str, Any], replica: dict[str, Any], handler: str
) -> None:
    # Given the publisher and the sweeper of each region
    # When their environments are read
    # Then each names its own region, the ring home first, the default takeover time, and the sweeper's
    # schedule and timeout (the region decisions count in them)
    for template, region in ((home, HOME), (replica, REPLICA)):
        environment = _environment(template, handler)
        assert {name: environment[name] for name in REGION_ENV} == {
            "OUTBOX_REGION": region,
            "OUTBOX_REGIONS": f"{HOME},{REPLICA}",
            "OUTBOX_TAKEOVER_AFTER_SECONDS": "600",
            "OUTBOX_SWEEP_INTERVAL_SECONDS": "60",
            "OUTBOX_SWEEPER_TIMEOUT_SECONDS": "120",
        }


def test_each_publisher_mapping_passes_only_its_own_origins_new_rows(
    home: dict[str, Any], replica: dict[str, Any]
) -> None:
    # Given each region's stream mapping
    # When its filter patterns are read
    home_patterns, replica_patterns = _patterns(home), _patterns(replica)

    # Then home passes INSERTs and rewritten slots (the writer-contract MODIFY pattern, as a single region has
    # it) of its origin and of rows without one; the replica its origin's only
    contract = mapping.PUBLISHER_FILTER_PATTERNS[1]

    def modify(origin: object) -> dict[str, Any]:
        images = dict(contract["dynamodb"])  # type: ignore[call-overload]
        return {
            **contract,
            "dynamodb": {**images, "NewImage": {**images["NewImage"], "origin": {"S": [origin]}}},
        }

    absent = {"exists": False}
    assert home_patterns == [
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"origin": {"S": [HOME]}}}},
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"origin": {"S": [absent]}}}},
        modify(HOME),
        modify(absent),
    ]
    assert replica_patterns == [
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"origin": {"S": [REPLICA]}}}},
        modify(REPLICA),
    ]


def test_the_replica_reads_its_stream_arn_from_describe_table_allowed_on_that_table_alone(
    replica: dict[str, Any],
) -> None:
    # Given the replica stack's custom resource and stream mapping
    lookup_id, lookup = only(replica, "Custom::AWS")
    _, source = only(replica, "AWS::Lambda::EventSourceMapping", "OutboxPublisher")

    # When the call it makes and the policy of its provider are read
    create = json.loads(lookup["Properties"]["Create"])
    policies = [
        policy
        for policy in resources(replica, "AWS::IAM::Policy").values()
        if lookup_id in json.dumps(policy.get("DependsOn", [])) or "DescribeTable" in json.dumps(policy)
    ]

    # Then it asks DynamoDB for the named table's latest stream, the mapping reads that ARN, and the only
    # permission granted for it is DescribeTable on that one table in this region
    assert (create["service"], create["action"]) == ("DynamoDB", "describeTable")
    assert create["parameters"] == {"TableName": "OutboxStack-Outbox-table"}
    assert create["outputPaths"] == ["Table.LatestStreamArn"]
    assert source["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [lookup_id, "Table.LatestStreamArn"]}
    assert len(policies) == 1
    [statement] = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "dynamodb:DescribeTable"
    resource = json.dumps(statement["Resource"])
    assert f":dynamodb:{REPLICA}:" in resource
    assert resource.endswith(':table/OutboxStack-Outbox-table"]]}')


def test_the_replica_publisher_reads_its_stream_and_updates_its_table_only(replica: dict[str, Any]) -> None:
    # Given the replica's publisher role
    _, function = function_by_handler(replica, PUBLISHER)
    granted = actions_by_resource(statements_of_role(replica, role_of(function)))

    # When its table grants are read
    table = {resource: actions for resource, actions in granted.items() if "dynamodb" in "".join(actions)}

    # Then the stream's read actions are on the looked-up stream ARN, the row actions on the replica table
    stream = [resource for resource in table if "Table.LatestStreamArn" in resource]
    assert len(stream) == 1
    assert table[stream[0]] == {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    }
    rows = [resource for resource in table if resource.endswith("table/OutboxStack-Outbox-table")]
    assert len(rows) == 1
    assert table[rows[0]] == {"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"}


def test_the_replica_has_its_own_destinations_queues_and_outputs(replica: dict[str, Any]) -> None:
    # Given the replica stack
    # When its resources and outputs are read
    # Then it has its own topic, bus, poison and on-failure queues, and every output the commands read
    assert len(resources(replica, "AWS::Events::EventBus")) == 1
    assert {"PoisonQueueUrl", "OnFailureQueueUrl", "TopicArn"} <= set(replica["Outputs"])
    assert set(outputs.OUTBOX_OUTPUTS) | set(outputs.REGION_OUTPUTS) <= set(replica["Outputs"])
    assert replica["Outputs"][outputs.OUTBOX_REGIONS]["Value"] == f"{HOME},{REPLICA}"
    assert replica["Outputs"][outputs.TAKEOVER_AFTER_SECONDS]["Value"] == "600"
    assert replica["Outputs"][outputs.OUTBOX_TABLE_NAME]["Value"] == "OutboxStack-Outbox-table"


@pytest.mark.parametrize(("stack", "region"), [("OutboxStack", HOME), (REPLICA_STACK, REPLICA)])
def test_each_region_alarms_on_a_silent_peer_and_on_a_takeover(
    stacks: dict[str, Any], stack: str, region: str
) -> None:
    # Given the region's alarms
    template = stacks[stack].template
    alarms = {
        alarm["Properties"]["MetricName"]: alarm["Properties"]
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values()
    }

    # When the two region alarms are read
    heartbeat, takeover = alarms["RegionHeartbeatAgeSeconds"], alarms["TakeoverInProgress"]

    # Then both watch this region's sweeper metric (Region dimension), the heartbeat at the takeover time,
    # the takeover at any origin held; both link their runbook section and are on the dashboard
    for alarm in (heartbeat, takeover):
        dimensions = {item["Name"]: item["Value"] for item in alarm["Dimensions"]}
        assert dimensions["Region"] == region
        assert dimensions["service"].endswith("-sweeper")
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert heartbeat["Threshold"] == 600
    assert takeover["Threshold"] == 1
    assert heartbeat["AlarmDescription"].endswith("Runbook: docs/runbook.md#regionheartbeatage")
    assert takeover["AlarmDescription"].endswith("Runbook: docs/runbook.md#takeoverinprogress")
    _, dashboard = only(template, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "RegionHeartbeatAgeSeconds" in body
    assert "TakeoverInProgress" in body


def test_the_provider_function_carries_its_checkov_reasons(replica: dict[str, Any]) -> None:
    # Given the AwsCustomResource's provider function (CDK's)
    _, lookup = only(replica, "Custom::AWS")
    provider_id = lookup["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    provider = replica["Resources"][provider_id]

    # When its checkov acknowledgements are read
    skips = {skip["id"]: skip["comment"] for skip in provider["Metadata"]["checkov"]["skip"]}

    # Then the three function checks that do not apply to it are acknowledged, each with a reason
    assert set(skips) == {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"}
    assert all(len(reason) > 40 for reason in skips.values())


def test_a_writer_gets_its_region_as_origin(tmp_path_factory: pytest.TempPathFactory) -> None:
    from aws_cdk import App, Environment, Stack

    from outbox_cdk import Outbox, OutboxProps, OutboxRegions, OutboxReplica, OutboxReplicaProps

    # Given a home outbox and a replica
    regions = OutboxRegions(home=HOME, replicas=[REPLICA])
    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.writer")))
    home = Outbox(Stack(app, "Home", env=Environment(region=HOME)), "Outbox", OutboxProps(regions=regions))
    assert home.global_table_name is not None
    replica = OutboxReplica(
        Stack(app, "Replica", env=Environment(region=REPLICA)),
        "Outbox",
        OutboxReplicaProps(regions=regions, table_name=home.global_table_name),
    )

    # When their writer environments are read
    # Then each names its own region as the rows' origin, and the same table
    assert home.writer_environment["OUTBOX_ORIGIN"] == HOME
    assert replica.writer_environment["OUTBOX_ORIGIN"] == REPLICA
    assert replica.outbox.table.table_name == home.global_table_name


def test_a_single_region_template_has_nothing_of_regions(template: dict[str, Any]) -> None:
    # Given the sample synthesized without regions (byte-identical to the template before regions existed,
    # but for the functions' asset hashes: checked by hand against main when this was written)
    # When its table, functions, mapping, alarms and outputs are read
    # Then the table is a plain table, no function has a region setting, the mapping's patterns are the
    # single-region ones, and there is no region alarm, output or custom resource
    assert not resources(template, "AWS::DynamoDB::GlobalTable")
    assert not resources(template, "Custom::AWS")
    for handler in (PUBLISHER, SWEEPER):
        assert not set(_environment(template, handler)) & {*REGION_ENV, "OUTBOX_ORIGIN"}
    assert _patterns(template) == [dict(pattern) for pattern in mapping.PUBLISHER_FILTER_PATTERNS]
    metric_names = {
        alarm["Properties"].get("MetricName")
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    assert not metric_names & {"RegionHeartbeatAgeSeconds", "TakeoverInProgress"}
    assert not set(template["Outputs"]) & set(outputs.REGION_OUTPUTS)


def test_cdk_nag_passed_both_stacks_every_acknowledgement_used(stacks: dict[str, Any]) -> None:
    # Given the multi-region synthesis (it would have raised on an unacknowledged finding)
    reports = {report["pluginName"]: report for report in stacks["validation-report"]["pluginReports"]}

    # When the AwsSolutions report is read
    report = reports["AwsSolutions"]

    # Then it passed, and the provider role's one acknowledgement silenced a finding that occurs
    assert report["conclusion"] == "success"
    assert report["violations"] == []
    provider_findings = [
        violation
        for violation in report["suppressedViolations"]
        if violation["acknowledgedId"].endswith("AWSLambdaBasicExecutionRole]")
        and "AWS679f53fac002430cb0da5b7982bd2287" in violation["acknowledgedAt"]
    ]
    assert provider_findings


@pytest.mark.parametrize(
    ("stack", "region", "peer"), [("OutboxStack", HOME, REPLICA), (REPLICA_STACK, REPLICA, HOME)]
)
def test_each_sweeper_reads_the_takeover_records_in_the_other_regions_replica_only(
    stacks: dict[str, Any], stack: str, region: str, peer: str
) -> None:
    # Given a region's sweeper role
    template: dict[str, Any] = stacks[stack].template
    _, function = function_by_handler(template, SWEEPER)
    granted = actions_by_resource(statements_of_role(template, role_of(function)))

    # When the grants on the other region's endpoint are read
    elsewhere = {
        resource: actions for resource, actions in granted.items() if f":dynamodb:{peer}:" in resource
    }

    # Then it may read items (the #taken# records, BatchGetItem) of the table's replica there, and nothing
    # else: no write, no other table, no other region
    assert len(elsewhere) == 1
    [(resource, actions)] = elsewhere.items()
    assert actions == {"dynamodb:BatchGetItem"}
    assert resource.startswith(f"Join:arn:aws:dynamodb:{peer}:Ref:AWS::AccountId:table/")
    table = resource.rsplit("table/", 1)[1]
    assert table == "OutboxStack-Outbox-table" or table.startswith("Ref:OutboxTable")  # the same name
    # and its own region's grants are as before: no other region's ARN carries any other action
    assert all(region in r or peer in r or ":dynamodb:" not in r for r in granted)

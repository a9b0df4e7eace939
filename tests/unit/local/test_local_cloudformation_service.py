"""The local CloudFormation's stack operations on a host that records what it is asked to do: statuses,
events, rollbacks, change sets with no changes or refused changes. No server, no moto."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import quote

import pytest

from outbox_local.cloudformation.api import CloudFormationApi
from outbox_local.cloudformation.changes import Deployed
from outbox_local.cloudformation.host import CloudFormationError, Progress, RunningStack
from outbox_local.cloudformation.service import CloudFormationService
from outbox_local.cloudformation.wire import Request
from outbox_local.errors import ProvisioningError
from outbox_local.template import ResolvedResource, Template


def template(**resources: Any) -> str:
    return json.dumps({"Resources": resources or {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}})


class FakeHost:
    region = "us-east-1"

    def __init__(self) -> None:
        self.stacks: dict[str, RunningStack] = {}
        self.fail_on: str | None = None
        self.calls: list[str] = []

    def running(self) -> Mapping[str, RunningStack]:
        return dict(self.stacks)

    def exclusive(self) -> AbstractContextManager[object]:
        return nullcontext()

    def _provision(
        self, name: str, stack_id: str, body: Template, values: Mapping[str, str], progress: Progress
    ) -> None:
        resources = {}
        for logical_id, resource in body.resources.items():
            if logical_id == self.fail_on:
                progress(logical_id, resource.type, None, "CREATE_FAILED", "boom")
                raise ProvisioningError(f"{logical_id}: boom")
            progress(logical_id, resource.type, f"{name}-{logical_id}", "CREATE_COMPLETE", None)
            resources[logical_id] = (resource.type, ResolvedResource(f"{name}-{logical_id}"))
        self.stacks[name] = RunningStack(
            stack_id, 0.0, Deployed(body, dict(values), resources, self.region, name)
        )

    def create(
        self, name: str, stack_id: str, body: Template, values: Mapping[str, str], progress: Progress
    ) -> None:
        self.calls.append(f"create {name}")
        self._provision(name, stack_id, body, values, progress)

    def update(
        self,
        name: str,
        body: Template,
        values: Mapping[str, str],
        progress: Progress,
        *,
        code_from_s3: bool = True,
    ) -> None:
        self.calls.append(f"update {name} {sorted(body.resources)}")
        self._provision(name, self.stacks[name].stack_id, body, values, progress)

    def delete(self, name: str, progress: Progress) -> list[str]:
        self.calls.append(f"delete {name}")
        self.stacks.pop(name, None)
        return []

    def exports(self) -> dict[str, str]:
        return {}

    def template_text(self, url: str) -> str:
        raise AssertionError("not used")

    def read_ssm(self, name: str) -> str | None:
        return None


@pytest.fixture
def host() -> FakeHost:
    return FakeHost()


@pytest.fixture
def service(host: FakeHost) -> CloudFormationService:
    return CloudFormationService(host)


def deploy(service: CloudFormationService, name: str, body: str, kind: str = "CREATE") -> str:
    change_set, _ = service.create_change_set(
        name, "cs", kind, template_text=body, use_previous_template=False, given={}, use_previous=set()
    )
    if change_set.status == "CREATE_COMPLETE":
        service.execute_change_set(change_set.arn, None)
        service.wait()
    return change_set.status


def statuses(service: CloudFormationService, name: str) -> list[str]:
    record = service.stack(name, deleted_too=True)
    return [f"{e.logical_id}:{e.status}" for e in record.events]


def test_a_create_then_an_update_then_a_delete(service: CloudFormationService, host: FakeHost) -> None:
    # Given a stack created from a change set
    assert deploy(service, "App", template()) == "CREATE_COMPLETE"
    stack_id = service.stack("App").stack_id
    # When a second template adds a topic, and the stack is then deleted
    assert (
        deploy(
            service,
            "App",
            template(Queue={"Type": "AWS::SQS::Queue"}, Topic={"Type": "AWS::SNS::Topic"}),
            "UPDATE",
        )
        == "CREATE_COMPLETE"
    )
    assert service.stack("App").status == "UPDATE_COMPLETE"
    service.delete_stack("App")
    service.wait()
    # Then the host did each, the events tell the story, and the deleted stack is described by its id only
    assert host.calls == ["create App", "update App ['Queue', 'Topic']", "delete App"]
    assert statuses(service, stack_id)[:3] == [
        "App:REVIEW_IN_PROGRESS",
        "App:CREATE_IN_PROGRESS",
        "Queue:CREATE_COMPLETE",
    ]
    assert statuses(service, stack_id)[-1] == "App:DELETE_COMPLETE"
    assert service.stack(stack_id, deleted_too=True).status == "DELETE_COMPLETE"
    with pytest.raises(CloudFormationError, match="does not exist"):
        service.stack("App")


def test_a_failed_create_is_rolled_back_with_the_error_in_the_events(
    service: CloudFormationService, host: FakeHost
) -> None:
    # Given a host that fails the second resource
    host.fail_on = "Topic"
    # When the stack is created
    deploy(service, "App", template(Queue={"Type": "AWS::SQS::Queue"}, Topic={"Type": "AWS::SNS::Topic"}))
    # Then it ends ROLLBACK_COMPLETE, what was made deleted, the failing resource and its error in the events
    record = service.stack("App")
    assert record.status == "ROLLBACK_COMPLETE"
    events = {(e.logical_id, e.status): e.reason for e in record.events}
    assert events[("Topic", "CREATE_FAILED")] == "boom"
    assert "The following resource(s) failed to create: [Topic]" in str(
        events[("App", "ROLLBACK_IN_PROGRESS")]
    )
    assert host.calls == ["create App", "delete App"]


def test_a_failed_update_goes_back_to_the_previous_template(
    service: CloudFormationService, host: FakeHost
) -> None:
    deploy(service, "App", template())
    host.fail_on = "Topic"
    deploy(
        service,
        "App",
        template(Queue={"Type": "AWS::SQS::Queue"}, Topic={"Type": "AWS::SNS::Topic"}),
        "UPDATE",
    )
    assert service.stack("App").status == "UPDATE_ROLLBACK_COMPLETE"
    assert host.calls[-1] == "update App ['Queue']"


def test_the_same_template_again_is_a_change_set_without_changes(service: CloudFormationService) -> None:
    # Given a deployed stack; when the same template comes again
    deploy(service, "App", template())
    status = deploy(service, "App", template(), "UPDATE")
    # Then the change set fails with the words the CDK CLI reads as "no changes"
    assert status == "FAILED"
    _, change_set = service.change_set("cs", "App")
    assert str(change_set.status_reason).startswith("The submitted information didn't contain changes.")


def test_a_resource_type_the_runtime_cannot_run_fails_the_change_set_naming_it(
    service: CloudFormationService, host: FakeHost
) -> None:
    status = deploy(service, "App", template(Db={"Type": "AWS::RDS::DBInstance", "Properties": {}}))
    assert status == "FAILED"
    _, change_set = service.change_set("cs", "App")
    assert "AWS::RDS::DBInstance" in str(change_set.status_reason)
    assert host.calls == []


def test_the_api_answers_describe_stacks_and_refuses_what_it_does_not_implement(
    service: CloudFormationService,
) -> None:
    api = CloudFormationApi(service)
    deploy(service, "App", template())
    status, body = api.handle(Request("Action=DescribeStacks&StackName=App"))
    assert status == "200 OK"
    assert b"<StackStatus>CREATE_COMPLETE</StackStatus>" in body
    status, body = api.handle(Request("Action=DescribeStacks&StackName=Nope"))
    assert status.startswith("400")
    assert b"Stack with id Nope does not exist" in body
    status, body = api.handle(Request("Action=CreateStackSet&StackSetName=x"))
    assert status.startswith("400")
    assert b"does not implement CreateStackSet" in body


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"Rules": {"Check": {"Assertions": [{"AssertDescription": "x"}]}}}, b"Rule Check"),
        ({"Rules": {"Check": {"Assertions": "not a list"}}}, b"Rule Check"),
        ({"Rules": ["Check"]}, b"Rules"),
        ({"Parameters": ["Stage"]}, b"Parameters"),
        ({"Parameters": {"Stage": "dev"}}, b"Parameter Stage"),
    ],
)
def test_a_malformed_parameters_or_rules_section_is_a_validation_error_naming_it(
    service: CloudFormationService, body: dict[str, Any], named: bytes
) -> None:
    # Given a template whose Parameters or Rules have the wrong shape
    text = json.dumps({**body, "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}})
    api = CloudFormationApi(service)
    # When a change set is created from it
    query = "&".join(
        [
            "Action=CreateChangeSet",
            "StackName=App",
            "ChangeSetName=cs",
            "ChangeSetType=CREATE",
            f"TemplateBody={quote(text)}",
        ]
    )
    status, answer = api.handle(Request(query))
    # Then the answer is a ValidationError naming the section, not a server error
    assert status.startswith("400"), answer
    assert b"<Code>ValidationError</Code>" in answer
    assert named in answer

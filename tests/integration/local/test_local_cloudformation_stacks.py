"""Stacks deployed through the runtime's CloudFormation with plain boto3 (what `cdk deploy` does, without the
CLI): an update that keeps the stream mapping's position (every event delivered once, in order, across it),
a change the runtime cannot apply in place refused before anything is touched, a failed create rolled back
with its error in the events, several stacks at once."""

from __future__ import annotations

import copy
import io
import json
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from outbox_cli.local import describe
from outbox_local.cloudformation.host import CloudFormationError
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import (
    HANDLERS,
    function,
    options,
    queue_template,
    template,
    write_template,
)

BOOTSTRAP_VERSION = "/cdk-bootstrap/hnb659fds/version"


def bootstrapped(runtime: LocalRuntime) -> LocalRuntime:
    """As after `cdk bootstrap` and the assets' upload: the version parameter, and the test handlers' code
    where the templates' functions say it is (s3://assets/code.zip)."""
    runtime.client("ssm").put_parameter(Name=BOOTSTRAP_VERSION, Type="String", Value="33")
    s3 = runtime.client("s3")
    s3.create_bucket(Bucket="assets")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in HANDLERS.glob("*.py"):
            bundle.write(path, path.name)
    s3.put_object(Bucket="assets", Key="code.zip", Body=archive.getvalue())
    return runtime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    """A runtime with no stack, bootstrapped."""
    with LocalRuntime(options(None, state_dir=tmp_path / "state")) as started:
        yield bootstrapped(started)


def deploy(runtime: LocalRuntime, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create and execute a change set as the CDK CLI does; the change set as described, once it ran."""
    cloudformation = runtime.client("cloudformation")
    exists = name in {stack["StackName"] for stack in cloudformation.describe_stacks()["Stacks"]}
    created = cloudformation.create_change_set(
        StackName=name,
        ChangeSetName="cdk-deploy-change-set",
        ChangeSetType="UPDATE" if exists else "CREATE",
        TemplateBody=json.dumps(body),
    )
    described: dict[str, Any] = cloudformation.describe_change_set(ChangeSetName=created["Id"])
    if described["Status"] == "CREATE_COMPLETE":
        cloudformation.execute_change_set(ChangeSetName=created["Id"])
        runtime.cloudformation.wait()
    return described


def status(runtime: LocalRuntime, name: str) -> str:
    (stack,) = runtime.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
    return str(stack["StackStatus"])


def outputs(runtime: LocalRuntime, name: str) -> dict[str, str]:
    (stack,) = runtime.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}


def delivered(runtime: LocalRuntime, queue_url: str) -> list[str]:
    sqs = runtime.client("sqs")
    bodies = []
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def put_items(runtime: LocalRuntime, table: str, *keys: str) -> None:
    for key in keys:
        runtime.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": key}})


def test_an_update_changes_a_function_and_every_event_is_delivered_once_in_order(
    runtime: LocalRuntime,
) -> None:
    # Given the stack deployed, three items delivered by its stream mapping, two more written and not yet
    deploy(runtime, "Items", template())
    found = outputs(runtime, "Items")
    put_items(runtime, found["TableName"], "a1", "a2", "a3")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["a1", "a2", "a3"]
    put_items(runtime, found["TableName"], "a4", "a5")

    # When a new template changes a function's variables (and only that)
    changed = template()
    changed["Resources"]["EnvFn"]["Properties"]["Environment"]["Variables"]["LOCAL_VERSION"] = "2"
    change_set = deploy(runtime, "Items", changed)

    # Then the change set names that function alone, the stack is updated, the function runs its new settings
    assert [
        (c["ResourceChange"]["Action"], c["ResourceChange"]["LogicalResourceId"])
        for c in change_set["Changes"]
    ] == [("Modify", "EnvFn")]
    assert status(runtime, "Items") == "UPDATE_COMPLETE"
    env_fn = next(
        spec for spec in runtime.stacks["Items"].provisioned.functions if spec.logical_id == "EnvFn"
    )
    assert runtime.invoke(env_fn.arn, {}).payload["LOCAL_VERSION"] == "2"
    # And the stream mapping went on after the last record it was done with: what waited is delivered, what
    # was delivered is not again, a write after the update too, each once, in order; the table kept its items
    put_items(runtime, found["TableName"], "a6")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["a4", "a5", "a6"]
    assert runtime.client("dynamodb").scan(TableName=found["TableName"])["Count"] == 6


def test_a_change_the_runtime_cannot_apply_in_place_is_refused_before_anything_changes(
    runtime: LocalRuntime,
) -> None:
    # Given the stack deployed, with an item
    deploy(runtime, "Items", template())
    table = outputs(runtime, "Items")["TableName"]
    put_items(runtime, table, "kept")
    # When a new template changes the table's key (CloudFormation would replace the table)
    changed = template()
    changed["Resources"]["Items"]["Properties"]["KeySchema"] = [{"AttributeName": "id", "KeyType": "HASH"}]
    changed["Resources"]["Items"]["Properties"]["AttributeDefinitions"] = [
        {"AttributeName": "id", "AttributeType": "S"}
    ]
    change_set = deploy(runtime, "Items", changed)
    # Then the change set fails naming the table and what changed; the stack and its data are as they were
    assert change_set["Status"] == "FAILED"
    assert "Items (AWS::DynamoDB::Table): AttributeDefinitions, KeySchema" in change_set["StatusReason"]
    assert status(runtime, "Items") == "CREATE_COMPLETE"
    assert runtime.client("dynamodb").scan(TableName=table)["Count"] == 1


def test_a_failed_create_is_rolled_back_with_the_error_in_the_events(runtime: LocalRuntime) -> None:
    # Given a template whose function names code that was never uploaded, after a table it refers to and
    # an HTTP API
    broken = function("stream", {"TABLE_NAME": {"Ref": "Items"}})
    broken["Properties"]["Code"]["S3Key"] = "never-uploaded.zip"
    body = {
        "Resources": {
            "Items": template()["Resources"]["Items"],
            "Api": template()["Resources"]["Api"],
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            "Broken": broken,
        }
    }
    # When it is deployed
    deploy(runtime, "Broken", body)
    # Then the stack is ROLLBACK_COMPLETE, the function's failure and its cause in the events, the table
    # it created deleted, nothing left running
    assert status(runtime, "Broken") == "ROLLBACK_COMPLETE"
    events = runtime.client("cloudformation").describe_stack_events(StackName="Broken")["StackEvents"]
    failed = [e for e in events if e["ResourceStatus"] == "CREATE_FAILED"]
    assert [e["LogicalResourceId"] for e in failed] == ["Broken"]
    assert "s3://assets/never-uploaded.zip cannot be read: NoSuchKey" in failed[0]["ResourceStatusReason"]
    assert ("Items", "DELETE_COMPLETE") in {(e["LogicalResourceId"], e["ResourceStatus"]) for e in events}
    assert runtime.client("dynamodb").list_tables()["TableNames"] == []
    assert "Broken" not in runtime.stacks
    assert runtime.apis == {}  # the HTTP API it opened no longer holds its port


def test_several_stacks_run_at_once_each_under_its_own_name(runtime: LocalRuntime) -> None:
    # Given the same template deployed under two names
    for name in ("QueuesA", "QueuesB"):
        deploy(runtime, name, queue_template())
    a, b = outputs(runtime, "QueuesA"), outputs(runtime, "QueuesB")
    assert a["WorkUrl"] != b["WorkUrl"]
    # When one is deleted
    runtime.client("cloudformation").delete_stack(StackName="QueuesA")
    runtime.cloudformation.wait()
    # Then the other still runs: a message on its queue reaches its function
    runtime.client("sqs").send_message(QueueUrl=b["WorkUrl"], MessageBody="hello")
    runtime.drain_streams()
    seen = [json.loads(body)["Records"][0]["body"] for body in delivered(runtime, b["SeenUrl"])]
    assert seen == ["hello"]
    stacks = runtime.client("cloudformation").list_stacks()["StackSummaries"]
    assert {(s["StackName"], s["StackStatus"]) for s in stacks} == {
        ("QueuesA", "DELETE_COMPLETE"),
        ("QueuesB", "CREATE_COMPLETE"),
    }
    assert list(runtime.stacks) == ["QueuesB"]
    # And tools read its resources and template as on AWS
    cloudformation = runtime.client("cloudformation")
    resources = cloudformation.describe_stack_resources(StackName="QueuesB")["StackResources"]
    work = next(resource for resource in resources if resource["LogicalResourceId"] == "Work")
    assert (work["PhysicalResourceId"], work["ResourceStatus"]) == (b["WorkUrl"], "CREATE_COMPLETE")
    summaries = cloudformation.list_stack_resources(StackName="QueuesB")["StackResourceSummaries"]
    assert {summary["LogicalResourceId"] for summary in summaries} == set(queue_template()["Resources"])
    assert cloudformation.get_template(StackName="QueuesB")["TemplateBody"] == queue_template()


def test_a_failed_update_goes_back_to_the_previous_template_and_delivery_goes_on(
    runtime: LocalRuntime,
) -> None:
    # Given the stack deployed, an item delivered, another written and not yet
    deploy(runtime, "Items", template())
    found = outputs(runtime, "Items")
    put_items(runtime, found["TableName"], "b1")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["b1"]
    put_items(runtime, found["TableName"], "b2")
    # When an update adds a queue and a function whose code was never uploaded (after the queue)
    broken = function("stream", {"EXTRA_URL": {"Ref": "Extra"}})
    broken["Properties"]["Code"]["S3Key"] = "never-uploaded.zip"
    changed = template()
    changed["Resources"] |= {"Extra": {"Type": "AWS::SQS::Queue", "Properties": {}}, "Broken": broken}
    deploy(runtime, "Items", changed)
    # Then the stack went back to its previous template: the queue it added deleted, the failure in the events
    assert status(runtime, "Items") == "UPDATE_ROLLBACK_COMPLETE"
    events = runtime.client("cloudformation").describe_stack_events(StackName="Items")["StackEvents"]
    steps = {(e["LogicalResourceId"], e["ResourceStatus"]) for e in events}
    assert {("Broken", "CREATE_FAILED"), ("Extra", "DELETE_COMPLETE")} <= steps
    assert sorted(runtime.stacks["Items"].provisioned.resources) == sorted(template()["Resources"])
    assert not [url for url in runtime.client("sqs").list_queues()["QueueUrls"] if "Extra" in url]
    # And its stream mapping goes on from where it was: each item delivered once, in order
    put_items(runtime, found["TableName"], "b3")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["b2", "b3"]


def test_the_stack_local_up_started_with_takes_deploys_like_any_other(tmp_path: Path) -> None:
    # Given a runtime started with a template (as `outbox local up` starts with cdk.out's), bootstrapped
    with LocalRuntime(options(write_template(tmp_path, template()), stack_name="Items")) as started:
        runtime = bootstrapped(started)
        # When the same template is deployed: nothing to change (the CDK CLI then says "no changes")
        same = deploy(runtime, "Items", template())
        assert same["Status"] == "FAILED"
        assert same["StatusReason"].startswith("The submitted information didn't contain changes.")
        # When a changed one is: the stack is updated in place
        changed = template()
        changed["Resources"]["EnvFn"]["Properties"]["Environment"]["Variables"]["LOCAL_VERSION"] = "2"
        deploy(runtime, "Items", changed)
        assert status(runtime, "Items") == "UPDATE_COMPLETE"
        env_fn = next(
            spec for spec in runtime.stacks["Items"].provisioned.functions if spec.logical_id == "EnvFn"
        )
        assert runtime.invoke(env_fn.arn, {}).payload["LOCAL_VERSION"] == "2"


def test_a_stack_imports_another_stacks_export_which_then_cannot_be_deleted(runtime: LocalRuntime) -> None:
    # Given a stack that exports its queue's URL, and a second one whose function imports it
    exporter = queue_template()
    exporter["Outputs"]["WorkUrl"]["Export"] = {"Name": "shared-work-url"}
    deploy(runtime, "Exporter", exporter)
    importer = queue_template()
    variables = importer["Resources"]["QueueFn"]["Properties"]["Environment"]["Variables"]
    variables["SHARED_URL"] = {"Fn::ImportValue": "shared-work-url"}
    deploy(runtime, "Importer", importer)
    # Then the import resolved to the exporter's value
    assert status(runtime, "Importer") == "CREATE_COMPLETE"
    (queue_fn,) = runtime.stacks["Importer"].provisioned.functions
    assert queue_fn.environment["SHARED_URL"] == outputs(runtime, "Exporter")["WorkUrl"]
    # When the exporter is deleted while the export is in use, Then it is refused and keeps running
    cloudformation = runtime.client("cloudformation")
    cloudformation.delete_stack(StackName="Exporter")
    runtime.cloudformation.wait()
    (stack,) = cloudformation.describe_stacks(StackName="Exporter")["Stacks"]
    assert stack["StackStatus"] == "DELETE_FAILED"
    assert (
        stack["StackStatusReason"] == "Export shared-work-url cannot be deleted as it is in use by Importer"
    )
    assert "Exporter" in runtime.stacks
    # And once the importer is gone, the exporter goes too
    for name in ("Importer", "Exporter"):
        cloudformation.delete_stack(StackName=name)
        runtime.cloudformation.wait()
    assert runtime.stacks == {}


def test_a_deployed_stack_runs_again_after_a_restart_on_its_state_directory(tmp_path: Path) -> None:
    # Given a stack deployed into a runtime with a state directory (its code from the uploaded zip), one item
    # delivered by its stream mapping and one written but not yet
    state = tmp_path / "state"
    with LocalRuntime(options(None, state_dir=state)) as first:
        deploy(bootstrapped(first), "Items", template())
        found = outputs(first, "Items")
        put_items(first, found["TableName"], "before")
        first.drain_streams()
        assert delivered(first, found["DeliveredUrl"]) == ["before"]
        put_items(first, found["TableName"], "pending")
        stack_id = first.client("cloudformation").describe_stacks(StackName="Items")["Stacks"][0]["StackId"]

    # When a runtime starts again on the directory, with no template of its own
    with LocalRuntime(options(None, state_dir=state)) as second:
        # Then the deployed stack runs again under its id, from the code extracted in the state directory:
        # the pending item is delivered, the one delivered before is not, and a new one is
        assert second.restored
        assert list(second.stacks) == ["Items"]
        assert "stacks Items (from the state directory)" in describe(second)  # what `local up` prints
        (described,) = second.client("cloudformation").describe_stacks(StackName="Items")["Stacks"]
        assert (described["StackId"], described["StackStatus"]) == (stack_id, "CREATE_COMPLETE")
        code_roots = {spec.code_root for spec in second.stacks["Items"].provisioned.functions}
        assert all(root is not None and state in root.parents for root in code_roots)
        second.drain_streams()
        assert delivered(second, found["DeliveredUrl"]) == ["pending"]
        put_items(second, found["TableName"], "after")
        second.drain_streams()
        assert delivered(second, found["DeliveredUrl"]) == ["after"]


def test_after_a_restart_a_deploy_finds_the_parameters_as_given_and_the_history_goes_on(
    tmp_path: Path,
) -> None:
    # Given a stack deployed (its BootstrapVersion parameter an SSM parameter's name, as CDK's), then updated
    state = tmp_path / "state"
    with LocalRuntime(options(None, state_dir=state)) as first:
        deploy(bootstrapped(first), "Items", template())
        changed = template()
        changed["Outputs"]["Extra"] = {"Value": "extra"}
        deploy(first, "Items", changed)
        assert status(first, "Items") == "UPDATE_COMPLETE"

    # When a runtime starts again on the directory, and the stack is deployed again as the CDK CLI deploys an
    # existing stack: each parameter with UsePreviousValue
    with LocalRuntime(options(None, state_dir=state)) as second:
        cloudformation = second.client("cloudformation")
        (described,) = cloudformation.describe_stacks(StackName="Items")["Stacks"]
        again = template()
        again["Outputs"]["Again"] = {"Value": "again"}
        created = cloudformation.create_change_set(
            StackName="Items",
            ChangeSetName="cdk-deploy-change-set",
            ChangeSetType="UPDATE",
            TemplateBody=json.dumps(again),
            Parameters=[{"ParameterKey": "BootstrapVersion", "UsePreviousValue": True}],
        )
        change_set = cloudformation.describe_change_set(ChangeSetName=created["Id"])
        cloudformation.execute_change_set(ChangeSetName=created["Id"])
        second.cloudformation.wait()

        # Then the stack is described as before the restart (its status, its parameter as given, its
        # history), and the deploy goes through
        assert described["StackStatus"] == "UPDATE_COMPLETE"
        assert described["Parameters"] == [
            {"ParameterKey": "BootstrapVersion", "ParameterValue": BOOTSTRAP_VERSION}
        ]
        assert change_set["Status"] == "CREATE_COMPLETE", change_set.get("StatusReason")
        assert status(second, "Items") == "UPDATE_COMPLETE"
        assert outputs(second, "Items")["Again"] == "again"
        history = [
            event["ResourceStatus"]
            for event in reversed(cloudformation.describe_stack_events(StackName="Items")["StackEvents"])
            if event["LogicalResourceId"] == "Items"
        ]
        # (the update before the restart, and the one after it)
        assert history.count("UPDATE_COMPLETE") == 2
        assert history.index("CREATE_COMPLETE") < history.index("UPDATE_COMPLETE")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_api_keeps_its_url_and_the_start_up_stack_its_place_through_updates_and_a_restart(
    tmp_path: Path,
) -> None:
    # Given a runtime started with a stack whose API has the port the user chose, and a second stack with
    # an API of its own deployed beside it; then the start-up stack updated (detached, attached again)
    port, state = free_port(), tmp_path / "state"
    path = write_template(tmp_path, template())
    first_options = options(path, state_dir=state, api_port=port)
    other = template()
    other["Resources"]["Bus"]["Properties"]["Name"] = "other-bus"
    with LocalRuntime(first_options) as first:
        name = first.options.stack_name
        deploy(bootstrapped(first), "Other", other)
        other_url = outputs(first, "Other")["ApiUrl"]
        changed = template()
        changed["Outputs"]["Extra"] = {"Value": "extra"}
        deploy(first, name, changed)
        assert status(first, name) == "UPDATE_COMPLETE"
        assert first.api_url == f"http://127.0.0.1:{port}"

    # When a runtime starts again on the directory, with no template of its own
    with LocalRuntime(options(None, state_dir=state, api_port=port)) as second:
        # Then the start-up stack is still the one the runtime reports, on the port the user chose, and the
        # other stack's API answers at the URL its outputs gave before
        assert list(second.stacks) == [name, "Other"]
        assert second.outputs["Extra"] == "extra"
        assert second.api_url == f"http://127.0.0.1:{port}"
        assert outputs(second, "Other")["ApiUrl"] == other_url
        assert other_url.startswith(second.apis[second.stacks["Other"].api_ids[0]].url)


def test_an_update_that_repoints_the_mapping_and_the_rule_delivers_from_and_to_the_new_ones_only(
    runtime: LocalRuntime,
) -> None:
    # Given the stack deployed, three items delivered from its table's stream, an event through its bus rule
    body = template()
    deploy(runtime, "Items", body)
    found = outputs(runtime, "Items")
    put_items(runtime, found["TableName"], "a1", "a2", "a3")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["a1", "a2", "a3"]

    # When an update points the mapping at a new table's stream and the rule at a new queue (the old target
    # no longer in the template)
    changed = template()
    resources = changed["Resources"]
    resources["Items2"] = copy.deepcopy(resources["Items"])
    resources["Items2"]["Properties"]["TableName"] = "items-two"
    resources["Mapping"]["Properties"]["EventSourceArn"] = {"Fn::GetAtt": ["Items2", "StreamArn"]}
    resources["BusConsumer2"] = {"Type": "AWS::SQS::Queue"}
    resources["BusRule"]["Properties"]["Targets"] = [
        {"Id": "q2", "Arn": {"Fn::GetAtt": ["BusConsumer2", "Arn"]}}
    ]
    changed["Outputs"]["BusConsumer2Url"] = {"Value": {"Ref": "BusConsumer2"}}
    deploy(runtime, "Items", changed)
    assert status(runtime, "Items") == "UPDATE_COMPLETE"
    found = outputs(runtime, "Items")

    # Then the mapping reads the new stream from its starting position: all five items, once, in order
    put_items(runtime, "items-two", "b1", "b2", "b3", "b4", "b5")
    runtime.drain_streams()
    assert delivered(runtime, found["DeliveredUrl"]) == ["b1", "b2", "b3", "b4", "b5"]
    # And an event on the bus reaches the rule's new target only
    runtime.client("events").put_events(
        Entries=[{"Source": "local.tests", "DetailType": "t", "Detail": "{}", "EventBusName": "local-bus"}]
    )
    assert len(delivered(runtime, found["BusConsumer2Url"])) == 1
    assert delivered(runtime, found["BusConsumerUrl"]) == []


def test_a_delete_that_failed_is_retried_and_deletes_what_was_left(runtime: LocalRuntime) -> None:
    # Given a stack whose bucket holds an object, deleted: the bucket cannot go (DELETE_FAILED), its queue did
    body = {
        "Resources": {
            "Files": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "kept-files"}},
            "Work": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "kept-work"}},
        }
    }
    deploy(runtime, "Files", body)
    cloudformation = runtime.client("cloudformation")
    stack_id = cloudformation.describe_stacks(StackName="Files")["Stacks"][0]["StackId"]
    s3 = runtime.client("s3")
    s3.put_object(Bucket="kept-files", Key="report.txt", Body=b"x")
    cloudformation.delete_stack(StackName="Files")
    runtime.cloudformation.wait()
    assert status(runtime, "Files") == "DELETE_FAILED"
    assert "kept-files" in {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}

    # When the object is removed and the delete retried
    s3.delete_object(Bucket="kept-files", Key="report.txt")
    cloudformation.delete_stack(StackName="Files")
    runtime.cloudformation.wait()

    # Then the stack is deleted and so is its bucket (not reported deleted with the bucket still there)
    assert "kept-files" not in {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}
    assert "Files" not in {stack["StackName"] for stack in cloudformation.describe_stacks()["Stacks"]}
    events = cloudformation.describe_stack_events(StackName=stack_id)
    assert ("Files", "DELETE_COMPLETE") in {
        (e["LogicalResourceId"], e["ResourceStatus"]) for e in events["StackEvents"]
    }


def held_by_another_thread(lock: Any) -> bool:
    """Whether `lock` is held (by someone other than a fresh thread): what a snapshot's cut would find."""
    free: list[bool] = []

    def probe() -> None:
        if lock.acquire(timeout=0):
            lock.release()
            free.append(True)

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join()
    return not free


def test_a_rollback_runs_with_the_stacks_held_as_its_operation_does(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a host that notes, as each rollback step begins, whether a snapshot could cut there (the stacks
    # lock free: it would save the failed operation's resources without the stack that owns them)
    host = runtime.cloudformation.host
    steps: list[tuple[str, bool]] = []
    delete, update = host.delete, host.update

    def noting_delete(*args: Any, **kwargs: Any) -> Any:
        steps.append(("delete", held_by_another_thread(runtime.stacks_lock)))
        return delete(*args, **kwargs)

    def noting_update(*args: Any, **kwargs: Any) -> Any:
        steps.append(("update", held_by_another_thread(runtime.stacks_lock)))
        return update(*args, **kwargs)

    monkeypatch.setattr(host, "delete", noting_delete)
    monkeypatch.setattr(host, "update", noting_update)
    broken = function("stream", {})
    broken["Properties"]["Code"]["S3Key"] = "never-uploaded.zip"
    queue = {"Type": "AWS::SQS::Queue", "Properties": {}}

    # When a create fails and is rolled back, then an update fails and is rolled back
    deploy(runtime, "Created", {"Resources": {"Work": queue, "Broken": broken}})
    deploy(runtime, "Updated", {"Resources": {"Work": queue}})
    deploy(runtime, "Updated", {"Resources": {"Work": queue, "Extra": queue, "Broken": broken}})

    # Then each rollback ran, and began with the stacks held since its operation (no cut in between)
    assert status(runtime, "Created") == "ROLLBACK_COMPLETE"
    assert status(runtime, "Updated") == "UPDATE_ROLLBACK_COMPLETE"
    assert steps == [("delete", True), ("update", True), ("update", True)]


def test_stop_waits_for_the_stack_operation_under_way_and_refuses_new_ones() -> None:
    # Given a runtime whose stack creation is held until released, a deploy under way
    runtime = LocalRuntime(options(None))
    runtime.start()
    bootstrapped(runtime)
    host = runtime.cloudformation.host
    entered, release, created = threading.Event(), threading.Event(), threading.Event()
    create = host.create

    def held_create(*args: Any, **kwargs: Any) -> None:
        entered.set()
        release.wait(10)
        create(*args, **kwargs)
        created.set()

    host.create = held_create  # type: ignore[method-assign]
    failures: list[BaseException] = []

    def deploying() -> None:
        try:
            deploy(runtime, "Held", queue_template())
        except BaseException as error:  # the client's side: whatever it gets is fine here
            failures.append(error)

    client = threading.Thread(target=deploying)
    client.start()
    assert entered.wait(10)

    # When the runtime stops (the operation released a little later)
    stopping = threading.Thread(target=runtime.stop)
    stopping.start()
    refused = runtime.cloudformation
    deadline = time.monotonic() + 10
    answer = ""
    while "stopping" not in answer and time.monotonic() < deadline:
        # Before stop begins, the delete is refused for the create under way; once it began, for the stop
        with pytest.raises(CloudFormationError) as error:
            refused.delete_stack("Held")
        answer = str(error.value)
    assert "The local runtime is stopping" in answer
    release.set()
    stopping.join(30)
    client.join(30)

    # Then stop returned only once the operation ended (its stack created while the runtime still ran), and
    # the stack, like everything else, no longer runs
    assert not stopping.is_alive()
    assert created.is_set()
    assert refused.stack("Held").status == "CREATE_COMPLETE"

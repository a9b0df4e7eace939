"""A user's own stack (`PaymentsStack`: the README's snippet, one `Outbox` construct) run by `outbox local up`
under its own name: it publishes what a writer saves, the `outbox` commands operate it with no extra step, and
every command the runtime prints runs as printed from a fresh shell: no venv on PATH, no AWS variable, no AWS
configuration in HOME."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from outbox import DynamoDBTransactionExecutor, OutboxEvent, OutboxWriter, Transaction
from outbox_local.endpoint import LOCAL_CREDENTIALS
from tests.support.local_templates import running_local_up
from tests.support.own_stack import OWN_OUTPUT, STACK_NAME, synthesize_payments_stack

OUTBOX = Path(sys.executable).parent / "outbox"
"""The venv's `outbox` script, run by its path as a fresh shell runs it (the venv is not on PATH)."""
SYSTEM_PATH = "/usr/bin:/bin"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project directory after `cdk synth`: cdk.out holds PaymentsStack's template alone."""
    directory = tmp_path_factory.mktemp("payments")
    synthesize_payments_stack(directory / "cdk.out")
    return directory


@dataclass
class Started:
    process: subprocess.Popen[str]
    printed: str
    environment: dict[str, str]

    @property
    def endpoint(self) -> str:
        found = re.search(r"AWS endpoint\s+(http://127\.0\.0\.1:\d+)", self.printed)
        assert found, self.printed
        return found.group(1)

    def printed_command(self, marker: str) -> str:
        """The command on the line after the one that ends with `marker`."""
        lines = self.printed.splitlines()
        index = next(i for i, line in enumerate(lines) if line.rstrip().endswith(marker))
        return lines[index + 1].strip()


def fresh_environment(home: Path) -> dict[str, str]:
    """A fresh login shell's environment: the system's PATH (no venv), an empty HOME (no ~/.aws), no AWS_*.

    OUTBOX_LOCAL_STATE_DIR keeps this test's runtime apart from any other `outbox local up` running on the
    machine (tests in parallel): without it `local env` would see theirs too."""
    home.mkdir(exist_ok=True)
    return {"PATH": SYSTEM_PATH, "HOME": str(home), "OUTBOX_LOCAL_STATE_DIR": str(home / "state")}


@contextmanager
def local_up(project: Path, home: Path, *arguments: str) -> Iterator[Started]:
    environment = fresh_environment(home)
    with running_local_up(arguments, environment=environment, cwd=project, command=[str(OUTBOX)]) as up:
        yield Started(up.process, up.printed, environment)


def run_in_fresh_shell(command: str, started: Started, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - a command our own CLI printed
        ["/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        env=started.environment,
        cwd=cwd,
        timeout=120,
    )


def test_a_users_own_stack_runs_under_its_own_name_and_its_printed_commands_work_from_a_fresh_shell(
    project: Path, tmp_path: Path
) -> None:
    template = json.loads((project / "cdk.out" / f"{STACK_NAME}.template.json").read_text())
    assert shutil.which("outbox", path=SYSTEM_PATH) is None  # the shell below finds no `outbox` by itself

    # Given `outbox local up`, without --template, in the project of a user whose cdk.out holds PaymentsStack
    with local_up(project, tmp_path / "home") as started:
        text = started.printed

        # Then the banner names the stack and what it holds: the outbox's table, publisher and sweeper, its
        # topic and the alarm topic, its bus, its two failure queues, its alarms; no HTTP API
        assert f"outbox local runtime (moto, no AWS account): stack {STACK_NAME}\n" in text
        assert f"Template      cdk.out/{STACK_NAME}.template.json\n" in text
        assert (
            "Resources     1 table, 2 functions, 2 topics, 1 event bus, 2 queues, 8 alarms, no HTTP API\n"
            in text
        )
        assert "HTTP API  " not in text
        assert "Orders API" not in text
        # and every output of the template, whatever its name, prefixed ones and the user's own included
        outputs_section = text.split("  Outputs:", 1)[1].split("\n\n", 1)[0]
        printed_outputs = re.findall(r"^    (\w+)\s", outputs_section, re.MULTILINE)
        assert printed_outputs == list(template["Outputs"])
        assert OWN_OUTPUT in printed_outputs

        # When a tool describes the stack through CloudFormation
        cloudformation = boto3.client(
            "cloudformation", endpoint_url=started.endpoint, region_name="us-east-1", **LOCAL_CREDENTIALS
        )
        (stack,) = cloudformation.describe_stacks(StackName=STACK_NAME)["Stacks"]
        outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}

        # Then it is there under its own name with every output, each resource named after the stack
        assert set(outputs) == set(template["Outputs"])
        assert outputs["OutboxTableName"].startswith(f"{STACK_NAME}-OutboxTable")
        assert outputs[OWN_OUTPUT] == f"{outputs['OutboxTableName']} holds the payments' events"
        assert outputs["PublisherFunctionName"].startswith(f"{STACK_NAME}-OutboxPublisher")
        assert cloudformation.describe_stacks()["Stacks"][0]["StackName"] == STACK_NAME  # no OutboxStack

        # When the `outbox status` line it printed runs, as printed, in a fresh shell elsewhere
        status_command = started.printed_command("from any shell:")
        assert f"status --stack {STACK_NAME} --endpoint-url {started.endpoint}" in status_command
        status = run_in_fresh_shell(status_command, started, cwd=tmp_path)

        # Then it reports the stack's outbox
        assert status.returncode == 0, status.stderr
        assert outputs["OutboxTableName"] in status.stdout

        # When the `local env` it names is evaluated in a fresh shell, then a plain boto3 script runs there
        env_command = re.search(r'eval "\$\((.+ local env --endpoint-url \S+)\)"', text)
        assert env_command, text
        describe = "boto3.client('cloudformation').describe_stacks()['Stacks'][0]['StackName']"
        script = f'eval "$({env_command.group(1)})" && {sys.executable} -c "import boto3; print({describe})"'
        evaluated = run_in_fresh_shell(script, started, cwd=tmp_path)

        # Then the script found the running stack: the exports point at this runtime, not the default port
        assert evaluated.returncode == 0, evaluated.stderr
        assert evaluated.stdout.strip() == STACK_NAME
        assert f"stack {STACK_NAME}, region us-east-1, AWS endpoint {started.endpoint}" in evaluated.stderr

        # When it gets Ctrl-C
        started.process.send_signal(signal.SIGINT)
        assert started.process.wait(timeout=60) == 0

    # Then `local env` says no runtime runs any more, and fails
    gone = run_in_fresh_shell(f"{OUTBOX} local env", started, cwd=tmp_path)
    assert gone.returncode == 1
    assert "no `outbox local up` is running" in gone.stderr
    assert gone.stdout == ""


def test_local_env_reports_the_ports_and_region_of_the_runtime_running(project: Path, tmp_path: Path) -> None:
    # Given the stack run on ports the system picked (not 4566) in another region, under a name of its own
    arguments = ("--region", "eu-west-1", "--stack-name", "Payments-Dev")
    with local_up(project, tmp_path / "home", *arguments) as started:
        assert "stack Payments-Dev\n" in started.printed
        port = started.endpoint.rsplit(":", 1)[1]
        assert port != "4566"

        # When `outbox local env` runs in a fresh shell with no argument
        printed = run_in_fresh_shell(f"{OUTBOX} local env", started, cwd=tmp_path)

        # Then it exports that runtime's endpoint and region, and says which stack runs there
        assert printed.returncode == 0, printed.stderr
        assert f"export AWS_ENDPOINT_URL=http://127.0.0.1:{port}\n" in printed.stdout
        assert "export AWS_REGION=eu-west-1\n" in printed.stdout
        assert "stack Payments-Dev, region eu-west-1" in printed.stderr

        # When `outbox status` is given only the endpoint (no region anywhere), Then it finds the runtime's
        # region by asking the runtime, and the stack in it
        status = run_in_fresh_shell(
            f"{OUTBOX} status --stack Payments-Dev --endpoint-url {started.endpoint}", started, cwd=tmp_path
        )
        assert status.returncode == 0, status.stderr
        assert "Payments-Dev-OutboxTable" in status.stdout


def test_a_users_own_stack_publishes_what_its_writer_saves_and_the_outbox_commands_operate_it(
    project: Path, tmp_path: Path
) -> None:
    # Given PaymentsStack under `outbox local up`, and a queue of the user's subscribed to its topic
    with local_up(project, tmp_path / "home") as started:
        clients = {
            service: boto3.client(
                service, endpoint_url=started.endpoint, region_name="us-east-1", **LOCAL_CREDENTIALS
            )
            for service in ("cloudformation", "dynamodb", "sns", "sqs")
        }
        (stack,) = clients["cloudformation"].describe_stacks(StackName=STACK_NAME)["Stacks"]
        found = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
        table = found["OutboxTableName"]
        queue_url = clients["sqs"].create_queue(QueueName="payments-listener")["QueueUrl"]
        queue_arn = clients["sqs"].get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        clients["sns"].subscribe(
            TopicArn=found["TopicArn"],
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes={"RawMessageDelivery": "true"},
        )

        # When a writer saves two events of one payment with the library, and another writer a poison row
        for seq in (1, 2):
            tx = Transaction()
            OutboxWriter(table).append(
                tx,
                OutboxEvent.new(
                    aggregate_type="Payment",
                    aggregate_id="p-1",
                    seq=seq,
                    event_type="PaymentCaptured",
                    payload={"amount": "9.99"},
                ),
            )
            DynamoDBTransactionExecutor(clients["dynamodb"]).execute(tx)
        poison = OutboxEvent.new(
            aggregate_type="Payment", aggregate_id="p-2", seq=1, event_type="PaymentCaptured", payload={}
        )
        clients["dynamodb"].put_item(
            TableName=table, Item={**poison.to_item(), "payload": {"S": "{not json"}}
        )

        # Then the stack's publisher delivers the two, in order, to the user's queue
        delivered = _receive(clients["sqs"], queue_url, count=2)
        assert [json.loads(body)["seq"] for body in delivered] == [1, 2]

        # When the operator runs the `outbox` commands in a fresh shell, naming no stack (there is one)
        failed = run_in_fresh_shell(
            f"{OUTBOX} failed list --endpoint-url {started.endpoint} --json", started, cwd=tmp_path
        )
        status = run_in_fresh_shell(
            f"{OUTBOX} status --endpoint-url {started.endpoint}", started, cwd=tmp_path
        )
        dry_run = run_in_fresh_shell(
            f"{OUTBOX} skip {poison.event_id} --endpoint-url {started.endpoint} --reason test --dry-run",
            started,
            cwd=tmp_path,
        )

        # Then they find PaymentsStack's outbox and see the poison row: listed, status not healthy, and a dry
        # run that says what it would do and changes nothing
        assert failed.returncode == 0, failed.stderr
        assert f"stack {STACK_NAME} (the only one" in failed.stderr
        assert [row["event_id"] for row in json.loads(failed.stdout)["failed"]] == [poison.event_id]
        assert status.returncode == 3, status.stdout + status.stderr
        assert "DRY RUN" in dry_run.stdout, dry_run.stdout + dry_run.stderr
        remaining = clients["dynamodb"].scan(TableName=table)["Items"]
        assert [
            item["event_id"]["S"] for item in remaining if item["aggregate_key"]["S"].startswith("Payment")
        ] == [poison.event_id]


def _receive(sqs: Any, queue_url: str, *, count: int) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + 60
    while len(bodies) < count and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            bodies.append(message["Body"])
    return bodies

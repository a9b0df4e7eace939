"""moto's state as bytes and back (`outbox_local.persistence.moto_state`), on moto's real objects: what each
service the runtime uses holds survives a capture, a reset of moto and a restore, and moto goes on serving
it (new writes after the restore included)."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
import urllib.request
from typing import Any

import boto3
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.sqs.models import sqs_backends

from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.moto_isolation import isolated_requests
from outbox_local.moto_streams import InProcessStreams
from outbox_local.persistence import moto_state
from tests.support.streams import table_with_stream

REGION = "us-east-1"


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **LOCAL_CREDENTIALS)


def reset(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - our own loopback server
        pass


def test_every_service_the_runtime_uses_survives_capture_reset_and_restore(endpoint: str) -> None:
    # Given a table with a stream and an item, a queue with one message received (in flight, 60 s) and one
    # waiting, a topic with the queue subscribed, a bus with a rule, a KMS key, an S3 object and an alarm
    dynamodb, sqs, sns = client(endpoint, "dynamodb"), client(endpoint, "sqs"), client(endpoint, "sns")
    events, kms, s3 = client(endpoint, "events"), client(endpoint, "kms"), client(endpoint, "s3")
    cloudwatch = client(endpoint, "cloudwatch")
    stream_arn = table_with_stream(dynamodb, "orders")
    dynamodb.put_item(TableName="orders", Item={"pk": {"S": "order-1"}})
    queue_url = sqs.create_queue(QueueName="consumer", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.send_message(QueueUrl=queue_url, MessageBody="in flight")
    in_flight = sqs.receive_message(QueueUrl=queue_url)["Messages"][0]
    sqs.send_message(QueueUrl=queue_url, MessageBody="waiting")
    topic_arn = sns.create_topic(Name="events")["TopicArn"]
    sns.subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    events.create_event_bus(Name="bus")
    events.put_rule(Name="rule", EventBusName="bus", EventPattern=json.dumps({"source": ["orders"]}))
    events.put_targets(Rule="rule", EventBusName="bus", Targets=[{"Id": "queue", "Arn": queue_arn}])
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    encrypted = kms.encrypt(KeyId=key_id, Plaintext=b"secret")["CiphertextBlob"]
    s3.create_bucket(Bucket="bodies")
    s3.put_object(Bucket="bodies", Key="envelope", Body=b"x" * 100_000)
    cloudwatch.put_metric_alarm(
        AlarmName="depth",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    )
    cloudwatch.set_alarm_state(AlarmName="depth", StateValue="ALARM", StateReason="deep")
    # and what `cdk bootstrap` makes besides: a tagged SSM parameter (SSM keeps tags in a defaultdict whose
    # factory is a lambda) and an ECR repository
    ssm, ecr = client(endpoint, "ssm"), client(endpoint, "ecr")
    ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="29", Type="String")
    ssm.add_tags_to_resource(
        ResourceType="Parameter",
        ResourceId="/cdk-bootstrap/hnb659fds/version",
        Tags=[{"Key": "k", "Value": "v"}],
    )
    ecr.create_repository(repositoryName="cdk-assets")

    # When moto's state is captured, moto reset (as a restarted process starts empty), and the state restored
    saved = moto_state.capture()
    reset(endpoint)
    assert dynamodb.list_tables()["TableNames"] == []
    restored = moto_state.restore(saved)

    # Then every service answers as before: the item and its stream record, the waiting message (the one in
    # flight stays invisible until its timeout), the subscription and the rule still deliver, the key still
    # decrypts, the object and the alarm's state are there
    assert restored >= 8
    assert dynamodb.get_item(TableName="orders", Key={"pk": {"S": "order-1"}})["Item"] == {
        "pk": {"S": "order-1"}
    }
    streams = InProcessStreams(REGION)
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    assert [r["eventName"] for r in streams.get_records(ShardIterator=iterator)["Records"]] == ["INSERT"]
    received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["waiting"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=received[0]["ReceiptHandle"])
    sqs.change_message_visibility(
        QueueUrl=queue_url, ReceiptHandle=in_flight["ReceiptHandle"], VisibilityTimeout=0
    )
    sns.publish(TopicArn=topic_arn, Message="after restore")
    events.put_events(
        Entries=[{"EventBusName": "bus", "Source": "orders", "DetailType": "t", "Detail": "{}"}]
    )
    bodies = sorted(
        m["Body"] for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    )
    assert bodies[:2] == ["after restore", "in flight"]
    assert len(bodies) == 3
    assert json.loads(bodies[2])["source"] == "orders"
    assert kms.decrypt(CiphertextBlob=encrypted)["Plaintext"] == b"secret"
    assert s3.get_object(Bucket="bodies", Key="envelope")["Body"].read() == b"x" * 100_000
    assert cloudwatch.describe_alarms(AlarmNames=["depth"])["MetricAlarms"][0]["StateValue"] == "ALARM"
    assert ssm.get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]["Value"] == "29"
    tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId="/cdk-bootstrap/hnb659fds/version")
    assert tags["TagList"] == [{"Key": "k", "Value": "v"}]
    ssm.put_parameter(Name="/other", Value="1", Type="String")  # the restored tags' factory still makes
    ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId="/other", Tags=[{"Key": "a", "Value": "b"}])
    assert [r["repositoryName"] for r in ecr.describe_repositories()["repositories"]] == ["cdk-assets"]
    # and a new write goes on from where the table was: a second stream record after the first
    dynamodb.put_item(TableName="orders", Item={"pk": {"S": "order-2"}})
    after = streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in after] == ["order-1", "order-2"]


def test_a_capture_waits_for_a_receive_changing_its_queue_and_not_for_a_long_poll(endpoint: str) -> None:
    # Given a queue whose lock a receive holds (as moto_isolation has every receive hold it)
    sqs = client(endpoint, "sqs")
    queue_url = sqs.create_queue(QueueName="busy")["QueueUrl"]
    with isolated_requests():
        queue = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].get_queue("busy")
        captured = threading.Event()
        with queue._messages_lock:

            def capture() -> None:
                moto_state.capture()
                captured.set()

            capturing = threading.Thread(target=capture)
            capturing.start()
            # When a capture starts meanwhile, Then it waits for the receive to let its queue go
            assert not captured.wait(0.3)
        capturing.join(5)
        assert captured.is_set()

        # And a long poll waiting for messages does not hold a capture up: it lets the lock go as it waits
        polling = threading.Thread(
            target=lambda: sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=2), daemon=True
        )
        polling.start()
        time.sleep(0.3)
        started = time.monotonic()
        moto_state.capture()
        assert time.monotonic() - started < 1.0
        polling.join(5)


def test_state_another_moto_cannot_read_is_a_typed_error() -> None:
    # Given bytes that are no capture of this moto's
    # When they are restored, Then the error says so
    with pytest.raises(moto_state.MotoStateError, match="cannot be read by this moto"):
        moto_state.restore(b"not a pickle")


def test_an_object_kept_in_a_file_is_read_whole_by_a_forked_writer_and_the_server_too(endpoint: str) -> None:
    # Given an 8 MB S3 object: moto keeps a body over ~5 MB in a temporary file, whose read position a
    # snapshot writer forked from the runtime shares with it
    s3 = client(endpoint, "s3")
    s3.create_bucket(Bucket="large")
    body = os.urandom(8 * 1024 * 1024)
    s3.put_object(Bucket="large", Key="envelope", Body=body)
    key = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets["large"].keys["envelope"]
    assert key._value_buffer._rolled  # the case under test: the body is in a file
    descriptor = key._value_buffer.fileno()

    def captures_wrong(count: int) -> int:
        """In a forked writer: how many of `count` captures do not hold the body whole."""
        wrong = 0
        for _ in range(count):
            saved = pickle.loads(moto_state.dump())  # noqa: S301 - our own capture
            s3_saved = next(backend for *_, backend in saved if hasattr(backend, "buckets"))
            wrong += s3_saved.buckets["large"].keys["envelope"].value != body
        return wrong

    # When a forked writer captures moto's state while the file's position is somewhere in the middle
    os.lseek(descriptor, 1000, os.SEEK_SET)
    writer = os.fork()
    if writer == 0:
        os._exit(captures_wrong(1))
    _, status = os.waitpid(writer, 0)
    # Then its capture holds the body whole, and the position the runtime shares with it did not move
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.lseek(descriptor, 0, os.SEEK_CUR) == 1000

    # When a writer captures again and again while the server answers GetObjects of the object
    writer = os.fork()
    if writer == 0:
        os._exit(captures_wrong(10))
    wrong_reads = reads = 0
    while True:
        done, status = os.waitpid(writer, os.WNOHANG)
        reads += 1
        wrong_reads += s3.get_object(Bucket="large", Key="envelope")["Body"].read() != body
        if done:
            break
    # Then every capture, and every answer, is the body whole
    assert os.waitstatus_to_exitcode(status) == 0
    assert wrong_reads == 0, f"{wrong_reads} of {reads} reads"

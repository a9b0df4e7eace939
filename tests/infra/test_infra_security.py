"""Encryption at rest and TLS in transit on every queue and topic; API auth, throttling, access logs."""

from typing import Any

from tests.infra.template_queries import as_list, function_by_handler, only, resources


def _tls_deny_statements(policy_document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s
        for s in policy_document["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]


def test_every_queue_is_encrypted_and_refuses_plain_http(template: dict[str, Any]) -> None:
    # Given every queue and queue policy
    queues = resources(template, "AWS::SQS::Queue")
    policies = resources(template, "AWS::SQS::QueuePolicy").values()
    # the publisher's two, the two inspection queues, and each inbox consumer's queue and dead-letter queue
    assert len(queues) == 8

    for logical_id, queue in queues.items():
        # When its encryption and its policy are read
        policy = next(p for p in policies if {"Fn::GetAtt": [logical_id, "Arn"]} in _policy_resources(p))

        # Then it is SSE-SQS encrypted and denies any non-TLS request
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        deny = _tls_deny_statements(policy["Properties"]["PolicyDocument"])
        assert len(deny) == 1
        assert deny[0]["Action"] == "sqs:*"
        assert deny[0]["Principal"] == {"AWS": "*"}


def _policy_resources(policy: dict[str, Any]) -> list[Any]:
    return [r for s in policy["Properties"]["PolicyDocument"]["Statement"] for r in as_list(s["Resource"])]


def test_every_topic_is_kms_encrypted_and_refuses_plain_http(template: dict[str, Any]) -> None:
    # Given every topic and topic policy
    topics = resources(template, "AWS::SNS::Topic")
    policies = resources(template, "AWS::SNS::TopicPolicy").values()
    assert len(topics) == 2

    for logical_id, topic in topics.items():
        # When its key and its policy are read
        policy = next(p for p in policies if {"Ref": logical_id} in p["Properties"]["Topics"])

        # Then it has a KMS key and denies publishing without TLS
        assert topic["Properties"]["KmsMasterKeyId"]
        deny = _tls_deny_statements(policy["Properties"]["PolicyDocument"])
        assert [d["Action"] for d in deny] == ["sns:Publish"]


def test_events_topic_uses_the_aws_managed_sns_key(template: dict[str, Any]) -> None:
    # Given the events topic (only the publisher's role publishes to it)
    _, topic = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")

    # When its key is read
    key = topic["Properties"]["KmsMasterKeyId"]

    # Then it is the alias of the AWS-managed SNS key
    assert key["Fn::Join"][1][-1] == ":alias/aws/sns"


def test_alarm_topic_uses_a_rotating_key_cloudwatch_can_use(template: dict[str, Any]) -> None:
    # Given the alarm topic, its key and its policy
    topic_id, topic = only(template, "AWS::SNS::Topic", "OutboxMonitoringAlarmTopic")
    key_id, key = only(template, "AWS::KMS::Key")
    _, policy = only(template, "AWS::SNS::TopicPolicy", "OutboxMonitoringAlarmTopic")

    # When the key policy and topic policy are read
    key_statements = key["Properties"]["KeyPolicy"]["Statement"]
    topic_statements = policy["Properties"]["PolicyDocument"]["Statement"]

    # Then the customer-managed key rotates and lets CloudWatch encrypt, and CloudWatch may publish
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    assert any(
        s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
        and set(as_list(s["Action"])) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        for s in key_statements
    )
    assert any(
        s["Effect"] == "Allow"
        and s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
        and s["Action"] == "sns:Publish"
        and s["Resource"] == {"Ref": topic_id}
        for s in topic_statements
    )


def test_every_api_route_requires_iam_authorization(template: dict[str, Any]) -> None:
    # Given the HTTP API routes
    routes = resources(template, "AWS::ApiGatewayV2::Route").values()

    # When their route keys and authorization are read
    keys = {r["Properties"]["RouteKey"]: r["Properties"].get("AuthorizationType") for r in routes}

    # Then exactly the four contract routes exist and each requires SigV4
    assert keys == {
        "POST /orders": "AWS_IAM",
        "GET /orders/{id}": "AWS_IAM",
        "POST /orders/{id}/confirm": "AWS_IAM",
        "POST /orders/{id}/cancel": "AWS_IAM",
    }


def test_api_integration_is_lambda_proxy_payload_v2(template: dict[str, Any]) -> None:
    # Given the one integration
    _, integration = only(template, "AWS::ApiGatewayV2::Integration")
    api_function, _ = function_by_handler(template, "orders_api.handler.handler")

    # When its type and target are read
    props = integration["Properties"]

    # Then it proxies to the Orders function with the v2 payload
    assert props["IntegrationType"] == "AWS_PROXY"
    assert props["PayloadFormatVersion"] == "2.0"
    assert props["IntegrationUri"] == {"Fn::GetAtt": [api_function, "Arn"]}


def test_api_stage_is_throttled_and_access_logged(template: dict[str, Any]) -> None:
    # Given the API's stage
    _, stage = only(template, "AWS::ApiGatewayV2::Stage")
    props = stage["Properties"]

    # When its settings are read
    # Then it throttles before Lambda and writes access logs to its own log group
    assert props["StageName"] == "$default"
    assert props["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 100, "ThrottlingRateLimit": 50}
    assert props["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"][0].startswith("OrdersApiAccessLogs")
    assert "$context.requestId" in props["AccessLogSettings"]["Format"]


def test_api_function_reserves_concurrency_to_protect_the_tables(template: dict[str, Any]) -> None:
    # Given the Orders API function
    _, function = function_by_handler(template, "orders_api.handler.handler")
    props = function["Properties"]

    # When its configuration is read
    # Then it has a concurrency reservation, the runtime contract and its environment
    assert props["ReservedConcurrentExecutions"] == 20
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "orders-api"
    assert set(props["Environment"]["Variables"]) == {
        "ORDERS_TABLE_NAME",
        "OUTBOX_TABLE_NAME",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_LOG_LEVEL",
    }


def test_every_log_group_has_a_retention(template: dict[str, Any]) -> None:
    # Given every log group (five functions, API access logs)
    groups = resources(template, "AWS::Logs::LogGroup").values()

    # When their retention is read
    # Then none keeps logs forever
    assert len(groups) == 6
    assert all(g["Properties"]["RetentionInDays"] == 30 for g in groups)

"""The two tables: keys, stream, TTL, PITR, encryption, billing, the sparse failed index (and no other)."""

from typing import Any

from tests.infra.template_queries import only


def test_orders_table_is_keyed_by_pk_with_ttl_pitr_encryption_and_on_demand(template: dict[str, Any]) -> None:
    # Given the synthesized stack
    # When the Orders table is looked up
    _, table = only(template, "AWS::DynamoDB::Table", "TablesOrdersTable")
    props = table["Properties"]

    # Then it has only the `pk` string key, idempotency TTL and every safety setting
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert "StreamSpecification" not in props


def test_outbox_table_has_new_image_stream_ttl_pitr_encryption_and_on_demand(
    template: dict[str, Any],
) -> None:
    # Given the synthesized stack
    # When the Outbox table is looked up
    _, table = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    props = table["Properties"]

    # Then it is keyed by aggregate and sequence, streams new and old images, and keeps TTL on `expires_at`:
    # the outbox sets it on no row, but the PUBLISHED rows an earlier release kept carry it, and TTL deletes
    # them for free once a stack is upgraded in place
    assert props["KeySchema"] == [
        {"AttributeName": "aggregate_key", "KeyType": "HASH"},
        {"AttributeName": "seq", "KeyType": "RANGE"},
    ]
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_outbox_table_has_only_the_sparse_failed_index_the_operations_commands_read(
    template: dict[str, Any],
) -> None:
    # Given the Outbox table
    _, table = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    props = table["Properties"]

    # When its secondary indexes are read
    indexes = props["GlobalSecondaryIndexes"]

    # Then there is one: the keys-only `failed` index on failed_shard (N) / failed_at (S) the operations
    # commands list FAILED rows by, written only when a row fails. No index is written per event (the
    # sweeper scans the table, which holds only what is not out yet), so no attribute but the failed index's
    # keys is declared besides the table's own
    assert indexes == [
        {
            "IndexName": "failed",
            "KeySchema": [
                {"AttributeName": "failed_shard", "KeyType": "HASH"},
                {"AttributeName": "failed_at", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        },
    ]
    assert "LocalSecondaryIndexes" not in props
    types = {d["AttributeName"]: d["AttributeType"] for d in props["AttributeDefinitions"]}
    assert types == {
        "aggregate_key": "S",
        "seq": "N",
        "failed_shard": "N",
        "failed_at": "S",
    }


def test_tables_keep_their_data_by_default(template: dict[str, Any]) -> None:
    # Given the default app context (retain_data unset)
    for prefix in ("TablesOrdersTable", "OutboxTable"):
        # When each table is looked up
        _, table = only(template, "AWS::DynamoDB::Table", prefix)

        # Then stack deletion retains it and deletion protection is on
        assert table["DeletionPolicy"] == "Retain"
        assert table["UpdateReplacePolicy"] == "Retain"
        assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_the_tables_tests_create_on_moto_are_the_ones_the_stack_deploys(
    template: dict[str, Any], dynamodb: Any
) -> None:
    # Given the tables tests/support creates on moto for every integration test
    from tests.support.aws import create_tables

    tables = create_tables(dynamodb)

    # When each is described and set beside its template definition
    for name, prefix in ((tables.orders, "TablesOrdersTable"), (tables.outbox, "OutboxTable")):
        deployed = only(template, "AWS::DynamoDB::Table", prefix)[1]["Properties"]
        created = dynamodb.describe_table(TableName=name)["Table"]

        # Then keys, attribute types, indexes and the stream are the same
        assert created["KeySchema"] == deployed["KeySchema"], name
        assert sorted(created["AttributeDefinitions"], key=str) == sorted(
            deployed["AttributeDefinitions"], key=str
        ), name
        indexes = {
            index["IndexName"]: (index["KeySchema"], index["Projection"])
            for index in created.get("GlobalSecondaryIndexes", [])
        }
        assert indexes == {
            index["IndexName"]: (index["KeySchema"], index["Projection"])
            for index in deployed.get("GlobalSecondaryIndexes", [])
        }, name
        stream = created.get("StreamSpecification", {})
        assert stream.get("StreamViewType") == deployed.get("StreamSpecification", {}).get(
            "StreamViewType"
        ), name

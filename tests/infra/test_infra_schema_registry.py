"""The sample publishes its event schemas to an EventBridge schema registry: a schema per file, unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack

from orders.event_schemas import SCHEMA_DIRECTORY
from outbox.schemas import read_schema_files
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.schema_registry import OutboxSchemaRegistry, SchemaRegistryProps


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def test_each_schema_file_is_one_draft_4_schema_of_the_outboxs_registry(template: dict[str, Any]) -> None:
    # Given the sample's schema files
    files = read_schema_files(SCHEMA_DIRECTORY)
    # Then the template holds one registry, named by CloudFormation, and one schema per file in it
    [(registry_id, registry)] = of_type(template, "AWS::EventSchemas::Registry").items()
    assert "RegistryName" not in registry["Properties"]
    schemas = {
        r["Properties"]["SchemaName"]: r["Properties"]
        for r in of_type(template, "AWS::EventSchemas::Schema").values()
    }
    assert set(schemas) == {f"{key.event_type}.v{key.version}" for key in files}
    for key, file in files.items():
        published = schemas[f"{key.event_type}.v{key.version}"]
        assert published["Type"] == "JSONSchemaDraft4"
        assert published["RegistryName"] == {"Fn::GetAtt": [registry_id, "RegistryName"]}
        # the content is the file's document, unchanged
        assert json.loads(published["Content"]) == file.document


def test_a_schema_of_another_draft_or_an_empty_folder_fails_the_synth(tmp_path: Path) -> None:
    # Given a folder whose schema declares draft 7, which the registry's JSONSchemaDraft4 does not take
    (tmp_path / "Shipped.v1.json").write_text(
        json.dumps({"$schema": "http://json-schema.org/draft-07/schema#"})
    )
    # Then the construct refuses it, naming the file
    with pytest.raises(OutboxConstructError, match=r"Shipped\.v1\.json declares \$schema .*draft 4"):
        OutboxSchemaRegistry(Stack(App(), "Draft7"), "Schemas", SchemaRegistryProps(directory=tmp_path))
    # and a folder without schema files, or a file the writer could not load, is refused too
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OutboxConstructError, match="holds no"):
        OutboxSchemaRegistry(Stack(App(), "Empty"), "Schemas", SchemaRegistryProps(directory=empty))
    (tmp_path / "Shipped.json").write_text("{}")
    with pytest.raises(OutboxConstructError, match=r"Shipped\.json is not named"):
        OutboxSchemaRegistry(Stack(App(), "Misnamed"), "Schemas", SchemaRegistryProps(directory=tmp_path))

"""The local runtime stores EventBridge schema registries and schemas (moto has no EventSchemas API), checked
as AWS would check them; what it cannot honour stops start-up. No AWS call: nothing reads them at run time."""

from __future__ import annotations

from typing import Any

import pytest

from outbox_local.errors import UnsupportedResourceError
from outbox_local.provisioning import Provisioner
from outbox_local.template import Resolver, Template

CONTENT = '{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}'


def provision(**schema_overrides: Any) -> Any:
    schema = {
        "RegistryName": {"Fn::GetAtt": ["Registry", "RegistryName"]},
        "SchemaName": "OrderPlaced.v1",
        "Type": "JSONSchemaDraft4",
        "Content": CONTENT,
        **schema_overrides,
    }
    body = {
        "Resources": {
            "Registry": {"Type": "AWS::EventSchemas::Registry", "Properties": {"Description": "events"}},
            "Schema": {"Type": "AWS::EventSchemas::Schema", "Properties": schema},
        }
    }
    template = Template.from_body(body)

    def no_clients(service: str) -> Any:
        raise AssertionError(f"a schema registry needs no {service} call")

    return Provisioner(
        template, Resolver(template, region="us-east-1", stack_name="S"), no_clients
    ).provision()


def test_a_registry_and_its_schema_are_stored_with_their_names_and_arns() -> None:
    # When a registry without a name and a schema in it are provisioned
    stack = provision()
    # Then the registry gets a generated name, as CloudFormation would give it, and the schema its ARN
    registry_type, registry = stack.resources["Registry"]
    schema_type, schema = stack.resources["Schema"]
    assert registry_type == "AWS::EventSchemas::Registry"
    name = registry.attributes["RegistryName"]
    assert name.startswith("S-Registry-")
    assert (
        registry.ref
        == registry.attributes["RegistryArn"]
        == f"arn:aws:schemas:us-east-1:123456789012:registry/{name}"
    )
    assert schema_type == "AWS::EventSchemas::Schema"
    assert schema.attributes["SchemaName"] == "OrderPlaced.v1"
    assert schema.ref == f"arn:aws:schemas:us-east-1:123456789012:schema/{name}/OrderPlaced.v1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"Type": "Avro"}, "Type 'Avro' is not one of JSONSchemaDraft4, OpenApi3"),
        ({"Content": "{not json"}, "Content is not JSON text"),
        ({"Content": {"type": "object"}}, "Content is not JSON text"),
        ({"SchemaName": "Order Placed"}, "SchemaName 'Order Placed' is invalid"),
        ({"RegistryName": "someone-elses"}, "registry 'someone-elses' is not in this template"),
        ({"Compatibility": "FULL"}, "properties not supported locally: Compatibility"),
    ],
    ids=["type", "content", "content-not-text", "name", "registry", "unknown-property"],
)
def test_a_schema_aws_would_refuse_stops_start_up(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(UnsupportedResourceError, match=rf"^Schema \(AWS::EventSchemas::Schema\): {message}"):
        provision(**overrides)

"""The service's event schemas published to an EventBridge schema registry, so consumers discover them.

EventBridge does not enforce a registry's schemas: the writer checks every event against the same files
before saving (outbox.schemas), and an inbox can check them on receipt. The registry is for people and
tools: one schema per file, named like it (`OrderPlaced.v1`), of type `JSONSchemaDraft4` (the registry also
takes `OpenApi3`; these files are JSON Schema). Each describes an event's `payload`, the envelope's field
that carries it (docs/contracts.md, "Published envelope").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_eventschemas as eventschemas
from constructs import Construct

from outbox.errors import ConfigurationError
from outbox.schemas import DRAFT_04, read_schema_files, schema_file_name
from outbox_cdk.errors import OutboxConstructError

SCHEMA_TYPE = "JSONSchemaDraft4"
# Draft 4's own identifiers, with and without the empty fragment: the registry reads both as draft 4.
_DRAFT_04_IDS = frozenset({DRAFT_04, DRAFT_04.rstrip("#")})


@dataclass(frozen=True)
class SchemaRegistryProps:
    """Publish a folder of `<event_type>.v<N>.json` files (the ones the writer loads) to a registry."""

    directory: str | Path
    # The registry's name; None: CloudFormation generates one (two stacks never collide).
    registry_name: str | None = None
    description: str = "Event payload schemas of this outbox, one per event type and schema_version"


class OutboxSchemaRegistry(Construct):
    """An `AWS::EventSchemas::Registry` and one `AWS::EventSchemas::Schema` per schema file.

    Read at synth time: a file the writer could not load, or one written for another draft than 4 (the
    registry's `JSONSchemaDraft4`), fails the synth with its name.
    """

    def __init__(self, scope: Construct, construct_id: str, props: SchemaRegistryProps) -> None:
        super().__init__(scope, construct_id)
        try:
            files = read_schema_files(props.directory)
        except ConfigurationError as error:
            raise OutboxConstructError(f"schema registry: {error}") from None
        if not files:
            raise OutboxConstructError(
                f"schema registry: {props.directory} holds no <event_type>.v<N>.json file"
            )
        self.registry = eventschemas.CfnRegistry(
            self, "Registry", registry_name=props.registry_name, description=props.description
        )
        self.schemas: dict[str, eventschemas.CfnSchema] = {}
        for key, file in sorted(files.items()):
            declared = file.document.get("$schema")
            if declared is not None and declared not in _DRAFT_04_IDS:
                raise OutboxConstructError(
                    f"schema registry: {schema_file_name(key)} declares $schema {declared!r}; the registry "
                    f"takes JSON Schema draft 4 ({DRAFT_04})"
                )
            name = schema_file_name(key).removesuffix(".json")
            self.schemas[name] = eventschemas.CfnSchema(
                self,
                f"Schema{_logical_name(name)}",
                registry_name=self.registry.attr_registry_name,
                schema_name=name,
                type=SCHEMA_TYPE,
                content=json.dumps(file.document, sort_keys=True, separators=(",", ":")),
                description=f"payload of {key.event_type} events with schema_version {key.version}",
            )

    @property
    def registry_name(self) -> str:
        return self.registry.attr_registry_name


def _logical_name(name: str) -> str:
    """`com.acme.OrderPlaced.v1` -> `comacmeOrderPlacedv1`: the construct id's letters and digits."""
    return "".join(character for character in name if character.isalnum())

"""The Orders events' schemas: `schemas/<event_type>.v<N>.json` beside this module, one file per version.

The Orders API loads them once per execution environment and its outbox writer checks every event against
them before the transaction. The API's own request validation (400) comes first, so a schema refusal there
is a bug in this package; tests build every payload the API can emit and check it against these files.
"""

from __future__ import annotations

from pathlib import Path

from outbox.schemas import SchemaRegistry

SCHEMA_DIRECTORY = Path(__file__).with_name("schemas")


def load_schemas() -> SchemaRegistry:
    """Every Orders event type has a schema: an unknown type or version is refused."""
    return SchemaRegistry.from_directory(SCHEMA_DIRECTORY)

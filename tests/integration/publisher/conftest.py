"""The publisher's world on moto, for every test here (tests/integration/publisher/publisher_world.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.publisher.publisher_world import World, build_world
from tests.support.aws import Tables


@pytest.fixture
def world(tables: Tables, dynamodb: Any) -> World:
    return build_world(tables, dynamodb)

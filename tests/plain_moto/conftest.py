"""A user's own tests, on moto as it is: this conftest installs nothing (no correction of moto, no local
runtime). Its one fixture checks that nothing else did either, so these tests prove the library on the moto a
user has (the repository's root conftest only sets fake credentials and a region, as a user's would)."""

from __future__ import annotations

import inspect

import pytest
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.parsing.validators import Validator


@pytest.fixture(autouse=True)
def _moto_as_it_is() -> None:
    """Every method of moto's DynamoDB backend and its expression validator is moto's own."""
    for owner in (DynamoDBBackend, Validator):
        for name, member in vars(owner).items():
            if inspect.isfunction(member):
                assert member.__module__.startswith("moto."), f"{owner.__name__}.{name} is patched"

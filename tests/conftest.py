"""Test-wide environment: no real AWS is ever reachable from a test."""

import functools
import os
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

from tests.support.aws import REGION, Tables, create_tables
from tests.support.synth import Synthesized, synthesize

# Fake credentials and a fixed region for boto3 against moto; never a real account.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # botocore >= 1.44.4 would send DynamoDB Streams calls to an endpoint moto does not serve.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "OutboxTests",
        "POWERTOOLS_DEV": "false",
    }
)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


@pytest.fixture(scope="session", autouse=True)
def _one_model_loader_per_process() -> Iterator[None]:
    """Every botocore session a test makes shares one loader, so each service's model and the endpoint data
    are read from disk and parsed once per process, not once per client. moto's `mock_aws` gives each test a
    new default session (and the ops commands build their own), and a loader of its own per session made
    client creation most of a moto test's cost (~90 ms a client). The models are botocore's own, read-only:
    sharing them is what one session does for all its clients."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))
        yield


@pytest.fixture
def aws() -> Iterator[None]:
    """moto in process: every boto3 client created inside the test talks to it."""
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def tables(dynamodb: Any) -> Tables:
    return create_tables(dynamodb)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The sample app, synthesized once per session (cdk-nag on: a finding fails every user of it)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.template

"""Test-wide environment: no real AWS is ever reachable from a test. And the order `make test` hands the
modules to its workers in: the slowest first."""

import functools
import logging
import os
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

from tests.support.aws import REGION, Tables, create_tables
from tests.support.synth import CUSTOMER_KEY_CONTEXT, Synthesized, synthesize

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

SLOW_FIRST = (
    # One `outbox local up` serves every doc block (a module fixture): ~100 s on one worker, the longest.
    "tests/docs/test_doc_commands.py",
    # pip install -r requirements.txt in a fresh clone, then `cdk synth`: ~60 s, mostly waiting on pip.
    "tests/packaging/test_fresh_clone_synth.py",
    # `outbox demo` on the synthesized stack: ~40 s in one test.
    "tests/integration/local/test_local_cli.py",
    # The real CDK CLI bootstraps, deploys, deploys again and destroys into a runtime: ~25 s.
    "tests/integration/local/test_local_cdk_deploy.py",
    # `outbox local up` killed twice under load and restarted (the kill proof's fast profile): ~18 s.
    "tests/local_crash/test_kill_proof.py",
    # A wheel, a venv and its install (a module fixture).
    "tests/packaging/test_install.py",
    "tests/integration/ops/test_ops_redrive_and_skip.py",
    "tests/reliability/test_fault_schedules.py",
    "tests/integration/ops/test_ops_status_and_failed.py",
    "tests/hardening/test_hardening_cli.py",
)
"""`make test` gives each worker whole modules (`--dist loadfile`: a module fixture is built once, not once
per worker that runs one of its tests) in collection order (`--no-loadscope-reorder`). These modules take
longest (`--durations`), so they start first and the many short ones fill in around them: started last,
one of them would be the run's tail. The rest keep pytest's order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: place for place, module in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


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
def customer_key(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The sample app as `cdk synth -c kms_key=customer` writes it, once per session (cdk-nag on)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out.kms"), CUSTOMER_KEY_CONTEXT)


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.template


@pytest.fixture(autouse=True)
def _our_loggers_reach_caplog(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that reads `caplog` sees what the library logs, whatever ran before it in this process.

    Importing a handler module, or hosting a function in process (`outbox demo` does, with its log level
    CRITICAL), gives the library's top-level loggers registered at that moment Powertools' output, its level
    and `propagate = False`, as a Lambda wants: so whether a warning reached caplog depended on which test
    this worker ran first."""
    if "caplog" not in request.fixturenames:
        yield
        return
    loggers = [
        logging.getLogger(name) for name in ("outbox", "outbox_publisher", "outbox_sweeper", "outbox_inbox")
    ]
    saved = [(logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
    yield
    for logger, (level, propagate) in zip(loggers, saved, strict=True):
        logger.setLevel(level)
        logger.propagate = propagate

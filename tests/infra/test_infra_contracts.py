"""What the infrastructure and the Lambda code must agree on, checked where they meet.

- The Powertools release the layer pins is the one the `local` extra installs (tests and the local runtime
  run the code Lambda runs).
- The environment the stack gives each function is what that function's configuration reads: the template's
  variables, with CloudFormation's references replaced by plausible values, parse without an error.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from orders_api.config import OrdersApiConfig
from outbox import metrics
from outbox.model import FAILED_INDEX_NAME, PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS, PublisherConfig
from outbox_sweeper.config import SweeperConfig, SweepSettings
from tests.infra.template_queries import function_by_handler, only

REPO_ROOT = Path(__file__).resolve().parents[2]

# Values CloudFormation would put where the template has a reference.
_RESOLVED = {
    "TOPIC_ARN": "arn:aws:sns:eu-west-1:123456789012:OutboxStack-Topic",
    "POISON_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/OutboxStack-Poison",
}


def _pinned_powertools() -> str:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = [entry for entry in extras["local"] if entry.startswith("aws-lambda-powertools")]
    found = re.fullmatch(r"aws-lambda-powertools(\[[a-z,]+\])?==([0-9.]+)", requirement)
    assert found, f"the local extra must pin Powertools exactly: {requirement}"
    return found.group(2)


def test_the_layer_and_the_local_install_pin_the_same_powertools(template: dict[str, Any]) -> None:
    # Given the release the layer resolves and the one the `local` extra pins
    from outbox_cdk.constants import POWERTOOLS_VERSION

    # Then they are one release, the one installed here, and the one constraints.txt freezes
    assert _pinned_powertools() == POWERTOOLS_VERSION
    assert metadata.version("aws-lambda-powertools") == POWERTOOLS_VERSION
    constraints = (REPO_ROOT / "constraints.txt").read_text().lower().replace("_", "-")
    assert f"aws-lambda-powertools=={POWERTOOLS_VERSION}\n" in constraints
    # and the template resolves exactly that release's layer
    layers = function_by_handler(template, "outbox_publisher.handler.handler")[1]["Properties"]["Layers"]
    assert f"/python3.13/{POWERTOOLS_VERSION}}}}}" in str(layers)


def _environment(template: dict[str, Any], handler: str) -> dict[str, str]:
    variables = function_by_handler(template, handler)[1]["Properties"]["Environment"]["Variables"]
    return {
        name: value if isinstance(value, str) else _RESOLVED.get(name, f"resolved-{name.lower()}")
        for name, value in variables.items()
    }


def test_the_publishers_environment_is_what_its_configuration_reads(template: dict[str, Any]) -> None:
    # Given the publisher's environment in the template
    environment = _environment(template, "outbox_publisher.handler.handler")

    # When the publisher's own parser reads it
    config = PublisherConfig.from_env(environment)

    # Then it finds every destination, its table, its poison queue and the sweep grace it claims rows near
    assert config.topic_arn == _RESOLVED["TOPIC_ARN"]
    assert config.event_bus_name is not None
    assert config.event_source == "outbox.orders"
    assert config.table_name == environment["OUTBOX_TABLE_NAME"]
    assert config.poison_queue_url == _RESOLVED["POISON_QUEUE_URL"]
    assert config.sweep_grace.total_seconds() == DEFAULT_SWEEP_GRACE_SECONDS
    # and Powertools is told the service name and namespace the alarms watch
    # (per outbox: the sample's is named after its stack and the construct's path)
    service = metrics.service_name("OutboxStack-Outbox", metrics.PUBLISHER)
    assert environment["POWERTOOLS_SERVICE_NAME"] == service
    assert environment["POWERTOOLS_METRICS_NAMESPACE"] == metrics.NAMESPACE


def test_the_sweepers_environment_is_what_its_configuration_reads_and_the_publishers_own(
    template: dict[str, Any],
) -> None:
    # Given the sweeper's and the publisher's environments in the template
    sweeper = _environment(template, "outbox_sweeper.handler.handler")
    publisher = _environment(template, "outbox_publisher.handler.handler")

    # When the sweeper's own parser reads it
    config = SweeperConfig.from_env(sweeper)

    # Then it publishes exactly as the publisher does (same variables, same values) and sweeps by defaults
    assert {name: sweeper[name] for name in publisher if name != "POWERTOOLS_SERVICE_NAME"} == {
        name: value for name, value in publisher.items() if name != "POWERTOOLS_SERVICE_NAME"
    }
    assert config.publisher == PublisherConfig.from_env(publisher)
    assert config.sweep == SweepSettings()
    assert sweeper["POWERTOOLS_SERVICE_NAME"] == metrics.service_name("OutboxStack-Outbox", metrics.SWEEPER)


def test_the_orders_apis_environment_is_what_its_configuration_reads(template: dict[str, Any]) -> None:
    # Given the Orders API's environment in the template, When its parser reads it, Then nothing is missing
    environment = _environment(template, "orders_api.handler.handler")
    config = OrdersApiConfig.from_env(environment)
    assert config.outbox_table_name == environment["OUTBOX_TABLE_NAME"]


def test_the_outbox_table_has_the_schema_the_library_writes(template: dict[str, Any]) -> None:
    # Given the deployed outbox table, When its schema is read
    properties = only(template, "AWS::DynamoDB::Table", "OutboxTable")[1]["Properties"]

    # Then its keys, TTL attribute (for the PUBLISHED rows an earlier release kept) and its one index are the
    # ones outbox.model names
    assert properties["KeySchema"] == [
        {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
        {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
    ]
    assert properties["TimeToLiveSpecification"]["AttributeName"] == TTL_ATTRIBUTE
    assert [index["IndexName"] for index in properties["GlobalSecondaryIndexes"]] == [FAILED_INDEX_NAME]

"""The process's boto3 session finds a client's model without listing every service botocore ships, and
loads exactly what botocore's own loader loads: the same models, the same search paths, the same errors."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import UnknownServiceError

from outbox.aws import session

SERVICES = ["sns", "events", "dynamodb", "sqs"]
"""Every service the functions build a client of."""
MODELS = ["service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2"]


def loader(a_session: boto3.session.Session) -> Any:
    return a_session._session.get_component("data_loader")


def loaded(a_loader: Any, service: str, model: str) -> Any:
    try:
        return a_loader.load_service_model(service, model)
    except Exception as error:
        return (type(error), str(error))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("service", SERVICES)
def test_a_model_is_botocores_own(service: str, model: str) -> None:
    # Given the process's session and one of botocore's own
    ours, botocores = loader(session()), loader(boto3.session.Session())

    # Then both load the same model (or fail the same way, for a model the service does not have)
    assert loaded(ours, service, model) == loaded(botocores, service, model)
    assert ours.search_paths == botocores.search_paths


def test_a_known_service_is_found_without_listing_every_service() -> None:
    # Given a fresh loader of the kind the session uses
    fresh = type(loader(session()))()

    # When a client's two models are loaded
    fresh.load_service_model("sns", "service-2")
    fresh.load_service_model("sns", "endpoint-rule-set-1")

    # Then no list of every service was built
    assert not [key for key in fresh._cache if key[0] == "list_available_services"]


@pytest.mark.parametrize("name", ["no-such-service", "../sns", "", "."])
def test_an_unknown_service_fails_as_botocore_fails(name: str) -> None:
    # Given a service name botocore does not know
    # When the process's session builds a client of it
    with pytest.raises(UnknownServiceError) as ours:
        session().client(name)
    with pytest.raises(UnknownServiceError) as botocores:
        boto3.session.Session().client(name)

    # Then the error names the services botocore knows, as botocore's own does
    assert str(ours.value) == str(botocores.value)

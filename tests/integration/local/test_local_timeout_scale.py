"""The hosted functions' AWS clients under the local runtime: their timeouts scaled by the runtime's option
(OUTBOX_LOCAL_TIMEOUT_SCALE, read by outbox.aws), because the endpoint is a moto server sharing this machine's
CPUs; without the variable (as on AWS) the timeouts stay as outbox.aws writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from outbox import aws
from outbox.errors import ConfigurationError
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import function, options, write_template


def timeouts_template() -> dict[str, Any]:
    return {
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            "TimeoutsFn": function("client_timeouts", {}),
        }
    }


def hosted_timeouts(tmp_path: Path, **overrides: Any) -> Any:
    # In a worker process, as the runtime runs functions by default: outbox.aws is imported there, with the
    # function's environment, on its first invocation.
    settings = {"max_environments": 1, **overrides}
    with LocalRuntime(options(write_template(tmp_path, timeouts_template()), **settings)) as runtime:
        result = runtime.invoke("TimeoutsFn", {})
    assert result.error_type is None, result.error_message
    return result.payload


def test_the_runtime_scales_its_functions_client_timeouts_by_default(tmp_path: Path) -> None:
    # Given the runtime with its default scale, Then a hosted function's clients wait 5 times AWS's
    assert hosted_timeouts(tmp_path) == {"client": [15, 50], "invocation": [5, 10]}


def test_a_scale_of_one_keeps_awss_timeouts(tmp_path: Path) -> None:
    assert hosted_timeouts(tmp_path, timeout_scale=1) == {"client": [3, 10], "invocation": [1, 2]}


def test_without_the_variable_the_timeouts_are_awss(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given no OUTBOX_LOCAL_TIMEOUT_SCALE (a function on AWS), Then each new client keeps the written timeouts
    monkeypatch.delenv(aws.TIMEOUT_SCALE_VARIABLE, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    config = aws.invocation_client.__wrapped__("sqs").meta.config
    assert (config.connect_timeout, config.read_timeout) == (1, 2)
    assert aws.INVOCATION_CALL_S == 3


@pytest.mark.parametrize("value", ["0", "11", "2.5", "٣"])
def test_a_scale_that_is_no_whole_number_from_1_to_10_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(aws.TIMEOUT_SCALE_VARIABLE, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(ConfigurationError, match=aws.TIMEOUT_SCALE_VARIABLE):
        aws.client.__wrapped__("sqs")

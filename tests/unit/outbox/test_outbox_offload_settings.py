"""The offload threshold is refused, at start-up, above what a row can hold: an envelope below it stays in its
row, which DynamoDB holds to 400 KB."""

from __future__ import annotations

import pytest

from outbox.errors import ConfigurationError
from outbox.offloading import Offloader
from outbox.payload_refs import MAX_OFFLOAD_THRESHOLD_BYTES
from outbox.s3_payloads import ENV_OFFLOAD_ABOVE_BYTES, ENV_PAYLOAD_BUCKET, PayloadStoreConfig, S3PayloadStore


def _config(threshold: str) -> PayloadStoreConfig | None:
    return PayloadStoreConfig.from_env(
        {ENV_PAYLOAD_BUCKET: "outbox-payloads", ENV_OFFLOAD_ABOVE_BYTES: threshold}
    )


def test_a_threshold_up_to_the_cap_is_taken() -> None:
    config = _config(str(MAX_OFFLOAD_THRESHOLD_BYTES))
    assert config is not None
    assert config.offload_above_bytes == MAX_OFFLOAD_THRESHOLD_BYTES


@pytest.mark.parametrize(
    "threshold", [str(MAX_OFFLOAD_THRESHOLD_BYTES + 1), str(400 * 1024), "64k", "-1", "٣"]
)
def test_a_threshold_a_row_could_not_hold_or_no_number_is_a_configuration_error(threshold: str) -> None:
    with pytest.raises(ConfigurationError, match=ENV_OFFLOAD_ABOVE_BYTES):
        _config(threshold)


def test_the_writer_refuses_such_a_threshold_too() -> None:
    with pytest.raises(ValueError, match=str(MAX_OFFLOAD_THRESHOLD_BYTES)):
        Offloader(S3PayloadStore(None, "outbox-payloads"), threshold_bytes=MAX_OFFLOAD_THRESHOLD_BYTES + 1)

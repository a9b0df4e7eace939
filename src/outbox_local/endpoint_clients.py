"""boto3 clients on the runtime's own AWS endpoint: a user's (armed faults fail them, as they fail the
functions' calls) and the runtime's internal ones, for what AWS itself does around the functions (the
mappings' polls and deletes, the on-failure sends, provisioning, metrics), which no armed fault fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.faults import INTERNAL_USER_AGENT


class EndpointClients:
    def __init__(self, endpoint_url: Callable[[], str], region: str) -> None:
        self._endpoint_url = endpoint_url
        self._region = region
        self._clients: dict[str, Any] = {}

    def client(self, service: str, *, internal: bool = False, region: str | None = None) -> Any:
        """One client per service, kind and region (the runtime's by default), made on first use, closed by
        `close()`."""
        region = region or self._region
        key = f"{service}/internal" if internal else service
        if region != self._region:
            key = f"{key}@{region}"
        if key not in self._clients:
            self._clients[key] = boto3.client(
                service,
                endpoint_url=self._endpoint_url(),
                region_name=region,
                config=Config(
                    retries={"mode": "standard", "total_max_attempts": 3},
                    user_agent_extra=INTERNAL_USER_AGENT if internal else None,
                ),
                **LOCAL_CREDENTIALS,
            )
        return self._clients[key]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

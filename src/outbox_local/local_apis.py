"""The HTTP APIs of every stack the runtime holds, each served on a local port (`outbox_local.http_api`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from outbox_local.errors import EndpointUnavailableError
from outbox_local.http_api import HttpApiServer, Route
from outbox_local.invocation import InvocationResult
from outbox_local.stacks import DeployedStack

Invoke = Callable[[str, dict[str, Any]], InvocationResult]


class LocalApis:
    def __init__(self, invoke: Invoke, *, host: str, first_port: int) -> None:
        """`first_port`: the first API's port (the one the user was told); later ones get free ports."""
        self._invoke = invoke
        self._host = host
        self._first_port = first_port
        self.servers: dict[str, HttpApiServer] = {}
        """By API id."""
        self._ports: dict[str, int] = {}
        """The port each API was served on: an API served again (its stack updated: detached, then attached)
        keeps its URL, as an API Gateway API keeps its endpoint through a stack update."""

    def reserve(self, api_id: str, url: str) -> None:
        """Serve the API on the port of `url` when it opens (a restored stack's API keeps the URL its
        outputs and its clients know)."""
        self._ports[api_id] = int(url.rsplit(":", 1)[1].split("/", 1)[0])

    def open(self, api_id: str) -> str:
        """Serve the API (routes come later): its local URL. Its port: the one it had (through an update, a
        restart), else the first port if no API ever had it, else a free one."""
        port = self._ports.get(api_id)
        if port is None:
            port = self._first_port if self._first_port not in self._ports.values() else 0
        try:
            api = HttpApiServer(api_id, self._invoke, host=self._host, port=port)
        except OSError as error:
            raise EndpointUnavailableError(
                f"the local runtime cannot serve the HTTP API {api_id} on {self._host}:{port}: "
                f"{error.strerror or error}. Is another `outbox local up` running? Stop it, or pass "
                "--api-port 0 for a free port"
            ) from None
        self.servers[api_id] = api
        self._ports[api_id] = int(api.url.rsplit(":", 1)[1])
        return api.url

    def attach(self, deployed: DeployedStack) -> None:
        """Route each of the stack's routes to its function, and start its APIs."""
        stages = {
            str(resource.properties.get("ApiId", {}).get("Ref")): str(resource.properties.get("StageName"))
            for resource in deployed.definition.template.resources.values()
            if resource.type == "AWS::ApiGatewayV2::Stage"
        }
        for route in deployed.provisioned.routes:
            api_id = deployed.provisioned.resources[route.api_logical_id][1].ref
            if api_id not in self.servers:
                self.open(api_id)  # a restored stack: provisioning opened it in an earlier run
            api = self.servers[api_id]
            api.stage = stages.get(route.api_logical_id, "$default")
            api.add_route(Route(route.route_key, route.function_arn))
            if api_id not in deployed.api_ids:
                deployed.api_ids.append(api_id)
        for api_id in deployed.api_ids:
            self.servers[api_id].start()

    def detach(self, deployed: DeployedStack) -> None:
        for api_id in deployed.api_ids:
            api = self.servers.pop(api_id, None)
            if api is not None:
                api.stop()

    def close(self, api_ids: set[str]) -> None:
        """Stop serving these APIs (opened by a provisioning that then failed: no stack holds them)."""
        for api_id in api_ids:
            api = self.servers.pop(api_id, None)
            if api is not None:
                api.stop()

    def stop(self) -> None:
        for api in self.servers.values():
            api.stop()
        self.servers.clear()  # each keeps its port for a next start (`_ports`)

    def urls(self) -> dict[str, str]:
        """Each API's local URL, by API id: those served, and those stopped (the runtime stopping), at the
        port each keeps."""
        return {api_id: f"http://{self._host}:{port}" for api_id, port in list(self._ports.items())}

    def localized(self, value: Any, region: str) -> Any:
        """An output value with the API URLs CDK builds (https://{apiId}.execute-api.{region}.{suffix}/)
        pointing at the local APIs."""
        if isinstance(value, str):
            for api_id, api in self.servers.items():
                value = value.replace(f"https://{api_id}.execute-api.{region}.amazonaws.com", api.url)
        return value

"""The moto server the runtime provisions into: threaded, on 127.0.0.1, with HTTP/1.1 keep-alive
(`outbox_local.keep_alive`), behind the fault injector, the runtime's own answer to Lambda's event source
mapping read calls (`outbox_local.event_source_mapping_api`), its own CloudFormation
(`outbox_local.cloudformation.api`) and its controls (`outbox_local.control_api`).
moto's `ThreadedMotoServer` takes no application of ours: its `_server_entry` is replaced to build ours."""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Callable
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from outbox_local.cloudformation.api import CloudFormationApi
from outbox_local.control_api import ControlApi
from outbox_local.errors import EndpointUnavailableError
from outbox_local.event_source_mapping_api import EventSourceMappingApi
from outbox_local.faults import FaultInjector, WsgiApp
from outbox_local.http_framing import SHUTDOWN_POLL_S
from outbox_local.keep_alive import Connections, keep_alive_handler


class _Dispatcher(DomainDispatcherApplication):
    """moto's dispatcher, remembering which backend serves a host: without it the runtime's CPU per order is
    22-33% higher and its commit -> delivery p50 10-52% longer (two paired runs of `python -m bench.local_load
    --orders 600 --rate 15`). moto finds the backend anew for every request (a listing of its package
    directory, a stat of each entry, a scan of every service's URL patterns), under one lock every request
    takes."""

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - one dispatcher per server; hosts are a small set
    def get_backend_for_host(self, host: str | None) -> Any:
        return super().get_backend_for_host(host)


class LocalAwsServer(ThreadedMotoServer):
    def __init__(
        self,
        faults: FaultInjector,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        event_source_mappings: EventSourceMappingApi | None = None,
        cloudformation: CloudFormationApi | None = None,
        control: ControlApi | None = None,
        cut: Callable[[WsgiApp], WsgiApp] | None = None,
    ) -> None:
        super().__init__(ip_address=host, port=port, verbose=False)
        self._faults = faults
        self._event_source_mappings = event_source_mappings
        self._control = control
        self._cut = cut
        """The persistence's cut layer (`outbox_local.persistence.cut`), around moto alone."""
        self._cloudformation = cloudformation
        self._connections = Connections()
        self._start_error: BaseException | None = None
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

    def start(self) -> None:
        """Serve, or raise EndpointUnavailableError when the port is taken. (moto's own start would wait for
        ever: werkzeug ends the server's thread with SystemExit, after printing its own advice.)"""
        if self._port:
            _claimable(self._ip_address, self._port)
        self._start_error = None
        self._thread = None
        super().start()
        if self._start_error is not None:
            raise _unavailable(self._ip_address, self._port, self._start_error)

    def _server_entry(self) -> None:
        app: WsgiApp = _Dispatcher(create_backend_app)
        if self._cut is not None:
            app = self._cut(app)
        if self._event_source_mappings is not None:
            app = self._event_source_mappings.wrap(app)
        if self._cloudformation is not None:
            app = self._cloudformation.wrap(app)
        app = self._faults.wrap(app)
        if self._control is not None:
            # Outermost: the runtime's own controls are never failed by an armed fault.
            app = self._control.wrap(app)
        self._connections = Connections()  # a server started again after stop(): the earlier one is closing
        try:
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=keep_alive_handler(self._connections)
            )
        except (OSError, SystemExit) as error:  # taken between the check and here
            self._start_error = error
            self._server_ready_event.set()
            return
        self._server_ready_event.set()
        self._server.serve_forever(poll_interval=SHUTDOWN_POLL_S)

    @property
    def endpoint_url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._thread is None or self._start_error is not None:
            return  # it never served: no thread to join, no server to close
        super().stop()
        self._connections.close_all()  # clients' kept-alive connections, and the threads serving them
        if self._server is not None:
            self._server.server_close()  # release the listening port now, not at garbage collection


def _claimable(host: str, port: int) -> None:
    """Raise EndpointUnavailableError unless `host:port` can be listened on now (as werkzeug binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise _unavailable(host, port, error) from None


def _unavailable(host: str, port: int, error: BaseException) -> EndpointUnavailableError:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else "it cannot be listened on"
    return EndpointUnavailableError(
        f"the local runtime cannot serve its AWS endpoint on {host}:{port}: {reason}. Is another "
        "`outbox local up` running (`outbox local env` says)? Stop it, or pass --aws-port 0 for a free port"
    )

"""One Lambda execution environment: a worker process that imports one function's handler once (the cold
start), then runs its invocations one at a time, until the runtime closes its pipe.

Started as a script by `outbox_local.execution_environments`, with the function's own environment. It imports
only the standard library, so no project module is loaded before the function's code root is first on
`sys.path`, as in Lambda, where the function's own asset comes first.

Messages are one JSON document per line over two private pipes, never stdout: what the handler prints is its
log, kept and handed back with each answer (the runtime reads its EMF metrics). Arguments: the two pipes'
file descriptors, a lifeline's (never written: end-of-file means the runtime is gone, and the worker ends even
mid-invocation), then the function's name (unused: it tells `ps` whose this is). First request
`{"code_root", "sys_path", "handler"}`, answered `{"ready": true}` or the import error; then `{"event",
"context", "trace_header"}`, answered `{"payload"}` or `{"error_type", "error_message", "trace"}`, with
`"output"`.
A handler that exits the process ends the worker; the runtime reports `Runtime.ExitError`, as Lambda does.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any, TextIO, cast

Handler = Callable[[Any, Any], Any]


class _KeptOutput:
    """Stands in for `sys.stdout` for the worker's whole life, so a logger the handler creates at import
    writes here too; `take()` returns what was written since the last call."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self) -> None:
        self._parts: list[str] = []

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        """Nothing to flush: the output travels with the answer."""

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def take(self) -> str:
        taken, self._parts = self._parts, []
        return "".join(taken)


class LambdaContext:
    """The attributes and method of the Python Lambda runtime's context object, from the runtime's fields."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.function_name: str = fields["function_name"]
        self.function_version: str = fields["function_version"]
        self.invoked_function_arn: str = fields["invoked_function_arn"]
        self.memory_limit_in_mb: int = fields["memory_limit_in_mb"]
        self.aws_request_id: str = fields["aws_request_id"]
        self.log_group_name: str = fields["log_group_name"]
        self.log_stream_name: str = fields["log_stream_name"]
        self.identity = None
        self.client_context = None
        self._deadline_ms: float = fields["deadline_ms"]

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self._deadline_ms - time.time() * 1000))


def _load(init: dict[str, Any]) -> Handler:
    root = init.get("code_root")
    sys.path[:] = [*([root] if root else []), *(entry for entry in init["sys_path"] if entry != root)]
    module_name, _, function_name = str(init["handler"]).rpartition(".")
    handler: Handler = getattr(importlib.import_module(module_name), function_name)
    return handler


def _invoke(handler: Handler, request: dict[str, Any], output: _KeptOutput) -> str:
    context = LambdaContext(request["context"])
    # As the Lambda runtime does before each invocation: the invocation's X-Ray header, or none.
    if request.get("trace_header"):
        os.environ["_X_AMZN_TRACE_ID"] = str(request["trace_header"])
    else:
        os.environ.pop("_X_AMZN_TRACE_ID", None)
    try:
        payload = handler(request["event"], context)
    except Exception as error:  # a handler's exception is the invocation's result
        return json.dumps(_error(type(error).__name__, error, output))
    try:
        # Lambda serializes the return value to JSON: what cannot be serialized is an error.
        return json.dumps({"payload": payload, "output": output.take()})
    except (TypeError, ValueError) as error:
        return json.dumps(_error("Runtime.MarshalError", error, output))


def _error(error_type: str, error: Exception, output: _KeptOutput) -> dict[str, Any]:
    return {
        "error_type": error_type,
        "error_message": str(error),
        "trace": traceback.format_exc(),
        "output": output.take(),
    }


def _send(responses: IO[bytes], document: str) -> None:
    responses.write(document.encode() + b"\n")
    responses.flush()


def _end_with_the_runtime(lifeline: int) -> None:
    """On its own thread: the runtime enforces the function's timeout, so without it nothing would stop a
    handler that hangs. `read` returns once every writer of the pipe is gone: the runtime closed it, or died.
    """
    os.read(lifeline, 1)
    os._exit(1)


def main(arguments: list[str]) -> int:
    # Ctrl-C in a terminal reaches the whole process group: it is for the runtime, which stops its
    # environments itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Assets live in cdk.out, which `cdk deploy` zips as they are: no bytecode may be written there.
    sys.dont_write_bytecode = True
    threading.Thread(target=_end_with_the_runtime, args=(int(arguments[2]),), daemon=True).start()
    requests = os.fdopen(int(arguments[0]), "rb")
    responses = os.fdopen(int(arguments[1]), "wb")
    output = _KeptOutput()
    sys.stdout = cast(TextIO, output)
    try:
        handler = _load(json.loads(requests.readline()))
    except Exception as error:  # Lambda reports import failures as a function error
        _send(responses, json.dumps(_error("Runtime.ImportModuleError", error, output)))
        return 1
    _send(responses, json.dumps({"ready": True, "output": output.take()}))
    for line in requests:  # until the runtime closes the pipe
        _send(responses, _invoke(handler, json.loads(line), output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""API calls counted on the clients the code under test uses, with botocore's own event hooks.

`before-call.<service>.<operation>` is emitted once per API call a client makes, before botocore builds the
HTTP request (its retries, if it had any, happen inside one call). A handler registered for the bare
`before-call` hears every service and operation of that client. Nothing is wrapped or patched: the code
under test calls its real boto3 clients exactly as in production.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

Operation = tuple[str, str]
"""(service name, operation name), e.g. ("dynamodb", "TransactWriteItems")."""


class CallCounter:
    def __init__(self) -> None:
        self.counts: Counter[Operation] = Counter()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call", self._count)
        return client

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[(model.service_model.service_name, model.name)] += 1

    def reset(self) -> None:
        self.counts.clear()

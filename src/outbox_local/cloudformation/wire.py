"""CloudFormation's wire format: the query protocol (form-encoded requests, XML answers).

The CDK CLI's SDK (and boto3) speak it to CloudFormation: `Action=CreateChangeSet&Version=2010-05-15&...`
with lists flattened as `Parameters.member.1.ParameterKey`, answered with
`<CreateChangeSetResponse><CreateChangeSetResult>...` (lists as `<member>` elements) or, on an error,
`<ErrorResponse><Error><Code>...`. Only this module knows that shape.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

NAMESPACE = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/([^/]+)/([^/]+)/aws4_request")


def signed_for(authorization: str) -> tuple[str, str] | None:
    """(region, service) named by a SigV4 Authorization header's credential scope, or None."""
    found = _CREDENTIAL_SCOPE.search(authorization)
    return (found.group(1), found.group(2)) if found else None


class Request:
    """One query-protocol request's parameters, with the flattened lists and maps read back."""

    def __init__(self, body: bytes | str, region: str | None = None) -> None:
        """`region`: the one the request was signed for (its SigV4 scope), where a stack it creates lives."""
        self.region = region
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        self.params: dict[str, str] = {
            key: values[-1] for key, values in parse_qs(text, keep_blank_values=True).items()
        }

    @property
    def action(self) -> str:
        return self.params.get("Action", "")

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.params.get(key, default)

    def flag(self, key: str) -> bool:
        return self.params.get(key, "false").lower() == "true"

    def members(self, key: str) -> list[Any]:
        """`key.member.N` (a string) or `key.member.N.Field` (a dict of fields), in N's order."""
        prefix = f"{key}.member."
        found: dict[int, Any] = {}
        for name, value in self.params.items():
            if not name.startswith(prefix):
                continue
            index, _, field = name[len(prefix) :].partition(".")
            if not index.isdigit():
                continue
            if field:
                entry = found.setdefault(int(index), {})
                if isinstance(entry, dict):
                    entry[field] = value
            else:
                found[int(index)] = value
        return [found[index] for index in sorted(found)]


def timestamp(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _xml(name: str, value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping):
        inner = "".join(_xml(key, item) for key, item in value.items())
        return f"<{name}>{inner}</{name}>"
    if isinstance(value, list | tuple):
        inner = "".join(_xml("member", item) for item in value)
        return f"<{name}>{inner}</{name}>"
    if isinstance(value, bool):
        return f"<{name}>{'true' if value else 'false'}</{name}>"
    return f"<{name}>{escape(str(value))}</{name}>"


def response(action: str, result: Mapping[str, Any] | None) -> bytes:
    """The XML answer of a successful `action` (its result's fields as given; lists as `member`s)."""
    body = _xml(f"{action}Result", result or {})
    metadata = f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
    return f'<{action}Response xmlns="{NAMESPACE}">{body}{metadata}</{action}Response>'.encode()


def error_response(code: str, message: str, *, sender: bool = True) -> bytes:
    kind = "Sender" if sender else "Receiver"
    return (
        f'<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{kind}</Type><Code>{escape(code)}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    ).encode()

"""A template as CloudFormation receives it: text, JSON or YAML (with the short forms `!Ref`, `!Sub`, ...).

The CDK CLI sends JSON; a user's own `aws cloudformation deploy` may send YAML. YAML's short forms are read
into the long forms the resolver knows (`!GetAtt A.B` -> `{"Fn::GetAtt": ["A", "B"]}`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlparse

import yaml

from outbox_local.errors import TemplateError
from outbox_local.template import Template

_FUNCTIONS = [
    "And",
    "Base64",
    "Cidr",
    "Contains",
    "Equals",
    "FindInMap",
    "GetAZs",
    "GetAtt",
    "If",
    "ImportValue",
    "Join",
    "Length",
    "Not",
    "Or",
    "Select",
    "Split",
    "Sub",
    "Transform",
    "ToJsonString",
]


class _CloudFormationLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """safe_load with CloudFormation's tags; nothing else (no arbitrary objects). Dates stay text:
    `AWSTemplateFormatVersion: 2010-09-09` is a string to CloudFormation, not a date."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def _constructor(function: str) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        value: Any
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
            if function == "Fn::GetAtt":
                value = str(value).split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {function: value}

    return construct


_CloudFormationLoader.add_constructor("!Ref", _constructor("Ref"))
_CloudFormationLoader.add_constructor("!Condition", _constructor("Condition"))
for _name in _FUNCTIONS:
    _CloudFormationLoader.add_constructor(f"!{_name}", _constructor(f"Fn::{_name}"))


def parse_body(text: str) -> dict[str, Any]:
    """The template's object, from JSON or YAML text; TemplateError when it is neither, or no template."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        try:
            body = yaml.load(text, Loader=_CloudFormationLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as error:
            raise TemplateError(f"Template format error: not JSON or YAML: {error}") from error
    if not isinstance(body, dict) or not isinstance(body.get("Resources"), dict):
        raise TemplateError("Template format error: At least one Resources member must be defined.")
    return body


def parse(text: str, origin: str) -> Template:
    return Template.from_body(parse_body(text), origin)


def s3_location(url: str) -> tuple[str, str]:
    """(bucket, key) of a TemplateURL: path style (`https://s3.<region>.amazonaws.com/<bucket>/<key>`, what
    the CDK CLI sends, or the runtime's own endpoint) or virtual-hosted (`https://<bucket>.s3...`)."""
    parsed = urlparse(url)
    host = parsed.hostname or ""
    path = unquote(parsed.path.lstrip("/"))
    if ".s3." in host or ".s3-" in host:
        bucket, key = host.split(".s3", 1)[0], path
    else:
        bucket, _, key = path.partition("/")
    if not bucket or not key:
        raise TemplateError(f"TemplateURL must be a supported URL: {url} names no S3 bucket and key")
    return bucket, key

"""Small queries over a synthesized CloudFormation template (a plain dict), shared by the infra tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Template = Mapping[str, Any]


def resources(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def only(template: Template, resource_type: str, id_prefix: str = "") -> tuple[str, dict[str, Any]]:
    found = {k: v for k, v in resources(template, resource_type).items() if k.startswith(id_prefix)}
    assert len(found) == 1, f"expected one {resource_type} starting with {id_prefix!r}, found {list(found)}"
    return next(iter(found.items()))


def function_by_handler(template: Template, handler: str) -> tuple[str, dict[str, Any]]:
    found = {
        k: v
        for k, v in resources(template, "AWS::Lambda::Function").items()
        if v["Properties"]["Handler"] == handler
    }
    assert len(found) == 1, f"expected one function with handler {handler}"
    return next(iter(found.items()))


def role_of(function: dict[str, Any]) -> str:
    role = function["Properties"]["Role"]
    assert set(role) == {"Fn::GetAtt"}, role
    return str(role["Fn::GetAtt"][0])


def statements_of_role(template: Template, role_logical_id: str) -> list[dict[str, Any]]:
    """Every Allow/Deny statement reaching the role: inline Policies and attached AWS::IAM::Policy."""
    role = template["Resources"][role_logical_id]
    statements: list[dict[str, Any]] = []
    for inline in role["Properties"].get("Policies", []):
        statements.extend(inline["PolicyDocument"]["Statement"])
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"].get("Roles", []):
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def actions_by_resource(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Allowed actions keyed by a readable form of each resource (e.g. ``GetAtt:Table.Arn``, ``*``)."""
    granted: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow", statement
        for resource in as_list(statement["Resource"]):
            granted.setdefault(describe(resource), set()).update(as_list(statement["Action"]))
    return granted


def describe(value: Any) -> str:
    """``{"Fn::GetAtt": ["X", "Arn"]}`` -> ``GetAtt:X.Arn``; ``{"Ref": "X"}`` -> ``Ref:X``; a join of those ->
    ``Join:`` and the parts joined; strings as is."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"GetAtt:{logical_id}.{attribute}"
    if isinstance(value, dict) and "Ref" in value:
        return f"Ref:{value['Ref']}"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return "Join:" + str(separator).join(describe(part) for part in parts)
    return repr(value)

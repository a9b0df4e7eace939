"""A change set's parameter values, as CloudFormation settles them: given, previous (`UsePreviousValue`) or
the template's default; SSM-typed ones read from the runtime's SSM (the CDK's `BootstrapVersion` reads
`/cdk-bootstrap/<qualifier>/version`, which `cdk bootstrap` wrote there); then the template's `Rules`
checked (the CDK's `CheckBootstrapVersion`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.errors import TemplateError
from outbox_local.template import Resolver, Template

PUBLIC_PARAMETERS = "/aws/service/"
"""AWS's public SSM parameters (e.g. the Powertools layer's ARN), which moto does not hold. Nothing local
reads their values (layers are not loaded: the function runs with the project's packages), so one that is
missing resolves to a marked placeholder instead of failing the deploy."""
_SSM_TYPE = "AWS::SSM::Parameter::Value"


class ParameterError(TemplateError):
    """A parameter or rule CloudFormation would refuse (answered as a ValidationError)."""


def settle(
    template: Template,
    given: Mapping[str, str],
    previous: Mapping[str, str],
    use_previous: set[str],
    read_ssm: Callable[[str], str | None],
) -> tuple[dict[str, str], dict[str, str]]:
    """(the values as the stack keeps them, the values the resolver uses: SSM types read)."""
    declared = _declared(template)
    unknown = sorted((set(given) | use_previous) - set(declared))
    if unknown:
        raise ParameterError(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    values: dict[str, str] = {}
    missing = []
    for name, spec in declared.items():
        if name in use_previous and name in previous:
            values[name] = previous[name]
        elif name in given:
            values[name] = given[name]
        elif "Default" in spec:
            values[name] = str(spec["Default"])
        else:
            missing.append(name)
        allowed = spec.get("AllowedValues")
        if name in values and allowed and values[name] not in [str(value) for value in allowed]:
            raise ParameterError(f"Parameter '{name}' must be one of AllowedValues")
    if missing:
        raise ParameterError(f"Parameters: [{', '.join(missing)}] must have values")
    resolved = dict(values)
    for name, spec in declared.items():
        if str(spec.get("Type", "")).startswith(_SSM_TYPE):
            value = read_ssm(values[name])
            if value is None:
                if not values[name].startswith(PUBLIC_PARAMETERS):
                    raise ParameterError(
                        f"Unable to fetch parameters [{values[name]}] from parameter store for this account."
                    )
                value = f"local-ssm-value:{values[name]}"
            resolved[name] = value
    return values, resolved


def check_rules(template: Template, resolver: Resolver) -> None:
    """The template's `Rules`: each assertion whose rule applies must hold, or the change set is refused
    with its AssertDescription (as CloudFormation refuses it)."""
    for name, rule in _mapping(template.body.get("Rules") or {}, "Rules").items():
        condition = _mapping(rule, f"Rule {name}").get("RuleCondition")
        if condition is not None and not resolver.resolve(condition):
            continue
        assertions = rule.get("Assertions", [])
        if not isinstance(assertions, list) or not all(
            isinstance(assertion, dict) and "Assert" in assertion for assertion in assertions
        ):
            raise ParameterError(f"Rule {name}: Assertions must be a list of objects, each with an Assert")
        for assertion in assertions:
            if not resolver.resolve(assertion["Assert"]):
                raise ParameterError(str(assertion.get("AssertDescription") or f"Rule {name} failed"))


def _declared(template: Template) -> Mapping[str, Mapping[str, Any]]:
    """The template's `Parameters`, each an object (refused, named, when not)."""
    declared = _mapping(template.body.get("Parameters") or {}, "Parameters")
    return {name: _mapping(spec, f"Parameter {name}") for name, spec in declared.items()}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """`value`, which the template's `where` must hold as an object (a list there is refused, named)."""
    if not isinstance(value, dict):
        raise ParameterError(f"Template format error: {where} must be an object, not {type(value).__name__}")
    return value


def ssm_reader(ssm: Any) -> Callable[[str], str | None]:
    def read(name: str) -> str | None:
        try:
            return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
        except ClientError as error:
            if error.response["Error"]["Code"] == "ParameterNotFound":
                return None
            raise

    return read

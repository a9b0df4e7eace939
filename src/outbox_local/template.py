"""Reading a synthesized CloudFormation template and resolving its intrinsic functions locally.

The runtime provisions exactly what `cdk synth` wrote: this module parses the template, orders its resources
by dependency and resolves `Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::Select`, `Fn::Split`, `Fn::If`,
`Fn::ImportValue` (the runtime's other stacks' exports), conditions, mappings and pseudo parameters against
the physical names the runtime gave each resource.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outbox_local.errors import TemplateError, UnresolvableReferenceError

ACCOUNT_ID = "123456789012"  # moto's default account: every ARN the server answers with uses it
TEMPLATE_SUFFIX = ".template.json"
"""How `cdk synth` names a stack's template in cdk.out: `<StackName>.template.json`."""
SAMPLE_STACK = "OutboxStack"
"""The sample app's stack: the template chosen when cdk.out holds several and this one among them."""
_STACK_NAME = re.compile(r"[A-Za-z][-A-Za-z0-9]{0,127}")
_NO_VALUE = object()
_SUB_PLACEHOLDER = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass(frozen=True)
class Resource:
    logical_id: str
    type: str
    properties: Mapping[str, Any]
    depends_on: tuple[str, ...] = ()
    condition: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    path: Path
    body: Mapping[str, Any]

    @classmethod
    def load(cls, path: Path | str) -> Template:
        location = Path(path)
        try:
            body = json.loads(location.read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise TemplateError(f"template not found: {location} (run `make synth` first)") from error
        except json.JSONDecodeError as error:
            raise TemplateError(f"template is not JSON: {location}: {error}") from error
        return cls.from_body(body, location)

    @classmethod
    def from_body(cls, body: object, path: Path | str = "<memory>") -> Template:
        if not isinstance(body, dict) or not isinstance(body.get("Resources"), dict):
            raise TemplateError(f"{path}: not a CloudFormation template (no Resources object)")
        return cls(Path(path), body)

    @property
    def resources(self) -> dict[str, Resource]:
        resources = {}
        for logical_id, raw in self.body["Resources"].items():
            if not isinstance(raw, dict) or not isinstance(raw.get("Type"), str):
                raise TemplateError(f"resource {logical_id} has no Type")
            depends_on = raw.get("DependsOn", [])
            resources[logical_id] = Resource(
                logical_id=logical_id,
                type=raw["Type"],
                properties=raw.get("Properties", {}),
                depends_on=tuple([depends_on] if isinstance(depends_on, str) else depends_on),
                condition=raw.get("Condition"),
                metadata=raw.get("Metadata", {}),
            )
        return resources

    @property
    def outputs(self) -> Mapping[str, Any]:
        outputs: Mapping[str, Any] = self.body.get("Outputs", {})
        return outputs

    def in_dependency_order(self) -> list[Resource]:
        """Resources ordered so that each comes after everything it references."""
        resources = self.resources
        ordered: list[Resource] = []
        state: dict[str, str] = {}

        def visit(logical_id: str, trail: tuple[str, ...]) -> None:
            if state.get(logical_id) == "done":
                return
            if state.get(logical_id) == "visiting":
                raise TemplateError(f"circular dependency: {' -> '.join((*trail, logical_id))}")
            state[logical_id] = "visiting"
            resource = resources[logical_id]
            for dependency in sorted(set(resource.depends_on) | references(resource.properties)):
                if dependency in resources:
                    visit(dependency, (*trail, logical_id))
                elif dependency in resource.depends_on:
                    raise TemplateError(f"{logical_id} depends on unknown resource {dependency}")
            state[logical_id] = "done"
            ordered.append(resource)

        for logical_id in resources:
            visit(logical_id, ())
        return ordered


def find_template(cdk_out: Path) -> Path:
    """The template `outbox local up` runs when given none: cdk.out's only one; the sample's when there are
    several and it is among them; else an error that lists them."""
    found = sorted(cdk_out.glob(f"*{TEMPLATE_SUFFIX}"))
    if not found:
        raise TemplateError(
            f"no *{TEMPLATE_SUFFIX} in {cdk_out}: run `cdk synth` (or `make synth`) first, or pass --template"
        )
    if len(found) == 1:
        return found[0]
    sample = cdk_out / f"{SAMPLE_STACK}{TEMPLATE_SUFFIX}"
    if sample in found:
        return sample
    names = ", ".join(path.name for path in found)
    raise TemplateError(f"{cdk_out} holds several templates ({names}): pass --template to choose one")


def stack_name_of(template_path: Path) -> str:
    """The stack a template describes, from its file's name as `cdk synth` writes it
    (`PaymentsStack.template.json` -> `PaymentsStack`)."""
    name = template_path.name
    stem = name.removesuffix(TEMPLATE_SUFFIX) if name.endswith(TEMPLATE_SUFFIX) else template_path.stem
    if _STACK_NAME.fullmatch(stem) is None:
        raise TemplateError(
            f"{template_path}: {stem!r} is not a stack name (a letter, then letters, digits or '-'): "
            "pass --stack-name"
        )
    return stem


def references(value: object) -> set[str]:
    """Logical ids a property value refers to (Ref, GetAtt, ${X} in Sub)."""
    found: set[str] = set()
    for node in _walk(value):
        if "Ref" in node and isinstance(node["Ref"], str):
            found.add(node["Ref"])
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            found.add(target[0] if isinstance(target, list) else str(target).split(".")[0])
        if "Fn::Sub" in node:
            text = node["Fn::Sub"][0] if isinstance(node["Fn::Sub"], list) else node["Fn::Sub"]
            if isinstance(text, str):
                found.update(name.split(".")[0] for name in _SUB_PLACEHOLDER.findall(text))
    return {name for name in found if not name.startswith("AWS::")}


def imported(value: object) -> list[Any]:
    """The arguments of every `Fn::ImportValue` in a value (export names, maybe still to resolve)."""
    return [node["Fn::ImportValue"] for node in _walk(value) if "Fn::ImportValue" in node]


def _walk(value: object) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child)


def physical_name(stack_name: str, logical_id: str, max_length: int = 255, suffix: str = "") -> str:
    """A CloudFormation-style generated name: stack, logical id and a stable hash, within the length limit.

    Stable (not random) so that `outbox local up` prints the same names every time a developer starts it.
    """
    digest = hashlib.sha256(f"{stack_name}/{logical_id}".encode()).hexdigest()[:12].upper()
    room = max_length - len(suffix) - len(digest) - 2
    stem = f"{stack_name}-{logical_id}"[:room]
    return f"{stem}-{digest}{suffix}"


@dataclass
class ResolvedResource:
    """A provisioned resource: what `Ref` returns and what `Fn::GetAtt` can ask for."""

    ref: str
    attributes: dict[str, Any] = field(default_factory=dict)


class Resolver:
    """Resolves intrinsic functions against the runtime's physical resources."""

    def __init__(
        self,
        template: Template,
        *,
        region: str,
        stack_name: str,
        parameter_values: Mapping[str, str] | None = None,
        exports: Mapping[str, str] | None = None,
    ) -> None:
        self._template = template
        self._exports = exports or {}
        """Export name -> value: what the runtime's other stacks export, for `Fn::ImportValue`."""
        self.region = region
        self.stack_name = stack_name
        self.resources: dict[str, ResolvedResource] = {}
        self._parameters = self._parameter_values(parameter_values or {})
        self._condition_cache: dict[str, bool] = {}

    @property
    def pseudo_parameters(self) -> dict[str, Any]:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
            "AWS::StackId": (
                f"arn:aws:cloudformation:{self.region}:{ACCOUNT_ID}:stack/{self.stack_name}/local"
            ),
            "AWS::NotificationARNs": [],
            "AWS::NoValue": _NO_VALUE,
        }

    def _parameter_values(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, spec in self._template.body.get("Parameters", {}).items():
            if name in overrides:
                values[name] = overrides[name]
            elif "Default" in spec:
                default = spec["Default"]
                # An SSM-typed parameter's default is the parameter NAME, resolved by CloudFormation at deploy
                # time. Locally nothing reads the real value (e.g. the bootstrap version, a public layer ARN).
                is_ssm = str(spec.get("Type", "")).startswith("AWS::SSM::Parameter::Value")
                values[name] = f"local-ssm-value:{default}" if is_ssm else default
            else:
                raise UnresolvableReferenceError(f"parameter {name} has no Default and no value was given")
        return values

    def condition(self, name: str) -> bool:
        if name not in self._condition_cache:
            conditions = self._template.body.get("Conditions", {})
            if name not in conditions:
                raise UnresolvableReferenceError(f"unknown condition {name}")
            self._condition_cache[name] = bool(self._evaluate(conditions[name]))
        return self._condition_cache[name]

    def resolve(self, value: object) -> Any:
        resolved = self._evaluate(value)
        return None if resolved is _NO_VALUE else resolved

    def _evaluate(self, value: object) -> Any:
        if isinstance(value, list):
            items = [self._evaluate(item) for item in value]
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, argument), *_ = value.items()
            if key == "Ref":
                return self._ref(argument)
            if key == "Condition":
                return self.condition(argument)
            if key.startswith("Fn::"):
                return self._function(key, argument)
        resolved = {k: self._evaluate(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _function(self, name: str, argument: Any) -> Any:
        handler: Callable[[Any], Any] | None = {
            "Fn::GetAtt": self._get_att,
            "Fn::Join": self._join,
            "Fn::Sub": self._sub,
            "Fn::Select": self._select,
            "Fn::Split": self._split,
            "Fn::If": self._if,
            "Fn::Equals": lambda a: self._evaluate(a[0]) == self._evaluate(a[1]),
            "Fn::Not": lambda a: not self._evaluate(a[0]),
            "Fn::And": lambda a: all(self._evaluate(item) for item in a),
            "Fn::Or": lambda a: any(self._evaluate(item) for item in a),
            "Fn::FindInMap": self._find_in_map,
            "Fn::GetAZs": lambda _: [f"{self.region}{zone}" for zone in "abc"],
            "Fn::ImportValue": self._import_value,
            # Rules only (the CDK's CheckBootstrapVersion): whether the list holds the value.
            "Fn::Contains": lambda a: self._evaluate(a[1]) in self._evaluate(a[0]),
        }.get(name)
        if handler is None:
            raise UnresolvableReferenceError(f"intrinsic function {name} is not supported locally")
        return handler(argument)

    def _ref(self, name: str) -> Any:
        if name in self.pseudo_parameters:
            return self.pseudo_parameters[name]
        if name in self._parameters:
            return self._parameters[name]
        if name in self.resources:
            return self.resources[name].ref
        raise UnresolvableReferenceError(f"Ref to {name}, which is not provisioned (or not supported)")

    def _import_value(self, argument: Any) -> str:
        name = str(self._evaluate(argument))
        if name not in self._exports:
            raise UnresolvableReferenceError(f"Fn::ImportValue: No export named {name} found")
        return self._exports[name]

    def _get_att(self, argument: Any) -> Any:
        logical_id, attribute = argument if isinstance(argument, list) else str(argument).split(".", 1)
        attribute = self._evaluate(attribute)
        resource = self.resources.get(logical_id)
        if resource is None:
            raise UnresolvableReferenceError(f"Fn::GetAtt {logical_id}.{attribute}: no such resource")
        if attribute not in resource.attributes:
            raise UnresolvableReferenceError(f"Fn::GetAtt {logical_id}.{attribute}: attribute not available")
        return resource.attributes[attribute]

    def _join(self, argument: Any) -> str:
        delimiter, items = argument
        return str(delimiter).join(str(item) for item in self._evaluate(items))

    def _sub(self, argument: Any) -> str:
        text, variables = (
            (argument[0], self._evaluate(argument[1])) if isinstance(argument, list) else (argument, {})
        )

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self._get_att(name.split(".", 1)))
            return str(self._ref(name))

        return _SUB_PLACEHOLDER.sub(replace, text).replace("${!", "${")

    def _select(self, argument: Any) -> Any:
        index, items = self._evaluate(argument[0]), self._evaluate(argument[1])
        return items[int(index)]

    def _split(self, argument: Any) -> list[str]:
        delimiter, text = argument
        return str(self._evaluate(text)).split(delimiter)

    def _if(self, argument: Any) -> Any:
        name, when_true, when_false = argument
        return self._evaluate(when_true if self.condition(name) else when_false)

    def _find_in_map(self, argument: Any) -> Any:
        name, first, second = (self._evaluate(item) for item in argument)
        try:
            return self._template.body["Mappings"][name][first][second]
        except KeyError as error:
            raise UnresolvableReferenceError(f"Fn::FindInMap {name}/{first}/{second} not found") from error

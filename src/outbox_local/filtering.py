"""Lambda event filtering (FilterCriteria), matched by moto's EventBridge pattern matcher (moto internals: its
`moto.events.models.EventPattern`, which moto's EventBridge rules use).

Lambda applies each `Filters[].Pattern` to the whole record it would send (for DynamoDB: `eventName`,
`dynamodb.NewImage...`); a record is sent when ANY pattern matches and is dropped otherwise. moto matches a
pattern; what is checked here is the pattern itself: moto's matcher answers "matches" for an operator it does
not know, so a pattern using anything but the subset Lambda documents (exact values, `prefix`, `suffix`,
`equals-ignore-case`, `anything-but` (value, list, or prefix/suffix), `numeric`, `exists`) raises
`FilterPatternError` when it is compiled: a template fails at start-up instead of filtering wrongly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.events.models import EventPattern as MotoEventPattern

from outbox_local.errors import FilterPatternError

_NUMERIC_OPERATORS = frozenset({"=", "<", "<=", ">", ">="})
_KNOWN_OPERATORS = frozenset({"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists"})


def _is_number(value: object) -> bool:
    # bool is an int in Python, but JSON true is not the number 1.
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class EventPattern:
    """One compiled pattern, matched by moto against a record of JSON values (what Lambda sends)."""

    pattern: Mapping[str, Any]
    _matcher: MotoEventPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_matcher", MotoEventPattern(json.dumps(self.pattern), dict(self.pattern)))

    @classmethod
    def parse(cls, text: str) -> EventPattern:
        try:
            pattern = json.loads(text)
        except json.JSONDecodeError as error:
            raise FilterPatternError(f"filter pattern is not JSON: {text!r}") from error
        if not isinstance(pattern, dict):
            raise FilterPatternError(f"filter pattern must be a JSON object: {text!r}")
        _validate_object(pattern, path="")
        return cls(pattern)

    def matches(self, event: Mapping[str, Any]) -> bool:
        record: Any = dict(event)  # moto types it as an EventBridge event; it matches any JSON object
        return self._matcher.matches_event(record)


@dataclass(frozen=True)
class FilterCriteria:
    """All patterns of one event source mapping. No pattern at all means every record passes."""

    patterns: tuple[EventPattern, ...] = ()

    @classmethod
    def from_template(cls, criteria: Mapping[str, Any] | None) -> FilterCriteria:
        if not criteria:
            return cls()
        filters = criteria.get("Filters", [])
        if not isinstance(filters, list):
            raise FilterPatternError("FilterCriteria.Filters must be a list")
        patterns = []
        for entry in filters:
            if not isinstance(entry, dict) or not isinstance(entry.get("Pattern"), str):
                raise FilterPatternError(f"each filter needs a Pattern string, got {entry!r}")
            patterns.append(EventPattern.parse(entry["Pattern"]))
        return cls(tuple(patterns))

    def accepts(self, record: Mapping[str, Any]) -> bool:
        return not self.patterns or any(pattern.matches(record) for pattern in self.patterns)


def _validate_object(pattern: Mapping[str, Any], path: str) -> None:
    for key, rule in pattern.items():
        where = f"{path}.{key}" if path else key
        if isinstance(rule, dict):
            _validate_object(rule, where)
        elif isinstance(rule, list):
            if not rule:
                raise FilterPatternError(f"{where}: a leaf must list at least one value")
            for matcher in rule:
                _validate_matcher(matcher, where)
        else:
            raise FilterPatternError(f"{where}: pattern values must be objects or arrays, got {rule!r}")


def _validate_matcher(matcher: object, where: str) -> None:
    if matcher is None or isinstance(matcher, str | int | float | bool):
        return
    if not isinstance(matcher, dict) or len(matcher) != 1:
        raise FilterPatternError(f"{where}: unsupported matcher {matcher!r}")
    (name, argument), *_ = matcher.items()
    if name not in _KNOWN_OPERATORS:
        raise FilterPatternError(f"{where}: operator {name!r} is not implemented by the local emulator")
    if name in {"prefix", "suffix"} and not (isinstance(argument, str) or _is_ignore_case(argument)):
        raise FilterPatternError(f"{where}: {name} takes a string, got {argument!r}")
    if name == "equals-ignore-case" and not isinstance(argument, str):
        raise FilterPatternError(f"{where}: equals-ignore-case takes a string, got {argument!r}")
    if name == "exists" and not isinstance(argument, bool):
        raise FilterPatternError(f"{where}: exists takes true or false, got {argument!r}")
    if name == "numeric":
        _validate_numeric(argument, where)
    if name == "anything-but":
        _validate_anything_but(argument, where)


def _is_ignore_case(argument: object) -> bool:
    return (
        isinstance(argument, dict)
        and set(argument) == {"equals-ignore-case"}
        and isinstance(argument["equals-ignore-case"], str)
    )


def _validate_numeric(argument: object, where: str) -> None:
    if not isinstance(argument, list) or len(argument) not in {2, 4}:
        raise FilterPatternError(f"{where}: numeric takes [op, n] or [op, n, op, n], got {argument!r}")
    for op, bound in zip(argument[::2], argument[1::2], strict=True):
        if op not in _NUMERIC_OPERATORS or not _is_number(bound):
            raise FilterPatternError(f"{where}: bad numeric comparison {op!r} {bound!r}")


def _validate_anything_but(argument: object, where: str) -> None:
    if isinstance(argument, dict):
        if len(argument) != 1 or next(iter(argument)) not in {"prefix", "suffix"}:
            raise FilterPatternError(f"{where}: anything-but supports only prefix/suffix objects")
        if not isinstance(next(iter(argument.values())), str):
            raise FilterPatternError(f"{where}: anything-but {argument!r} needs a string")
        return
    values = argument if isinstance(argument, list) else [argument]
    for value in values:
        if not (value is None or isinstance(value, str | int | float | bool)):
            raise FilterPatternError(f"{where}: anything-but values must be scalars, got {value!r}")


# --- SQS (AWS Lambda Developer Guide, "Using event filtering with an Amazon SQS event source") ------------
# "Amazon SQS event source mappings only support filtering on the body key." Lambda compares the format of
# the message body with the format of the pattern's `body`: a JSON pattern (an object) applies to a body that
# is valid JSON, a plain-string pattern (a list of matchers) to a body that is not; on a mismatch "Lambda
# drops the message".

QUEUE_FILTER_KEYS = frozenset({"body"})
_NOT_JSON = object()
_MISSING = object()


def accepts_queue_record(criteria: FilterCriteria, record: Mapping[str, Any]) -> bool:
    """Whether an SQS record (Lambda's shape) passes the mapping's filters."""
    if not criteria.patterns:
        return True
    body = record.get("body")
    try:
        parsed = json.loads(body) if isinstance(body, str) else _NOT_JSON
    except ValueError:
        parsed = _NOT_JSON
    return any(_accepts_body(pattern, body, parsed) for pattern in criteria.patterns)


def _accepts_body(pattern: EventPattern, body: object, parsed: object) -> bool:
    rule = pattern.pattern.get("body", _MISSING)
    if rule is _MISSING:
        return pattern.matches({})
    if isinstance(rule, dict):
        return parsed is not _NOT_JSON and pattern.matches({"body": parsed})
    return parsed is _NOT_JSON and pattern.matches({"body": body})

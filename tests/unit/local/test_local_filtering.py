"""Lambda FilterCriteria: the pattern subset Lambda documents for event filtering, matched by moto."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.events.models import EventPattern as MotoEventPattern

from outbox_local.errors import FilterPatternError
from outbox_local.filtering import EventPattern, FilterCriteria

RECORD: dict[str, Any] = {
    "eventName": "INSERT",
    "dynamodb": {
        "Keys": {"aggregate_key": {"S": "Order#42"}},
        "NewImage": {"status": {"S": "PENDING"}, "event_type": {"S": "OrderPlaced"}},
        "SizeBytes": 120,
        "Tags": ["a", "b"],
    },
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"eventName": ["INSERT"]}, True),
        ({"eventName": ["MODIFY", "REMOVE"]}, False),
        ({"dynamodb": {"Keys": {"aggregate_key": {"S": [{"prefix": "Order#"}]}}}}, True),
        ({"dynamodb": {"Keys": {"aggregate_key": {"S": [{"prefix": "Invoice#"}]}}}}, False),
        ({"dynamodb": {"NewImage": {"event_type": {"S": [{"suffix": "Placed"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"status": {"S": [{"equals-ignore-case": "pending"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": "PUBLISHED"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": ["PENDING", "X"]}]}}}}, False),
        ({"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": {"prefix": "PEN"}}]}}}}, False),
        ({"dynamodb": {"SizeBytes": [{"numeric": [">", 100, "<=", 120]}]}}, True),
        ({"dynamodb": {"SizeBytes": [{"numeric": ["<", 100]}]}}, False),
        ({"dynamodb": {"SizeBytes": [120.0]}}, True),
        ({"dynamodb": {"SizeBytes": ["120"]}}, False),
        ({"dynamodb": {"NewImage": {"status": [{"exists": True}]}}}, False),  # an object is not a leaf
        ({"dynamodb": {"NewImage": {"status": {"S": [{"exists": True}]}}}}, True),
        ({"dynamodb": {"OldImage": {"status": {"S": [{"exists": False}]}}}}, True),
        ({"dynamodb": {"OldImage": {"status": {"S": ["PENDING"]}}}}, False),
        ({"dynamodb": {"Tags": ["b"]}}, True),
        ({"eventName": ["INSERT"], "dynamodb": {"SizeBytes": [1]}}, False),
        ({"eventName": [True]}, False),
    ],
)
def test_pattern_matching(pattern: dict[str, Any], expected: bool) -> None:
    # Given a compiled pattern, When applied to a DynamoDB record, Then it matches as EventBridge would
    assert EventPattern.parse(json.dumps(pattern)).matches(RECORD) is expected


def test_any_pattern_of_the_criteria_lets_a_record_through() -> None:
    # Given two filters
    criteria = FilterCriteria.from_template(
        {"Filters": [{"Pattern": '{"eventName": ["REMOVE"]}'}, {"Pattern": '{"eventName": ["INSERT"]}'}]}
    )
    # When a record matches the second only, Then it is accepted; a record matching none is not
    assert criteria.accepts(RECORD)
    assert not criteria.accepts({"eventName": "MODIFY"})


def test_no_criteria_accept_everything() -> None:
    assert FilterCriteria.from_template(None).accepts({"anything": 1})


@pytest.mark.parametrize(
    "pattern",
    [
        "not json",
        "[1]",
        '{"eventName": "INSERT"}',
        '{"eventName": []}',
        '{"eventName": [{"wildcard": "IN*"}]}',
        '{"eventName": [{"prefix": 1}]}',
        '{"eventName": [{"equals-ignore-case": 1}]}',
        '{"eventName": [{"exists": "yes"}]}',
        '{"eventName": [{"numeric": [">"]}]}',
        '{"eventName": [{"numeric": ["!=", 1]}]}',
        '{"eventName": [{"anything-but": {"wildcard": "x"}}]}',
        '{"eventName": [{"anything-but": {"prefix": 1}}]}',
        '{"eventName": [{"anything-but": [{"a": 1}]}]}',
        '{"eventName": [{"prefix": "a", "suffix": "b"}]}',
        '{"eventName": [["nested"]]}',
    ],
)
def test_unsupported_or_malformed_patterns_fail_loudly(pattern: str) -> None:
    # Given a pattern the emulator does not implement, When compiled, Then it raises instead of guessing
    with pytest.raises(FilterPatternError):
        EventPattern.parse(pattern)


@pytest.mark.parametrize(
    "criteria",
    [{"Filters": "x"}, {"Filters": [{"Pattern": 1}]}, {"Filters": ["x"]}],
)
def test_malformed_filter_criteria_fail_loudly(criteria: dict[str, Any]) -> None:
    with pytest.raises(FilterPatternError):
        FilterCriteria.from_template(criteria)


def test_moto_s_matcher_lets_an_unknown_operator_match_which_is_why_patterns_are_checked_here() -> None:
    # Given moto's matcher, which the patterns are matched by, and an operator Lambda does not document
    pattern = {"eventName": [{"wildcard-typo": "x"}]}
    # When moto matches it, Then it answers "matches": so the pattern must be refused before it reaches moto
    record: Any = {"eventName": "INSERT"}  # moto types it as an EventBridge event
    assert MotoEventPattern(json.dumps(pattern), pattern).matches_event(record)
    with pytest.raises(FilterPatternError):
        EventPattern.parse(json.dumps(pattern))

"""The per-region publisher filter patterns (`outbox.stream_mapping.publisher_filter_patterns`, which the
constructs deploy), run through the local runtime's filter matcher on stream records as DynamoDB sends them:
each region's publisher gets exactly its own origin's new rows and rewritten slots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.stream_mapping import publisher_filter_patterns
from outbox_local.filtering import FilterCriteria

HOME, PEER = "us-east-1", "us-west-2"


def _criteria(region: str, *, home: bool) -> FilterCriteria:
    patterns = publisher_filter_patterns(region=region, home=home)
    return FilterCriteria.from_template({"Filters": [{"Pattern": json.dumps(p)} for p in patterns]})


def _insert(origin: str | None) -> dict[str, Any]:
    image: dict[str, Any] = {"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}, "status": {"S": "PENDING"}}
    if origin is not None:
        image["origin"] = {"S": origin}
    return {"eventName": "INSERT", "dynamodb": {"NewImage": image}}


@pytest.mark.parametrize(
    ("region", "home", "origin", "accepted"),
    [
        (HOME, True, HOME, True),
        (HOME, True, None, True),
        (HOME, True, PEER, False),
        (PEER, False, PEER, True),
        (PEER, False, None, False),
        (PEER, False, HOME, False),
    ],
)
def test_a_regions_mapping_passes_its_own_origins_inserts_and_home_also_those_without_origin(
    region: str, home: bool, origin: str | None, accepted: bool
) -> None:
    # Given a region's patterns and a new row of some origin (or none)
    # When the row's INSERT record is matched
    # Then only the region's own rows pass, and home's also those that name no origin
    assert _criteria(region, home=home).accepts(_insert(origin)) is accepted


def _modify(old: str, new: str, origin: str | None = None) -> dict[str, Any]:
    image = {"status": {"S": new}} | ({} if origin is None else {"origin": {"S": origin}})
    return {"eventName": "MODIFY", "dynamodb": {"OldImage": {"status": {"S": old}}, "NewImage": image}}


def test_a_regions_mapping_passes_its_own_rewritten_slots_and_no_settle() -> None:
    # Given each region's patterns
    peer, home = _criteria(PEER, home=False), _criteria(HOME, home=True)
    # When a pending row's MODIFY, a mark and a settle are matched
    # Then a region gets the rewrites of its own rows only (home also of rows without origin), never a mark
    # or a settle
    assert peer.accepts(_modify("PENDING", "PENDING", origin=PEER))
    assert not peer.accepts(_modify("PENDING", "PENDING", origin=HOME))
    assert not peer.accepts(_modify("PENDING", "PENDING"))
    assert home.accepts(_modify("PENDING", "PENDING"))
    assert not peer.accepts(_modify("PENDING", "FAILED", origin=PEER))
    assert not peer.accepts({"eventName": "REMOVE", "dynamodb": {"OldImage": {}}})


def test_without_a_region_the_patterns_are_the_single_region_ones() -> None:
    from outbox import stream_mapping

    # Given no region
    # When the patterns are asked for
    # Then they are the single-region ones, unchanged
    assert publisher_filter_patterns() == stream_mapping.PUBLISHER_FILTER_PATTERNS

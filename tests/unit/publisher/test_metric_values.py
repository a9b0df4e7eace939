"""`add_values` and `add_counts` store values straight into Powertools' metric set when that is all
`add_metric` would do: they must leave the same metric set and print the same EMF documents, at the same
values, as one `add_metric` call per value, whatever the set already held, however many values there are, and
whether or not `add_metric` has already stored the name in this process (the module's `_STORED`)."""

from __future__ import annotations

import contextlib
import logging
import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.exceptions import MetricValueError, SchemaValidationError
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from outbox_publisher import metric_values
from outbox_publisher.metric_values import add_counts, add_values

NAME = "PublishLatencyMs"


@pytest.fixture(autouse=True, params=["first in the process", "stored before"])
def stored(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: before `add_metric` has stored any name in this process, and after it stored
    every name these tests use (so a metric's first value in a set may be stored directly)."""
    monkeypatch.setattr(metric_values, "_STORED", {})
    if request.param == "stored before":
        warm = metrics_with({})
        for name in [NAME, "EventsPublished", "HeldEvents", "C", *NAMES]:
            unit = MetricUnit.Milliseconds if name == NAME else MetricUnit.Count
            add_values(warm, name, unit, [1.0])
        assert metric_values._STORED, "the warm-up stored nothing: this parameter would test nothing"
    return str(request.param)


def metrics_with(held: dict[str, int]) -> Metrics:
    """A Metrics of its own (not the class-wide set handlers share), already holding `held` values."""
    provider = AmazonCloudWatchEMFProvider(namespace="Test", service="test", metric_set={}, dimension_set={})
    metrics = Metrics(provider=provider)
    metrics.set_timestamp(datetime(2026, 11, 29, 12, tzinfo=UTC))
    for name, count in held.items():
        unit = MetricUnit.Milliseconds if name == NAME else MetricUnit.Count
        for value in range(count):
            metrics.add_metric(name=name, unit=unit, value=value)
    return metrics


def one_by_one(metrics: Metrics, values: list[float]) -> None:
    for value in values:
        metrics.add_metric(name=NAME, unit=MetricUnit.Milliseconds, value=value)


HELD = [{}, {"EventsPublished": 1, "HeldEvents": 1}, {NAME: 1}, {NAME: 98}, {NAME: 99}, {"C": 3, NAME: 50}]
COUNTS = [0, 1, 2, 97, 98, 99, 100, 101, 250, 1000]


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("count", COUNTS)
def test_the_same_metric_set_and_documents_as_one_call_per_value(
    held: dict[str, int], count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two equal metric sets and values, one value per event
    values = [float(n) * 1.5 for n in range(count)]
    general, fast = metrics_with(held), metrics_with(held)
    capsys.readouterr()

    # When one gets them one add_metric at a time, the other through add_values
    one_by_one(general, values)
    printed_general = capsys.readouterr().out
    add_values(fast, NAME, MetricUnit.Milliseconds, values)
    printed_fast = capsys.readouterr().out

    # Then both printed the same documents and hold the same set
    assert printed_fast == printed_general
    assert printed_fast.count("\n") == (held.get(NAME, 0) + count) // 100  # a document per 100 values
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


@pytest.mark.parametrize("count", [1, 99, 150])
def test_debug_logging_on_takes_powertools_own_path_with_its_lines(
    count: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Given Powertools' metrics debug logging on
    values = [float(n) for n in range(count)]
    general, fast = metrics_with({NAME: 10}), metrics_with({NAME: 10})
    logger = "aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch"
    with caplog.at_level(logging.DEBUG, logger=logger):
        # When the values are added both ways
        one_by_one(general, values)
        lines_general = [record.getMessage() for record in caplog.records]
        caplog.clear()
        add_values(fast, NAME, MetricUnit.Milliseconds, values)
        lines_fast = [record.getMessage() for record in caplog.records]

    # Then the same debug lines were logged, and the sets are the same
    assert lines_fast == lines_general
    assert len(lines_fast) >= count
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


def test_powertools_is_called_only_for_a_first_value_or_to_fill_a_set(
    stored: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an empty metric set whose provider counts its add_metric calls
    metrics = metrics_with({})
    calls: list[float] = []
    add_metric = metrics.provider.add_metric

    def counted(**arguments: Any) -> None:
        calls.append(arguments["value"])
        add_metric(**arguments)

    monkeypatch.setattr(metrics.provider, "add_metric", counted)

    # When 250 values are added
    add_values(metrics, NAME, MetricUnit.Milliseconds, [float(n) for n in range(250)])

    # Then Powertools took the name's first value in the process and each that filled the set (and
    # published it); every other value, the first of the next sets included, was stored directly
    first = [0.0] if stored == "first in the process" else []
    assert calls == [*first, 99.0, 199.0]
    assert len(metrics.provider.metric_set[NAME]["Value"]) == 50


def _plain(metric_set: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: dict(metric) for name, metric in metric_set.items()}


@pytest.mark.parametrize("position", [0, 1, 50, 99])
def test_a_value_that_is_not_a_number_is_refused_as_add_metric_refuses_it(position: int) -> None:
    # Given values of which one is text, at the first place, within the set or where it fills it
    values: list[Any] = [float(n) for n in range(100)]
    values[position] = "2"

    # When they are added one by one, and together
    with pytest.raises(MetricValueError) as one_call_each:
        one_by_one(metrics_with({}), values)
    with pytest.raises(MetricValueError) as together:
        add_values(metrics_with({}), NAME, MetricUnit.Milliseconds, values)

    # Then both refuse it with the same words
    assert str(together.value) == str(one_call_each.value) == "2 is not a valid number"


def test_a_complex_number_is_refused_as_add_metric_refuses_it_leaving_the_set_as_it_was() -> None:
    # Given values of which one is a complex number: a Number that float() refuses
    values: list[Any] = [1.0, 2.0, 3j]
    general, fast = metrics_with({}), metrics_with({})

    # When they are added one by one, and together
    with pytest.raises(TypeError):
        one_by_one(general, values)
    with pytest.raises(TypeError):
        add_values(fast, NAME, MetricUnit.Milliseconds, values)

    # Then both sets hold what came before it, and nothing of it
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


REFUSALS = (MetricValueError, TypeError, OverflowError)
"""What add_metric raises for a value it refuses: not a number, a complex number, an int past a float's."""
NAMES = [f"Count{n:03d}" for n in range(120)] + [" Padded "]
"""More names than a metric set holds (it is published at 100), and one add_metric stores stripped."""


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
@pytest.mark.parametrize("seed", range(60))
def test_any_sequence_of_counts_values_and_flushes_gives_what_add_metric_gives(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two equal metric sets and a random sequence of additions (counts, runs of values, a name taken
    # with another unit, a non-number) and flushes, as invocations make them
    rng = random.Random(seed)  # noqa: S311 - a replayable sequence, not secrets
    general, fast = metrics_with({}), metrics_with({})
    capsys.readouterr()
    for _ in range(40):
        operation = rng.random()
        if operation < 0.1:
            # When an invocation ends: log_metrics flushes
            general.flush_metrics()
            printed_general = capsys.readouterr().out
            fast.flush_metrics()
            printed_fast = capsys.readouterr().out
        elif operation < 0.2:
            # When other code adds a value with add_metric itself, to both (maybe another unit or resolution)
            name, unit, resolution = (
                rng.choice([NAME, *NAMES[:3]]),
                rng.choice([MetricUnit.Milliseconds, MetricUnit.Count]),
                rng.choice([60, 1]),
            )
            general.add_metric(name=name, unit=unit, value=1.0, resolution=resolution)
            printed_general = capsys.readouterr().out
            fast.add_metric(name=name, unit=unit, value=1.0, resolution=resolution)
            printed_fast = capsys.readouterr().out
        elif operation < 0.55:
            counts = {rng.choice(NAMES): rng.choice([0, 1, 7, 2.5, True]) for _ in range(rng.randint(1, 12))}
            for name, count in counts.items():
                general.add_metric(name=name, unit=MetricUnit.Count, value=count)
            printed_general = capsys.readouterr().out
            add_counts(fast, counts)
            printed_fast = capsys.readouterr().out
        else:
            name = rng.choice([NAME, *NAMES[:3], NAMES[-1]])
            unit = rng.choice([MetricUnit.Milliseconds, MetricUnit.Count])
            values: list[Any] = [
                rng.choice([rng.random() * 100, rng.randint(0, 9)]) for _ in range(rng.randint(0, 230))
            ]
            refused = rng.random() < 0.1 and bool(values)
            if refused:  # not a number, or a number float() refuses
                values[rng.randrange(len(values))] = rng.choice(["x", 3j, 10**400])
            with pytest.raises(REFUSALS) if refused else contextlib.nullcontext():
                for value in values:
                    general.add_metric(name=name, unit=unit, value=value)
            printed_general = capsys.readouterr().out
            with pytest.raises(REFUSALS) if refused else contextlib.nullcontext():
                add_values(fast, name, unit, values)
            printed_fast = capsys.readouterr().out
        # Then each step printed the same documents and left the same set
        assert printed_fast == printed_general
        assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


@pytest.mark.parametrize("held", [97, 98, 99])
@pytest.mark.parametrize("how", ["add_counts", "add_values"])
def test_a_new_metric_that_fills_the_set_publishes_it_as_add_metric_does(
    held: int, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two sets holding nearly as many metrics as a document may (100)
    general = metrics_with({f"Held{n:03d}": 1 for n in range(held)})
    fast = metrics_with({f"Held{n:03d}": 1 for n in range(held)})
    capsys.readouterr()

    # When one more metric, then another, are added both ways
    for name in ("EventsPublished", "HeldEvents"):
        general.add_metric(name=name, unit=MetricUnit.Count, value=1)
    printed_general = capsys.readouterr().out
    for name in ("EventsPublished", "HeldEvents"):
        if how == "add_counts":
            add_counts(fast, {name: 1})
        else:
            add_values(fast, name, MetricUnit.Count, [1])
    printed_fast = capsys.readouterr().out

    # Then the 100th metric published the set in both, and both hold the same after it
    assert printed_fast == printed_general
    assert printed_fast.count("\n") == (1 if held >= 98 else 0)
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


@pytest.mark.parametrize(
    "value", [3j, 10**400, Decimal("sNaN")], ids=["complex", "huge int", "signalling NaN"]
)
@pytest.mark.parametrize("unit", [MetricUnit.Count, MetricUnit.Milliseconds])
def test_a_number_float_refuses_leaves_the_set_as_add_metric_leaves_it(value: Any, unit: MetricUnit) -> None:
    # Given a count other code added with a high resolution, or with another unit
    general, fast = metrics_with({}), metrics_with({})
    for metrics in (general, fast):
        metrics.add_metric(name="EventsPublished", unit=unit, value=1, resolution=1)

    # When a number float() refuses is counted, one way and the other
    with pytest.raises(Exception) as one_way:  # noqa: PT011 - the same error either way, whatever it is
        general.add_metric(name="EventsPublished", unit=MetricUnit.Count, value=value)
    with pytest.raises(Exception) as other_way:  # noqa: PT011
        add_counts(fast, {"EventsPublished": value})

    # Then both raise it after add_metric has set the count's unit and resolution anew
    assert type(other_way.value) is type(one_way.value)
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set)


def test_a_full_set_a_failed_publish_left_goes_out_at_the_next_value_as_add_metric_sends_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given sets left holding 100 metrics by a publish that raised (no namespace then)
    general, fast = metrics_with({}), metrics_with({})
    for metrics in (general, fast):
        metrics.provider.namespace = None  # type: ignore[assignment]  # as a missing environment leaves it
        for name in NAMES[:99]:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
        with pytest.raises(SchemaValidationError):
            metrics.add_metric(name=NAMES[99], unit=MetricUnit.Count, value=1)
        metrics.provider.namespace = "Test"
    assert len(fast.provider.metric_set) == 100
    capsys.readouterr()

    # When one more value of a metric they hold is counted, one way and the other
    general.add_metric(name=NAMES[0], unit=MetricUnit.Count, value=2)
    printed_general = capsys.readouterr().out
    add_counts(fast, {NAMES[0]: 2})
    printed_fast = capsys.readouterr().out

    # Then both published the set with it, as one document, and hold nothing after it
    assert printed_fast == printed_general
    assert printed_fast.count("\n") == 1
    assert _plain(fast.provider.metric_set) == _plain(general.provider.metric_set) == {}

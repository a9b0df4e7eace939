"""`add_values` appends a metric's values straight to Powertools' metric set when that is all `add_metric`
would do: it must leave the same metric set and print the same EMF documents, at the same values, as one
`add_metric` call per value, whatever the set already held and however many values there are."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.exceptions import MetricValueError
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from outbox_publisher.metric_values import add_values

NAME = "PublishLatencyMs"


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


def test_powertools_is_called_only_to_start_or_fill_a_metric(monkeypatch: pytest.MonkeyPatch) -> None:
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

    # Then Powertools took the first of each set and the one that filled it; the rest were appended
    assert calls == [0.0, 99.0, 100.0, 199.0, 200.0]
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

"""How a StreamingContext reads its engine keys and what SIGTERM does with them (no JVM)."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.streaming.context import StreamingContext


class _ContextLike:
    """Just enough of a SparkContext for the StreamingContext constructor."""

    def __init__(self, conf: dict[str, str]) -> None:
        self._conf = conf


def _stops_on_sigterm(conf: dict[str, str]) -> list[tuple[Any, ...]]:
    ssc = StreamingContext(_ContextLike(conf), 0.5)  # type: ignore[arg-type]
    calls: list[tuple[Any, ...]] = []
    ssc.stop = lambda stopSparkContext=True, stopGraceFully=False: calls.append(  # type: ignore[method-assign]
        (stopSparkContext, stopGraceFully))
    ssc._stop_on_sigterm()
    return calls


def test_sigterm_stops_at_once_by_default_as_spark() -> None:
    assert _stops_on_sigterm({}) == [(False, False)]


@pytest.mark.parametrize("value", ["true", "TRUE"])
def test_sigterm_stops_gracefully_when_stop_gracefully_on_shutdown_is_true(value: str) -> None:
    assert _stops_on_sigterm({"spark.streaming.stopGracefullyOnShutdown": value}) == [(False, True)]


def test_graceful_stop_timeout_is_read_from_the_conf_else_ten_batches() -> None:
    assert StreamingContext(_ContextLike({}), 0.5).graceful_stop_timeout == 5.0  # type: ignore[arg-type]
    conf = {"spark.streaming.gracefulStopTimeout": "30s"}
    assert StreamingContext(_ContextLike(conf), 0.5).graceful_stop_timeout == 30.0  # type: ignore[arg-type]

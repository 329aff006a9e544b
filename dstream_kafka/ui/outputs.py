"""The ui's outputs, registered in :mod:`dstream_kafka.streaming.outputs` when imported.

* the Streaming page, a context output (``spark.streaming.kafka.ui.port``);
* the Prometheus metrics of a stream run (``spark.streaming.kafka.metrics.prometheus.port``,
  or the page's ``/metrics`` when a page is served and prometheus_client is installed): each
  progress, the lag timer's samples and each data loss;
* the page's charts of a stream run, while a page is served: each progress, the lag timer's
  samples, the data-loss records.

Neither the engine nor the planner imports this module: the registry imports it the first time
it makes outputs (:data:`~dstream_kafka.streaming.outputs.BUILTIN_OUTPUTS`).
"""

from __future__ import annotations

from typing import Any

from dstream_kafka import config as _config
from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming.outputs import (DataLoss, StreamOutput, StreamRun,
                                             register_context_output, register_stream_output)
from dstream_kafka.ui import metrics
from dstream_kafka.ui.server import StreamingPage, active_page

__all__ = ["MetricsOutput", "PageFeed", "metrics_output", "page_feed", "streaming_page"]


class MetricsOutput(StreamOutput):
    """The Prometheus series of one stream run: :class:`~dstream_kafka.ui.metrics.StreamMetrics`
    for each progress and data loss, :class:`~dstream_kafka.ui.metrics.LagMetrics` for the lag
    timer's samples; closing removes the run's series (after the lag samples stopped)."""

    def __init__(self, label: str, port: int | None) -> None:
        self.stream = metrics.StreamMetrics(label, port)
        self.lag: metrics.LagMetrics | None = None

    def onProgress(self, progress: Any) -> None:
        self.stream(progress)

    def onLagMonitor(self, monitor: Any) -> None:
        self.lag = metrics.LagMetrics(self.stream.stream)
        monitor.add_listener(self.lag)

    def onDataLoss(self, loss: DataLoss) -> None:
        if not self.stream.closed:  # a count after the close would leave a series behind
            metrics.count_data_loss(loss.label)

    def close(self) -> None:
        if self.lag is not None:  # first: a sample set after the removal would stay
            self.lag.close()
        self.stream.close()

    def __repr__(self) -> str:
        return f"MetricsOutput({self.stream!r})"


def metrics_output(run: StreamRun) -> MetricsOutput | None:
    """The metrics of ``run``: served on the configured port, or on a served page's /metrics
    when prometheus_client is installed; None otherwise.

    Raises
    ------
    ConfigurationError
        A port outside 0-65535.
    MissingDependencyError
        A port set without prometheus_client installed.
    """
    reader = SparkConfReader(run.conf)
    port = reader.get_raw(_config.METRICS_PROMETHEUS_PORT)
    if port is not None and str(port).strip() != "":
        number = reader.get_int(_config.METRICS_PROMETHEUS_PORT)
        if not 0 <= number <= 65535:
            raise ConfigurationError(
                f"{_config.METRICS_PROMETHEUS_PORT}={port!r} is not a TCP port; use 0 to "
                "65535 (0: a free port), e.g. 9464")
        return MetricsOutput(run.label, number)
    if active_page() is not None and metrics.REGISTRY is not None:
        return MetricsOutput(run.label, None)
    return None


class PageFeed(StreamOutput):
    """The Streaming page's charts of one stream run (see
    :meth:`~dstream_kafka.ui.state.PageState.stream_feed`)."""

    def __init__(self, page: StreamingPage, run: StreamRun) -> None:
        self.page = page
        self.stream = run.stream
        self._feed = page.stream_feed(run.stream, run.description, run.store, run.group)

    def onProgress(self, progress: Any) -> None:
        self._feed(progress)

    def onLagMonitor(self, monitor: Any) -> None:
        monitor.add_listener(self.page.state.lag_feed(self.stream))

    def onDataLoss(self, loss: DataLoss) -> None:
        self.page.state.count_data_loss(self.stream)

    def __repr__(self) -> str:
        return f"PageFeed(stream={self.stream})"


def page_feed(run: StreamRun) -> PageFeed | None:
    """The page's charts of ``run`` while a page is served, else None."""
    page = active_page()
    return None if page is None else PageFeed(page, run)


def streaming_page(sc: Any, batch_ms: int, conf: Any) -> StreamingPage | None:
    """The Streaming page ``conf`` asks for (``spark.streaming.kafka.ui.port``), or None."""
    return StreamingPage.create(sc, batch_ms, conf)


register_context_output(streaming_page)
register_stream_output(metrics_output)  # before the page's feed, which shows what it counted
register_stream_output(page_feed)

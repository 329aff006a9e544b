"""Prometheus metrics of direct streams, served on 127.0.0.1 (optional extra ``metrics``).

Enabled by ``spark.streaming.kafka.metrics.prometheus.port``: the first stream that starts
with it serves ``/metrics`` of :data:`REGISTRY` on ``127.0.0.1:<port>`` (0 picks a free port,
see :func:`serving_port`); every stream of the process shares that endpoint and is told apart
by the label ``stream``, ``<context>-<stream>`` (:func:`stream_label`: the number this process
gave the stream's StreamingContext, then the stream's number in it), so that the streams of two
contexts of one process never share a label. A stream's series go when it stops
(:func:`remove_stream`): a stopped stream leaves no frozen gauge behind for ``sum by (stream)``
to keep adding. Names follow Prometheus rules:
prefix ``dstream_kafka_``, base units (seconds), ``_total`` on counters, bounded labels only
(stream, topic, partition; never batch times, offsets or run ids).

The executors' consumer-cache counters are exported at each scrape as
:func:`executor_cache_counters`, their sum over every executor and worker, which the tasks'
results bring to the driver (:mod:`dstream_kafka.read.counters`, where the read path keeps
them: executors never import this module).

The same registry is served on the Streaming page's port (``/metrics``, see
:mod:`dstream_kafka.ui`); :func:`exposition` writes it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from typing import Any

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.read.counters import COUNTERS, executor_cache_counters
# The label every output of a stream shares; exported here, where the metrics first named it.
from dstream_kafka.streaming.outputs import stream_label

_prom: Any = (importlib.import_module("prometheus_client")
              if importlib.util.find_spec("prometheus_client") else None)
_prom_core: Any = None if _prom is None else importlib.import_module("prometheus_client.core")

# executor_cache_counters is read.counters' function, exported here with the other figures the
# page and /metrics show.
__all__ = ["REGISTRY", "LagMetrics", "StreamMetrics", "serving_port", "ensure_server", "count_data_loss",
           "data_loss_events", "executor_cache_counters", "exposition", "remove_stream",
           "stream_label"]

log = logging.getLogger(__name__)

#: Histogram buckets in seconds: from 5 ms to 5 minutes (batches can take minutes).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
           300.0)

_lock = threading.Lock()
_server: Any = None
_port: int | None = None
_losses: dict[int | str, int] = {}


def _require() -> None:
    if _prom is None:
        raise MissingDependencyError(
            "spark.streaming.kafka.metrics.prometheus.port needs prometheus_client: "
            "pip install 'dstream_kafka[metrics]'")


def _histogram(name: str, doc: str) -> Any:
    return _prom.Histogram(name, doc, ["stream"], buckets=BUCKETS, registry=REGISTRY)


if _prom is not None:
    #: The registry served on /metrics (not prometheus_client's global one).
    REGISTRY: Any = _prom.CollectorRegistry()
    BATCHES = _prom.Counter("dstream_kafka_batches_completed", "Completed batches.",
                            ["stream"], registry=REGISTRY)
    RECORDS = _prom.Counter("dstream_kafka_records", "Records read by completed batches.",
                            ["stream", "topic"], registry=REGISTRY)
    BATCH_DURATION = _histogram("dstream_kafka_batch_duration_seconds",
                                "Driver time of a batch: planning plus processing plus commit.")
    SCHEDULING_DELAY = _histogram("dstream_kafka_batch_scheduling_delay_seconds",
                                  "Time a batch waited before its jobs started.")
    PROCESSING_DELAY = _histogram("dstream_kafka_batch_processing_seconds",
                                  "Time from a batch's first job start to its last job end.")
    COMMIT_DURATION = _histogram("dstream_kafka_offset_commit_seconds",
                                 "Time spent committing a batch (offset store and commitAsync).")
    LAG = _prom.Gauge("dstream_kafka_offsets_behind_latest",
                      "Offsets between the last batch's until offset and the latest offset.",
                      ["stream", "topic", "partition"], registry=REGISTRY)
    COMMITTED = _prom.Gauge("dstream_kafka_committed_offset",
                            "Next offset to read after the last committed batch.",
                            ["stream", "topic", "partition"], registry=REGISTRY)
    TOTAL_DELAY = _histogram("dstream_kafka_batch_total_delay_seconds",
                             "Scheduling delay plus processing time of a batch.")
    DATA_LOSS = _prom.Counter("dstream_kafka_data_loss_events",
                              "Data-loss events skipped with failOnDataLoss=False.",
                              ["stream"], registry=REGISTRY)

    _PARTITION = ["stream", "topic", "partition"]
    LAG_OFFSETS = _prom.Gauge("dstream_kafka_lag_offsets",
                              "Log end (LSO under read_committed) minus the committed offset, "
                              "sampled by the lag timer.", _PARTITION, registry=REGISTRY)
    LAG_SECONDS = _prom.Gauge("dstream_kafka_lag_seconds",
                              "How long ago the log reached the committed offset, interpolated "
                              "from the log-end samples.", _PARTITION, registry=REGISTRY)
    LOG_END = _prom.Gauge("dstream_kafka_log_end_offset",
                          "Log end offset (LSO under read_committed) at the last lag sample.",
                          _PARTITION, registry=REGISTRY)
    LAG_LOOKUPS = _prom.Counter("dstream_kafka_lag_lookups",
                                "Log-end look-ups of the lag timer, by outcome (ok, failed).",
                                ["stream", "outcome"], registry=REGISTRY)
    LAG_STATUS = _prom.Gauge("dstream_kafka_lag_status",
                             "1 for the stream's current lag status (OK, WARN, REWIND, STALL, "
                             "STOP, ERR), 0 for the others.", ["stream", "status"],
                             registry=REGISTRY)

    class _CacheCollector:
        """Exports :func:`executor_cache_counters` at each scrape (no per-batch bookkeeping)."""

        def collect(self) -> Any:
            counters = executor_cache_counters()
            for name in COUNTERS:
                family = _prom_core.CounterMetricFamily(
                    f"dstream_kafka_consumer_cache_{name}",
                    f"Executor consumer-cache {name}, summed over executors' Python workers.")
                family.add_metric([], counters.get(name, 0))
                yield family

    REGISTRY.register(_CacheCollector())

    #: Every metric with a ``stream`` label, with its label names (removal needs them in order).
    _PER_STREAM: tuple[tuple[Any, tuple[str, ...]], ...] = (
        (BATCHES, ("stream",)), (RECORDS, ("stream", "topic")),
        (BATCH_DURATION, ("stream",)), (SCHEDULING_DELAY, ("stream",)),
        (PROCESSING_DELAY, ("stream",)), (COMMIT_DURATION, ("stream",)),
        (TOTAL_DELAY, ("stream",)), (DATA_LOSS, ("stream",)),
        (LAG, tuple(_PARTITION)), (COMMITTED, tuple(_PARTITION)),
        (LAG_OFFSETS, tuple(_PARTITION)), (LAG_SECONDS, tuple(_PARTITION)),
        (LOG_END, tuple(_PARTITION)), (LAG_LOOKUPS, ("stream", "outcome")),
        (LAG_STATUS, ("stream", "status")))
else:  # pragma: no cover
    REGISTRY = None


def remove_stream(label: str) -> None:
    """Remove every series whose ``stream`` label is ``label`` from :data:`REGISTRY` (and forget
    its data-loss count): the stream stopped, and a series it left would stay at its last value
    for as long as the process serves /metrics."""
    with _lock:
        _losses.pop(label, None)
    if REGISTRY is None:
        return
    for metric, names in _PER_STREAM:
        found = {tuple(sample.labels[n] for n in names)
                 for family in metric.collect() for sample in family.samples
                 if sample.labels.get("stream") == label}
        for values in found:
            try:
                metric.remove(*values)
            except KeyError:  # removed meanwhile by another stop of the same label
                pass


def ensure_server(port: int) -> int:
    """Serve :data:`REGISTRY` on ``127.0.0.1:port`` once per process and return the port.

    A later call with another non-zero port logs a warning and keeps the first server.
    """
    global _server, _port
    _require()
    with _lock:
        if _server is None:
            server, _thread = _prom.start_http_server(port, addr="127.0.0.1", registry=REGISTRY)
            _server = server
            _port = int(server.server_port)
            log.info("Prometheus metrics on http://127.0.0.1:%d/metrics", _port)
        elif port not in (0, _port):
            log.warning("Prometheus metrics already served on port %d, not %d", _port, port)
        assert _port is not None
        return _port


def serving_port() -> int | None:
    """The port /metrics is served on, or None when no stream enabled it."""
    return _port


def count_data_loss(stream: int | str) -> None:
    """Count one data-loss event of ``stream``, its label (:func:`stream_label`) (the Prometheus
    counter needs prometheus_client)."""
    with _lock:
        _losses[stream] = _losses.get(stream, 0) + 1
    if REGISTRY is not None:
        DATA_LOSS.labels(stream=str(stream)).inc()


def data_loss_events(stream: int | str) -> int:
    """Data-loss events of ``stream`` (its label) counted in this process so far."""
    with _lock:
        return _losses.get(stream, 0)


def exposition() -> tuple[str, bytes]:
    """``(content type, body)`` of the Prometheus text exposition of :data:`REGISTRY`; without
    prometheus_client a plain-text body saying how to install it."""
    if _prom is None:
        return "text/plain; charset=utf-8", (
            b"# Prometheus metrics need prometheus_client: pip install 'dstream_kafka[metrics]'\n")
    return _prom.CONTENT_TYPE_LATEST, _prom.generate_latest(REGISTRY)


class StreamMetrics:
    """A progress listener that updates the metrics of one stream and serves them.

    Parameters
    ----------
    stream : int or str
        The ``stream`` label (:func:`stream_label`).
    port : int or None
        Port for :func:`ensure_server`; None when only the Streaming page serves them.
    """

    def __init__(self, stream: int | str, port: int | None) -> None:
        _require()
        self.stream = str(stream)
        self.port = None if port is None else ensure_server(port)
        self.closed = False
        self._lock = threading.Lock()

    def close(self) -> None:
        """The stream stopped: remove its series; a later progress (none is expected) sets
        none again."""
        with self._lock:  # after an update in flight
            self.closed = True
        remove_stream(self.stream)

    def __call__(self, progress: Any) -> None:
        with self._lock:
            if not self.closed:
                self._update(progress)

    def _update(self, progress: Any) -> None:
        s = self.stream
        BATCHES.labels(stream=s).inc()
        per_topic: dict[str, int] = {}
        for r in progress.ranges:
            per_topic[r.topic] = per_topic.get(r.topic, 0) + r.count()
            COMMITTED.labels(stream=s, topic=r.topic, partition=str(r.partition)).set(
                r.untilOffset)
        for topic, n in per_topic.items():
            RECORDS.labels(stream=s, topic=topic).inc(n)
        for tp, n in progress.offsetsBehindLatest.items():
            LAG.labels(stream=s, topic=tp[0], partition=str(tp[1])).set(n)
        processing = progress.processingDelay or 0
        BATCH_DURATION.labels(stream=s).observe(
            (progress.planMs + processing + progress.commitMs) / 1000.0)
        if progress.schedulingDelay is not None:
            SCHEDULING_DELAY.labels(stream=s).observe(progress.schedulingDelay / 1000.0)
        if progress.processingDelay is not None:
            PROCESSING_DELAY.labels(stream=s).observe(progress.processingDelay / 1000.0)
        if progress.schedulingDelay is not None and progress.processingDelay is not None:
            TOTAL_DELAY.labels(stream=s).observe(
                (progress.schedulingDelay + progress.processingDelay) / 1000.0)
        COMMIT_DURATION.labels(stream=s).observe(progress.commitMs / 1000.0)

    def __repr__(self) -> str:
        return f"StreamMetrics(stream={self.stream}, port={self.port})"


class LagMetrics:
    """A lag-timer listener that sets one stream's lag gauges from each sample.

    A partition whose lag in seconds is not known yet has no ``dstream_kafka_lag_seconds``
    series (never NaN, which would make ``sum()`` NaN).
    """

    def __init__(self, stream: int | str) -> None:
        _require()
        self.stream = str(stream)
        self.closed = False
        self._lock = threading.Lock()

    def close(self) -> None:
        """The stream stopped: returns once no sample is being set, and later samples (a tick
        the timer's stop did not wait for) set no series again."""
        with self._lock:
            self.closed = True

    def __call__(self, sample: Any, verdict: Any) -> None:
        with self._lock:
            if not self.closed:
                self._update(sample, verdict)

    def _update(self, sample: Any, verdict: Any) -> None:
        s = self.stream
        LAG_LOOKUPS.labels(stream=s, outcome="failed" if sample.lookupError else "ok").inc()
        for p in sample.partitions:
            labels = {"stream": s, "topic": p.topic, "partition": str(p.partition)}
            LAG_OFFSETS.labels(**labels).set(p.lagOffsets)
            LOG_END.labels(**labels).set(p.logEndOffset)
            COMMITTED.labels(**labels).set(p.committedOffset)
            if p.lagSeconds is not None:
                LAG_SECONDS.labels(**labels).set(p.lagSeconds)
        from dstream_kafka.monitor.verdict import STATUSES

        for status in STATUSES:
            LAG_STATUS.labels(stream=s, status=status).set(int(verdict.status == status))

    def __repr__(self) -> str:
        return f"LagMetrics(stream={self.stream})"

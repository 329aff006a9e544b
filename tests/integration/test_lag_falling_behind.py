"""Consumer lag of real streams that fall behind: on /metrics, on the page, with the cause named.

Three ways to fall behind, each against the real services: reading capped by
maxRatePerPartition below the production rate, a PostgreSQL store whose rows another connection
holds locked, and a batch stuck in its output. The page is read in headless Chromium (Debian's
package) and screenshotted under the test's tmp path (and ``$DSK_SCREENSHOT_DIR`` when set).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores, config
from dstream_kafka.ui import active_page, metrics

from support import wait_until

BATCH = 0.5
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="needs Debian's chromium (bash .ci/setup)")


@pytest.fixture
def lag_conf(spark_conf: Callable[[str, str], None]) -> Callable[[str, str], None]:
    """The Streaming page on a free port and a lag sample every 300 ms, for this test only."""
    spark_conf(config.UI_PORT, "0")
    spark_conf(config.LAG_INTERVAL, "300ms")
    return spark_conf


class Producer:
    """Produces ``per_tick`` records every ``every`` seconds on a thread until closed."""

    def __init__(self, kafka: Any, topic: str, per_tick: int, every: float) -> None:
        self._stop = threading.Event()
        self.sent = 0

        def run() -> None:
            while not self._stop.wait(every):
                kafka.produce(topic, [b"x"] * per_tick)
                self.sent += per_tick
        self._thread = threading.Thread(target=run, name="test-producer", daemon=True)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(60)


def _metrics(url: str, stream: Any, topic: str) -> dict[str, float]:
    """Partition 0's samples of ``stream`` on /metrics, once its lag in seconds is there."""
    found: dict[str, float] = {}
    label = metrics.stream_label(stream.context(), stream.id)

    def scrape() -> bool:
        with urllib.request.urlopen(url + "metrics", timeout=10) as reply:
            text = reply.read().decode()
        found.clear()
        found.update({s.name: s.value for family in text_string_to_metric_families(text)
                      for s in family.samples
                      if s.labels.get("stream") == label and s.labels.get("topic") == topic
                      and s.labels.get("partition") == "0"})
        return "dstream_kafka_lag_seconds" in found
    wait_until(scrape, what="the lag gauges on /metrics", interval=0.2)
    return dict(found)


class _Dom(HTMLParser):
    """Attributes and text of the elements of a DOM dump, by class and id."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self._svg = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._svg = values.get("id", "")
        values.setdefault("data-chart", self._svg)  # the chart a point belongs to
        self.elements.append((tag, values))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, attr: str, value: str) -> list[dict[str, str]]:
        return [a for _, a in self.elements if value in a.get(attr, "").split()]


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _page(url: str, shot: Path) -> _Dom:
    """The page as Chromium renders it, and its screenshot at ``shot``."""
    dom = _Dom()
    dom.feed(_chromium("--dump-dom", url))
    _chromium(f"--screenshot={shot}", "--window-size=1300,2200", url)
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("DSK_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return dom


def _lag_on_page(dom: _Dom, stream: int) -> tuple[list[float], list[float]]:
    """The lag charts' points of partition 0 (offsets, seconds), oldest first."""
    def points(chart: str) -> list[float]:
        return [float(a["data-value"]) for tag, a in dom.elements
                if tag == "circle" and a.get("data-series", "").endswith("-0")
                and a.get("data-chart") == chart]
    return points(f"lag-{stream}-offsets"), points(f"lag-{stream}-seconds")


def _params(kafka: Any, unique: Callable[[str], str]) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
            "auto.offset.reset": "earliest", "enable.auto.commit": False}


def _verdict_names(stream: Any, cause: str) -> Callable[[], bool]:
    return lambda: stream.lag.verdict().cause.startswith(cause)


@needs_chromium
def _lag_grown_by_50(stream: Any, page: Any, topic: str, png: Path, what: str) -> tuple[Any, ...]:
    """The metrics before and after the stream's lag grew by 50 offsets, then the page (saved
    as ``png``) and the verdict."""
    before = _metrics(page.url, stream, topic)
    wait_until(lambda: stream.lag.latest.lagOffsets > before["dstream_kafka_lag_offsets"] + 50,
               what=what)
    return before, _metrics(page.url, stream, topic), _page(page.url, png), stream.lag.verdict()


def test_a_stream_capped_below_the_production_rate_shows_lag_rising_and_names_the_rate_limit(
        kafka: Any, make_ssc: Any, unique: Any, lag_conf: Any, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    lag_conf(config.MAX_RATE_PER_PARTITION, "20")  # 10 records a batch, 20 records/s
    caplog.set_level(logging.WARNING, logger="dstream_kafka.monitor.lag")
    topic = unique("capped")
    kafka.create_topic(topic, partitions=1)
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic],
                                                                        _params(kafka, unique)))
    stream.foreachRDD(lambda rdd: rdd.count())
    with Producer(kafka, topic, per_tick=20, every=0.1):  # up to 200 records/s
        context.start()
        page = active_page()
        assert page is not None
        wait_until(lambda: stream.lag.latest is not None
                   and stream.lag.latest.maxLagSeconds is not None
                   and stream.lag.latest.lagOffsets > 50, what="a first lag in seconds")
        before = _metrics(page.url, stream, topic)
        wait_until(_verdict_names(stream, "rate limit"), what="the verdict to name the cap")
        wait_until(lambda: stream.lag.latest.lagOffsets > before["dstream_kafka_lag_offsets"] + 200
                   and stream.lag.latest.maxLagSeconds > before["dstream_kafka_lag_seconds"] + 1,
                   what="the lag to grow by 200 offsets and 1 s")
        after = _metrics(page.url, stream, topic)
        dom = _page(page.url, tmp_path / "lag-rate-limit.png")
        verdict = stream.lag.verdict()
        progress = stream.lastProgress
    context.stop(stopSparkContext=False, stopGraceFully=False)

    assert after["dstream_kafka_lag_offsets"] > before["dstream_kafka_lag_offsets"]
    assert after["dstream_kafka_lag_seconds"] > before["dstream_kafka_lag_seconds"]
    assert after["dstream_kafka_log_end_offset"] > before["dstream_kafka_log_end_offset"]
    # the committed gauge moves with each batch (the lag gauges with each of the timer's samples)
    assert after["dstream_kafka_committed_offset"] > before["dstream_kafka_committed_offset"]
    # WARN while batches keep their schedule; a loaded machine may make it STOP for a while
    assert verdict.status in ("WARN", "STOP") and "caps reading at 20.0" in verdict.cause
    offsets, seconds = _lag_on_page(dom, stream.id)
    assert len(offsets) >= 5 and offsets[-1] > offsets[0] and seconds[-1] > seconds[0]
    (shown,) = dom.having("id", f"lag-verdict-{stream.id}")
    assert shown["data-status"] in ("WARN", "STOP")
    assert any("rate limit: spark.streaming.kafka.maxRatePerPartition" in t for t in dom.text)
    read = [p for p in stream.recentProgress if p.numRecords]
    assert read and all(p.processingRate > 0 for p in read)  # processedRowsPerSecond
    assert all(p.jsonValue()["durationMs"]["triggerExecution"] > 0 for p in read)
    assert progress is not None and progress.lag is not None
    assert progress.lag["partitions"][topic]["0"]["lagOffsets"] > 0
    warnings = [r for r in caplog.records if "is behind" in r.getMessage()]
    assert 1 <= len(warnings) < len(stream.lag.history()) // 3  # not one per sample or batch


@needs_chromium
def test_a_store_whose_rows_are_locked_shows_lag_rising_and_names_the_stuck_store(
        kafka: Any, postgres: Any, make_ssc: Any, unique: Any, lag_conf: Any,
        tmp_path: Path) -> None:
    topic = unique("locked")
    kafka.create_topic(topic, partitions=1)
    prefix = "lag_" + unique("t").replace("-", "_")[-12:] + "_"
    store = OffsetStores.postgres(table_prefix=prefix, timeout=120.0, **postgres.dsn_params())
    params = _params(kafka, unique)
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params),
                                           offsetStore=store)
    stream.foreachRDD(lambda rdd: rdd.count())
    locker = postgres.connect()
    try:
        with Producer(kafka, topic, per_tick=10, every=0.1):
            context.start()
            page = active_page()
            assert page is not None
            wait_until(lambda: sum(p.numRecords for p in stream.recentProgress) > 0,
                       what="a committed batch with records")
            with locker.cursor() as cur:  # holds the group's offsets rows until the rollback
                cur.execute(f'SELECT * FROM "{prefix}offsets" WHERE "group_id" = %s FOR UPDATE',
                            (params["group.id"],))
                assert cur.fetchall()
            wait_until(_verdict_names(stream, "stuck store"), what="the verdict: stuck store")
            before, after, dom, verdict = _lag_grown_by_50(
                stream, page, topic, tmp_path / "lag-stuck-store.png",
                "the lag to grow while the store is locked")
            locker.rollback()
            committed = len(stream.recentProgress)
            wait_until(lambda: len(stream.recentProgress) > committed,
                       what="a commit once the lock is gone")
    finally:
        locker.rollback()
        locker.close()
        context.stop(stopSparkContext=False, stopGraceFully=False)

    assert verdict.status == "STOP"
    assert verdict.cause.startswith("stuck store: a commit to the PostgresOffsetStore offset "
                                    "store has been running for")
    assert after["dstream_kafka_lag_offsets"] > before["dstream_kafka_lag_offsets"]
    assert after["dstream_kafka_lag_seconds"] >= before["dstream_kafka_lag_seconds"]
    (shown,) = dom.having("id", f"lag-verdict-{stream.id}")
    assert shown["data-status"] == "STOP"
    assert any("stuck store" in t for t in dom.text)


@needs_chromium
def test_a_batch_stuck_in_its_output_shows_lag_rising_and_names_the_stuck_spark_job(
        kafka: Any, make_ssc: Any, unique: Any, lag_conf: Any, tmp_path: Path) -> None:
    topic = unique("stuck")
    kafka.create_topic(topic, partitions=1)
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic],
                                                                        _params(kafka, unique)))
    release = threading.Event()
    blocked = threading.Event()

    def output(rdd: Any) -> None:
        if rdd.count() and len(stream.recentProgress) >= 1:
            blocked.set()
            release.wait(300)  # the batch's output op stays in its jobs until released
    stream.foreachRDD(output)
    try:
        with Producer(kafka, topic, per_tick=10, every=0.1):
            context.start()
            page = active_page()
            assert page is not None
            wait_until(blocked.is_set, what="a batch to block in its output")
            wait_until(_verdict_names(stream, "stuck Spark job"), what="the verdict: stuck job")
            before, after, dom, verdict = _lag_grown_by_50(
                stream, page, topic, tmp_path / "lag-stuck-job.png",
                "the lag to grow while the batch is stuck")
    finally:
        release.set()
        context.stop(stopSparkContext=False, stopGraceFully=False)

    assert verdict.status == "STOP" and verdict.cause.startswith("stuck Spark job: the batch of")
    assert after["dstream_kafka_lag_offsets"] > before["dstream_kafka_lag_offsets"]
    assert after["dstream_kafka_lag_seconds"] >= before["dstream_kafka_lag_seconds"]
    (shown,) = dom.having("id", f"lag-verdict-{stream.id}")
    assert shown["data-status"] == "STOP"
    assert any("stuck Spark job" in t for t in dom.text)


def test_a_broker_that_goes_down_turns_the_verdict_err_within_the_lag_timers_own_bound(
        own_kafka, make_ssc, spark_conf, unique):
    # Each look-up of the timer is bounded by its interval, at least 2 s: before, the first
    # look-up after the broker went down waited 30 s and the verdict stayed OK all that time.
    spark_conf(config.LAG_INTERVAL, "1s")
    spark_conf(config.LOOKUP_TIMEOUT, "2s")  # the batches' own look-ups
    topic = unique("lag-down")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [b"x"] * 5)
    ssc = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], _params(own_kafka, unique)))
    stream.foreachRDD(lambda rdd: rdd.count())
    ssc.start()
    wait_until(lambda: stream.lag.latest is not None and stream.lag.latest.lagOffsets == 0
               and stream.lag.verdict().status == "OK", what="the stream caught up, verdict OK")

    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    down = time.monotonic()
    wait_until(lambda: stream.lag.verdict().status == "ERR", what="the verdict ERR",
               timeout=60, interval=0.05)
    elapsed = time.monotonic() - down

    # One interval to the next tick, its look-up's bound, plus 4 s for a loaded machine's
    # scheduling: far below the 30 s the look-up waited before.
    assert stream.lag.lookup_bound_ms == 2000
    assert elapsed < 1.0 + 2.0 + 4.0, elapsed
    assert stream.lag.verdict().cause.startswith("broker unreachable")

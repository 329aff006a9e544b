"""Prometheus /metrics on the Streaming page's port, scraped while a real stream runs.

One stream (module fixture) resumes from a SQLite store whose offsets of partition 0 were
deleted by ``delete_records`` (``failOnDataLoss=False``: one data-loss event), reads the rest,
and is scraped while it runs; the tests compare the scrape with the stream's own progress.
"""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dstream_kafka import (ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange,
                           OffsetStores, config)
from dstream_kafka.plan.progress import BatchProgress
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.ui import active_page, metrics

from support import wait_until

BATCH = 0.5
PER_PARTITION = 20
DELETED = 5  # offsets 0-4 of partition 0 are gone before the stream starts

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _parse(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@dataclass
class Run:
    """What the fixture's stream did and what was scraped while it ran."""

    topic: str
    stream: int
    before: Samples
    scraped: Samples
    progress_before: list[BatchProgress]
    progress_after: list[BatchProgress]
    page_html: str


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


@pytest.fixture(scope="module")
def run(kafka: Any, sc: Any, tmp_path_factory: Any) -> Iterator[Run]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"metrics-page-{suffix}", f"metrics-page-g-{suffix}"
    kafka.create_topic(topic, partitions=2)
    for partition in (0, 1):
        kafka.send_messages(topic, {f"v{partition}": PER_PARTITION}, partition=partition)
    db = str(tmp_path_factory.mktemp("metrics") / "offsets.db")
    store = OffsetStores.sqlite(db)
    store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 0), OffsetRange(topic, 1, 0, 0)])
    store.close()
    kafka.delete_records(topic, {0: DELETED})
    sc._conf.set(config.UI_PORT, "0")
    context = StreamingContext(sc, BATCH)
    try:
        params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False}
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], params), offsetStore=OffsetStores.sqlite(db),
            failOnDataLoss=False)
        stream.foreachRDD(lambda rdd: rdd.map(lambda r: r.offset).collect())
        before = _parse(metrics.exposition()[1].decode())
        context.start()
        page = active_page()
        assert page is not None
        wait_until(lambda: sum(p.numRecords for p in stream.recentProgress)
                   >= 2 * PER_PARTITION - DELETED and len(stream.recentProgress) >= 3,
                   what="every record in three batches")
        progress_before = list(stream.recentProgress)
        scraped = _parse(_scrape(page.url + "metrics"))
        progress_after = list(stream.recentProgress)
        page_html = _scrape(page.url)
        yield Run(topic, metrics.stream_label(context, stream.id), before, scraped,
                  progress_before, progress_after, page_html)
    finally:
        context.stop(stopSparkContext=False, stopGraceFully=False)
        sc._conf._jconf.remove(config.UI_PORT)


def _delta(run: Run, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return run.scraped.get(key, 0.0) - run.before.get(key, 0.0)


def _completed(run: Run) -> list[BatchProgress]:
    """The batches the scrape counted (one may have completed between scrape and progress)."""
    n = int(_delta(run, "dstream_kafka_batches_completed_total", stream=str(run.stream)))
    assert len(run.progress_before) - 1 <= n <= len(run.progress_after)
    return run.progress_after[:n]


def test_records_batches_offsets_and_lag_on_metrics_match_the_streams_progress(run: Run) -> None:
    s = str(run.stream)
    assert run.scraped[("dstream_kafka_records_total", (("stream", s), ("topic", run.topic)))] \
        == 2 * PER_PARTITION - DELETED
    last = _completed(run)[-1]
    for r in last.ranges:
        labels = (("partition", str(r.partition)), ("stream", s), ("topic", run.topic))
        assert run.scraped[("dstream_kafka_committed_offset", labels)] == r.untilOffset
        assert run.scraped[("dstream_kafka_offsets_behind_latest", labels)] == \
            last.offsetsBehindLatest[r.topicPartition()]
    assert {r.untilOffset for r in last.ranges} == {PER_PARTITION}


def test_delay_and_commit_histograms_on_metrics_sum_the_streams_progress(run: Run) -> None:
    s = str(run.stream)
    done = _completed(run)
    expected = {
        "dstream_kafka_batch_processing_seconds": [p.processingDelay or 0 for p in done],
        "dstream_kafka_batch_scheduling_delay_seconds": [p.schedulingDelay or 0 for p in done],
        "dstream_kafka_batch_total_delay_seconds": [
            (p.schedulingDelay or 0) + (p.processingDelay or 0) for p in done],
        "dstream_kafka_offset_commit_seconds": [p.commitMs for p in done],
        "dstream_kafka_batch_duration_seconds": [
            p.planMs + (p.processingDelay or 0) + p.commitMs for p in done],
    }
    for name, values in expected.items():
        assert _delta(run, name + "_count", stream=s) == len(done), name
        assert _delta(run, name + "_sum", stream=s) == pytest.approx(sum(values) / 1000.0), name


def test_the_data_loss_event_is_counted_on_metrics_and_listed_on_the_page(run: Run) -> None:
    assert _delta(run, "dstream_kafka_data_loss_events_total", stream=str(run.stream)) == 1
    assert (f"<td>{run.topic}</td><td class=\"num\">0</td><td class=\"num\">0</td>"
            f"<td class=\"num\">{DELETED}</td><td class=\"num\">{DELETED}</td>") in run.page_html


def test_consumer_cache_counters_on_metrics_sum_what_the_executors_read(run: Run) -> None:
    read = _delta(run, "dstream_kafka_consumer_cache_records_total")
    assert read == 2 * PER_PARTITION - DELETED
    assert _delta(run, "dstream_kafka_consumer_cache_creations_total") >= 1
    assert _delta(run, "dstream_kafka_consumer_cache_seeks_total") >= 1
    assert _delta(run, "dstream_kafka_consumer_cache_hits_total") \
        + _delta(run, "dstream_kafka_consumer_cache_misses_total") >= 2

"""The Streaming page of a real direct stream, opened in headless Chromium (Debian's package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, config
from dstream_kafka.ui import active_page, metrics
from dstream_kafka.ui.state import job_group

from support import wait_until

BATCH = 0.5
CHROMIUM = shutil.which("chromium")
SECRET = "streaming-page-secret-5f1c"


@pytest.fixture
def page_conf(sc: Any) -> Iterator[dict[str, str]]:
    """Turns the Streaming page on (a free port) for this test's contexts only."""
    keys = {config.UI_PORT: "0"}
    for key, value in keys.items():
        sc._conf.set(key, value)
    yield keys
    for key in keys:
        sc._conf._jconf.remove(key)


class _Dom(HTMLParser):
    """The elements of a DOM dump as (tag, attributes, enclosing element ids)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self._ids: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.elements.append((tag, values, tuple(i for _, i in self._ids)))
        if tag not in ("meta", "br", "link", "img", "input", "hr"):  # HTML's void elements
            self._ids.append((tag, values.get("id", "")))

    def handle_endtag(self, tag: str) -> None:
        while self._ids:
            opened, _ = self._ids.pop()
            if opened == tag:
                break

    def within(self, container: str, tag: str) -> list[dict[str, str]]:
        return [a for t, a, ids in self.elements if t == tag and container in ids]


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", *args],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.service_check
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (bash .ci/setup)")
def test_the_streaming_page_shows_the_running_streams_batches_offset_ranges_and_charts(
        kafka: Any, sc: Any, make_ssc: Any, unique: Any, page_conf: dict[str, str],
        tmp_path: Path) -> None:
    from PIL import Image, ImageStat

    topic = unique("page")
    kafka.create_topic(topic, partitions=2)
    kafka.send_messages(topic, {chr(ord("a") + i): 5 for i in range(8)})  # 40 records
    context = make_ssc(BATCH)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              # unused by a PLAINTEXT broker; here to show that no secret reaches the page
              "sasl.plain.password": SECRET}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    seen: dict[int, list[Any]] = {}

    def output(batch_time: Any, rdd: Any) -> None:
        seen[round(batch_time.timestamp() * 1000)] = rdd.offsetRanges()
        rdd.map(lambda r: r.value).collect()  # a Spark job per batch (count() needs none)

    stream.foreachRDD(output)
    context.start()
    page = active_page()
    assert page is not None and page.url.startswith("http://127.0.0.1:")
    wait_until(lambda: sum(p.numRecords for p in stream.recentProgress) >= 40
               and len(stream.recentProgress) >= 3, what="40 records in three batches")
    times = [p.batchTime for p in stream.recentProgress]
    wait_until(lambda: all(page.state.batch(t) is not None and page.state.batch(t).completed
                           for t in times), what="the page to hear of the batches")

    dom = _Dom()
    text = _chromium("--dump-dom", page.url)
    dom.feed(text)
    png = tmp_path / "page.png"
    _chromium(f"--screenshot={png}", "--window-size=1300,1800", page.url)
    with urllib.request.urlopen(page.url + "metrics", timeout=10) as reply:
        metrics_text = reply.read().decode()
    with urllib.request.urlopen(page.url + f"batch?id={times[-1]}", timeout=10) as reply:
        batch_html = reply.read().decode()
    context.stop(stopSparkContext=False, stopGraceFully=False)
    assert SECRET not in text + metrics_text + batch_html

    for chart in ("input-rate", "scheduling-delay", "processing-time", "total-delay"):
        points = {int(a["data-batch-time"]) for a in dom.within(f"{chart}-timeline", "circle")}
        assert set(times) <= points, chart
        bins = dom.within(f"{chart}-histogram", "rect")
        assert len(bins) == 10 and sum(int(b["data-count"]) for b in bins) >= len(times)
    rates = {int(a["data-batch-time"]): float(a["data-value"])
             for a in dom.within("input-rate-timeline", "circle")}
    for p in stream.recentProgress:
        if p.batchTime in times:
            assert rates[p.batchTime] == pytest.approx(p.numRecords / BATCH, abs=0.01)

    listed = {int(a["data-batch-time"]) for a in dom.within("completed-batches", "a")
              if "data-batch-time" in a}
    assert set(times) <= listed
    ranges = {(a["data-topic"], int(a["data-partition"]), int(a["data-from"]),
               int(a["data-until"])) for a in dom.within("completed-batches", "li")}
    for t in times:
        assert {(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in seen[t]} <= ranges
    # The session's SparkContext runs without the Spark UI (spark.ui.enabled=false), so the
    # page lists each batch's job ids unlinked; test_ui_pages checks the links.
    shown = {int(a["data-job-id"]) for tag in ("a", "span")
             for a in dom.within("completed-batches", tag) if a.get("class") == "job"}
    tracker = sc.statusTracker()
    expected = {j for t in times for j in tracker.getJobIdsForGroup(job_group(t))}
    assert len(expected) >= len(times) and expected <= shown
    lag_series = {a["data-series"] for a in dom.within(f"lag-{stream.id}", "circle")}
    assert lag_series == {f"{topic}-0", f"{topic}-1"}
    assert {int(a["data-batch-time"]) for a in dom.within(f"commit-{stream.id}-timeline",
                                                         "circle")} >= set(times)
    label = metrics.stream_label(context, stream.id)
    assert f'dstream_kafka_records_total{{stream="{label}",topic="{topic}"}} 40.0' \
        in metrics_text

    image = Image.open(png).convert("L")
    assert image.size == (1300, 1800)
    low, high = image.getextrema()
    assert high - low > 100 and ImageStat.Stat(image).stddev[0] > 10  # drawn, not blank


def test_the_batch_page_names_the_users_foreach_rdd_line_not_the_librarys(
        kafka: Any, make_ssc: Any, unique: Callable[[str], str],
        spark_conf: Callable[[str, str], None]) -> None:
    spark_conf(config.UI_PORT, "0")
    topic = unique("site")
    kafka.create_topic(topic, partitions=1)
    kafka.send_messages(topic, {"a": 3})
    context = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    stream.foreachRDD(lambda rdd: rdd.count())  # the line the page must name
    line = sys._getframe().f_lineno - 1
    context.start()
    page = active_page()
    assert page is not None
    wait_until(lambda: any(p.numRecords for p in stream.recentProgress), what="a batch")
    batch = next(p.batchTime for p in stream.recentProgress if p.numRecords)
    wait_until(lambda: page.state.batch(batch) is not None and page.state.batch(batch).completed,
               what="the page to hear of the batch")
    with urllib.request.urlopen(page.url + f"batch?id={batch}", timeout=10) as reply:
        html = reply.read().decode()
    context.stop(stopSparkContext=False, stopGraceFully=False)
    assert f"foreachRDD at {__file__}:{line}" in html
    assert "direct_stream.py" not in html

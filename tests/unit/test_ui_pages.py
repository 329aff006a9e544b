"""The Streaming page's state, charts and HTML, without a browser or a running stream."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.progress import BatchProgress
from dstream_kafka.streaming.listener import (BatchInfo, OutputOperationInfo, StreamInputInfo,
                                              StreamingListenerBatchCompleted,
                                              StreamingListenerBatchStarted,
                                              StreamingListenerBatchSubmitted)
from dstream_kafka.ui import pages, page_settings, svg
from dstream_kafka.ui.server import StreamingPage
from dstream_kafka.ui.state import PageListener, PageState, job_group, job_group_setter

T0 = 1_795_500_000_000
RANGES = (OffsetRange("clicks", 0, 10, 25), OffsetRange("clicks", 1, 7, 7))


def _info(t: int, start: int | None = None, end: int | None = None,
          failure: str | None = None) -> BatchInfo:
    ops = {} if end is None else {0: OutputOperationInfo(t, 0, "foreachRDD", "foreachRDD at a.py:3",
                                                         start, end, failure)}
    return BatchInfo(t, {0: StreamInputInfo(0, 15, {"offsets": list(RANGES)})}, t + 5,
                     start, end, ops)


def _state_with_batches(n: int, spark_ui: str | None = "http://driver:4040") -> PageState:
    state = PageState(1000, 1000, spark_ui, "app")
    listener = PageListener(state, lambda t: (t // 1000 % 100, t // 1000 % 100 + 1))
    for i in range(n):
        t = T0 + 1000 * i
        listener.onBatchSubmitted(StreamingListenerBatchSubmitted(_info(t)))
        listener.onBatchStarted(StreamingListenerBatchStarted(_info(t, t + 20)))
        listener.onBatchCompleted(StreamingListenerBatchCompleted(_info(t, t + 20, t + 320)))
    return state


def test_a_batch_goes_from_queued_to_processing_to_completed_with_its_job_ids() -> None:
    state = PageState(1000, 10, None)
    listener = PageListener(state, lambda t: (4, 5))
    listener.onBatchSubmitted(StreamingListenerBatchSubmitted(_info(T0)))
    assert state.batch(T0).status == "queued"
    listener.onBatchStarted(StreamingListenerBatchStarted(_info(T0, T0 + 10)))
    assert state.batch(T0).status == "processing"
    listener.onBatchCompleted(StreamingListenerBatchCompleted(_info(T0, T0 + 10, T0 + 60)))
    row = state.batch(T0)
    assert (row.status, row.job_ids, row.ranges) == ("completed", (4, 5), RANGES)
    assert (row.scheduling_delay, row.processing_time, row.total_delay) == (5, 50, 55)


def test_a_batch_whose_output_failed_is_failed_with_the_error() -> None:
    state = PageState(1000, 10, None)
    state.completed(_info(T0, T0 + 10, T0 + 60, failure="Traceback\nValueError: bad"), ())
    assert state.batch(T0).status == "failed"
    assert "ValueError: bad" in pages.streaming_page(state)


def test_the_page_keeps_only_the_retained_number_of_completed_batches() -> None:
    state = PageState(1000, 3, None)
    for i in range(5):
        state.completed(_info(T0 + i * 1000, T0 + i * 1000, T0 + i * 1000 + 5), ())
    _, completed, _ = state.snapshot()
    assert [r.batch_time for r in completed] == [T0 + 2000, T0 + 3000, T0 + 4000]
    assert state.total_completed == 5


def test_the_job_group_setter_puts_each_job_in_its_batchs_group() -> None:
    calls: list[tuple[str, ...]] = []

    class FakeSc:
        def setJobGroup(self, group: str, description: str) -> None:
            calls.append((group, description))

        def setJobDescription(self, description: str) -> None:
            calls.append((description,))

    setter = job_group_setter(FakeSc())
    setter(f"Streaming job from [output operation 0, batch time {T0} ms]")
    setter("something else")
    assert calls == [(job_group(T0), f"Streaming job from [output operation 0, batch time {T0} ms]"),
                     ("something else",)]


def test_the_page_links_each_completed_batch_to_its_spark_jobs_and_batch_page() -> None:
    page = pages.streaming_page(_state_with_batches(3))
    for i in range(3):
        t = T0 + 1000 * i
        assert f'href="batch?id={t}"' in page
        job = t // 1000 % 100
        assert f'href="http://driver:4040/jobs/job/?id={job}"' in page
    assert page.count('<li class="range" data-topic="clicks"') == 6


def test_without_a_spark_ui_the_page_lists_job_ids_without_links() -> None:
    page = pages.streaming_page(_state_with_batches(1, spark_ui=None))
    assert 'class="job" data-job-id=' in page and "/jobs/job/" not in page


def test_each_chart_has_one_point_per_completed_batch() -> None:
    page = pages.streaming_page(_state_with_batches(4))
    for chart in ("input-rate", "scheduling-delay", "processing-time", "total-delay"):
        svg_text = re.search(rf'<svg id="{chart}-timeline".*?</svg>', page).group(0)
        assert svg_text.count("<circle") == 4


def test_values_on_the_page_are_escaped() -> None:
    state = PageState(1000, 10, None, "<script>x</script>")
    state.stream_feed(0, "<b>stream</b>", None, "g")
    page = pages.streaming_page(state)
    assert "<script>x" not in page and "<b>stream" not in page


def test_the_stream_feed_keeps_progress_for_the_lag_and_commit_charts() -> None:
    state = PageState(1000, 10, None)
    feed = state.stream_feed(3, "DirectKafkaInputDStream[3]", None, "g")
    progress = BatchProgress(T0, RANGES, 15, 15.0, 100.0, 5, 150,
                             {TopicPartition("clicks", 0): 12, TopicPartition("clicks", 1): 0},
                             planMs=4.0, commitMs=2.5)
    feed(progress)
    page = pages.streaming_page(state)
    assert 'data-series="clicks-0" data-batch-time="%d" data-value="12"' % T0 in page
    assert re.search(r'<table id="commits-3">.*2\.5 ms', page)


@pytest.mark.parametrize("ms, unit", [(999, "ms"), (1000, "sec"), (59_999, "sec"),
                                      (60_000, "min"), (3_600_000, "hrs"), (86_400_000, "days")])
def test_durations_are_shown_in_spark_units(ms: float, unit: str) -> None:
    assert svg.normalize_duration(ms)[0] == unit


@given(st.lists(st.floats(min_value=0, max_value=1e6), max_size=200),
       st.floats(min_value=1, max_value=1e6))
def test_a_histogram_counts_every_value_once_in_ten_bins(values: list[float], top: float) -> None:
    chart = svg.histogram(values, max([top, *values]), "ms", css_id="h")
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', chart)]
    assert len(counts) == 10 and sum(counts) == len(values)


def test_the_batch_page_lists_ranges_and_operations() -> None:
    state = _state_with_batches(1)
    page = pages.batch_page(state, state.batch(T0))
    assert "<td>clicks</td>" in page and "foreachRDD at a.py:3" in page


def test_the_batches_json_has_sparks_field_names_and_the_ranges() -> None:
    row = _state_with_batches(1).batch(T0)
    value = json.loads(json.dumps(row.jsonValue()))
    assert value["status"] == "COMPLETED" and value["inputSize"] == 15
    assert value["offsetRanges"][0] == {"topic": "clicks", "partition": 0, "fromOffset": 10,
                                        "untilOffset": 25}


@pytest.mark.parametrize("conf, message", [
    ({"spark.streaming.kafka.ui.port": "70000"}, "spark.streaming.kafka.ui.port='70000'"),
    ({"spark.streaming.kafka.ui.port": "x"}, "spark.streaming.kafka.ui.port"),
    ({"spark.streaming.kafka.ui.port": "0", "spark.streaming.kafka.ui.host": " "},
     "spark.streaming.kafka.ui.host"),
    ({"spark.streaming.kafka.ui.port": "0", "spark.streaming.kafka.ui.retainedBatches": "0"},
     "spark.streaming.kafka.ui.retainedBatches"),
])
def test_bad_page_settings_name_the_key(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        page_settings(conf)


def test_the_page_is_off_unless_its_port_is_set() -> None:
    assert page_settings({}) is None
    assert page_settings({"spark.streaming.kafka.ui.port": "0"}) == (0, "127.0.0.1", 1000)


class _NoSpark:
    uiWebUrl = None
    appName = "unit"


def test_the_server_serves_the_page_a_batch_json_and_metrics_then_frees_the_port() -> None:
    page = StreamingPage(_NoSpark(), 1000, 0, "127.0.0.1", 10)
    page.state.completed(_info(T0, T0 + 10, T0 + 60), ())
    url = page.start()
    try:
        for path, needle in [("", "Streaming Statistics"), (f"batch?id={T0}", "Offset ranges"),
                             ("api/batches", '"batchTime"'), ("metrics", "dstream_kafka_")]:
            with urllib.request.urlopen(url + path, timeout=10) as reply:
                assert needle in reply.read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "batch?id=1", timeout=10)
        assert missing.value.code == 404
    finally:
        page.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_a_port_in_use_fails_the_start_naming_the_key() -> None:
    first = StreamingPage(_NoSpark(), 1000, 0, "127.0.0.1", 10)
    url = first.start()
    try:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        second = StreamingPage(_NoSpark(), 1000, port, "127.0.0.1", 10)
        with pytest.raises(ConfigurationError, match="spark.streaming.kafka.ui.port"):
            second.start()
    finally:
        first.stop()


def _progress(t: int, records: int) -> BatchProgress:
    return BatchProgress(t, RANGES, records, float(records), 100.0, 5, 150,
                         {TopicPartition("clicks", 0): 3})


def test_the_demo_display_prints_plain_lines_when_output_is_not_a_terminal() -> None:
    import io

    from rich.console import Console

    from dstream_kafka.operate.terminal import PlainDisplay, create_display

    out = io.StringIO()
    with create_display("clicks", lambda: "kafka 3", Console(file=out, width=200)) as display:
        assert isinstance(display, PlainDisplay)
        display.batch(_progress(T0, 15))
        display.batch(_progress(T0 + 1000, 4))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all("\x1b" not in line for line in lines)
    assert re.fullmatch(r"batch \d\d:\d\d:\d\d  records     15  partitions 2  processing   150 ms"
                        r"  scheduling    5 ms  behind     3  \| totals: kafka 3", lines[0])
    assert display.processed == 19


def test_the_demo_display_is_live_on_a_terminal_and_lists_the_newest_batch_first() -> None:
    import io

    from rich.console import Console

    from dstream_kafka.operate.terminal import LiveDisplay, create_display

    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    display = create_display("clicks", lambda: "kafka 3", console)
    assert isinstance(display, LiveDisplay)
    display.batch(_progress(T0, 15))
    display.batch(_progress(T0 + 1000, 4))
    display.close()
    last_view = out.getvalue().rsplit("dstream-kafka demo", 1)[1]
    rows = re.findall(r"(\d\d:\d\d:\d\d) │\s+(\d+)", last_view)
    assert [n for _, n in rows] == ["4", "15"] and "p0:[10,25)" in last_view


def test_the_consumer_lag_section_shows_the_verdict_escaped_the_partitions_and_both_charts() -> None:
    from dstream_kafka.monitor.lag import LagSample, PartitionLag
    from dstream_kafka.monitor.verdict import Verdict

    state = _state_with_batches(2)
    state.stream_feed(0, "stream <0>", None, "g")
    feed = state.lag_feed(0)
    for i, (end, seconds) in enumerate([(40, None), (60, 1.5), (90, 3.0)]):
        sample = LagSample(T0 + 1000 * i, (PartitionLag("clicks", 0, end, 25, end - 25, seconds),))
        feed(sample, Verdict("WARN", "rate limit: <capped>", ("input rate 30.0 records/s",),
                             {"clicks-0": "WARN"}))
    html = pages.streaming_page(state)
    box = re.search(r'<div class="verdict status-WARN" id="lag-verdict-0" data-status="WARN">'
                    r'(.*?)</div>', html)
    assert box is not None
    assert "rate limit: &lt;capped&gt;" in box.group(1) and "<capped>" not in html
    assert "<li>input rate 30.0 records/s</li>" in box.group(1)
    row = re.search(r'<table id="lag-0-partitions">.*?<tbody>(.*?)</tbody>', html).group(1)
    assert re.findall(r'data-value="([^"]*)"', row) == ["65", "3.0"]
    assert ">3.0 s<" in row and "<td>WARN</td>" in row
    assert len(re.findall(r'<circle class="point"[^>]*data-series="clicks-0"',
                          html.split('id="lag-0-offsets"')[1].split("</svg>")[0])) == 3
    assert len(re.findall(r'<circle class="point"',  # no point while seconds were unknown
                          html.split('id="lag-0-seconds"')[1].split("</svg>")[0])) == 2

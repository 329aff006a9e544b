"""The Streaming page and the batch page as HTML text (no script, no external asset).

The layout is Spark's old Streaming tab: a summary line; Input Rate, Scheduling Delay,
Processing Time and Total Delay, each with its average, a timeline and a histogram (the three
delays share one unit and y range, chosen from the largest delay); then what Spark's tab did
not have for Kafka: offsets behind latest per partition over time, offset-store commits and
their cost, data-loss records and the executors' consumer-cache counters; then the active and
completed batches with their per-partition offset ranges and links to their Spark jobs.
Every value is escaped; the page holds no Kafka parameter.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from dstream_kafka.offsets import OffsetRange
from dstream_kafka.ui import svg
from dstream_kafka.ui.state import BatchRow, PageState, StreamView

__all__ = ["streaming_page", "batch_page", "not_found_page", "format_duration"]

#: Completed batches listed on the page (all retained ones feed the charts).
LISTED_BATCHES = 100

_STYLE = """
body{font-family:sans-serif;font-size:13px;margin:16px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ccc;padding:3px 6px;
vertical-align:top;text-align:left} th{background:#f3f3f3}
td.num{text-align:right} ul.ranges{margin:0;padding-left:14px} .failed{color:#c00}
.summary{margin:8px 0} nav a{margin-right:12px}
.verdict{border-left:6px solid #2a2;padding:2px 10px;margin:8px 0;background:#f6fbf6}
.verdict h3{margin:4px 0} .status-WARN,.status-REWIND{border-color:#e90;background:#fffaf0}
.status-STALL,.status-STOP,.status-ERR{border-color:#c00;background:#fff5f5}
"""


def e(value: Any) -> str:
    """``value`` as escaped HTML text."""
    return html.escape(str(value))


def format_duration(ms: float | None) -> str:
    """A duration the way Spark's UI writes it (``45 ms``, ``1.2 s``, ``3.5 min``, ``2.0 h``)."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def _date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000.0).strftime("%Y/%m/%d %H:%M:%S")


def _batch_label(state: PageState, ms: int) -> str:
    with_ms = state.batch_ms < 1000
    return datetime.fromtimestamp(ms / 1000.0).strftime("%Y/%m/%d ") + svg.format_time(ms, with_ms)


def _document(title: str, body: Iterable[str], refresh: int | None) -> str:
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">" + meta
            + f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>"
            + "".join(body) + "</body></html>")


def _table(css_id: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    cells = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>'


def _td(value: Any, num: bool = False) -> str:
    return f'<td class="num">{e(value)}</td>' if num else f"<td>{e(value)}</td>"


def _ranges_cell(ranges: Sequence[OffsetRange]) -> str:
    items = "".join(
        f'<li class="range" data-topic="{e(r.topic)}" data-partition="{r.partition}" '
        f'data-from="{r.fromOffset}" data-until="{r.untilOffset}">{e(r.topic)}-{r.partition}: '
        f"[{r.fromOffset}, {r.untilOffset}) {r.count()}</li>"
        for r in sorted(ranges, key=lambda r: (r.topic, r.partition)))
    return f'<td><ul class="ranges">{items}</ul></td>'


def _job_links(state: PageState, job_ids: Sequence[int]) -> str:
    if not job_ids:
        return "<td>-</td>"
    if not state.spark_ui:  # spark.ui.enabled=false: the ids, nothing to link to
        return "<td>" + ", ".join(f'<span class="job" data-job-id="{j}">{j}</span>'
                                  for j in job_ids) + "</td>"
    base = state.spark_ui.rstrip("/")
    return "<td>" + ", ".join(f'<a class="job" data-job-id="{j}" '
                              f'href="{e(base)}/jobs/job/?id={j}">{j}</a>'
                              for j in job_ids) + "</td>"


def _ops(row: BatchRow) -> str:
    done = sum(1 for o in row.operations.values() if o.end_time is not None and not o.failure_reason)
    return f"{done}/{max(len(row.operations), done)}"


def _statistics(state: PageState, completed: list[BatchRow], active: list[BatchRow]) -> str:
    seconds = state.batch_ms / 1000.0
    rates = [(r.batch_time, r.records / seconds) for r in completed]
    delays = {
        "scheduling-delay": [(r.batch_time, r.scheduling_delay) for r in completed],
        "processing-time": [(r.batch_time, r.processing_time) for r in completed],
        "total-delay": [(r.batch_time, r.total_delay) for r in completed],
    }
    largest = max([float(v) for pts in delays.values() for _, v in pts if v is not None] + [1.0])
    unit, size = svg.normalize_duration(largest)
    failed = frozenset(r.batch_time for r in completed if r.failure)
    rate_max = max([v for _, v in rates] + [1.0])
    x_max = max(len(completed), 1)
    rows = []

    def avg(values: Sequence[float]) -> float | None:
        return sum(values) / len(values) if values else None

    rate_avg = avg([v for _, v in rates])
    rows.append(
        ["<td><b>Input Rate</b><br>Avg: "
         + ("-" if rate_avg is None else f"{rate_avg:.2f} records/sec") + "</td>",
         "<td>" + svg.timeline(rates, rate_max, "records/sec", css_id="input-rate-timeline",
                               batch_ms=state.batch_ms, failed=failed) + "</td>",
         "<td>" + svg.histogram([v for _, v in rates], rate_max, "records/sec",
                                css_id="input-rate-histogram", x_max=x_max) + "</td>"])
    titles = {"scheduling-delay": "Scheduling Delay", "processing-time": "Processing Time",
              "total-delay": "Total Delay"}
    for key, points in delays.items():
        scaled = [(t, None if v is None else v / size) for t, v in points]
        known = [v for _, v in scaled if v is not None]
        mean = avg([float(v) for _, v in points if v is not None])
        stable = seconds * 1000 / size if key == "processing-time" else None
        rows.append(
            [f"<td><b>{titles[key]}</b><br>Avg: {format_duration(mean)}</td>",
             "<td>" + svg.timeline(scaled, largest / size, unit, css_id=f"{key}-timeline",
                                   batch_ms=state.batch_ms, stable=stable, failed=failed)
             + "</td>",
             "<td>" + svg.histogram(known, largest / size, unit, css_id=f"{key}-histogram",
                                    x_max=x_max, stable=stable) + "</td>"])
    header = (f"Timelines (Last {len(completed) + len(active)} batches, {len(active)} active, "
              f"{len(completed)} completed)")
    return _table("statistics", ["", header, "Histograms"], rows)


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(value * 1000.0)


def _consumer_lag_section(state: PageState, streams: list[StreamView]) -> str:
    parts = ["<h2>Consumer lag</h2><p>Sampled by each stream's lag timer, independently of "
             "batches: log end (last stable offset under read_committed) minus the committed "
             "offset, and how long ago the log reached the committed offset.</p>"]
    for view in streams:
        if not view.lag:
            continue
        latest = view.lag[-1]
        verdict = view.verdict
        statuses = {} if verdict is None else verdict.partitions
        if verdict is not None:
            evidence = "".join(f"<li>{e(item)}</li>" for item in verdict.evidence)
            parts.append(
                f'<div class="verdict status-{e(verdict.status)}" id="lag-verdict-{view.stream}" '
                f'data-status="{e(verdict.status)}"><h3>{e(view.description)}: '
                f'<span class="status">{e(verdict.status)}</span></h3>'
                f'<p class="cause">Why: {e(verdict.cause)}</p><ul>{evidence}</ul></div>')
        if latest.lookupError:
            parts.append(f'<p class="failed">Log-end look-up failed: {e(latest.lookupError)}</p>')
        rows = [[_td(p.topic), _td(p.partition, True), _td(p.logEndOffset, True),
                 _td(p.committedOffset, True),
                 f'<td class="num lag-offsets" data-value="{p.lagOffsets}">{p.lagOffsets}</td>',
                 f'<td class="num lag-seconds" data-value="'
                 f'{"" if p.lagSeconds is None else p.lagSeconds}">{_seconds(p.lagSeconds)}</td>',
                 _td(statuses.get(f"{p.topic}-{p.partition}", "-"))]
                for p in sorted(latest.partitions, key=lambda p: (p.topic, p.partition))]
        parts.append(_table(f"lag-{view.stream}-partitions",
                            ["Topic", "Partition", "Log End", "Committed", "Lag (offsets)",
                             "Lag (time)", "Status"], rows))
        offsets: dict[str, list[tuple[int, float]]] = {}
        seconds: dict[str, list[tuple[int, float]]] = {}
        for sample in view.lag:
            for p in sample.partitions:
                name = f"{p.topic}-{p.partition}"
                offsets.setdefault(name, []).append((sample.time, float(p.lagOffsets)))
                if p.lagSeconds is not None:
                    seconds.setdefault(name, []).append((sample.time, p.lagSeconds))
        parts.append(svg.multi_line(offsets, "offsets", css_id=f"lag-{view.stream}-offsets",
                                    batch_ms=state.batch_ms))
        parts.append(svg.multi_line(seconds, "seconds", css_id=f"lag-{view.stream}-seconds",
                                    batch_ms=state.batch_ms))
    return "".join(parts)


def _lag_section(state: PageState, streams: list[StreamView]) -> str:
    parts = ["<h2>Offsets behind latest at planning</h2><p>Per partition, how far each batch's "
             "until offset stayed behind the latest offset when the batch was planned (the "
             "backlog the rate limits left; the consumer lag above is the stream's real lag)."
             "</p>"]
    for view in streams:
        series: dict[str, list[tuple[int, float]]] = {}
        for p in view.progress:
            for tp, n in sorted(p.offsetsBehindLatest.items()):
                series.setdefault(f"{tp[0]}-{tp[1]}", []).append((p.batchTime, float(n)))
        parts.append(f"<h3>{e(view.description)}</h3>" + svg.multi_line(
            series, "offsets", css_id=f"lag-{view.stream}", batch_ms=state.batch_ms))
    return "".join(parts)


def _commit_section(state: PageState, streams: list[StreamView]) -> str:
    parts = ["<h2>Offset commits</h2><p>Time each completed batch spent committing (offset "
             "store and commitAsync) and planning (latest offsets, rate limits, RDD).</p>"]
    for view in streams:
        recent = list(view.progress)
        points = [(p.batchTime, float(p.commitMs)) for p in recent]
        largest = max([v for _, v in points] + [1.0])
        parts.append(f"<h3>{e(view.description)}: store {e(view.store)}</h3>" + svg.timeline(
            points, largest, "ms", css_id=f"commit-{view.stream}-timeline",
            batch_ms=state.batch_ms))
        rows = [[f"<td>{e(_batch_label(state, p.batchTime))}</td>", _td(p.batchId, True),
                 _td(p.numRecords, True), _td(f"{p.commitMs:.1f} ms", True),
                 _td(f"{p.planMs:.1f} ms", True)]
                for p in reversed(recent[-20:])]
        parts.append(_table(f"commits-{view.stream}",
                            ["Batch Time", "Batch Id", "Records", "Commit", "Plan"], rows))
    return "".join(parts)


def _loss_section(streams: list[StreamView]) -> str:
    rows = [[_td(v.stream, True), _td(r.topic), _td(r.partition, True), _td(r.lost_from, True),
             _td(r.lost_until, True), _td(r.lost_until - r.lost_from, True), _td(r.recorded_at)]
            for v in streams for r in v.data_loss]
    events = sum(v.losses_seen for v in streams)
    return (f"<h2>Data loss</h2><p>{events} data-loss events (offsets skipped with "
            "failOnDataLoss=False), as recorded in the offset store:</p>"
            + _table("data-loss", ["Stream", "Topic", "Partition", "Lost From", "Lost Until",
                                   "Offsets", "Recorded At"], rows))


def _cache_section(state: PageState) -> str:
    counters = state.cache_counters()
    rows = [[_td(name), _td(value, True)] for name, value in sorted(counters.items())]
    return ("<h2>Executor consumer cache</h2><p>Counters summed over the executors' Python "
            "workers, for the ranges their tasks read to the end.</p>"
            + _table("consumer-cache", ["Counter", "Value"], rows))


def _batch_rows(state: PageState, rows: Iterable[BatchRow], completed: bool) -> list[list[str]]:
    out = []
    for r in rows:
        cells = [f'<td><a class="batch" data-batch-time="{r.batch_time}" '
                 f'href="batch?id={r.batch_time}">{e(_batch_label(state, r.batch_time))}</a></td>',
                 _td(f"{r.records} records", True), _td(format_duration(r.scheduling_delay), True),
                 _td(format_duration(r.processing_time), True)]
        if completed:
            cells.append(_td(format_duration(r.total_delay), True))
        cells.append(_td(_ops(r), True))
        if not completed:
            cells.append(_td(r.status))
        cells += [_ranges_cell(r.ranges), _job_links(state, r.job_ids)]
        failure = r.failure
        cells.append('<td class="failed">' + e(failure.strip().splitlines()[-1]) + "</td>"
                     if failure else "<td></td>")
        out.append(cells)
    return out


def streaming_page(state: PageState, refresh: int | None = 5) -> str:
    """The whole Streaming page."""
    active, completed, streams = state.snapshot()
    now = datetime.now().timestamp() * 1000
    summary = (f'<p class="summary">Running batches of <b>{format_duration(state.batch_ms)}</b> '
               f"for <b>{format_duration(now - state.started_ms)}</b> since "
               f"<b>{_date(state.started_ms)}</b> (<b>{state.total_completed}</b> completed "
               f"batches, <b>{state.total_records}</b> records)</p>")
    links = ['<a href="metrics">Prometheus metrics</a>', '<a href="api/batches">Batches JSON</a>']
    if state.spark_ui:
        links.insert(0, f'<a id="spark-ui" href="{e(state.spark_ui)}/jobs/">Spark UI</a>')
    listed = list(reversed(completed))[:LISTED_BATCHES]
    body = [f"<h1>Streaming Statistics</h1><nav>{''.join(links)}</nav>", summary,
            _statistics(state, completed, active), _consumer_lag_section(state, streams),
            _lag_section(state, streams),
            _commit_section(state, streams), _loss_section(streams), _cache_section(state),
            f"<h2>Active Batches ({len(active)})</h2>",
            _table("active-batches", ["Batch Time", "Records", "Scheduling Delay",
                                      "Processing Time", "Output Ops: Succeeded/Total", "Status",
                                      "Offset Ranges", "Spark Jobs", "Error"],
                   _batch_rows(state, active, False)),
            f"<h2>Completed Batches (last {len(listed)} out of {state.total_completed})</h2>",
            _table("completed-batches", ["Batch Time", "Records", "Scheduling Delay",
                                         "Processing Time", "Total Delay",
                                         "Output Ops: Succeeded/Total", "Offset Ranges",
                                         "Spark Jobs", "Error"],
                   _batch_rows(state, listed, True))]
    title = f"Streaming Statistics - {state.app_name}" if state.app_name else "Streaming Statistics"
    return _document(title, body, refresh)


def batch_page(state: PageState, row: BatchRow) -> str:
    """The page of one batch: its delays, offset ranges and output operations with jobs."""
    facts = [("Batch Duration", format_duration(state.batch_ms)),
             ("Input data size", f"{row.records} records"), ("Status", row.status),
             ("Scheduling delay", format_duration(row.scheduling_delay)),
             ("Processing time", format_duration(row.processing_time)),
             ("Total delay", format_duration(row.total_delay))]
    ranges = [[_td(r.topic), _td(r.partition, True), _td(r.fromOffset, True),
               _td(r.untilOffset, True), _td(r.count(), True)]
              for r in sorted(row.ranges, key=lambda r: (r.topic, r.partition))]
    ops = [[_td(o.operation_id, True), _td(o.operation_description),
            _td(format_duration(None if o.end_time is None or o.start_time is None
                                else o.end_time - o.start_time), True),
            _td("failed" if o.failure_reason else "succeeded" if o.end_time else "running"),
            f"<td><pre>{e(o.failure_reason)}</pre></td>" if o.failure_reason else "<td></td>"]
           for o in sorted(row.operations.values(), key=lambda o: o.operation_id)]
    body = [f"<h1>Details of batch at {e(_batch_label(state, row.batch_time))}</h1>",
            '<nav><a href="./">Streaming Statistics</a></nav>',
            "<ul>" + "".join(f"<li><b>{e(k)}:</b> {e(v)}</li>" for k, v in facts) + "</ul>",
            "<h2>Offset ranges</h2>",
            _table("batch-ranges", ["Topic", "Partition", "From Offset", "Until Offset",
                                    "Records"], ranges),
            "<h2>Output operations</h2>",
            _table("batch-operations", ["Output Op Id", "Description", "Output Op Duration",
                                        "Status", "Error"], ops),
            "<h2>Spark jobs</h2>", _table("batch-jobs", ["Job Ids"],
                                          [[_job_links(state, row.job_ids)]])]
    return _document(f"Batch {row.batch_time}", body, None)


def not_found_page(what: str) -> str:
    """A 404 page saying what was not found."""
    return _document("Not found", [f"<h1>Not found</h1><p>{e(what)}</p>",
                                   '<p><a href="./">Streaming Statistics</a></p>'], None)

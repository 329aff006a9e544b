"""The soak workload (9) in the report: resource trends after the warm-up, exactly-once, goals.

Pure functions over the run records the harness keeps (``run["soak"]``, as
:func:`benchmarks.adapter_soak.stream_soak` returns it). Only the samples taken after the warm-up
and while the producer was writing are judged (``warmup_seconds <= t <= producing_seconds``):
the drain after the producer stops is a different load.

- Memory (driver Python, driver JVM, Python workers): the median of the last window of samples
  against the median of the first window after the warm-up, each window
  :data:`MEMORY_WINDOW_SECONDS` long (a third of the judged span when that is shorter); the
  growth ``(last - first) / first`` must be at most :data:`MEMORY_GOAL` (5 %). Medians of at
  least :data:`MIN_WINDOW_SAMPLES` samples: one noisy sample moves neither. A drop is no leak.
- Counts (file descriptors and threads of each process group, cached consumers, TCP connections
  to the broker and to PostgreSQL): the maximum of the last third of the judged samples must not
  exceed the maximum of the first third. A count that only rises and falls back within the run
  passes; one that climbs, however slowly, does not.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from benchmarks.report_steady import pooled_run

__all__ = ["MEMORY_GOAL", "MEMORY_WINDOW_SECONDS", "MIN_WINDOW_SAMPLES", "MEMORY_KEYS",
           "COUNT_GOALS", "judged_samples", "memory_growth", "count_growth", "kept_up",
           "summarize_soak", "check_soak_goals", "soak_lines", "soak_status", "finish_soak"]

#: Largest memory growth after the warm-up (a fraction: 5 %).
MEMORY_GOAL = 0.05
#: Length of the first and last memory windows, seconds.
MEMORY_WINDOW_SECONDS = 60.0
#: Fewest samples in each memory window for a judgement.
MIN_WINDOW_SAMPLES = 3
#: Fewest judged samples for the count checks (thirds of at least 2 samples).
MIN_COUNT_SAMPLES = 6
#: Memory figures of a sample, and their labels.
MEMORY_KEYS = (("driver_py_mb", "driver Python"), ("driver_jvm_mb", "driver JVM"),
               ("workers_mb", "Python workers"))
#: The no-growth goals: label and the sample keys each one covers.
COUNT_GOALS = (
    ("open file descriptors", (("driver_py_fds", "driver Python"), ("driver_jvm_fds", "driver JVM"),
                               ("workers_fds", "Python workers"))),
    ("threads", (("driver_py_threads", "driver Python"), ("driver_jvm_threads", "driver JVM"),
                 ("workers_threads", "Python workers"))),
    ("cached consumers", (("consumers", "workers' consumer caches"),)),
    ("TCP connections", (("broker_tcp", "to the broker"), ("postgres_tcp", "to PostgreSQL"))),
)
#: Kept up: the lag at the end must be at most this many batch intervals' worth of records.
LAG_INTERVALS = 3.0
#: Kept up: the scheduling delay may grow by at most this fraction of an interval.
SCHEDULING_GROWTH_INTERVALS = 0.5


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def judged_samples(samples: Sequence[dict[str, Any]], warmup_seconds: float,
                   end_seconds: float | None) -> list[dict[str, Any]]:
    """The samples after the warm-up and, when ``end_seconds`` is given, up to it, in time order."""
    return sorted((s for s in samples if s.get("t") is not None and s["t"] >= warmup_seconds
                   and (end_seconds is None or s["t"] <= end_seconds)), key=lambda s: s["t"])


def memory_growth(samples: Sequence[dict[str, Any]], key: str, warmup_seconds: float = 0.0,
                  end_seconds: float | None = None,
                  window_seconds: float = MEMORY_WINDOW_SECONDS) -> dict[str, Any]:
    """Growth of ``key`` (MiB) from the first window after the warm-up to the last one.

    Returns ``first`` and ``last`` (window medians), ``growth`` ((last - first) / first),
    ``window_seconds``, ``samples`` and ``met`` (growth <= :data:`MEMORY_GOAL`; None with fewer
    than :data:`MIN_WINDOW_SAMPLES` samples in a window, ``reason`` says why).
    """
    judged = [s for s in judged_samples(samples, warmup_seconds, end_seconds) if s.get(key) is not None]
    out: dict[str, Any] = {"first": None, "last": None, "growth": None, "samples": len(judged),
                           "window_seconds": None, "met": None}
    if len(judged) < 2:
        out["reason"] = f"{len(judged)} samples after the warm-up"
        return out
    t_first, t_last = judged[0]["t"], judged[-1]["t"]
    window = min(window_seconds, (t_last - t_first) / 3.0)
    first = [float(s[key]) for s in judged if s["t"] <= t_first + window]
    last = [float(s[key]) for s in judged if s["t"] >= t_last - window]
    out["window_seconds"] = window
    if min(len(first), len(last)) < MIN_WINDOW_SAMPLES:
        out["reason"] = (f"{len(first)} and {len(last)} samples in the first and last {window:g} s, "
                         f"fewer than {MIN_WINDOW_SAMPLES}")
        return out
    m_first, m_last = statistics.median(first), statistics.median(last)
    out.update(first=m_first, last=m_last)
    if m_first <= 0:
        out["reason"] = "no memory in the first window"
        return out
    out["growth"] = (m_last - m_first) / m_first
    out["met"] = out["growth"] <= MEMORY_GOAL
    return out


def count_growth(samples: Sequence[dict[str, Any]], key: str, warmup_seconds: float = 0.0,
                 end_seconds: float | None = None) -> dict[str, Any]:
    """Did the count ``key`` grow after the warm-up?

    Returns ``start``/``end`` (first and last judged sample), ``first_max``/``last_max`` (maxima
    of the first and last third of the judged samples) and ``met``: ``last_max <= first_max``
    (None with fewer than :data:`MIN_COUNT_SAMPLES` samples).
    """
    values = [float(s[key]) for s in judged_samples(samples, warmup_seconds, end_seconds)
              if s.get(key) is not None]
    out: dict[str, Any] = {"start": values[0] if values else None, "end": values[-1] if values else None,
                           "first_max": None, "last_max": None, "samples": len(values), "met": None}
    if len(values) < MIN_COUNT_SAMPLES:
        out["reason"] = f"{len(values)} samples after the warm-up, fewer than {MIN_COUNT_SAMPLES}"
        return out
    third = len(values) // 3
    out.update(first_max=max(values[:third]), last_max=max(values[-third:]))
    out["met"] = out["last_max"] <= out["first_max"]
    return out


def kept_up(soak: dict[str, Any]) -> dict[str, Any]:
    """Did the stream keep up with the producer?

    ``lag_seconds``: the median lag of the last third of the judged samples, in seconds of input
    at the soak rate; ``scheduling_first_ms``/``scheduling_last_ms``: median scheduling delay of
    the first and last third of the batches after the warm-up, while producing; ``drained``: the
    stream committed everything produced within a minute of the producer's end. ``met``: drained,
    lag <= :data:`LAG_INTERVALS` intervals and the scheduling delay grew by at most
    :data:`SCHEDULING_GROWTH_INTERVALS` of an interval.
    """
    params = soak.get("params") or {}
    rate, interval = float(params.get("rate") or 0), float(params.get("interval") or 0)
    warm, end = float(soak.get("warmup_seconds") or 0.0), soak.get("producing_seconds")
    lags = [float(s["lag"]) for s in judged_samples(soak.get("samples") or [], warm, end)
            if s.get("lag") is not None]
    batches = [b for b in judged_samples(soak.get("batches") or [], warm, end)
               if b.get("scheduling_ms") is not None]
    out: dict[str, Any] = {"drained": soak.get("drained"), "drain_seconds": soak.get("drain_seconds"),
                           "lag_seconds": None, "scheduling_first_ms": None,
                           "scheduling_last_ms": None, "met": None}
    if len(lags) >= 3 and rate > 0:
        out["lag_seconds"] = statistics.median(lags[-(len(lags) // 3):]) / rate
    if len(batches) >= 3:
        third = len(batches) // 3
        out["scheduling_first_ms"] = statistics.median(float(b["scheduling_ms"]) for b in batches[:third])
        out["scheduling_last_ms"] = statistics.median(float(b["scheduling_ms"]) for b in batches[-third:])
    if out["drained"] is False:
        out["met"] = False
    elif None not in (out["lag_seconds"], out["scheduling_first_ms"]) and interval > 0:
        out["met"] = bool(out["drained"]) and out["lag_seconds"] <= LAG_INTERVALS * interval and (
            out["scheduling_last_ms"] <= out["scheduling_first_ms"]
            + SCHEDULING_GROWTH_INTERVALS * interval * 1000.0)
    return out


def _soak_runs(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("ok") and not r.get("warmup") and r.get("kind") == "soak"
            and r.get("soak")]


def summarize_soak(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return ``{label: entry}`` per measured soak run (label: the contender, with `` r<round>``
    when it ran more than once): ``params``, ``samples``, ``batches``, ``records``,
    ``memory``/``counts`` (:func:`memory_growth`/:func:`count_growth` per sample key),
    ``kept_up``, ``exactly_once`` and ``first``/``last`` (the first and last sample after the
    warm-up), ``table`` (at most :data:`MAX_TABLE_ROWS` samples, evenly spread)."""
    found = _soak_runs(runs)
    rounds: dict[str, int] = {}
    for r in found:
        rounds[r["contender"]] = rounds.get(r["contender"], 0) + 1
    out: dict[str, Any] = {}
    for r in found:
        soak = r["soak"]
        label = r["contender"] + (f" r{r['round']}" if rounds[r["contender"]] > 1 else "")
        warm, end = float(soak.get("warmup_seconds") or 0.0), soak.get("producing_seconds")
        samples = soak.get("samples") or []
        judged = judged_samples(samples, warm, end)
        out[label] = {
            "params": soak.get("params") or {}, "samples": len(samples), "judged_samples": len(judged),
            "batches": len(soak.get("batches") or []), "records": r.get("records"),
            "warmup_seconds": warm, "producing_seconds": end, "producer": soak.get("producer") or {},
            "memory": {k: memory_growth(samples, k, warm, end) for k, _ in MEMORY_KEYS},
            "counts": {k: count_growth(samples, k, warm, end)
                       for _, keys in COUNT_GOALS for k, _ in keys},
            "kept_up": kept_up(soak), "exactly_once": soak.get("exactly_once") or {},
            "first": judged[0] if judged else None, "last": judged[-1] if judged else None,
            "table": _spread(samples, MAX_TABLE_ROWS),
        }
    return out


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f} %"


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _goals_of(label: str, e: dict[str, Any]) -> list[dict[str, Any]]:
    contender = label.split()[0]
    rows = []
    for key, name in MEMORY_KEYS:
        m = e["memory"][key]
        measured = (f"{_num(m['first'], 1)} -> {_num(m['last'], 1)} MiB ({_pct(m['growth'])}; medians "
                    f"of the first and last {_num(m['window_seconds'])} s after the warm-up)"
                    if m["growth"] is not None else m.get("reason", "not measured"))
        rows.append({"goal": f"soak: {name} memory grows at most {MEMORY_GOAL:.0%} after the warm-up "
                             "(median of the last window vs the first)",
                     "workload": "soak", "contender": contender, "value": m["growth"],
                     "limit": MEMORY_GOAL, "measured": measured, "met": m["met"]})
    for what, keys in COUNT_GOALS:
        parts, verdicts, worst = [], [], None
        for key, name in keys:
            c = e["counts"][key]
            verdicts.append(c["met"])
            if c["met"] is None:
                parts.append(f"{name}: {c.get('reason', 'not measured')}")
                continue
            parts.append(f"{name} {_num(c['start'])} -> {_num(c['end'])} (max {_num(c['first_max'])} "
                         f"first third, {_num(c['last_max'])} last)")
            grew = c["last_max"] - c["first_max"]
            worst = grew if worst is None else max(worst, grew)
        met = False if False in verdicts else None if None in verdicts else True
        rows.append({"goal": f"soak: no growth in {what} after the warm-up (max of the last third "
                             "of the samples <= max of the first third)",
                     "workload": "soak", "contender": contender, "value": worst, "limit": 0,
                     "measured": "; ".join(parts), "met": met})
    eo = e["exactly_once"]
    if eo:
        measured = (f"{eo.get('stored', 0):,} offsets in the sink, {eo.get('expected', 0):,} in "
                    f"[start, end), producer wrote {_num(eo.get('produced'))}; "
                    f"{eo.get('duplicates', 0)} duplicate, {eo.get('missing', 0)} missing; committed "
                    f"offsets {'=' if eo.get('committed_equals_end') else '!='} end offsets")
        if eo.get("problems"):
            measured += " (" + "; ".join(eo["problems"])[:300] + ")"
        rows.append({"goal": "soak: exactly-once (every offset once in the sink, sink total = records "
                             "produced, committed offsets = end offsets)",
                     "workload": "soak", "contender": contender, "value": eo.get("duplicates", 0)
                     + eo.get("missing", 0), "limit": 0, "measured": measured,
                     "met": bool(eo.get("exactly_once"))})
    k = e["kept_up"]
    interval = float(e["params"].get("interval") or 0)
    measured = (f"lag {_num(k['lag_seconds'], 2)} s of input (median of the last third); scheduling "
                f"delay {_num(k['scheduling_first_ms'])} -> {_num(k['scheduling_last_ms'])} ms "
                f"(first/last third); {'drained' if k['drained'] else 'NOT drained'} "
                f"{_num(k['drain_seconds'], 1)} s after the producer stopped")
    rows.append({"goal": f"soak: the stream keeps up (lag <= {LAG_INTERVALS:g} intervals ({LAG_INTERVALS * interval:g} s), "
                         f"scheduling delay grows <= {SCHEDULING_GROWTH_INTERVALS:g} interval, "
                         "backlog drained at the end)",
                 "workload": "soak", "contender": contender, "value": k["lag_seconds"],
                 "limit": LAG_INTERVALS * interval, "measured": measured, "met": k["met"]})
    return rows


def check_soak_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every soak goal of every measured soak run (see the module text), as the other goals."""
    return [g for label, e in summarize_soak(runs).items() for g in _goals_of(label, e)]


#: Sample columns of the report's table: (key or keys joined by " / ", heading, digits).
_SAMPLE_COLUMNS = (("driver_py_mb", "driver Python MiB", 1), ("driver_jvm_mb", "driver JVM MiB", 1),
                   ("workers_mb", "workers MiB", 1),
                   (("driver_py_fds", "driver_jvm_fds", "workers_fds"), "fds Python / JVM / workers", 0),
                   (("driver_py_threads", "driver_jvm_threads", "workers_threads"),
                    "threads Python / JVM / workers", 0),
                   ("consumers", "cached consumers", 0),
                   (("broker_tcp", "postgres_tcp"), "TCP broker / PostgreSQL", 0),
                   ("lag", "lag records", 0))
#: At most this many sample rows per run in the report (evenly spread; results.json has all).
MAX_TABLE_ROWS = 16


def _spread(items: Sequence[Any], n: int) -> list[Any]:
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


def soak_lines(summary: dict[str, Any]) -> list[str]:
    """The Markdown section of the soak workload (empty when nothing was measured)."""
    if not summary:
        return []
    lines = ["## Workload: soak (steady input through the PostgreSQL exactly-once store)", "",
             "One dk-stream direct stream (local[2]) reads what Kafka's ProducerPerformance writes "
             "at a fixed rate; every batch writes the runs of offsets it read to a sink table and "
             "its offsets in one PostgreSQL transaction (stream.transaction). Samples of the "
             "contender's process tree (driver Python, its JVM, the Python workers; the producer "
             "left out); only the samples after the warm-up and while the producer wrote are "
             f"judged. Memory: median of the last {MEMORY_WINDOW_SECONDS:g} s against the first "
             f"{MEMORY_WINDOW_SECONDS:g} s (a third of the span when shorter), at most "
             f"{MEMORY_GOAL:.0%} growth; counts: the maximum of the last third of the samples "
             "against the first third. Exactly-once: every offset of [start, end) of every "
             "partition in exactly one sink row, the sink total equal to what the producer wrote, "
             "the store's committed offsets equal to the end offsets.", ""]
    for label, e in summary.items():
        p, prod = e["params"], e["producer"]
        lines.append(f"**{label}**: {_num(p.get('minutes'), 1)} min at {_num(p.get('rate'))} records/s "
                     f"(produced {_num(prod.get('records'))} at {_num(prod.get('records_per_s'))}/s), "
                     f"{p.get('interval', 0):g} s batches, {p.get('partitions')} partitions, warm-up "
                     f"{e['warmup_seconds'] / 60:g} min; {e['batches']} batches, {e['samples']} samples "
                     f"every {p.get('sample_seconds', 0):g} s ({e['judged_samples']} judged).")
        lines.append("")
        head = ["figure", "first after warm-up", "last", "change", "met"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for key, name in MEMORY_KEYS:
            m = e["memory"][key]
            met = {True: "yes", False: "NO", None: "not judged"}[m["met"]]
            lines.append(f"| {name} MiB (window medians) | {_num(m['first'], 1)} | {_num(m['last'], 1)} | "
                         f"{_pct(m['growth'])} | {met} |")
        for what, keys in COUNT_GOALS:
            for key, name in keys:
                c = e["counts"][key]
                met = {True: "yes", False: "NO", None: "not judged"}[c["met"]]
                lines.append(f"| {what}, {name} (max first / last third) | {_num(c['first_max'])} | "
                             f"{_num(c['last_max'])} | {_num(c['start'])} -> {_num(c['end'])} | {met} |")
        eo, k = e["exactly_once"], e["kept_up"]
        lines += ["", f"Exactly-once: {'yes' if eo.get('exactly_once') else 'NO'}: "
                      f"{eo.get('stored', 0):,} offsets stored, {eo.get('expected', 0):,} expected, "
                      f"{eo.get('duplicates', 0)} duplicate, {eo.get('missing', 0)} missing"
                      + (f"; {'; '.join(eo['problems'])}" if eo.get("problems") else "")
                      + (f"; first problems: {'; '.join(eo['examples'][:3])}" if eo.get("examples") else "")
                      + ".",
                  f"Kept up: {'yes' if k['met'] else 'NO' if k['met'] is False else 'not judged'}: "
                  f"lag {_num(k['lag_seconds'], 2)} s of input, scheduling delay "
                  f"{_num(k['scheduling_first_ms'])} -> {_num(k['scheduling_last_ms'])} ms, "
                  f"{'drained' if k['drained'] else 'not drained'} in {_num(k['drain_seconds'], 1)} s.", ""]
        samples = e.get("table") or []
        if samples:
            head = ["t s", *[h for _, h, _ in _SAMPLE_COLUMNS]]
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for s in samples:
                cells = [_num(s.get("t"))]
                for column, _, digits in _SAMPLE_COLUMNS:
                    names = (column,) if isinstance(column, str) else column
                    cells.append(" / ".join(_num(s.get(k), digits) for k in names))
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return lines


def soak_status(rec: dict[str, Any]) -> str:
    """One line for the harness's progress output."""
    soak = rec.get("soak") or {}
    entry = summarize_soak([rec]).get(rec.get("contender", ""), {})
    memory = ", ".join(f"{name} {_pct((entry.get('memory') or {}).get(k, {}).get('growth'))}"
                       for k, name in MEMORY_KEYS)
    eo = soak.get("exactly_once") or {}
    return (f"{len(soak.get('samples') or [])} samples, {len(soak.get('batches') or [])} batches; "
            f"memory {memory}; exactly-once {'yes' if eo.get('exactly_once') else 'NO'}")[:600]


def finish_soak(record: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A soak run's record (the harness's ``Runner``): keep ``soak``; ok when it has samples and
    an exactly-once verification (whether it held is a goal, not a failure of the run)."""
    soak = result.get("soak") or {}
    pooled_run(record, result, "soak", "the whole soak, process tree without the producer",
               soak=soak)
    if not soak.get("samples"):
        record["error"] = "the soak took no samples"
        return record
    if not soak.get("exactly_once"):
        record["error"] = "the soak did not verify its sink"
        return record
    record["ok"] = True
    return record

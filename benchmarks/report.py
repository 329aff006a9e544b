"""Statistics, ratios, goal checks and the Markdown table of a benchmark run (pure functions).

Ratios are always computed within one run: ``ratio(A, B)`` is the median of A divided by the
median of B, and ``paired`` gives the range of the per-round ratios A_i / B_i (rounds alternate
contenders, ABCABC, so round i of A and B ran minutes apart under the same conditions). Warm-up
runs and failed runs never enter a statistic.

Latency workloads (``overhead``, ``exactly-once``, ``planning``) report one row of milliseconds per batch and
phase for each configuration of a run (``run["latency"][config]["rows"]``, warm-up batches kept
apart); :func:`summarize_latency` pools the rows of the measured runs and gives p50/p99 per
phase. The ``partitions`` workload runs as sub-workloads ``partitions-p<N>`` (a drain on an
N-partition topic) and is shown as one table across N.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Sequence

from benchmarks.contenders import CLUSTER_SUFFIX, MULTICORE_PREFIX
from benchmarks.report_k2k import check_k2k_goals, k2k_lines, k2k_variants, summarize_k2k
from benchmarks.report_multicore import check_multicore_goals, multicore_lines, summarize_multicore
from benchmarks.report_soak import check_soak_goals, soak_lines, summarize_soak
from benchmarks.report_steady import steady_lines, summarize_steady

__all__ = ["median_spread", "summarize", "ratio", "paired_ratios", "GOALS", "check_goals",
           "markdown_report", "RATIO_BASELINES", "percentile", "latency_stats", "summarize_latency",
           "check_latency_goals", "check_steady_state", "all_goals", "partition_counts_of",
           "check_partition_goals", "PARTITION_GOALS",
           "LATENCY_PHASES", "OVERHEAD_GOAL_MS", "EXACTLY_ONCE_GOAL_MS", "PLANNING_GOAL_MS",
           "check_planning_goals", "growth_exponent"]

#: Metrics summarized per (workload, contender); higher is better only for the first two.
METRICS = ("records_per_s", "mb_per_s", "cpu_s_per_million", "peak_rss_driver_mb",
           "peak_rss_workers_mb")

#: For each workload, the baselines every contender is divided by in the table.
RATIO_BASELINES = {
    "drain": ("raw-kafka-python", "raw-confluent", "ss-batch", "java-dstream-rdd", "kafka-perf"),
    "json": ("raw-kafka-python", "ss-udf", "ss-native"),
    "partitions": ("ss-batch", "raw-kafka-python", "raw-confluent"),
}

#: Phases shown per latency workload, in table order (milliseconds per batch).
LATENCY_PHASES = {
    "overhead": ("plan", "plan_offsets", "plan_rdd", "queue", "job_launch", "job_tasks",
                 "job_return", "output", "commit", "other", "work", "total"),
    "exactly-once": ("plan", "job", "user_writes", "plain_tx", "tx_open", "tx_close", "store_plan",
                     "store_commit", "commit", "store_cost", "eo_extra"),
    "planning": ("plan", "plan_offsets", "plan_rdd", "commit", "total"),
}
#: Memory and connection figures of the planning rows (p50 shown).
PLANNING_RESOURCES = (("driver_py_mb", "driver Python MiB"), ("driver_jvm_mb", "driver JVM MiB"),
                      ("workers_mb", "Python workers MiB"), ("driver_tcp", "driver TCP connections"))

#: The issue's latency goals (milliseconds, p50).
OVERHEAD_GOAL_MS = 60.0
EXACTLY_ONCE_GOAL_MS = 5.0
#: Planning: p50 per batch at the largest partition count (1,000 by default).
PLANNING_GOAL_MS = 50.0

#: The issue's throughput goals: (workload, contender, baseline, minimum ratio, label). A drain
#: is compared with the raw client loop of the *same* backend: dk-* read with kafka-python,
#: dk-*-fast with confluent-kafka (``spark.streaming.kafka.consumer.backend``).
GOALS = (
    ("drain", "dk-rdd", "raw-kafka-python", 0.9,
     "createRDD drain >= 0.9x the raw loop of the same backend (kafka-python)"),
    ("drain", "dk-rdd-fast", "raw-confluent", 0.9,
     "createRDD drain, fast backend >= 0.9x the raw loop of the same backend (confluent-kafka)"),
    ("drain", "dk-rdd-fast", "ss-batch", 1.0, "drain, fast backend >= 1.0x Structured Streaming count"),
    ("drain", "dk-stream", "raw-kafka-python", 0.7,
     "streaming drain >= 0.7x the raw loop of the same backend (kafka-python)"),
    ("drain", "dk-stream-fast", "raw-confluent", 0.7,
     "streaming drain, fast backend >= 0.7x the raw loop of the same backend (confluent-kafka)"),
    ("drain", "dk-rdd-fast", "dk-rdd", 1.0, "createRDD drain: the fast backend is the faster one"),
    ("drain", "dk-stream-fast", "dk-stream", 1.0,
     "streaming drain: the fast backend is the faster one"),
    ("json", "dk-rdd-fast", "dk-rdd", 1.0, "json: the fast backend is the faster one (createRDD)"),
    ("json", "dk-stream-fast", "dk-stream", 1.0,
     "json: the fast backend is the faster one (streaming)"),
    ("drain", "dk-stream-fast", "ss-stream", 1.0,
     "streaming drain, fast backend >= 1.0x Structured Streaming availableNow"),
    ("json", "dk-rdd", "ss-udf", 1.5, "Python per-record function >= 1.5x SS Python UDF"),
    ("drain", "dk-df-fast", "ss-batch", 2.0,
     "DataFrame drain, fast backend >= 2x Structured Streaming batch count"),
    ("drain", "dk-df-parquet-fast", "ss-parquet", 2.0,
     "DataFrame to Parquet, fast backend >= 2x Structured Streaming batch to Parquet"),
    ("drain", "dk-df-fast", "java-dstream-rdd", 1.0,
     "DataFrame drain, fast backend >= 1.0x Spark's JVM createRDD"),
    ("drain", "dk-df-fast", "dk-df", 1.0, "DataFrame drain: the fast backend is the faster one"),
)
#: The drain goals checked again at every partition count of the ``partitions`` workload.
PARTITION_GOALS = tuple(g for g in GOALS if g[0] == "drain" and g[1].startswith("dk-rdd"))
#: Workloads in report order (goal lines are grouped by it).
WORKLOAD_ORDER = ("drain", "json", "overhead", "steady", "k2k", "exactly-once", "partitions",
                  "planning", "multicore", "soak")


def median_spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """Return median, min, max and relative spread ``(max - min) / median`` of ``values``."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None}
    med = statistics.median(vals)
    spread = (max(vals) - min(vals)) / med if med else None
    return {"n": len(vals), "median": med, "min": min(vals), "max": max(vals), "spread": spread}


def _measured(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("ok") and not r.get("warmup")]


def _is_latency(run: dict[str, Any]) -> bool:
    """Latency, steady and soak runs have no throughput figures: they stay out of :func:`summarize`."""
    return run.get("kind") in ("latency", "steady", "soak", "k2k") or "latency" in run or "steps" in run


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Return ``{workload: {contender: {metric: median_spread(...)}}}`` over measured throughput runs."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in _measured(runs):
        if _is_latency(run):
            continue
        out.setdefault(run["workload"], {}).setdefault(run["contender"], {"_runs": []})["_runs"].append(run)
    for by_contender in out.values():
        for name, entry in by_contender.items():
            runs_of = entry.pop("_runs")
            for metric in METRICS:
                entry[metric] = median_spread([r.get(metric) for r in runs_of])
    return out


def ratio(summary: dict[str, Any], workload: str, a: str, b: str,
          metric: str = "records_per_s") -> float | None:
    """Median of ``a`` over median of ``b`` for ``metric`` in ``workload``; None if either is missing."""
    try:
        num = summary[workload][a][metric]["median"]
        den = summary[workload][b][metric]["median"]
    except KeyError:
        return None
    if num is None or not den:
        return None
    return num / den


def paired_ratios(runs: Sequence[dict[str, Any]], workload: str, a: str, b: str,
                  metric: str = "records_per_s") -> list[float]:
    """Per-round ratios ``a_i / b_i`` for the rounds where both ran successfully."""
    by_round: dict[int, dict[str, float]] = {}
    for r in _measured(runs):
        if r["workload"] == workload and r["contender"] in (a, b) and r.get(metric):
            by_round.setdefault(r["round"], {})[r["contender"]] = r[metric]
    return [v[a] / v[b] for _, v in sorted(by_round.items()) if a in v and b in v and v[b]]


def check_goals(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Evaluate :data:`GOALS`; a goal whose sides were not both measured has ``met`` None."""
    rows = []
    for workload, a, b, minimum, label in GOALS:
        value = ratio(summary, workload, a, b)
        rows.append({"goal": label, "workload": workload, "contender": a, "baseline": b,
                     "minimum": minimum, "ratio": value,
                     "met": None if value is None else value >= minimum})
    return rows


def check_partition_goals(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The drain goals of :data:`PARTITION_GOALS` at every partition count: the worst count decides."""
    counts = partition_counts_of(summary)
    rows = []
    for _, a, b, minimum, label in PARTITION_GOALS:
        values = [(ratio(summary, f"partitions-p{n}", a, b), n) for n in counts]
        values = [(v, n) for v, n in values if v is not None]
        if not counts:
            continue
        row = {"goal": f"{label}, at every partition count", "workload": "partitions",
               "contender": a, "baseline": b, "minimum": minimum, "ratio": None, "met": None}
        if values:
            worst, at = min(values)
            per_count = ", ".join(f"p={n}: {v:.2f}x" for v, n in sorted(values, key=lambda x: x[1]))
            row.update(value=worst, measured=f"{per_count} (worst at p={at})", met=worst >= minimum)
        rows.append(row)
    return rows


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _ratio_cell(summary: dict[str, Any], runs: Sequence[dict[str, Any]], workload: str,
                a: str, b: str) -> str:
    value = ratio(summary, workload, a, b)
    if value is None:
        return "–"
    if a == b:
        return "1.00"
    paired = paired_ratios(runs, workload, a, b)
    if len(paired) > 1:
        return f"{value:.2f} ({min(paired):.2f}–{max(paired):.2f})"
    return f"{value:.2f}"


def markdown_report(runs: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Return the whole Markdown report: conditions, one table per workload, goals, failures."""
    summary = summarize(runs)
    lines = ["# dstream_kafka benchmark", ""]
    machine = meta.get("machine", {})
    lines.append(f"Machine: {machine.get('nproc')} cores, {machine.get('memory_gib')} GiB, "
                 f"{machine.get('cpu')}; load at start {machine.get('load_average_at_start')}.  ")
    lines.append(f"Data: {meta.get('records'):,} records x {meta.get('value_bytes')} B values, "
                 f"{meta.get('partitions')} partitions; {meta.get('repetitions')} measured "
                 f"repetition(s) after {meta.get('warmup')} warm-up round(s), contenders alternating "
                 f"(ABCABC); overhead, steady and exactly-once: {meta.get('batch_repetitions', 1)} "
                 "round(s) pooling their batches, no warm-up round (each run drops its own warm-up "
                 "batches). Medians; spread = (max-min)/median; ratio ranges are per-round pairs.")
    options = meta.get("workload_options") or {}
    if options:
        lines.append("  \n" + "; ".join(f"{k}: {v}" for k, v in options.items()) + ".")
    if meta.get("quick"):
        lines.append("  \n**Quick run: few batches and one repetition; the figures are indicative only.**")
    if meta.get("interrupted"):
        lines.append(f"  \n**Stopped early ({meta['interrupted']}).**")
    lines.append("")
    for workload, by_contender in summary.items():
        if workload.startswith("partitions-p"):
            continue  # one table across partition counts, below
        bases = [b for b in RATIO_BASELINES.get(workload, ()) if b in by_contender]
        lines.append(f"## Workload: {workload}")
        lines.append("")
        head = ["contender", "records/s", "spread", "MB/s", "CPU s / M rec", "peak RSS driver MiB",
                "peak RSS workers MiB", *[f"x {b}" for b in bases]]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        order = sorted(by_contender, key=lambda c: -(by_contender[c]["records_per_s"]["median"] or 0))
        for name in order:
            m = by_contender[name]
            spread = m["records_per_s"]["spread"]
            cells = [name, _fmt(m["records_per_s"]["median"]),
                     "–" if spread is None else f"{spread:.0%}",
                     _fmt(m["mb_per_s"]["median"], 1), _fmt(m["cpu_s_per_million"]["median"], 2),
                     _fmt(m["peak_rss_driver_mb"]["median"]), _fmt(m["peak_rss_workers_mb"]["median"]),
                     *[_ratio_cell(summary, runs, workload, name, b) for b in bases]]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += _partitions_lines(summary, runs)
    latency = summarize_latency(runs)
    if latency.get("overhead"):
        lines += _overhead_lines(latency["overhead"])
    steady = summarize_steady(runs)
    if steady:
        lines += steady_lines(steady, meta.get("steady_interval"))
    if latency.get("exactly-once"):
        lines += _exactly_once_lines(latency["exactly-once"])
    if latency.get("planning"):
        lines += _planning_lines(latency["planning"])
    lines += multicore_lines(summarize_multicore(runs))
    lines += soak_lines(summarize_soak(runs))
    lines += k2k_lines(k2k_variants(runs), meta.get("k2k") or {})
    goals = all_goals(runs)
    if goals:
        lines += ["## Goals", "", "Checked by the harness, never asserted by a test. not measured: one "
                  "side of the goal was not selected or failed (see Failed runs).", "",
                  "| workload | goal | measured | met |", "|---|---|---|---|"]
        for g in goals:
            measured = f"{g['ratio']:.2f}x" if g.get("ratio") is not None else g.get("measured", "–")
            met = {True: "yes", False: "NO", None: "not measured"}[g["met"]]
            lines.append(f"| {g['workload']} | {g['goal']} | {measured} | {met} |")
        lines.append("")
    cache_lines = _cache_lines(runs)
    if cache_lines:
        lines += ["## dstream_kafka consumer cache (median over measured runs)", "",
                  "| workload | contender | creations first batch | creations after first | "
                  "seeks after first | batches |", "|---|---|---|---|---|---|", *cache_lines, ""]
    failed = [r for r in runs if not r.get("ok")]
    config_errors = [(r, c, d["error"]) for r in runs for c, d in (r.get("latency") or {}).items()
                     if isinstance(d, dict) and d.get("error")]
    if failed or config_errors:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines.append(f"- {r['workload']} / {r['contender']} round {r['round']}: "
                         f"{str(r.get('error', '')).splitlines()[0][:300] if r.get('error') else '?'}")
        for r, config, error in config_errors:
            lines.append(f"- {r['workload']} / {r['contender']} {config} round {r['round']}: "
                         f"{str(error).splitlines()[0][:300]}")
        lines.append("")
    return "\n".join(lines)


def _cache_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in _measured(runs):
        cache = (r.get("extra") or {}).get("cache")
        if cache:
            groups.setdefault((r["workload"], r["contender"]), []).append(cache)
        for config, data in (r.get("latency") or {}).items():
            cache = data.get("cache") if isinstance(data, dict) else None
            if cache and cache.get("batches") and r["workload"] != "overhead":  # idle: no consumers
                groups.setdefault((r["workload"], f"{r['contender']} {config}"), []).append(cache)
    out = []
    for (workload, name), caches in sorted(groups.items()):
        def med(get: Any) -> str:
            vals = [get(c) for c in caches]
            vals = [v for v in vals if v is not None]
            return _fmt(statistics.median(vals), 1) if vals else "–"
        out.append(f"| {workload} | {name} | "
                   f"{med(lambda c: c.get('first_batch', {}).get('creations'))} | "
                   f"{med(lambda c: c.get('after_first_total', {}).get('creations'))} | "
                   f"{med(lambda c: c.get('after_first_total', {}).get('seeks'))} | "
                   f"{med(lambda c: c.get('batches'))} |")
    return out


# ---------------------------------------------------------------------------------------------
# Latency workloads


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the ``q``-th percentile (0-100) of ``values`` with linear interpolation; None if empty.

    The same definition as ``numpy.percentile(..., method="linear")``: rank ``(n - 1) * q / 100``.
    """
    vals = sorted(float(v) for v in values if v is not None)
    if not vals:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q!r}")
    rank = (len(vals) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(vals) - 1)
    return vals[low] + (vals[high] - vals[low]) * (rank - low)


def latency_stats(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Return n, p50, p99, mean and max of ``values`` (None entries are ignored)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"n": 0, "p50": None, "p99": None, "mean": None, "max": None}
    return {"n": len(vals), "p50": percentile(vals, 50), "p99": percentile(vals, 99),
            "mean": sum(vals) / len(vals), "max": max(vals)}


def summarize_latency(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pool the per-batch rows of every measured run per (workload, contender, configuration).

    Returns ``{workload: {contender: {config: {"params", "batches", "runs", "phases":
    {phase: latency_stats}, "errors", "verified"}}}}``. A configuration that failed in a run
    adds its error and no rows.
    """
    pooled: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for run in _measured(runs):
        for config, data in (run.get("latency") or {}).items():
            entry = pooled.setdefault(run["workload"], {}).setdefault(run["contender"], {}).setdefault(
                config, {"params": data.get("params", {}), "rows": [], "runs": 0, "errors": [],
                         "verified": []})
            if data.get("error"):
                entry["errors"].append(data["error"])
                continue
            entry["runs"] += 1
            entry["rows"].extend(data.get("rows") or [])
            entry["capped"] = bool(entry.get("capped")) or bool(data.get("capped"))
            if data.get("verified") is not None:
                entry["verified"].append(data["verified"])
    out: dict[str, Any] = {}
    for workload, by_contender in pooled.items():
        for contender, configs in by_contender.items():
            for config, entry in configs.items():
                rows = entry.pop("rows")
                phases = sorted({k for row in rows for k, v in row.items()
                                 if isinstance(v, (int, float)) and k not in ("batch_time", "batch_id")})
                entry["batches"] = len(rows)
                entry["phases"] = {ph: latency_stats([row.get(ph) for row in rows]) for ph in phases}
                out.setdefault(workload, {}).setdefault(contender, {})[config] = entry
    return out


def _p50(entry: dict[str, Any], phase: str) -> float | None:
    return ((entry.get("phases") or {}).get(phase) or {}).get("p50")


def check_latency_goals(latency: dict[str, Any]) -> list[dict[str, Any]]:
    """The latency goals: empty-batch overhead p50 <= 60 ms at every interval (per output of
    ``dk-stream``), and the PostgreSQL exactly-once store cost p50 <= 5 ms per batch."""
    rows: list[dict[str, Any]] = []
    by_output: dict[str, list[tuple[float, float]]] = {}
    for config, entry in (latency.get("overhead", {}).get("dk-stream") or {}).items():
        value = _p50(entry, "total")
        if value is not None:
            params = entry.get("params", {})
            by_output.setdefault(params.get("output", config), []).append((value, params.get("interval")))
    for output, values in sorted(by_output.items()):
        worst, interval = max(values, key=lambda v: v[0])
        per_interval = ", ".join(f"{i:g} s: {v:.0f}" for v, i in sorted(values, key=lambda v: v[1]))
        rows.append({"goal": f"empty-batch overhead p50 <= {OVERHEAD_GOAL_MS:.0f} ms "
                             f"(dk-stream, output {output}, every interval)",
                     "workload": "overhead", "contender": "dk-stream", "value": worst,
                     "limit": OVERHEAD_GOAL_MS,
                     "measured": f"p50 total ms per interval: {per_interval} (worst at {interval:g} s)",
                     "met": worst <= OVERHEAD_GOAL_MS})
    rows += check_planning_goals(latency)
    entry = (latency.get("exactly-once", {}).get("dk-stream") or {}).get("postgres-tx")
    if entry is not None and _p50(entry, "store_cost") is not None:
        value = _p50(entry, "store_cost")
        p99 = entry["phases"]["store_cost"]["p99"]
        rows.append({"goal": f"PostgreSQL exactly-once commit <= {EXACTLY_ONCE_GOAL_MS:.0f} ms per batch "
                             "(p50 of transaction entry + exit + post-batch check)",
                     "workload": "exactly-once", "contender": "dk-stream", "value": value,
                     "limit": EXACTLY_ONCE_GOAL_MS, "measured": f"{value:.2f} ms (p99 {p99:.2f} ms)",
                     "met": value <= EXACTLY_ONCE_GOAL_MS})
    return rows


def _planning_points(latency: dict[str, Any]) -> list[tuple[int, float, str]]:
    """``(partitions, plan p50, config)`` of dk-stream's one-topic planning configurations."""
    points = []
    for config, entry in (latency.get("planning", {}).get("dk-stream") or {}).items():
        params, value = entry.get("params", {}), _p50(entry, "plan")
        if value is not None and params.get("strategy") == "Subscribe" and params.get("partitions"):
            points.append((int(params["partitions"]), value, config))
    return sorted(points)


def growth_exponent(points: Sequence[tuple[int, float]]) -> float | None:
    """The exponent k of ``plan ~ partitions ** k`` from the smallest to the largest count:
    below 1 the planning grows sub-linearly. None with fewer than two counts or a zero time."""
    if len(points) < 2 or points[0][0] == points[-1][0] or min(points[0][1], points[-1][1]) <= 0:
        return None
    (n0, t0), (n1, t1) = points[0][:2], points[-1][:2]
    return math.log(t1 / t0) / math.log(n1 / n0)


def check_planning_goals(latency: dict[str, Any]) -> list[dict[str, Any]]:
    """The planning goals: p50 planning per batch <= 50 ms at the largest partition count, and
    growth below linear from the smallest count to the largest."""
    points = _planning_points(latency)
    if not points:
        return []
    shown = ", ".join(f"{n:,}: {v:.1f}" for n, v, _ in points)
    largest, value, _ = points[-1]
    rows = [{"goal": f"planning p50 <= {PLANNING_GOAL_MS:.0f} ms per batch at {largest:,} partitions "
                     "(dk-stream, Subscribe)", "workload": "planning", "contender": "dk-stream",
             "value": value, "limit": PLANNING_GOAL_MS,
             "measured": f"p50 plan ms by partitions: {shown}", "met": value <= PLANNING_GOAL_MS}]
    k = growth_exponent([(n, v) for n, v, _ in points])
    if k is not None:
        # A fixed cost flattens the whole span; the two largest counts show the per-partition part.
        top = growth_exponent([(n, v) for n, v, _ in points[-2:]])
        worst = max(k, top if top is not None else k)
        measured = (f"k = {k:.2f} ({points[-1][1] / points[0][1]:.1f}x the time for "
                    f"{largest / points[0][0]:,.0f}x the partitions)")
        if top is not None and len(points) > 2:
            measured += f"; {points[-2][0]:,} to {largest:,}: k = {top:.2f}"
        rows.append({"goal": "planning grows sub-linearly with partitions (plan ~ partitions^k, k < 1, "
                             f"{points[0][0]:,} to {largest:,} and between the two largest counts)",
                     "workload": "planning", "contender": "dk-stream", "value": worst, "limit": 1.0,
                     "measured": measured, "met": worst < 1.0})
    return rows


def _planning_lines(latency: dict[str, Any]) -> list[str]:
    phases = LATENCY_PHASES["planning"]
    lines = ["## Workload: planning (the driver's work per batch, ms: p50 / p99)", "",
             "One direct stream per configuration over idle topics: Subscribe to one topic of N "
             "partitions, or SubscribePattern over many topics. plan = planMs (latest offsets of "
             "every partition, rate limits, the RDD of one Spark partition per Kafka partition); "
             "plan_offsets = the latest-offset look-up within it, plan_rdd = the RDD's creation; "
             "commit = commitMs (commitAsync of every range); total = batch time to the batch's "
             "progress report. Memory and connections: p50 of one sample per batch.", ""]
    head = ["contender", "config", "strategy", "topics", "partitions", "batches", *phases,
            *[label for _, label in PLANNING_RESOURCES]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for contender in sorted(latency):
        configs = latency[contender]
        for config in sorted(configs, key=lambda k: (configs[k]["params"].get("strategy", ""),
                                                     configs[k]["params"].get("partitions", 0))):
            entry = configs[config]
            params = entry.get("params", {})
            if entry.get("errors") and not entry.get("batches"):
                lines.append(f"| {contender} | {config} | FAILED: "
                             f"{str(entry['errors'][0]).splitlines()[0][:160]} |")
                continue
            cells = [contender, config, str(params.get("strategy", "–")), str(params.get("topics", "–")),
                     f"{params.get('partitions', 0):,}",
                     str(entry.get("batches", 0)) + (" (capped)" if entry.get("capped") else ""),
                     *[_cell(entry, ph) for ph in phases],
                     *[_fmt(_p50(entry, key), 0) for key, _ in PLANNING_RESOURCES]]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _cache_summaries(runs: Sequence[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every consumer cache summary of the measured dk-stream runs: (workload, label, summary)."""
    found = []
    for r in _measured(runs):
        if not str(r.get("contender")).startswith("dk-stream"):
            continue
        cache = (r.get("extra") or {}).get("cache")
        if cache and cache.get("batches", 0) > 1:
            found.append((r["workload"], r["contender"], cache))
        for config, data in (r.get("latency") or {}).items():
            cache = data.get("cache") if isinstance(data, dict) else None
            if cache and cache.get("batches", 0) > 1 and r["workload"] != "overhead":
                found.append((r["workload"], f"{r['contender']} {config}", cache))
    return found


def check_steady_state(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Goal: zero consumer creations and zero seeks per batch after the first, one line per
    workload and deployment (local[2], or the standalone cluster of ``*-cluster`` contenders)
    with dk-stream runs that read data in more than one batch."""
    by_workload: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for workload, label, cache in _cache_summaries(runs):
        if workload.startswith(MULTICORE_PREFIX):
            continue  # check_multicore_goals judges K-core executors
        where = ("standalone 2 x 1-core executors" if label.split()[0].endswith(CLUSTER_SUFFIX)
                 else "local[2]")
        by_workload.setdefault((workload, where), []).append((label, cache))
    rows = []
    for (workload, where), found in sorted(by_workload.items(),
                                           key=lambda kv: (_workload_rank(kv[0][0]), kv[0][1])):
        creations = sum(c.get("after_first_total", {}).get("creations", 0) for _, c in found)
        seeks = sum(c.get("after_first_total", {}).get("seeks", 0) for _, c in found)
        batches = sum(max(c.get("batches", 1) - 1, 0) for _, c in found)
        offenders = sorted({label for label, c in found
                            if c.get("after_first_total", {}).get("creations", 0)
                            or c.get("after_first_total", {}).get("seeks", 0)})
        measured = f"{creations} creations, {seeks} seeks in {batches} batches after the first"
        if offenders:
            measured += " (" + ", ".join(offenders[:4]) + ("..." if len(offenders) > 4 else "") + ")"
        rows.append({"goal": "steady state: zero consumer creations and zero seeks per batch after "
                             f"the first ({where})", "workload": workload,
                     "contender": ",".join(sorted({label.split()[0] for label, _ in found})),
                     "value": creations + seeks, "limit": 0, "measured": measured,
                     "met": creations == 0 and seeks == 0})
    return rows


def _workload_rank(workload: str) -> int:
    base = ("partitions" if workload.startswith("partitions")
            else "multicore" if workload.startswith(MULTICORE_PREFIX) else workload)
    return WORKLOAD_ORDER.index(base) if base in WORKLOAD_ORDER else len(WORKLOAD_ORDER)


def all_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every goal of the workloads that ran, grouped by workload: throughput ratios (``met`` None
    when a side is missing), the partition-count goals, latencies, the consumer steady state."""
    summary = summarize(runs)
    ran = {r["workload"] for r in runs}
    goals = ([g for g in check_goals(summary) if g["workload"] in ran]
             + check_partition_goals(summary)
             + check_latency_goals(summarize_latency(runs)) + check_steady_state(runs)
             + check_soak_goals(runs) + check_multicore_goals(summarize_multicore(runs))
             + check_k2k_goals(summarize_k2k(k2k_variants(runs))))
    return sorted(goals, key=lambda g: _workload_rank(g["workload"]))  # stable: keeps goal order


def partition_counts_of(workloads: Iterable[str]) -> list[int]:
    """The N of every ``partitions-p<N>`` sub-workload, ascending."""
    counts = set()
    for w in workloads:
        if w.startswith("partitions-p") and w[len("partitions-p"):].isdigit():
            counts.add(int(w[len("partitions-p"):]))
    return sorted(counts)


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cell(entry: dict[str, Any], phase: str) -> str:
    st = (entry.get("phases") or {}).get(phase)
    if not st or st.get("n", 0) == 0:
        return "–"
    return f"{_ms(st['p50'])} / {_ms(st['p99'])}"


def _overhead_ratio(latency: dict[str, Any], entry: dict[str, Any], rival: str) -> str:
    """dk-stream's p50 work over the rival's at the same interval (and output, for Java).

    Work (the batch's own cost), not total: a stream that falls behind has a total that grows
    with the length of the run.
    """
    params = entry.get("params", {})
    mine = _p50(entry, "work")
    for other in (latency.get(rival) or {}).values():
        op = other.get("params", {})
        if op.get("interval") != params.get("interval"):
            continue
        if rival != "ss-stream" and op.get("output") != params.get("output"):
            continue
        if _backlogged(entry) or _backlogged(other):
            return "(backlog)"  # a backlogged stream's plan and output include its queue
        theirs = _p50(other, "work")
        if mine is not None and theirs:
            return f"{mine / theirs:.2f}"
    return "–"


def _backlogged(entry: dict[str, Any]) -> bool:
    """True when the stream could not keep up (p50): batches waited in the queue for more than
    half an interval, or planning started more than an interval late (Spark's JobGenerator lags
    show in its plan = submission - batch time). Its total then grows with the run's length."""
    interval = (entry.get("params") or {}).get("interval")
    if not interval:
        return False
    queue, plan = _p50(entry, "queue"), _p50(entry, "plan")
    late_queue = queue is not None and queue > interval * 500.0
    return late_queue or (plan is not None and plan > interval * 1000.0)


def _overhead_lines(latency: dict[str, Any]) -> list[str]:
    phases = LATENCY_PHASES["overhead"]
    rivals = [r for r in ("java-dstream-stream", "ss-stream") if r in latency]
    head = ["contender", "output", "interval s", "batches", *phases, *[f"work x {r}" for r in rivals]]
    lines = ["## Workload: overhead (empty batches, ms per batch: p50 / p99)", "",
             "Idle 4-partition topic, no offset store. dstream_kafka: plan = planMs, queue = "
             "schedulingDelay, output = processingDelay (1 ms resolution), job_* = the Spark job "
             "of the output split by task-side clocks, commit = commitMs (sending commitAsync's "
             "Kafka commit; the batch does not wait for the answer), other = timer lag + job generation + hand-offs, work = plan + output + commit "
             "(the batch's own cost), total = batch time to progress reported (after the commit); "
             "plan_offsets / plan_rdd = latestOffsets() / RDD creation inside plan, timed on the "
             "stream instance. (backlog): batches queued longer than half an interval (or, for "
             "Java, planned more than an interval late): the stream fell behind and total "
             "includes the growing wait; (capped): such a configuration stopped once twice its "
             "planned length had passed and 3 batches were measured. Spark's Java DStream: "
             "plan = submission - batch time (includes the previous batch's commitAsync, which "
             "kafka010 sends while planning), total = processing end - batch time. Structured "
             "Streaming runs no micro-batch on an idle topic: its row is the idle trigger "
             "(plan = latestOffset, total = triggerExecution).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = ("dk-stream", "java-dstream-stream", "ss-stream")
    for contender in sorted(latency, key=lambda c: (order.index(c) if c in order else 9, c)):
        configs = latency[contender]
        for config in sorted(configs, key=lambda k: (configs[k]["params"].get("output", ""),
                                                     configs[k]["params"].get("interval", 0))):
            entry = configs[config]
            params = entry.get("params", {})
            interval = params.get("interval")
            cells = [contender, str(params.get("output", config)),
                     "–" if interval is None else f"{interval:g}",
                     str(entry.get("batches", 0)) + (" (capped)" if entry.get("capped") else ""),
                     *[_cell(entry, ph) + (" (backlog)" if ph == "total" and _backlogged(entry) else "")
                       for ph in phases],
                     *[_overhead_ratio(latency, entry, r) if contender == "dk-stream" else "–"
                       for r in rivals]]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _exactly_once_lines(latency: dict[str, Any]) -> list[str]:
    phases = LATENCY_PHASES["exactly-once"]
    lines = ["## Workload: exactly-once (offset store cost, ms per batch: p50 / p99)", "",
             "One direct stream per store over the same topic, ~1,000 records a batch over 4 "
             "partitions, each batch one Spark job computing a per-partition aggregate. "
             "store_plan / store_commit = the store's own plan() (write-ahead) and commit() or "
             "committed_in() calls, timed on the store instance; commit = commitMs (store commit + "
             "commitAsync, as the stream reports it); *-tx: the aggregate is written inside "
             "stream.transaction(time): tx_open = BEGIN + lock + checks, user_writes = the "
             "executemany, tx_close = offset update + COMMIT; plain_tx = the same rows in the user's "
             "own transaction on a second connection (no offsets), for comparison. store_cost = "
             "store_plan + store_commit + tx_open + tx_close (kafka-commitAsync: commitMs); eo_extra = "
             "tx_total + store_commit - plain_tx in the same batch: what exactly-once adds over "
             "writing the same rows in a plain transaction. ss-stream checkpoint: Structured "
             "Streaming on the same topic and interval (maxOffsetsPerTrigger 1,000, foreachBatch "
             "aggregate); its store_cost = walCommit + commitOffsets, the rival of the checkpoint "
             "store. The test PostgreSQL runs with fsync=off "
             "and synchronous_commit=off, so no figure includes a disk flush.", ""]
    rival = latency.get("ss-stream") or {}
    head = ["contender", "store", "batches", *phases, "exactly once",
            *(["store_cost x ss-stream"] if rival else [])]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = ("dk-stream", "ss-stream")
    for contender in sorted(latency, key=lambda c: (order.index(c) if c in order else 9, c)):
        configs = latency[contender]
        for config, entry in configs.items():
            verified = entry.get("verified") or []
            check = "–"
            if verified:
                ok = all(v.get("exactly_once") for v in verified)
                check = ("yes" if ok else "NO") + f" ({sum(v.get('records', 0) for v in verified):,} rec)"
            if entry.get("errors") and not entry.get("batches"):
                check = "FAILED: " + str(entry["errors"][0]).splitlines()[0][:120]
            cells = [contender, config, str(entry.get("batches", 0)),
                     *[_cell(entry, ph) for ph in phases], check]
            if rival:
                mine, theirs = _p50(entry, "store_cost"), _p50(rival.get(config, {}), "store_cost")
                same = contender != "ss-stream" and mine is not None and theirs
                cells.append(f"{mine / theirs:.2f}" if same else "–")
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _partitions_lines(summary: dict[str, Any], runs: Sequence[dict[str, Any]]) -> list[str]:
    counts = partition_counts_of(summary)
    if not counts:
        return []
    names = sorted({c for n in counts for c in summary.get(f"partitions-p{n}", {})},
                   key=lambda c: -(summary.get(f"partitions-p{counts[-1]}", {}).get(c, {})
                                   .get("records_per_s", {}).get("median") or 0))
    head = ["contender", *[f"p={n} records/s" for n in counts]]
    lines = ["## Workload: partitions (drain records/s by partition count)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        cells = [name] + [_fmt(summary.get(f"partitions-p{n}", {}).get(name, {})
                                .get("records_per_s", {}).get("median")) for n in counts]
        lines.append("| " + " | ".join(cells) + " |")
    for base in RATIO_BASELINES["partitions"]:
        if "dk-rdd" not in names or base not in names:
            continue
        cells = [f"dk-rdd x {base}"] + [_ratio_cell(summary, runs, f"partitions-p{n}", "dk-rdd", base)
                                        for n in counts]
        lines.append("| " + " | ".join(cells) + " |")
    for name in (n for n in names if n.startswith("dk-")):
        for key, label in PARTITION_RESOURCES:
            cells = [f"{name}: {label}"] + [_resource_cell(runs, f"partitions-p{n}", name, key)
                                            for n in counts]
            lines.append("| " + " | ".join(cells) + " |")
        for metric, label in (("peak_rss_driver_mb", "peak RSS driver MiB"),
                              ("peak_rss_workers_mb", "peak RSS workers MiB")):
            cells = [f"{name}: {label}"] + [_fmt(summary.get(f"partitions-p{n}", {}).get(name, {})
                                                 .get(metric, {}).get("median")) for n in counts]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


#: The executor's figures of a drain (``extra["cache"]["resources"]``), medians per count.
PARTITION_RESOURCES = (("consumers_cached", "consumers cached in the executor"),
                       ("tcp_connections", "TCP connections of the executor's workers"))


def _resource_cell(runs: Sequence[dict[str, Any]], workload: str, contender: str, key: str) -> str:
    vals = [((r.get("extra") or {}).get("cache") or {}).get("resources", {}).get(key)
            for r in _measured(runs) if r["workload"] == workload and r["contender"] == contender]
    vals = [v for v in vals if v is not None]
    return _fmt(statistics.median(vals)) if vals else "–"

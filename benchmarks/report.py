"""Statistics, ratios, goal checks and the Markdown table of a benchmark run (pure functions).

Ratios are always computed within one run: ``ratio(A, B)`` is the median of A divided by the
median of B, and ``paired`` gives the range of the per-round ratios A_i / B_i (rounds alternate
contenders, ABCABC, so round i of A and B ran minutes apart under the same conditions). Warm-up
runs and failed runs never enter a statistic.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Sequence

__all__ = ["median_spread", "summarize", "ratio", "paired_ratios", "GOALS", "check_goals",
           "markdown_report", "RATIO_BASELINES"]

#: Metrics summarized per (workload, contender); higher is better only for the first two.
METRICS = ("records_per_s", "mb_per_s", "cpu_s_per_million", "peak_rss_driver_mb",
           "peak_rss_workers_mb")

#: For each workload, the baselines every contender is divided by in the table.
RATIO_BASELINES = {
    "drain": ("raw-kafka-python", "raw-confluent", "ss-batch", "java-dstream-rdd", "kafka-perf"),
    "json": ("raw-kafka-python", "ss-udf", "ss-native"),
}

#: The issue's throughput goals: (workload, contender, baseline, minimum ratio, label).
GOALS = (
    ("drain", "dk-rdd", "raw-kafka-python", 0.8, "drain >= 0.8x raw client loop (kafka-python)"),
    ("drain", "dk-stream", "raw-kafka-python", 0.8, "streaming drain >= 0.8x raw loop (kafka-python)"),
    ("drain", "dk-rdd", "ss-batch", 1.0, "drain >= 1.0x Structured Streaming count (fast backend)"),
    ("drain", "dk-stream", "ss-stream", 1.0, "streaming drain >= 1.0x SS availableNow (fast backend)"),
    ("json", "dk-rdd", "ss-udf", 1.5, "Python per-record function >= 1.5x SS Python UDF"),
)


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


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Return ``{workload: {contender: {metric: median_spread(...)}}}`` over measured runs."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in _measured(runs):
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
    """Evaluate :data:`GOALS` that both sides were measured for."""
    rows = []
    for workload, a, b, minimum, label in GOALS:
        value = ratio(summary, workload, a, b)
        rows.append({"goal": label, "workload": workload, "contender": a, "baseline": b,
                     "minimum": minimum, "ratio": value,
                     "met": None if value is None else value >= minimum})
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
                 "(ABCABC). Medians; spread = (max-min)/median; ratio ranges are per-round pairs.")
    lines.append("")
    for workload, by_contender in summary.items():
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
    goals = [g for g in check_goals(summary) if g["ratio"] is not None]
    if goals:
        lines += ["## Goals", "", "| goal | measured | met |", "|---|---|---|"]
        for g in goals:
            lines.append(f"| {g['goal']} | {g['ratio']:.2f}x | {'yes' if g['met'] else 'NO'} |")
        lines.append("")
    cache_lines = _cache_lines(runs)
    if cache_lines:
        lines += ["## dstream_kafka consumer cache (median over measured runs)", "",
                  "| workload | contender | creations first batch | creations after first | "
                  "seeks after first | batches |", "|---|---|---|---|---|---|", *cache_lines, ""]
    failed = [r for r in runs if not r.get("ok")]
    if failed:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines.append(f"- {r['workload']} / {r['contender']} round {r['round']}: "
                         f"{str(r.get('error', '')).splitlines()[0][:300] if r.get('error') else '?'}")
        lines.append("")
    return "\n".join(lines)


def _cache_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in _measured(runs):
        cache = (r.get("extra") or {}).get("cache")
        if cache:
            groups.setdefault((r["workload"], r["contender"]), []).append(cache)
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

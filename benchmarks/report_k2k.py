"""The Kafka-to-Kafka latency workload (``k2k``) in the report: rows, issue #30's goals, anchor.

Pure functions over what :func:`benchmarks.latency.run_variant` returns: one dict per variant
with its ``rows`` (one per rate). Several measured runs of one variant (``--batch-repetitions``)
are pooled per rate: median of the per-run figures.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

__all__ = ["k2k_variants", "summarize_k2k", "k2k_lines", "check_k2k_goals", "row_held", "OURS", "SS_MICRO_BATCH",
           "ANCHOR", "HELD_P99_MS"]

#: Our variants (goals are evaluated for each) and Structured Streaming's micro-batch variants.
OURS = ("dk-alo", "dk-eo", "dk-alo-fast", "dk-eo-fast")
SS_MICRO_BATCH = ("ss-pt0", "ss-pt1")
#: A rate is held when every produced record came out, at >= 95 % of the rate, p99 under this.
HELD_P99_MS = 1000.0
HELD_PRODUCED_FRACTION = 0.95
ANCHOR = ("Anchor (apache/spark connector/kafka-0-10-sql/benchmarks/, SPARK-56543): Structured "
          "Streaming's real-time mode, Kafka to Kafka, stateless, 1,000 records/s, 5 partitions, "
          "on 15 cores: p50 69-70 ms, p99 84-85 ms. This machine has 2 cores shared by the "
          "driver, the executors' Python workers, the broker and the producer.")


def _median(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def k2k_variants(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The variant results inside the harness's ``k2k`` run records (every round)."""
    return [{"variant": r["contender"], "rows": r.get("rows") or [],
             **({"error": r.get("error") or "no rows"} if not r.get("rows") else {})}
            for r in runs if r.get("kind") == "k2k"]


def summarize_k2k(variants: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """``{variant: {rate: entry}}``: medians of ``p50``, ``p99``, ``max``, ``produced_per_s``
    over the runs that measured the rate, summed ``records``, ``batches`` and ``missing``,
    ``runs``, and ``errors`` (the runs' error texts)."""
    found: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for v in variants:
        if v.get("error"):
            found.setdefault(v["variant"], {}).setdefault(0, []).append({"error": v["error"]})
            continue
        for row in v.get("rows") or []:
            found.setdefault(v["variant"], {}).setdefault(int(row["rate"]), []).append(row)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for variant, by_rate in found.items():
        out[variant] = {}
        for rate, rows in sorted(by_rate.items()):
            good = [r for r in rows if not r.get("error")]
            out[variant][rate] = {
                "runs": len(good), "rate": rate,
                **{k: _median([r.get(k) for r in good]) for k in ("p50", "p99", "max", "produced_per_s")},
                **{k: sum(int(r.get(k) or 0) for r in good) for k in ("records", "batches", "missing")},
                "errors": [r["error"] for r in rows if r.get("error")]}
    return out


def row_held(entry: dict[str, Any]) -> bool:
    """A rate is held: measured, nothing missing, the producer near the rate, p99 < 1 s."""
    return bool(entry.get("runs") and entry.get("p99") is not None and not entry.get("missing")
                and entry["p99"] < HELD_P99_MS
                and (entry.get("produced_per_s") or 0) >= HELD_PRODUCED_FRACTION * entry["rate"])


def _highest_held(by_rate: dict[int, dict[str, Any]]) -> int | None:
    held = [rate for rate, e in by_rate.items() if rate and row_held(e)]
    return max(held) if held else None


def _best_ss(summary: dict[str, dict[int, dict[str, Any]]], rate: int) -> tuple[str, float] | None:
    """Structured Streaming's lowest micro-batch p50 at ``rate`` and the variant that had it."""
    found = [(summary[v][rate]["p50"], v) for v in SS_MICRO_BATCH
             if rate in summary.get(v, {}) and summary[v][rate].get("p50") is not None]
    if not found:
        return None
    p50, variant = min(found)
    return variant, p50


def check_k2k_goals(summary: dict[str, dict[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Issue #30's goals for each of our variants that ran; ``met`` None when a side is missing.

    1. p50 <= 100 ms and p99 <= 250 ms at 1,000 records/s;
    2. p50 <= 0.5 x Structured Streaming's micro-batch p50 (its better trigger) at every rate
       both measured;
    3. the highest rate held (:func:`row_held`) at least Structured Streaming micro-batch's.
    """
    goals: list[dict[str, Any]] = []
    ss_rates = sorted({r for v in SS_MICRO_BATCH for r in summary.get(v, {}) if r})
    ss_held = [h for h in (_highest_held(summary[v]) for v in SS_MICRO_BATCH if v in summary)
               if h is not None]
    for variant in [v for v in OURS if v in summary]:
        mine = summary[variant]
        one_k = mine.get(1000)
        goal: dict[str, Any] = {
            "workload": "k2k", "goal": f"{variant}: p50 <= 100 ms and p99 <= 250 ms at 1,000 "
                                       "records/s", "measured": "–", "met": None}
        if one_k and one_k.get("p50") is not None:
            goal.update(measured=f"p50 {one_k['p50']:.0f} ms, p99 {one_k['p99']:.0f} ms",
                        met=one_k["p50"] <= 100 and one_k["p99"] <= 250)
        goals.append(goal)
        ratios = []
        for rate in ss_rates:
            best = _best_ss(summary, rate)
            p50 = (mine.get(rate) or {}).get("p50")
            if best and p50 is not None and best[1]:
                ratios.append((rate, p50 / best[1], best[0]))
        goal = {"workload": "k2k", "goal": f"{variant}: p50 <= 0.5 x Structured Streaming "
                                           "micro-batch's (its better trigger) at every rate",
                "measured": "; ".join(f"{r:,}/s: {x:.2f}x {v}" for r, x, v in ratios) or "–",
                "met": (all(x <= 0.5 for _, x, _ in ratios) and len(ratios) == len(ss_rates))
                if ratios else None}
        goals.append(goal)
        held = _highest_held(mine)
        theirs = max(ss_held) if ss_held else None
        goal = {"workload": "k2k", "goal": f"{variant}: highest rate held with p99 < 1 s at least "
                                           "Structured Streaming micro-batch's",
                "measured": f"{_rate(held)} against {_rate(theirs)}" if ss_rates else "–",
                "met": None}
        if ss_rates and mine:
            goal["met"] = (held or 0) >= (theirs or 0) and held is not None
        goals.append(goal)
    return goals


def _rate(rate: int | None) -> str:
    return "none" if rate is None else f"{rate:,}/s"


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else "?"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def k2k_lines(variants: Sequence[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The Markdown section (empty when the workload did not run)."""
    summary = summarize_k2k(variants)
    if not summary:
        return []
    from benchmarks.latency import VARIANTS

    lines = ["## Workload: k2k (Kafka to Kafka end-to-end latency)", "",
             f"Per row: a fresh 4-partition input topic, a confluent-kafka producer process at the "
             f"rate for {_num(meta.get('seconds'))} s (records of the first "
             f"{_num(meta.get('warmup'))} s dropped), the query copying every record to a LogAppendTime output topic. Latency = "
             "output append time - input CreateTime, every record, read with read_committed. "
             "missing = produced records not out when the row's drain time ended. held = nothing "
             f"missing, produced >= {HELD_PRODUCED_FRACTION:.0%} of the rate and p99 < 1 s. "
             + ANCHOR, "",
             "| variant | rate/s | produced/s | records | batches | p50 ms | p99 ms | max ms | "
             "missing | held |", "|---|---|---|---|---|---|---|---|---|---|"]
    for variant in [v for v in VARIANTS if v in summary]:
        for rate, e in summary[variant].items():
            if e["errors"] and not e["runs"]:
                error = str(e["errors"][0]).splitlines()[0][:200] if e["errors"][0] else "?"
                lines.append(f"| {variant} | {f'{rate:,}' if rate else '–'} | failed: {error} "
                             "| | | | | | | NO |")
                continue
            lines.append(f"| {variant} | {rate:,} | {_ms(e['produced_per_s'])} | {e['records']:,} | "
                         f"{e['batches']:,} | {_ms(e['p50'])} | {_ms(e['p99'])} | {_ms(e['max'])} | "
                         f"{e['missing']:,} | {'yes' if row_held(e) else 'NO'} |")
    lines += ["", "Variants: " + "; ".join(f"{v}: {VARIANTS[v]}" for v in VARIANTS if v in summary)
              + ".", ""]
    return lines

"""The ``multicore`` workload's table and goals (pure functions over run records).

Each ``multicore-c<K>`` run carries :func:`benchmarks.adapter_multicore.multicore_summary` in
``extra["multicore"]``; medians are taken over the measured runs of one (cores, contender).
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from benchmarks.contenders import MULTICORE_PREFIX

__all__ = ["summarize_multicore", "multicore_lines", "check_multicore_goals",
           "SEEK_OVERHEAD_GOAL", "MULTICORE_FIGURES"]

#: Goal: the extra read time of tasks that seeked, as a share of all steady read time.
SEEK_OVERHEAD_GOAL = 0.05
#: Figures of :func:`~benchmarks.adapter_multicore.multicore_summary` taken as medians.
MULTICORE_FIGURES = ("seeks_per_batch", "prepositions_per_batch", "seeking_tasks_share", "creations_after_warm",
                     "consumers_per_partition", "tcp_connections", "workers", "workers_rss_mb",
                     "read_ms_per_10k_no_seek", "read_ms_per_10k_seek", "read_ms_per_10k_creation",
                     "seek_overhead_share")


def _cores(workload: str) -> int | None:
    tail = workload[len(MULTICORE_PREFIX):]
    return int(tail) if workload.startswith(MULTICORE_PREFIX) and tail.isdigit() else None


def _median(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize_multicore(runs: Sequence[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """``{cores: {contender: {figure: median, "records_per_s": median, "runs": n}}}``."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in runs:
        cores = _cores(str(r.get("workload", "")))
        if cores is None or not r.get("ok") or r.get("warmup"):
            continue
        groups.setdefault((cores, r["contender"]), []).append(r)
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for (cores, name), found in sorted(groups.items()):
        figures = [(r.get("extra") or {}).get("multicore") or {} for r in found]
        entry = {key: _median([f.get(key) for f in figures]) for key in MULTICORE_FIGURES}
        rates = [r.get("records_per_s") for r in found]
        entry["records_per_s"] = _median(rates)
        valid = [float(v) for v in rates if v is not None]
        entry["spread"] = ((max(valid) - min(valid)) / statistics.median(valid)
                           if len(valid) > 1 and statistics.median(valid) else None)
        entry["runs"] = len(found)
        out.setdefault(cores, {})[name] = entry
    return out


def _num(value: float | None, digits: int = 0, pct: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}%}" if pct else f"{value:,.{digits}f}"


def multicore_lines(summary: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """The Markdown section of the workload (empty without multicore runs)."""
    if not summary:
        return []
    head = ["cores", "contender", "records/s", "spread", "x 1 core", "seeks / steady batch",
            "pre-positioned / batch", "tasks that seeked", "creations after batch 1", "consumers / partition",
            "TCP connections", "workers RSS MiB", "read ms / 10k rec", "read ms / 10k rec (seeked)",
            "seek overhead"]
    lines = ["## Workload: multicore (one standalone executor of K cores, streaming drain)", "",
             "Seek overhead: the extra read time of the steady tasks that seeked (their read time "
             "minus their records at the no-seek median rate), as a share of all steady read "
             "time. Consumers, connections and memory: every Python worker of the executor at "
             "the end of the run.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    one_core = summary.get(min(summary), {})
    for cores in sorted(summary):
        for name, e in sorted(summary[cores].items()):
            base = one_core.get(name, {}).get("records_per_s")
            rel = (e["records_per_s"] / base if base and e["records_per_s"] is not None else None)
            lines.append("| " + " | ".join([
                str(cores), name, _num(e["records_per_s"]), _num(e["spread"], 0, True),
                _num(rel, 2), _num(e["seeks_per_batch"], 1), _num(e["prepositions_per_batch"], 1),
                _num(e["seeking_tasks_share"], 0, True),
                _num(e["creations_after_warm"]), _num(e["consumers_per_partition"], 2),
                _num(e["tcp_connections"]), _num(e["workers_rss_mb"]),
                _num(e["read_ms_per_10k_no_seek"], 1), _num(e["read_ms_per_10k_seek"], 1),
                _num(e["seek_overhead_share"], 1, True)]) + " |")
    lines.append("")
    return lines


def check_multicore_goals(summary: dict[int, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per (cores, contender): one consumer per partition per executor, and either close to zero
    seeks per steady batch (under one per 20 partition-tasks) or a seek overhead within
    :data:`SEEK_OVERHEAD_GOAL` of the read time."""
    goals = []
    for cores in sorted(summary):
        for name, e in sorted(summary[cores].items()):
            workload = f"{MULTICORE_PREFIX}{cores}"
            consumers = e.get("consumers_per_partition")
            goals.append({
                "workload": workload, "contender": name,
                "goal": f"one consumer per partition per executor ({name}, {cores}-core executor)",
                "value": consumers, "limit": 1.0,
                "measured": "–" if consumers is None else f"{consumers:.2f} per partition",
                "met": None if consumers is None else consumers <= 1.0})
            seeks, share = e.get("seeks_per_batch"), e.get("seeking_tasks_share")
            overhead = e.get("seek_overhead_share")
            if share is None:
                met, measured = None, "–"
            elif share <= 0.05:
                met, measured = True, f"{seeks:.1f} seeks per batch ({share:.0%} of tasks)"
            else:
                met = None if overhead is None else overhead <= SEEK_OVERHEAD_GOAL
                measured = (f"{seeks:.1f} seeks per batch ({share:.0%} of tasks), overhead "
                            + ("–" if overhead is None else f"{overhead:.1%}") + " of read time")
            goals.append({
                "workload": workload, "contender": name,
                "goal": f"seeks per steady batch close to zero (<= 5% of tasks) or their cost "
                        f"<= {SEEK_OVERHEAD_GOAL:.0%} of read time ({name}, {cores}-core executor)",
                "value": overhead, "limit": SEEK_OVERHEAD_GOAL, "measured": measured, "met": met})
    return goals

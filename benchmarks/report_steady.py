"""The steady-rate workload (4) in the report: per contender and rate, latency, lag, rate held.

Pure functions over the run records the harness keeps (``run["steps"]``, one dict per rate step
as :func:`benchmarks.steady.run_steps` returns them). Several measured runs of one contender are
pooled per rate: median of the per-run percentiles, and a rate is *held* only when the lag was
stable in every run that measured it.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

__all__ = ["summarize_steady", "steady_lines", "STEADY_RIVAL", "pooled_run"]

#: The contender every dstream_kafka stream is divided by in the steady table.
STEADY_RIVAL = "ss-stream"


def pooled_run(record: dict[str, Any], result: dict[str, Any], kind: str, cpu_scope: str,
               **kept: Any) -> dict[str, Any]:
    """Fill a run record of a workload that pools many batches (``steady``, ``soak``): its
    records, seconds and CPU per million records, no throughput figures, and ``kept`` (the
    workload's own results). Whether the run is ok is the caller's decision."""
    records, cpu = int(result.get("records") or 0), result.get("cpu_seconds")
    record.update(kind=kind, records=records, expected=None, checksum=None,
                  seconds=float(result.get("seconds") or 0.0), extra=result.get("extra", {}),
                  records_per_s=None, mb_per_s=None, cpu_seconds=cpu,
                  cpu_s_per_million=cpu / records * 1e6 if cpu is not None and records else None,
                  cpu_scope=cpu_scope, **kept)
    return record


def _median(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize_steady(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return ``{contender: {"rates": {rate: entry}, "highest_held": rate or None}}``.

    An entry holds ``runs`` (runs that measured the rate), the medians ``p50``, ``p90``, ``p99``,
    ``max`` (latency, ms), ``produced_per_s``, ``lag_seconds_final``, ``growth_pct`` (lag growth
    over the last half of the step as a percentage of one interval's worth of records),
    ``cpu_s_per_million``; ``stable`` (one bool or None per run), ``held`` (every run stable),
    ``batches``, ``creations``, ``seeks`` (summed), ``scheduling_delay_ms_max`` and ``skipped``
    (the reason, when no run measured the rate).
    """
    steps: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for run in runs:
        if not run.get("ok") or run.get("warmup") or run.get("kind") != "steady":
            continue
        for step in run.get("steps") or []:
            if not step.get("warmup"):
                steps.setdefault(run["contender"], {}).setdefault(int(step["rate"]), []).append(step)
    out: dict[str, Any] = {}
    for contender, by_rate in steps.items():
        rates: dict[int, dict[str, Any]] = {}
        for rate, found in sorted(by_rate.items()):
            measured = [s for s in found if not s.get("skipped")]
            latency = [s.get("latency_ms") or {} for s in measured]
            growth = [(s.get("trend") or {}).get("growth") for s in measured]
            limit = [(s.get("trend") or {}).get("limit") for s in measured]
            stable = [s.get("stable") for s in measured]
            delays = [s.get("scheduling_delay_ms_max") for s in measured
                      if s.get("scheduling_delay_ms_max") is not None]
            rates[rate] = {
                "runs": len(measured),
                **{q: _median([lat.get(q) for lat in latency]) for q in ("p50", "p90", "p99", "max")},
                "produced_per_s": _median([(s.get("producer") or {}).get("records_per_s")
                                           for s in measured]),
                "lag_seconds_final": _median([s.get("lag_seconds_final") for s in measured]),
                "growth_pct": _median([g / lim * 100.0 for g, lim in zip(growth, limit)
                                       if g is not None and lim]),
                "cpu_s_per_million": _median([s.get("cpu_s_per_million") for s in measured]),
                "stable": stable, "held": bool(stable) and all(v is True for v in stable),
                "batches": sum(int(s.get("batches") or 0) for s in measured),
                "creations": sum(int(s.get("creations") or 0) for s in measured),
                "seeks": sum(int(s.get("seeks") or 0) for s in measured),
                "scheduling_delay_ms_max": max(delays) if delays else None,
                "skipped": None if measured else (found[0].get("skipped") or "not measured"),
            }
        held = [r for r, e in rates.items() if e["held"]]
        out[contender] = {"rates": rates, "highest_held": max(held) if held else None}
    return out


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _stable_cell(entry: dict[str, Any]) -> str:
    if entry["skipped"]:
        return "skipped"
    marks = ["yes" if v else "NO" if v is False else "?" for v in entry["stable"]]
    return "/".join(marks) if len(marks) > 1 else marks[0]


def _ratio(mine: float | None, theirs: float | None) -> str:
    return f"{mine / theirs:.2f}" if mine is not None and theirs else "–"


def steady_lines(summary: dict[str, Any], interval: float | None = None) -> list[str]:
    """The Markdown section of the steady workload (empty when nothing was measured)."""
    if not summary:
        return []
    rival = summary.get(STEADY_RIVAL, {}).get("rates", {})
    head = ["contender", "rate/s", "produced/s", "batches", "latency p50 ms", "p90", "p99", "max",
            "lag growth %", "lag at end s", "stable", "max sched. delay ms", "CPU s / M rec",
            "creations / seeks", *([f"p50 x {STEADY_RIVAL}", f"p99 x {STEADY_RIVAL}"] if rival else [])]
    every = f"{interval:g} s" if interval else "one interval"
    lines = ["## Workload: steady (producer at fixed rates, end-to-end latency)", "",
             f"Kafka's ProducerPerformance writes each rate for the step's seconds in its own JVM "
             f"(acks=1, linger.ms=5); every contender runs {every} batches (dstream_kafka: no rate "
             "limit, commitAsync after the output; Structured Streaming: processingTime trigger, "
             "foreachBatch). Latency = commit wall time - record CreateTime, for every record "
             "(dstream_kafka: when the batch's progress is reported, after its commitAsync was sent; "
             "Structured Streaming: at the end of foreachBatch, before its commit log is "
             "written). lag = records in the topic not yet committed, at each commit; lag growth "
             "= growth of a least-squares line over the last half of the step, in % of one "
             "interval's worth of records at that rate; stable = growth <= 100 % and the backlog "
             "drained after the step (a step that did not drain skips the higher rates). "
             "max sched. delay: dstream_kafka's largest scheduling delay. CPU: the contender's "
             "process tree over the step, without the producer. Ratios < 1: lower latency than "
             f"{STEADY_RIVAL}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = sorted(summary, key=lambda c: (c == STEADY_RIVAL, c))
    for contender in order:
        for rate, e in summary[contender]["rates"].items():
            cells = [contender, f"{rate:,}", _num(e["produced_per_s"]), str(e["batches"]),
                     _num(e["p50"]), _num(e["p90"]), _num(e["p99"]), _num(e["max"]),
                     _num(e["growth_pct"]), _num(e["lag_seconds_final"], 2), _stable_cell(e),
                     _num(e["scheduling_delay_ms_max"]), _num(e["cpu_s_per_million"], 2),
                     "–" if e["skipped"] or contender == STEADY_RIVAL else f"{e['creations']} / {e['seeks']}"]
            if rival:
                theirs = rival.get(rate, {})
                mine = contender != STEADY_RIVAL
                cells += [_ratio(e["p50"], theirs.get("p50")) if mine else "–",
                          _ratio(e["p99"], theirs.get("p99")) if mine else "–"]
            lines.append("| " + " | ".join(cells) + " |")
    held = "; ".join(f"{c} {_num(summary[c]['highest_held'])}/s" if summary[c]["highest_held"]
                     else f"{c} none" for c in order)
    lines += ["", f"Highest rate held (stable lag in every run): {held}.", ""]
    return lines

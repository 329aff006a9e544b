"""The PNG chart: median records/s per contender and workload (min-max whiskers), records/s by
partition count, empty-batch overhead by interval, end-to-end latency by steady producer rate
and offset store cost per batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_chart"]

_COLORS = {"dk": "#1f77b4", "ss": "#ff7f0e", "java": "#2ca02c", "raw": "#7f7f7f", "kafka": "#d62728"}


def _color(name: str) -> str:
    if name.startswith("dk-") and "-fast" in name:
        return "#17becf"  # dstream_kafka with the confluent-kafka backend
    return _COLORS.get(name.split("-")[0], "#9467bd")


def _throughput(ax: Any, workload: str, by_contender: dict[str, Any]) -> None:
    items = sorted(by_contender.items(), key=lambda kv: kv[1]["records_per_s"]["median"] or 0)
    names = [n for n, _ in items]
    med = [m["records_per_s"]["median"] or 0 for _, m in items]
    lo = [max(0.0, v - (m["records_per_s"]["min"] or v)) for v, (_, m) in zip(med, items)]
    hi = [max(0.0, (m["records_per_s"]["max"] or v) - v) for v, (_, m) in zip(med, items)]
    ax.barh(names, med, xerr=[lo, hi], color=[_color(n) for n in names], capsize=3)
    for y, v in enumerate(med):
        ax.text(v, y, f" {v:,.0f}", va="center", fontsize=8)
    ax.set_title(f"workload: {workload}", fontsize=10)
    ax.set_xlabel("records/s (median, min-max)")
    ax.margins(x=0.2)


def _partitions(ax: Any, summary: dict[str, Any], counts: list[int]) -> None:
    names = sorted({c for n in counts for c in summary.get(f"partitions-p{n}", {})})
    for i, name in enumerate(names):
        xs, ys = [], []
        for n in counts:
            med = summary.get(f"partitions-p{n}", {}).get(name, {}).get("records_per_s", {}).get("median")
            if med:
                xs.append(n)
                ys.append(med)
        ax.plot(xs, ys, marker="os^vD"[i % 5], linestyle=("-", "--", ":")[i % 3], label=name,
                color=_color(name))
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.set_title("workload: partitions (drain)", fontsize=10)
    ax.set_xlabel("partitions")
    ax.set_ylabel("records/s (median)")
    ax.legend(fontsize=7)


def _overhead(ax: Any, latency: dict[str, Any]) -> None:
    styles = {"count": ":", "job": "-", "job-nocommit": "--", "idle-trigger": "-."}
    for contender, configs in sorted(latency.items()):
        by_output: dict[str, list[tuple[float, float, float]]] = {}
        for entry in configs.values():
            st = (entry.get("phases") or {}).get("total") or {}
            if st.get("p50") is None:
                continue
            params = entry.get("params", {})
            by_output.setdefault(params.get("output", "?"), []).append(
                (params.get("interval", 0), st["p50"], st["p99"]))
        for output, pts in sorted(by_output.items()):
            pts.sort()
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                        yerr=[[0] * len(pts), [p[2] - p[1] for p in pts]], capsize=3,
                        marker="o", linestyle=styles.get(output, "-"), color=_color(contender),
                        label=f"{contender} {output}")
    ax.axhline(60, color="#d62728", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")  # a stream that falls behind at 0.1 s reaches seconds
    ax.set_title("workload: overhead (empty batch total, p50 with p99 whisker, log scale; goal 60 ms)",
                 fontsize=10)
    ax.set_xlabel("batch interval (s)")
    ax.set_ylabel("ms per batch")
    ax.legend(fontsize=7)


def _stores(ax: Any, latency: dict[str, Any]) -> None:
    rows = []
    for contender, configs in sorted(latency.items()):
        for config, entry in configs.items():
            st = (entry.get("phases") or {}).get("store_cost") or {}
            if st.get("p50"):  # the no-store baseline (0 ms) has no bar on a log scale
                rows.append((f"{contender} {config}", st["p50"], st["p99"], contender))
    rows.sort(key=lambda r: r[1])
    names = [r[0] for r in rows]
    ax.barh(names, [r[1] for r in rows], xerr=[[0] * len(rows), [r[2] - r[1] for r in rows]],
            color=[_color(r[3]) for r in rows], capsize=3)
    for y, r in enumerate(rows):
        ax.text(r[1], y, f" {r[1]:.1f}", va="center", fontsize=8)
    ax.axvline(5, color="#d62728", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_title("workload: exactly-once (store cost per batch, p50, p99 whisker; goal 5 ms for "
                 "postgres-tx)", fontsize=10)
    ax.set_xlabel("ms per batch")


def _steady(ax: Any, steady: dict[str, Any]) -> None:
    """Latency p50 (line) and p99 (whisker) per rate; hollow markers where the lag grew."""
    rates: set[int] = set()
    for i, (contender, entry) in enumerate(sorted(steady.items())):
        pts = [(rate, e) for rate, e in entry["rates"].items() if e.get("p50") is not None]
        if not pts:
            continue
        xs = [rate for rate, _ in pts]
        rates.update(xs)
        p50 = [e["p50"] for _, e in pts]
        ax.errorbar(xs, p50, yerr=[[0] * len(pts), [max(0.0, (e["p99"] or v) - v) for (_, e), v in zip(pts, p50)]],
                    capsize=3, linestyle=("-", "--", ":")[i % 3], color=_color(contender),
                    label=f"{contender} (held: " + (f"{entry['highest_held']:,.0f}/s)"
                                                    if entry["highest_held"] else "none)"))
        for (rate, e), v in zip(pts, p50):
            ax.plot([rate], [v], marker="o", color=_color(contender),
                    markerfacecolor=_color(contender) if e.get("held") else "white")
    ax.set_xscale("log")
    ax.set_xticks(sorted(rates), [f"{r / 1000:g}k" for r in sorted(rates)])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_title("workload: steady (end-to-end latency p50 with p99 whisker; hollow: lag not stable)",
                 fontsize=10)
    ax.set_xlabel("producer rate (records/s)")
    ax.set_ylabel("ms, record timestamp to commit")
    ax.legend(fontsize=7)


def _multicore(ax: Any, summary: dict[str, Any]) -> None:
    """records/s (bars) and seek overhead (labels) per executor core count and contender."""
    cores = sorted(summary)
    names = sorted({n for c in cores for n in summary[c]})
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs = [j + i * width for j in range(len(cores))]
        entries = [summary[c].get(name, {}) for c in cores]
        ys = [e.get("records_per_s") or 0 for e in entries]
        ax.bar(xs, ys, width, color=_color(name), label=name)
        for x, y, e in zip(xs, ys, entries):
            share = e.get("seek_overhead_share")
            label = f"{y:,.0f}" + (f"\nseeks {share:.0%}" if share is not None else "")
            ax.text(x, y, label, ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(cores))],
                  [f"{c} core(s)" for c in cores])
    ax.set_title("workload: multicore (one executor; label: records/s, seek overhead of read time)",
                 fontsize=10)
    ax.set_ylabel("records/s")
    ax.margins(y=0.25)
    ax.legend(fontsize=7)


def write_chart(summary: dict[str, Any], path: Path, meta: dict[str, Any],
                latency: dict[str, Any] | None = None, steady: dict[str, Any] | None = None,
                multicore_runs: list[dict[str, Any]] | None = None) -> None:
    """Write one panel per workload to ``path`` (matplotlib, Agg backend); ``steady`` is
    :func:`benchmarks.report_steady.summarize_steady`; ``multicore_runs`` are the run records
    (:func:`benchmarks.report_multicore.summarize_multicore` takes them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.contenders import MULTICORE_PREFIX
    from benchmarks.report import partition_counts_of
    from benchmarks.report_multicore import summarize_multicore

    latency = latency or {}
    panels: list[tuple[float, Any]] = []
    for w in summary:
        if summary[w] and not w.startswith(("partitions-p", MULTICORE_PREFIX)):
            panels.append((max(2.0, 0.45 * len(summary[w]) + 1.0),
                           lambda ax, w=w: _throughput(ax, w, summary[w])))
    counts = partition_counts_of(summary)
    if counts:
        panels.append((3.5, lambda ax: _partitions(ax, summary, counts)))
    multicore = summarize_multicore(multicore_runs or [])
    if multicore:
        panels.append((3.5, lambda ax: _multicore(ax, multicore)))
    if latency.get("overhead"):
        panels.append((4.0, lambda ax: _overhead(ax, latency["overhead"])))
    if steady:
        panels.append((3.5, lambda ax: _steady(ax, steady)))
    if latency.get("exactly-once"):
        n = sum(len(c) for c in latency["exactly-once"].values())
        panels.append((max(2.0, 0.4 * n + 1.0), lambda ax: _stores(ax, latency["exactly-once"])))
    if not panels:
        return
    heights = [h for h, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (_, draw) in zip(axes[:, 0], panels):
        draw(ax)
    title = (f"dstream_kafka benchmark: {meta.get('records'):,} x {meta.get('value_bytes')} B, "
             f"{meta.get('partitions')} partitions, {meta.get('machine', {}).get('nproc')} cores")
    if meta.get("quick"):
        title += " (quick run: indicative)"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

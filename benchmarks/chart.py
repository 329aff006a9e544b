"""The PNG chart: median records/s per contender and workload, with min-max whiskers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_chart"]

_COLORS = {"dk": "#1f77b4", "ss": "#ff7f0e", "java": "#2ca02c", "raw": "#7f7f7f", "kafka": "#d62728"}


def write_chart(summary: dict[str, Any], path: Path, meta: dict[str, Any]) -> None:
    """Write one horizontal bar panel per workload to ``path`` (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = [w for w in summary if summary[w]]
    if not workloads:
        return
    heights = [max(2.0, 0.45 * len(summary[w]) + 1.0) for w in workloads]
    fig, axes = plt.subplots(len(workloads), 1, figsize=(9, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, workload in zip(axes[:, 0], workloads):
        items = sorted(summary[workload].items(), key=lambda kv: kv[1]["records_per_s"]["median"] or 0)
        names = [n for n, _ in items]
        med = [m["records_per_s"]["median"] or 0 for _, m in items]
        lo = [max(0.0, v - (m["records_per_s"]["min"] or v)) for v, (_, m) in zip(med, items)]
        hi = [max(0.0, (m["records_per_s"]["max"] or v) - v) for v, (_, m) in zip(med, items)]
        colors = [_COLORS.get(n.split("-")[0], "#9467bd") for n in names]
        ax.barh(names, med, xerr=[lo, hi], color=colors, capsize=3)
        for y, v in enumerate(med):
            ax.text(v, y, f" {v:,.0f}", va="center", fontsize=8)
        ax.set_title(f"workload: {workload}", fontsize=10)
        ax.set_xlabel("records/s (median, min-max)")
        ax.margins(x=0.2)
    fig.suptitle(f"dstream_kafka benchmark: {meta.get('records'):,} x {meta.get('value_bytes')} B, "
                 f"{meta.get('partitions')} partitions, {meta.get('machine', {}).get('nproc')} cores",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

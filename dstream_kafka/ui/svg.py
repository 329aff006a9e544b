"""SVG charts drawn on the server: timelines, histograms and multi-series lines.

The shapes follow Spark's old Streaming tab (a 500x150 timeline with the first and last batch
time on the x axis and five y ticks, a 350x150 histogram of 10 horizontal bins with a top
"#batches" axis); they are plain SVG text, so the page needs no script and no network. Every
point carries ``data-batch-time`` (epoch ms) and a ``<title>`` tooltip, as Spark's hover text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime

__all__ = ["normalize_duration", "timeline", "histogram", "multi_line", "format_time"]

#: Line colours of :func:`multi_line`, cycled (a colour-blind-safe palette).
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
           "#000000")

_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 10, 20, 30


def normalize_duration(max_ms: float) -> tuple[str, float]:
    """The unit Spark's page shows durations up to ``max_ms`` in, and ms per unit.

    Under 1000 ms: ``ms``; under 60 s: ``sec``; under 60 min: ``min``; under 24 h: ``hrs``;
    otherwise ``days``.
    """
    for unit, size, limit in (("ms", 1.0, 1000.0), ("sec", 1000.0, 60_000.0),
                              ("min", 60_000.0, 3_600_000.0), ("hrs", 3_600_000.0, 86_400_000.0)):
        if max_ms < limit:
            return unit, size
    return "days", 86_400_000.0


def format_time(millis: int, with_ms: bool = False) -> str:
    """``HH:MM:SS`` (``.mmm`` with ``with_ms``) of an epoch-ms time, in the driver's timezone."""
    when = datetime.fromtimestamp(millis / 1000.0)
    text = when.strftime("%H:%M:%S")
    return f"{text}.{millis % 1000:03d}" if with_ms else text


def _number(value: float) -> str:
    return f"{value:,.2f}"


def _frame(width: int, height: int, css_id: str, label: str, body: list[str]) -> str:
    return (f'<svg id="{html.escape(css_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{html.escape(label)}">' + "".join(body) + "</svg>")


def _y_axis(y_max: float, unit: str, height: int) -> list[str]:
    plot_h = height - _TOP - _BOTTOM
    parts = [f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{height - _BOTTOM}" '
             'stroke="#555"/>',
             f'<text x="{_LEFT - 4}" y="{_TOP - 8}" text-anchor="end" font-size="10">'
             f"{html.escape(unit)}</text>"]
    for i in range(5):
        value = y_max * i / 4
        y = _TOP + plot_h - plot_h * i / 4
        parts.append(f'<text class="tick" x="{_LEFT - 4}" y="{y + 3:.1f}" text-anchor="end" '
                     f'font-size="10">{_number(value)}</text>')
    return parts


def _axes(y_max: float, unit: str, width: int, height: int,
          ticks: Sequence[tuple[float, int]], with_ms: bool) -> list[str]:
    """Both axes: five y ticks, and the x axis labelled at ``ticks`` ``(x, batch time)``."""
    body = _y_axis(y_max, unit, height)
    body.append(f'<line class="axis" x1="{_LEFT}" y1="{height - _BOTTOM}" x2="{width - _RIGHT}" '
                f'y2="{height - _BOTTOM}" stroke="#555"/>')
    for i, (x, t) in enumerate(ticks):
        anchor = "start" if i == 0 and len(ticks) > 1 else "end" if i else "middle"
        body.append(f'<text class="tick" x="{x:.1f}" y="{height - _BOTTOM + 14}" '
                    f'text-anchor="{anchor}" font-size="10">{format_time(t, with_ms)}</text>')
    return body


def timeline(points: Sequence[tuple[int, float | None]], y_max: float, unit: str, *,
             css_id: str, batch_ms: int, stable: float | None = None,
             failed: frozenset[int] = frozenset(), width: int = 500, height: int = 150) -> str:
    """A line of ``(batch time ms, value)`` points over time; ``None`` values are gaps.

    ``y_max`` is the top of the y axis (at least 1 unit); ``stable`` draws Spark's dashed
    batch-interval line; batch times in ``failed`` are red dots.
    """
    y_max = max(y_max, 1e-9)
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    times = [t for t, _ in points]
    lo, hi = (min(times), max(times)) if times else (0, 1)
    span = max(hi - lo, 1)

    def x(t: int) -> float:
        return _LEFT + plot_w * (t - lo) / span if len(times) > 1 else _LEFT + plot_w / 2

    def y(v: float) -> float:
        return _TOP + plot_h - plot_h * min(v, y_max) / y_max

    with_ms = batch_ms < 1000
    body = _axes(y_max, unit, width, height, [(x(t), t) for t in sorted({lo, hi})] if times else [],
                 with_ms)
    if stable is not None and stable <= y_max:
        body.append(f'<line class="stable" x1="{_LEFT}" y1="{y(stable):.1f}" x2="{width - _RIGHT}" '
                    f'y2="{y(stable):.1f}" stroke="#6cf" stroke-dasharray="4 3"/>')
    segment: list[str] = []
    segments: list[list[str]] = [segment]
    for t, v in points:
        if v is None:
            segment = []
            segments.append(segment)
        else:
            segment.append(f"{x(t):.1f},{y(v):.1f}")
    body += [f'<polyline fill="none" stroke="#0088cc" stroke-width="1.5" points="{" ".join(s)}"/>'
             for s in segments if len(s) > 1]
    for t, v in points:
        if v is None:
            continue
        colour = "#d00" if t in failed else "#0088cc"
        body.append(f'<circle class="point" data-batch-time="{t}" data-value="{v:.3f}" '
                    f'cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"><title>'
                    f"{_number(v)} {html.escape(unit)} at {format_time(t, with_ms)}"
                    "</title></circle>")
    return _frame(width, height, css_id, f"timeline in {unit}", body)


def histogram(values: Sequence[float], y_max: float, unit: str, *, css_id: str,
              x_max: int | None = None, stable: float | None = None, width: int = 350,
              height: int = 150) -> str:
    """Ten horizontal bins over ``[0, y_max]`` counting ``values`` (Spark's histograms).

    ``x_max`` is the bar scale in batches (shared by a page's histograms so rows line up);
    ``stable`` labels the bins at or under it "stable" as Spark does for processing time.
    """
    y_max = max(y_max, 1e-9)
    bins = [0] * 10
    for v in values:
        bins[min(int(v / y_max * 10), 9)] += 1
    x_max = max(x_max or 0, max(bins), 1)
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    bar_h = plot_h / 10
    body = _y_axis(y_max, unit, height)
    body.append(f'<text x="{width - _RIGHT}" y="{_TOP - 8}" text-anchor="end" font-size="10">'
                f"#batches (max {x_max})</text>")
    total = max(len(values), 1)
    for i, count in enumerate(bins):
        low, high = y_max * i / 10, y_max * (i + 1) / 10
        top = _TOP + plot_h - bar_h * (i + 1)
        w = plot_w * count / x_max
        note = " (stable)" if stable is not None and high <= stable else ""
        body.append(f'<rect class="bin" data-count="{count}" x="{_LEFT}" y="{top + 1:.1f}" '
                    f'width="{w:.1f}" height="{bar_h - 2:.1f}" fill="#0088cc"><title>{count} '
                    f"batches ({count * 100 / total:.1f}%) between {_number(low)} and "
                    f"{_number(high)} {html.escape(unit)}{note}</title></rect>")
    return _frame(width, height, css_id, f"histogram in {unit}", body)


def multi_line(series: Mapping[str, Sequence[tuple[int, float]]], unit: str, *, css_id: str,
               batch_ms: int, width: int = 860, height: int = 180) -> str:
    """One line per labelled series of ``(batch time ms, value)`` with a legend on the right."""
    legend_w = 280
    points = [p for values in series.values() for p in values]
    y_max = max([v for _, v in points] + [1.0])
    times = [t for t, _ in points]
    lo, hi = (min(times), max(times)) if times else (0, 1)
    span = max(hi - lo, 1)
    plot_w = width - legend_w - _LEFT - _RIGHT
    plot_h = height - _TOP - _BOTTOM
    with_ms = batch_ms < 1000
    ticks = [(_LEFT + plot_w * (t - lo) / span, t) for t in sorted({lo, hi})] if times else []
    body = _axes(y_max, unit, width - legend_w, height, ticks, with_ms)
    for i, (label, values) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        coords = [(_LEFT + plot_w * (t - lo) / span, _TOP + plot_h - plot_h * v / y_max, t, v)
                  for t, v in values]
        if len(coords) > 1:
            body.append(f'<polyline class="series" data-series="{html.escape(label)}" fill="none" '
                        f'stroke="{colour}" stroke-width="1.5" points="'
                        + " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, _, _ in coords) + '"/>')
        body += [f'<circle class="point" data-series="{html.escape(label)}" data-batch-time="{t}" '
                 f'data-value="{v:.0f}" cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="{colour}"><title>'
                 f"{html.escape(label)}: {_number(v)} {html.escape(unit)} at "
                 f"{format_time(t, with_ms)}</title></circle>" for cx, cy, t, v in coords]
        ly = _TOP + 14 * i
        short = label if len(label) <= 44 else "\u2026" + label[-43:]  # keep the partition
        body.append(f'<rect x="{width - legend_w + 10}" y="{ly}" width="10" height="10" '
                    f'fill="{colour}"/><text x="{width - legend_w + 24}" y="{ly + 9}" '
                    f'font-size="10">{html.escape(short)}<title>{html.escape(label)}</title>'
                    "</text>")
    return _frame(width, height, css_id, f"lines in {unit}", body)

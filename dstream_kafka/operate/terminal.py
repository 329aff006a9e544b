"""The demo's progress display: a live rich view on a terminal, plain lines otherwise.

On a terminal (``Console.is_terminal``) :class:`LiveDisplay` redraws one view in place, four
times a second: the stream's source, totals and rates, the last batches with their records,
partitions, delays and lag, and the running word totals. Piped or redirected output gets
:class:`PlainDisplay`, one self-contained line per batch, so logs and ``grep`` keep working.
rich is the project's terminal library (already used by the offsets command's tables).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

__all__ = ["DemoDisplay", "LiveDisplay", "PlainDisplay", "create_display"]

#: Batches the live view lists.
SHOWN_BATCHES = 12


def _clock(millis: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(millis / 1000))


class DemoDisplay:
    """Shows each batch's progress and the running totals.

    Parameters
    ----------
    console : rich.console.Console
        Where to write.
    title : str
        What is read and where the results go (one line).
    totals : callable
        Returns the running totals as text (called once per batch, on the caller's thread).
    """

    def __init__(self, console: Console, title: str, totals: Callable[[], str]) -> None:
        self.console = console
        self.title = title
        self.totals = totals
        self.processed = 0
        self.batches = 0

    def __enter__(self) -> DemoDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def message(self, text: str) -> None:
        """Print a line of text above the progress."""
        self.console.print(text, highlight=False)

    def batch(self, progress: Any) -> None:
        """Show one completed batch (a :class:`~dstream_kafka.plan.progress.BatchProgress`)."""
        self.processed += progress.numRecords
        self.batches += 1

    def close(self) -> None:
        """Stop redrawing (the last view stays on the screen)."""


class PlainDisplay(DemoDisplay):
    """One line per batch: time, records, partitions, delays, offsets behind, totals."""

    def batch(self, progress: Any) -> None:
        super().batch(progress)
        behind = sum(progress.offsetsBehindLatest.values())
        self.console.print(
            f"batch {_clock(progress.batchTime)}  records {progress.numRecords:6d}  "
            f"partitions {len(progress.ranges)}  processing {progress.processingDelay or 0:5d} ms"
            f"  scheduling {progress.schedulingDelay or 0:4d} ms  behind {behind:5d}  | totals: "
            f"{self.totals()}", highlight=False, soft_wrap=True)


class LiveDisplay(DemoDisplay):
    """A view redrawn in place: header, recent batches table and totals."""

    def __init__(self, console: Console, title: str, totals: Callable[[], str]) -> None:
        super().__init__(console, title, totals)
        self._recent: collections.deque[Any] = collections.deque(maxlen=SHOWN_BATCHES)
        self._totals_text = ""
        self._started = time.monotonic()
        self._live = Live(self._render(), console=console, refresh_per_second=4,
                          transient=False, redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    def batch(self, progress: Any) -> None:
        super().batch(progress)
        self._recent.append(progress)
        self._totals_text = self.totals()
        self._live.update(self._render())

    def message(self, text: str) -> None:
        self._live.console.print(text, highlight=False)

    def close(self) -> None:
        self._live.update(self._render())
        self._live.stop()

    def _render(self) -> Any:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        table = Table(title="Recent batches", expand=False, title_justify="left")
        for name in ("batch", "records", "partitions", "processing", "scheduling", "behind"):
            table.add_column(name, justify="left" if name == "batch" else "right", no_wrap=True)
        # One line per batch: a long ranges cell is cut, never wrapped.
        table.add_column("offset ranges", no_wrap=True, overflow="ellipsis", max_width=90)
        for p in reversed(self._recent):
            ranges = " ".join(f"p{r.partition}:[{r.fromOffset},{r.untilOffset})"
                              for r in sorted(p.ranges, key=lambda r: r.partition) if r.count())
            table.add_row(_clock(p.batchTime), str(p.numRecords), str(len(p.ranges)),
                          f"{p.processingDelay or 0} ms", f"{p.schedulingDelay or 0} ms",
                          str(sum(p.offsetsBehindLatest.values())), ranges or "-")
        summary = Text.assemble(
            ("batches ", "dim"), (str(self.batches), "bold"), ("   records ", "dim"),
            (str(self.processed), "bold"), ("   rate ", "dim"),
            (f"{self.processed / elapsed:.0f} records/s", "bold"))
        totals = Text.assemble(("word totals: ", "dim"), self._totals_text or "-")
        footer = Text("Ctrl-C stops gracefully (the running batch finishes and commits)",
                      style="dim")
        return Panel(Group(summary, table, totals, footer),
                     title="dstream-kafka demo", subtitle=self.title, expand=False)


def create_display(title: str, totals: Callable[[], str],
                   console: Console | None = None) -> DemoDisplay:
    """A :class:`LiveDisplay` when ``console`` (default: stdout) is a terminal, else a
    :class:`PlainDisplay`."""
    console = console or Console()
    kind = LiveDisplay if console.is_terminal else PlainDisplay
    return kind(console, title, totals)

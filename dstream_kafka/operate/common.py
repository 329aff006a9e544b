"""What the ``dstream-kafka offsets`` commands share: opening a store they were given, and tables.

:func:`opened_store` takes a store or a store URI (a URI opens the store, for reading unless
asked to create it) and says whether the caller must close it; :func:`render_table` draws rows the
way every table of the commands looks (rich on a terminal, plain aligned text in a pipe).
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Sequence

from dstream_kafka.stores.base import OffsetStore

__all__ = ["NUMERIC_COLUMNS", "opened_store", "render_table"]

#: Columns :func:`render_table` aligns right.
NUMERIC_COLUMNS = frozenset({"PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET",
                             "LAG", "RECORDS"})


#: Width of plain text (a pipe): wide enough that no row is wrapped for a script.
PIPE_WIDTH = 1000


def render_table(columns: Sequence[str], rows: Sequence[tuple[Sequence[str], bool]], *,
                 terminal: bool = False, width: int | None = None) -> str:
    """Return rows as aligned columns drawn by rich; a row flagged True is red on a terminal.

    Without ``terminal`` the text is plain (no borders, colours or trailing spaces), for pipes,
    and no row is wrapped. On a terminal the table fits ``width`` (default: the terminal's
    width, or ``COLUMNS``): when the rows are wider, headers break at their hyphens
    (``CURRENT-`` over ``OFFSET``), never inside a word, and long names wrap in their column.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if terminal and width is None:
        width = shutil.get_terminal_size((120, 24)).columns
    width = PIPE_WIDTH if not terminal or width is None else width

    def table_of(headers: Sequence[str]) -> Table:
        table = Table(box=box.SIMPLE_HEAD if terminal else None, show_edge=False, pad_edge=False,
                      header_style="bold" if terminal else "")
        for name, header in zip(columns, headers):
            numeric = name in NUMERIC_COLUMNS
            longest = max((len(part) for part in header.split("\n")), default=0)
            table.add_column(header, justify="right" if numeric else "left", min_width=longest,
                             no_wrap=numeric or not terminal, overflow="fold")
        for cells, flagged in rows:
            table.add_row(*cells, style="red" if (terminal and flagged) else None)
        return table

    table = table_of(columns)
    probe = Console(file=io.StringIO(), width=PIPE_WIDTH, highlight=False)
    if terminal and probe.measure(table).maximum > width:
        table = table_of([name.replace("-", "-\n") for name in columns])
    last = columns[-1].split("-")[-1] if columns else ""
    while True:
        console = Console(file=io.StringIO(), width=width, force_terminal=terminal,
                          color_system="standard" if terminal else None, highlight=False)
        console.print(table)
        text = console.file.getvalue()  # type: ignore[attr-defined]
        # rich crops the last columns of a table that cannot fit; a column such as DATA-LOST
        # must never vanish, so the lines grow past the terminal instead
        header = "\n".join(text.splitlines()[:3])
        if not terminal or last in header or width >= PIPE_WIDTH:
            break
        width += 10
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def opened_store(store: OffsetStore | str, timeout: float, *, create: bool = False) -> tuple[OffsetStore, bool]:
    """Return (store, whether this call opened it); a URI is opened for reading (``create``
    False: it must exist and nothing is created) unless ``create``."""
    from dstream_kafka.stores.uri import open_store

    return (open_store(store, timeout=timeout, create=create), True) if isinstance(store, str) else (store, False)

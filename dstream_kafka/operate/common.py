"""What the ``dstream-kafka offsets`` commands share: opening a store they were given, and tables.

:func:`opened_store` takes a store or a store URI (a URI opens the store, for reading unless
asked to create it) and says whether the caller must close it; :func:`render_table` draws rows the
way every table of the commands looks (rich on a terminal, plain aligned text in a pipe).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from dstream_kafka.stores.base import OffsetStore

__all__ = ["NUMERIC_COLUMNS", "opened_store", "render_table"]

#: Columns :func:`render_table` aligns right.
NUMERIC_COLUMNS = frozenset({"PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET",
                             "LAG", "RECORDS"})


def render_table(columns: Sequence[str], rows: Sequence[tuple[Sequence[str], bool]], *,
                 terminal: bool = False) -> str:
    """Return rows as aligned columns drawn by rich; a row flagged True is red on a terminal.

    Without ``terminal`` the text is plain (no borders, colours or trailing spaces), for pipes.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD if terminal else None, show_edge=False, pad_edge=False,
                  header_style="bold" if terminal else "")
    for name in columns:
        table.add_column(name, justify="right" if name in NUMERIC_COLUMNS else "left", no_wrap=True)
    for cells, flagged in rows:
        table.add_row(*cells, style="red" if (terminal and flagged) else None)
    console = Console(file=io.StringIO(), width=1000, force_terminal=terminal,
                      color_system="standard" if terminal else None, highlight=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()).strip("\n")  # type: ignore[attr-defined]


def opened_store(store: OffsetStore | str, timeout: float, *, create: bool = False) -> tuple[OffsetStore, bool]:
    """Return (store, whether this call opened it); a URI is opened for reading (``create``
    False: it must exist and nothing is created) unless ``create``."""
    from dstream_kafka.stores.uri import open_store

    return (open_store(store, timeout=timeout, create=create), True) if isinstance(store, str) else (store, False)

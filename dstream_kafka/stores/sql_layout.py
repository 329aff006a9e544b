"""The layout version of the SQL stores' tables: a newer one is refused, older ones upgraded.

``"Playout"`` holds one row, the :data:`LAYOUT_VERSION` that last wrote the tables (none: 1,
the release before resets). Tables of a newer layout fail every call before anything is read
or written; layout 1 gains ``"Pcommits"."reset"`` (the audit of a reset, :class:`ResetAudit`
as JSON) and the layout row, its commits kept.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.stores.records import ResetAudit

__all__ = ["LAYOUT_VERSION", "check_layout", "reset_audit"]

#: The table layout this version writes (2: "commits"."reset"); a newer one is refused.
LAYOUT_VERSION = 2


def check_layout(conn: Any, dialect: Any, q: Callable[[str], str], layout_table: str) -> None:
    """Refuse tables of a newer layout; bring older ones (no layout row: 1) to this one.

    ``q`` expands the store's table placeholders (``{C}`` commits, ``{V}`` layout).

    Raises
    ------
    OffsetStoreError
        Tables of a newer layout, naming the upgrade.
    """
    dialect.begin(conn, write=False)
    cur = conn.cursor()
    cur.execute(q('SELECT MAX("layout_version") FROM {V}'))
    found = cur.fetchone()[0]
    conn.commit()
    if found is not None and int(found) > LAYOUT_VERSION:
        raise OffsetStoreError(
            f"The offset tables {layout_table} say layout {int(found)}: they were written by a newer dstream_kafka "
            f"(this version reads layout {LAYOUT_VERSION}). Nothing was read or written; upgrade dstream_kafka to "
            "use them.")
    if found is not None and int(found) == LAYOUT_VERSION:
        return
    dialect.begin(conn, write=False)
    cur = conn.cursor()
    # The column names of the result, not 'SELECT "reset"': SQLite takes a double-quoted unknown
    # name for a string literal.
    cur.execute(q('SELECT * FROM {C} WHERE 1 = 0'))
    columns = {c[0] for c in cur.description}
    conn.commit()
    dialect.begin(conn, write=True)
    cur = conn.cursor()
    if "reset" not in columns:
        cur.execute(q(f'ALTER TABLE {{C}} ADD COLUMN "reset" {dialect.text}'))
    cur.execute(q('DELETE FROM {V}'))
    cur.execute(q('INSERT INTO {V} ("layout_version") VALUES (?)'), (LAYOUT_VERSION,))
    conn.commit()


def reset_audit(table: str, text: str | None) -> ResetAudit | None:
    """Return the audit a ``"reset"`` cell holds (None for NULL: a batch commit).

    Raises
    ------
    OffsetStoreError
        The cell holds something else (edited by hand).
    """
    if text is None:
        return None
    try:
        return ResetAudit.from_doc(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise OffsetStoreError(f"{table}.reset holds {text[:80]!r}, not a reset audit ({exc}); it was edited by "
                               "hand: restore it or set it to NULL") from None

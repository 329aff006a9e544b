"""The commit rows of the SQL stores' history, and the check that each continues the one before.

:class:`CommitRow` is one ``"Pcommits"`` row as :meth:`SqlOffsetStore._state
<dstream_kafka.stores.sql.SqlOffsetStore>` reads it (with the data losses recorded after it);
:func:`check_chain` refuses a newest row that contradicts its own ranges or the row before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.offsets_json import offset_ranges_from_json, partition_offsets_from_json
from dstream_kafka.stores.records import chain_breaks

__all__ = ["CommitRow", "check_chain"]


class CommitRow:
    """One ``"Pcommits"`` row of a group as ``_state`` reads it, with the data losses after it."""

    def __init__(self, table: str, group_id: str, rows: list[Any]) -> None:
        self.id, self.batch_time_ms = rows[0][0], int(rows[0][1])
        try:
            self.offsets = partition_offsets_from_json(rows[0][2], f"{table}.offsets", allowed_sentinels=())
            self.ranges = tuple(offset_ranges_from_json(rows[0][3], f"{table}.ranges"))
        except ConfigurationError as exc:
            raise OffsetStoreError(f"The commit row id {self.id} of group {group_id!r} in {table} is "
                                   f"unreadable: {exc}. Nothing was committed or reset.") from None
        self.is_reset = rows[0][4] is not None
        self.losses = [(TopicPartition(row[5], row[6]), row[7], row[8]) for row in rows if row[5] is not None]

    def after_losses(self) -> dict[TopicPartition, int]:
        """The offsets after this commit, moved over the data losses recorded after it."""
        offsets = dict(self.offsets)
        for tp, lost_from, lost_until in self.losses:
            if offsets.get(tp) == lost_from:
                offsets[tp] = lost_until
        return offsets


def check_chain(store: str, tables: Mapping[str, str], group_id: str, previous: CommitRow | None,
                newest: CommitRow) -> None:
    """Refuse a newest commit row that contradicts its own ranges or the row before it.

    Its offsets must be where its ranges end, and the previous row's offsets (moved over
    the data losses recorded after it) moved to the end of its ranges; unless it is a
    reset, each range must start where the previous row left its partition. Without a
    previous row (the first commit, or history pruned to one row) only its own ranges are
    checked. A row edited by hand, even consistently with the offsets table, would
    otherwise skip records silently.

    Raises
    ------
    OffsetStoreError
        Naming the store, the group, the partition, both offsets and what to do.
    """
    problems = chain_breaks(None if previous is None else previous.after_losses(), newest.ranges,
                            newest.offsets, reset=newest.is_reset,
                            previous=f"the commit before it (id {previous and previous.id})")
    if problems:
        raise OffsetStoreError(
            f"The commit history of group {group_id!r} in {store} is broken at {tables['commits']} "
            f"id {newest.id} (batch {newest.batch_time_ms}): " + "; ".join(problems) + ". The rows were "
            "edited by hand: records between the two offsets would be skipped with no data loss "
            "recorded. Nothing was committed and no offset was reset. Inspect the commits with "
            f"`dstream-kafka offsets history --group {group_id}`; restore the edited rows of "
            f"{tables['commits']} and {tables['offsets']}, then move the offsets on purpose "
            "with `dstream-kafka offsets reset`, which records the move.")

"""Transactional offset stores: user results and a batch's offsets in one database transaction.

:class:`TransactionalOffsetStore` adds :meth:`~TransactionalOffsetStore.transaction` to the
:class:`~dstream_kafka.stores.base.OffsetStore` contract, with the same fencing rules; the SQL
stores (SQLite, PostgreSQL) implement it. A stream whose store is transactional leaves the
commit to the user's transaction and only checks that it happened (``committed_in``).
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, field
from typing import Any

from dstream_kafka.offsets import OffsetRange
from dstream_kafka.stores.base import OffsetStore

__all__ = ["Transaction", "TransactionalOffsetStore"]


@dataclass
class Transaction:
    """An open database transaction for one batch, yielded by ``store.transaction(...)``.

    Write results with :meth:`execute` / :meth:`executemany` or through :attr:`cursor` (a
    DB-API cursor; use the driver's parameter style: ``?`` for sqlite3, ``%s`` for psycopg2).
    When :attr:`already_committed` is true the batch was committed before (a re-run after a
    crash): the transaction is rolled back on exit, so the results are not written twice.
    """

    cursor: Any
    group_id: str
    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]
    already_committed: bool = False
    paramstyle: str = field(default="qmark")

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run one statement in the transaction; returns the cursor."""
        self.cursor.execute(sql, params)
        return self.cursor

    def executemany(self, sql: str, seq_of_params: Any) -> Any:
        """Run one statement for every parameter tuple in the transaction; returns the cursor."""
        self.cursor.executemany(sql, list(seq_of_params))
        return self.cursor


class TransactionalOffsetStore(OffsetStore):
    """An offset store that writes user results and offsets in one database transaction."""

    transactional = True

    def transaction(self, group_id: str, batch_time_ms: Any, ranges: Any, *,
                    epoch: int | None = None) -> contextlib.AbstractContextManager[Transaction]:
        """Write results and the batch's offsets in one database transaction.

        The group's offsets are locked and the batch checked on entry, so a fenced batch fails
        before the block runs. On normal exit the offsets are updated (same fencing rules) and
        the transaction commits; any exception rolls back the results and the offsets and
        propagates. ``batch_time_ms`` may be the ``datetime`` PySpark's ``foreachRDD`` gives;
        ``ranges`` may be a KafkaRDD. If the batch was already committed (a re-run) the block
        runs with ``tx.already_committed`` set and everything is rolled back on exit. If the
        store was closed since ``epoch`` (default: since the call), the batch is refused with
        :class:`~dstream_kafka.errors.OffsetFencedError` and everything is rolled back: a
        stream's stop closes its store, so a batch it abandoned never commits afterwards.

        Examples
        --------
        >>> def save(time, rdd):                                         # doctest: +SKIP
        ...     rows = rdd.map(lambda r: (r[5], 1)).collect()
        ...     with store.transaction("my-group", time, rdd) as tx:
        ...         tx.executemany('INSERT INTO "results" VALUES (?, ?)', rows)
        """
        group_id, t, given, merged = self._check_batch_args(group_id, batch_time_ms, ranges)
        return self._transaction(group_id, t, given, merged, self._epoch if epoch is None else epoch)

    @abc.abstractmethod
    def _transaction(self, group_id: str, batch_time_ms: int, given: tuple[OffsetRange, ...],
                     merged: tuple[OffsetRange, ...], epoch: int
                     ) -> contextlib.AbstractContextManager[Transaction]:
        """Run the block in one database transaction; its final write inside
        ``self._open_since(epoch, ...)``."""

    @abc.abstractmethod
    def _committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        """Return whether the batch at ``batch_time_ms`` is committed for the group."""

"""stores/sql.py bounded by its timeout on PostgreSQL: a call behind a lock another session holds
fails within it, and a timeout that bounds nothing is refused."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import ConfigurationError, OffsetStoreError
from dstream_kafka.stores import OffsetStores

from support import G, bounded, r


PG_TIMEOUT = 3.0


@pytest.fixture
def pg_store_behind_a_lock(postgres: Any, unique: Callable[[str], str]) -> Iterator[Any]:
    """A PostgreSQL store (timeout 3 s) whose offsets table another session holds locked."""
    prefix = "s_" + unique("s")[-8:] + "_"
    store = OffsetStores.postgres(table_prefix=prefix, timeout=PG_TIMEOUT, **postgres.dsn_params())
    store.commit(G, 1000, [r(0, 5)])
    store.close()
    blocker = postgres.connect()
    blocker.cursor().execute(f'LOCK TABLE "{prefix}offsets" IN ACCESS EXCLUSIVE MODE')
    store = OffsetStores.postgres(table_prefix=prefix, timeout=PG_TIMEOUT, **postgres.dsn_params())
    yield store
    blocker.rollback()
    blocker.close()
    store.close()


@pytest.mark.parametrize("call", ["load", "commit"])
def test_a_postgres_store_call_behind_a_held_lock_fails_within_its_timeout(pg_store_behind_a_lock, call):
    store = pg_store_behind_a_lock
    calls = {"load": lambda: store.load(G), "commit": lambda: store.commit(G, 2000, [r(5, 9)])}
    took, error, _ = bounded(calls[call], 10 * PG_TIMEOUT)
    assert isinstance(error, OffsetStoreError), error
    assert "timeout" in str(error) and took < 2 * PG_TIMEOUT + 2


def test_a_postgres_store_refuses_a_timeout_that_bounds_nothing(postgres):
    with pytest.raises(ConfigurationError, match=r"timeout.*-1.*timeout=30.0"):
        OffsetStores.postgres(timeout=-1, **postgres.dsn_params())

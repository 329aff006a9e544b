"""Offset stores: where a stream keeps the offsets it has committed.

=============================  ==============================================================
``OffsetStores.checkpoint``    write-ahead offsets log + commit log in a checkpoint directory
``OffsetStores.kafka``         the Kafka consumer group (at-least-once)
``OffsetStores.sqlite``        SQLite file, results and offsets in one transaction (default)
``OffsetStores.postgres``      PostgreSQL, results and offsets in one transaction
``OffsetStores.zookeeper``     ZooKeeper, ``/consumers/<group>/offsets/<topic>/<partition>``
``OffsetStores.hbase``         HBase table ``<topic>:<group>:<batchTimeMillis>`` (happybase, Thrift1)
=============================  ==============================================================

Every store implements :class:`OffsetStore` (see :mod:`dstream_kafka.stores.base` for the
rules: atomic commits, fencing of a second driver, idempotent re-commit); its records are in
:mod:`dstream_kafka.stores.records`. The checkpoint, SQL and ZooKeeper stores can mirror every
commit to a Kafka group for lag tools (``also_commit_to_kafka_group``,
:mod:`dstream_kafka.stores.mirror`). Store modules import their optional dependencies
(psycopg2, kazoo, happybase) only when a store is created.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.transactional import Transaction, TransactionalOffsetStore
from dstream_kafka.stores.checkpoint import CheckpointOffsetStore
from dstream_kafka.stores.hbase import HBaseOffsetStore
from dstream_kafka.stores.kafka_group import KafkaGroupOffsetStore
from dstream_kafka.stores.mirror import KafkaGroupMirror, MirrorTarget
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, PlannedBatch, ResetAudit
from dstream_kafka.stores.sql import PostgresOffsetStore, SqliteOffsetStore, SqlOffsetStore
from dstream_kafka.stores.structured_streaming import StructuredStreamingCheckpoint
from dstream_kafka.stores.zookeeper import ZooKeeperOffsetStore

__all__ = [
    "CheckpointOffsetStore",
    "CommitRecord",
    "DataLossRecord",
    "HBaseOffsetStore",
    "KafkaGroupMirror",
    "KafkaGroupOffsetStore",
    "OffsetStore",
    "OffsetStores",
    "PlannedBatch",
    "PostgresOffsetStore",
    "ResetAudit",
    "SqlOffsetStore",
    "SqliteOffsetStore",
    "StructuredStreamingCheckpoint",
    "Transaction",
    "TransactionalOffsetStore",
    "ZooKeeperOffsetStore",
]

class OffsetStores:
    """Factory of the built-in offset stores (a namespace, as Spark's ``ConsumerStrategies``)."""

    def __init__(self) -> None:  # pragma: no cover - a namespace, not a value
        raise TypeError("OffsetStores is a namespace; call OffsetStores.sqlite(...) and friends")

    @staticmethod
    def checkpoint(path: str | os.PathLike[str], *, keep_batches: int = 100, spark_context: Any = None,
                   also_commit_to_kafka_group: MirrorTarget | None | bool = None,
                   create: bool = True) -> CheckpointOffsetStore:
        """Offsets in the checkpoint directory ``path`` (local path or Hadoop URI); ``create=False``
        opens an existing store only."""
        return CheckpointOffsetStore(path, keep_batches=keep_batches, spark_context=spark_context,
                                     also_commit_to_kafka_group=also_commit_to_kafka_group, create=create)

    @staticmethod
    def kafka(kafkaParams: Mapping[str, Any], **kwargs: Any) -> KafkaGroupOffsetStore:
        """Offsets committed to the Kafka consumer group (``data_loss_topic``, ``timeout_ms``)."""
        return KafkaGroupOffsetStore(kafkaParams, **kwargs)

    @staticmethod
    def sqlite(path: str | os.PathLike[str] = "dstream_kafka_offsets.db", **kwargs: Any) -> SqliteOffsetStore:
        """Offsets in a SQLite file (``table_prefix``, ``keep_history``, ``timeout``, ``create``, mirror)."""
        return SqliteOffsetStore(path, **kwargs)

    @staticmethod
    def postgres(dsn: str | None = None, **kwargs: Any) -> PostgresOffsetStore:
        """Offsets in PostgreSQL: a DSN and/or ``psycopg2.connect`` keyword arguments.

        The password (in the DSN or as ``password=``) never appears in repr, logs or errors.
        """
        return PostgresOffsetStore(dsn, **kwargs)

    @staticmethod
    def zookeeper(hosts: Any = "127.0.0.1:2181", **kwargs: Any) -> ZooKeeperOffsetStore:
        """Offsets in ZooKeeper at ``/consumers/<group>/offsets/<topic>/<partition>``."""
        return ZooKeeperOffsetStore(hosts, **kwargs)

    @staticmethod
    def hbase(host: str = "127.0.0.1", port: int = 9090, **kwargs: Any) -> HBaseOffsetStore:
        """Offsets in an HBase table through its Thrift1 gateway (``table``, ``ttl_days``,
        ``timeout``, ``create_table``, mirror); see :mod:`dstream_kafka.stores.hbase`."""
        return HBaseOffsetStore(host, port, **kwargs)

"""Offsets in the Kafka consumer group (``group.id``), and commits to Kafka groups.

:class:`KafkaGroupOffsetStore` commits ``untilOffset`` per partition to the user's group after
the batch's output, as Spark's ``commitAsync`` does, which gives at-least-once delivery. Each
committed offset carries a small JSON metadata string::

    {"dstream_kafka":1,"batch_time_ms":1700000000000,"from":4200,"committed_at_ms":1700000001234}

Limits, stated plainly:

* Fencing is best effort. The committed offsets are read and checked just before the commit,
  but Kafka has no compare-and-set, so two drivers racing within that window both succeed.
* :meth:`~KafkaGroupOffsetStore.history` holds only the latest batch: Kafka keeps one offset
  (and one metadata string) per partition.
* Data-loss records go to a Kafka topic (``_dstream_kafka_data_loss`` by default, one
  partition, ``retention.ms=-1``), keyed by group id. :meth:`~KafkaGroupOffsetStore.data_losses`
  reads the whole topic.
* A broker refuses commits from a client outside the group while the group has active members.
  A stream whose driver consumer subscribes with the same ``group.id`` must therefore pass it
  with :meth:`~dstream_kafka.stores.base.OffsetStore.bind_consumer`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

from dstream_kafka import _kafka_internals
from dstream_kafka.client.configs import ClientConfigs, bootstrapped_client, store_configs
from dstream_kafka.client.configs import store_client_config as kafka_client_config
from dstream_kafka.errors import DStreamKafkaError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit, utc_from_ms

__all__ = ["GroupCommitter", "KafkaGroupOffsetStore", "kafka_client_config"]

log = logging.getLogger(__name__)

DATA_LOSS_TOPIC = "_dstream_kafka_data_loss"


def _ktp(tp: TopicPartition) -> Any:
    from kafka import TopicPartition as KTP

    return KTP(tp.topic, tp.partition)


def _failure(what: str, exc: BaseException) -> OffsetStoreError:
    """The store's error for ``what`` failing with ``exc``: a bootstrap or login failure in the
    words createRDD uses (:func:`~dstream_kafka.client.configs.bootstrapped_client`), a client's
    error with its type."""
    cause = str(exc) if isinstance(exc, DStreamKafkaError) else f"{type(exc).__name__}: {exc}"
    return OffsetStoreError(f"{what} failed: {cause}")


def _meta(text: str | None) -> dict[str, Any]:
    try:
        doc = json.loads(text or "")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) and doc.get("dstream_kafka") == 1 else {}


class GroupCommitter:
    """Commits to Kafka groups through a bound consumer or one owned consumer per group.

    The group store and :class:`~dstream_kafka.stores.mirror.KafkaGroupMirror` commit with it.
    """

    def __init__(self, kafkaParams: Mapping[str, Any] | ClientConfigs, timeout_ms: int = 30_000) -> None:
        # Translated once (bad params refused now, before any data moves): every consumer
        # this committer opens takes its settings from the translation.
        self._configs = store_configs(kafkaParams)
        self._timeout_ms = timeout_ms
        self._owned: dict[str, Any] = {}
        self._bound: Any = None
        self._bound_lock: Any = None

    def bind(self, consumer: Any, lock: Any) -> None:
        """Commit through ``consumer`` (guarded by ``lock``) for its own group."""
        self._bound, self._bound_lock = consumer, lock

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, Any], timeout_ms: int) -> None:
        """Commit ``{TopicPartition: OffsetAndMetadata}`` to ``group_id``."""
        bound = self._bound
        if bound is not None and getattr(bound, "config", {}).get("group_id") == group_id:
            from kafka.errors import RebalanceInProgressError

            kafka_offsets = {_ktp(tp): oam for tp, oam in offsets.items()}
            with self._bound_lock or contextlib.nullcontext():
                try:
                    bound.commit(kafka_offsets, timeout_ms=timeout_ms)
                except RebalanceInProgressError:
                    # A member commits only in a stable generation: finish the rebalance
                    # (without fetching records) and commit once more.
                    _kafka_internals.finish_rejoin(bound, timeout_ms)
                    bound.commit(kafka_offsets, timeout_ms=timeout_ms)
            return
        consumer = self._owned.get(group_id)
        if consumer is None:
            from kafka import KafkaConsumer

            config = kafka_client_config(
                self._configs, defaults={"client_id": f"dstream-kafka-offsets-{group_id}",
                                        "bootstrap_timeout_ms": self._timeout_ms},
                required={"group_id": group_id, "enable_auto_commit": False})
            consumer = self._owned[group_id] = bootstrapped_client(KafkaConsumer, config)
        consumer.commit({_ktp(tp): oam for tp, oam in offsets.items()}, timeout_ms=timeout_ms)

    def close(self) -> None:
        """Close the consumers this committer opened (never the bound one)."""
        for consumer in self._owned.values():
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)
        self._owned.clear()


class KafkaGroupOffsetStore(OffsetStore):
    """Offsets committed to the Kafka consumer group, after the output (at-least-once).

    Parameters
    ----------
    kafkaParams : dict
        Kafka params with ``bootstrap.servers``; security settings are passed through.
    data_loss_topic : str
        Topic holding data-loss records (created on first use).
    timeout_ms : int
        Milliseconds the store waits for Kafka: to bootstrap each client it opens, for each
        request, and for a retriable error (no coordinator yet) to clear. A broker that does
        not answer in time fails the store call with
        :class:`~dstream_kafka.errors.OffsetStoreError`. ``bootstrap.timeout.ms`` and
        ``request.timeout.ms`` in the params override the bootstrap and per-request parts.
        A client is opened as createRDD opens its own, SASL credentials checked first, all
        within the bootstrap bound: no broker reached in time, or refused credentials, fail
        the call with createRDD's words (the servers, the bound and the likely cause, such as
        a ``security.protocol`` the listener does not speak).
    """

    def __init__(self, kafkaParams: Mapping[str, Any], *, data_loss_topic: str = DATA_LOSS_TOPIC,
                 timeout_ms: int = 30_000) -> None:
        super().__init__()
        # Translated once (bad params refused now, before any data moves): the store's
        # consumers, admin client and producer take their settings from this translation.
        self._configs = store_configs(kafkaParams)
        self._servers = dict(kafkaParams).get("bootstrap.servers")
        self._committer = GroupCommitter(self._configs, timeout_ms)
        self._admin: Any = None
        self._data_loss_topic = data_loss_topic
        self._timeout_ms = timeout_ms

    @property
    def keeps_group_offsets(self) -> bool:
        """True: this store's offsets are the group's committed offsets."""
        return True

    def __repr__(self) -> str:
        return f"KafkaGroupOffsetStore(bootstrap.servers={self._servers!r})"

    def _admin_client(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = bootstrapped_client(KafkaAdminClient, kafka_client_config(
                self._configs, "admin", defaults={"request_timeout_ms": self._timeout_ms,
                                                 "bootstrap_timeout_ms": self._timeout_ms}))
        return self._admin

    def _fetch(self, group_id: str, partitions: Collection[TopicPartition] | None = None) -> dict[TopicPartition, Any]:
        spec = None if partitions is None else [_ktp(tp) for tp in partitions]
        deadline = time.monotonic() + self._timeout_ms / 1000
        while True:
            try:
                result = self._admin_client().list_group_offsets({group_id: spec})
                break
            except Exception as exc:
                # A fresh cluster has no __consumer_offsets yet (CoordinatorNotAvailable):
                # retriable errors are retried until the timeout. No broker reached within
                # bootstrap.timeout.ms is final (our error, not retriable).
                if getattr(exc, "retriable", False) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise _failure(f"Reading the committed offsets of Kafka group {group_id!r}", exc) from exc
        return {TopicPartition(tp.topic, tp.partition): oam
                for tp, oam in result.get(group_id, {}).items() if oam.offset is not None and oam.offset >= 0}

    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        super().bind_consumer(consumer, lock)
        self._committer.bind(consumer, lock)

    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: int(oam.offset) for tp, oam in self._fetch(group_id).items()}

    def _commit(self, group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...]) -> bool:
        from kafka.structs import OffsetAndMetadata

        if not merged:
            return False  # nothing to store: Kafka offsets are per partition
        with self._lock:
            current = self._fetch(group_id, [r.topicPartition() for r in merged])
            # Kafka keeps no batch history: the batch is committed when every partition holds
            # its untilOffset with metadata naming this batch.
            done = all(r.topicPartition() in current and current[r.topicPartition()].offset == r.untilOffset
                       and _meta(current[r.topicPartition()].metadata).get("batch_time_ms") == batch_time_ms
                       for r in merged)
            where = f"Kafka group {group_id!r}"
            if self._admit_commit(group_id, batch_time_ms, merged, merged if done else None,
                                  lambda: {tp: int(o.offset) for tp, o in current.items()},
                                  holder=where, place=where,
                                  reset=self._reset_audit) is None:
                return False
            now = int(time.time() * 1000)
            audit = self._reset_audit

            def meta(r: OffsetRange) -> str:
                doc: dict[str, Any] = {"dstream_kafka": 1, "batch_time_ms": batch_time_ms, "from": r.fromOffset,
                                       "committed_at_ms": now}
                if audit is not None:  # per partition: Kafka keeps metadata per committed offset
                    doc["reset"] = {"user": audit.user, "host": audit.host,
                                    "previous": audit.previous.get(r.topicPartition())}
                return json.dumps(doc, separators=(",", ":"))

            offsets = {r.topicPartition(): OffsetAndMetadata(r.untilOffset, meta(r), -1) for r in merged}
            try:
                self._committer.commit(group_id, offsets, self._timeout_ms)
            except Exception as exc:
                error = _failure(f"Committing offsets of batch {batch_time_ms} to Kafka group {group_id!r}", exc)
                raise OffsetStoreError(
                    f"{error}. If the stream's driver consumer subscribes with this group.id, bind it with "
                    "store.bind_consumer(consumer)") from exc
        return True

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        # Only the latest committed batch: Kafka keeps one offset per partition.
        with self._lock:
            metas = {tp: (oam, _meta(oam.metadata)) for tp, oam in self._fetch(group_id).items()}
        metas = {tp: v for tp, v in metas.items() if "batch_time_ms" in v[1] and not v[1].get("data_loss")}
        if not metas or limit <= 0:
            return []
        latest = max(m["batch_time_ms"] for _, m in metas.values())
        chosen = {tp: v for tp, v in metas.items() if v[1]["batch_time_ms"] == latest}
        ranges = tuple(OffsetRange(tp.topic, tp.partition, int(m.get("from", oam.offset)), int(oam.offset))
                       for tp, (oam, m) in sorted(chosen.items()))
        committed_at = max(int(m.get("committed_at_ms", 0)) for _, m in chosen.values())
        resets = {tp: m["reset"] for tp, (_, m) in chosen.items() if isinstance(m.get("reset"), dict)}
        audit = None
        if resets:
            first = next(iter(resets.values()))
            audit = ResetAudit(str(first.get("user")), str(first.get("host")),
                               {tp: int(r["previous"]) for tp, r in resets.items() if r.get("previous") is not None})
        return [CommitRecord(int(latest), ranges, utc_from_ms(committed_at), audit)]

    # -- data loss ----------------------------------------------------------------------------
    def _ensure_data_loss_topic(self) -> None:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        try:
            self._admin_client().create_topics(
                [NewTopic(self._data_loss_topic, 1, -1, topic_configs={"retention.ms": "-1"})],
                timeout_ms=self._timeout_ms)
        except TopicAlreadyExistsError:
            pass

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        from kafka import KafkaProducer
        from kafka.structs import OffsetAndMetadata

        record = {"group_id": group_id,
                  **DataLossRecord.doc(tp, lost_from, lost_until, batch_time_ms, int(time.time() * 1000))}
        with self._lock:
            try:
                self._ensure_data_loss_topic()
                # acks=all: a loss record must survive a broker failure.
                producer = bootstrapped_client(KafkaProducer, kafka_client_config(
                    self._configs, "producer", defaults={"client_id": "dstream-kafka-data-loss",
                                                        "bootstrap_timeout_ms": self._timeout_ms,
                                                        "max_block_ms": self._timeout_ms},
                    required={"acks": "all"}))
                try:
                    producer.send(self._data_loss_topic, key=group_id.encode(),
                                  value=json.dumps(record).encode()).get(timeout=self._timeout_ms / 1000)
                finally:
                    producer.close(timeout=5)
            except Exception as exc:
                raise _failure(f"Recording data loss of {tp.topic}-{tp.partition} [{lost_from}, {lost_until}) "
                               f"for group {group_id!r} in topic {self._data_loss_topic!r}", exc) from exc
            current = self._fetch(group_id, [tp]).get(tp)
            if current is not None and current.offset == lost_from:
                meta = json.dumps({"dstream_kafka": 1, "data_loss": True, "from": lost_from,
                                   "batch_time_ms": batch_time_ms,
                                   "committed_at_ms": record["recorded_at_ms"]}, separators=(",", ":"))
                self._committer.commit(group_id, {tp: OffsetAndMetadata(lost_until, meta, -1)},
                                       self._timeout_ms)

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        config = kafka_client_config(self._configs, defaults={"bootstrap_timeout_ms": self._timeout_ms},
                                     required={"group_id": None, "enable_auto_commit": False})
        records: list[DataLossRecord] = []
        with self._lock:
            try:
                consumer = bootstrapped_client(KafkaConsumer, config)
            except Exception as exc:  # no broker within bootstrap.timeout.ms, credentials refused
                raise _failure(f"Reading data-loss records from topic {self._data_loss_topic!r}", exc) from exc
            try:
                parts = consumer.partitions_for_topic(self._data_loss_topic)
                if not parts:
                    return []
                ktps = [KTP(self._data_loss_topic, p) for p in sorted(parts)]
                consumer.assign(ktps)
                consumer.seek_to_beginning(*ktps)
                end = consumer.end_offsets(ktps)
                deadline = time.monotonic() + self._timeout_ms / 1000
                while any(consumer.position(k, timeout_ms=self._timeout_ms) < end[k] for k in ktps):
                    if time.monotonic() > deadline:
                        raise OffsetStoreError(
                            f"Reading data-loss records from topic {self._data_loss_topic!r} timed out")
                    for batch in consumer.poll(timeout_ms=500).values():
                        for msg in batch:
                            if msg.key != group_id.encode():
                                continue
                            records.append(DataLossRecord.from_doc(json.loads(msg.value)))
            finally:
                consumer.close(autocommit=False)
        return records

    def close(self) -> None:
        with self._lock:
            self._committer.close()
            if self._admin is not None:
                with contextlib.suppress(Exception):
                    self._admin.close()
                self._admin = None
            super().close()

"""Driver-side Kafka look-ups: topics, partitions, and earliest/latest/by-time offsets.

:func:`offset_reader` lends a :class:`KafkaOffsetReader` from a small per-process pool keyed
by the driver consumer settings, so repeated ``createRDD`` calls do not pay for a new client
and a full metadata fetch each time (about 0.1 s). A reader is used by one thread at a time;
concurrent callers get separate readers. Pooled readers are closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import difflib
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from dstream_kafka._kafka_internals import leader_host
from dstream_kafka.errors import (BrokerTimeoutError, ConfigurationError, DStreamKafkaError,
                                  UnknownTopicPartitionError)
from dstream_kafka.client.configs import ClientConfigs, driver_consumer_config, params_fingerprint
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.client.param_checks import bootstrap_failure

__all__ = ["KafkaOffsetReader", "close_offset_readers", "offset_reader"]

_TIMEOUT_MS = 30000


class KafkaOffsetReader:
    """A driver consumer for metadata and offset look-ups; not thread-safe.

    Parameters
    ----------
    kafkaParams : mapping or ClientConfigs
        The user's parameters, used unchanged except that the consumer joins no group, so
        ``isolation.level`` decides whether "latest" is the high watermark or the last
        stable offset; or their :class:`~dstream_kafka.client.configs.ClientConfigs`
        (``driver``).
    consumer : kafka.KafkaConsumer, optional
        Ask through this consumer instead (a stream's driver consumer); its owner closes it.

    Raises
    ------
    ConfigurationError
        If ``bootstrap.servers`` is missing or a parameter is invalid.
    BrokerTimeoutError
        If no bootstrap server answered within ``bootstrap.timeout.ms``.
    """

    def __init__(self, kafkaParams: Mapping[str, Any] | ClientConfigs | None = None, *,
                 consumer: Any = None) -> None:
        if consumer is not None:  # a stream's driver consumer: its owner closes it, not this
            self._consumer = consumer
            self._bootstrap = getattr(consumer, "config", {}).get("bootstrap_servers")
            return
        config = driver_consumer_config(kafkaParams or {})
        if not config.get("bootstrap_servers"):
            raise ConfigurationError(
                "kafkaParams must set bootstrap.servers, e.g. "
                '{"bootstrap.servers": "localhost:9092"}'
            )
        from kafka import KafkaConsumer

        self._bootstrap = config["bootstrap_servers"]
        try:
            self._consumer = KafkaConsumer(**config)
        except Exception as exc:  # no broker within bootstrap.timeout.ms: say so, naming them
            error = bootstrap_failure(config, exc)
            if error is None:
                raise
            raise error from None

    def __enter__(self) -> KafkaOffsetReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close(autocommit=False, timeout_ms=5000)

    def partitions_of(self, topic: str, refresh: bool = False) -> set[int]:
        """Return the partition numbers of ``topic``, or raise if the topic does not exist.

        ``refresh`` fetches fresh metadata first (partitions may have been added).
        """
        if refresh:
            self._consumer.topics()  # always a metadata round trip
        parts = self._consumer.partitions_for_topic(topic)  # refreshes for unknown topics
        if not parts:
            known = sorted(self._consumer.topics())
            close = difflib.get_close_matches(topic, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownTopicPartitionError(
                f"Topic {topic!r} does not exist in the Kafka cluster at {self._bootstrap}{hint}"
            )
        return set(parts)

    def refresh_metadata(self) -> None:
        """Fetch fresh metadata (one round trip): a pooled reader's cached copy may still list
        a topic deleted since, whose offset look-ups would then wait for their timeout."""
        self._consumer.topics()

    def all_topics(self) -> set[str]:
        """Return the name of every topic in the cluster, from fresh metadata."""
        return set(self._consumer.topics())  # always a metadata round trip

    def existing_partitions(self, topics: Iterable[str]) -> dict[str, set[int]]:
        """Return the partition numbers of each of ``topics`` from fresh metadata; an empty set
        for a topic that does not exist."""
        names = self.all_topics()
        return {t: set(self._consumer.partitions_for_topic(t) or ()) if t in names else set()
                for t in topics}

    def check_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Raise :class:`UnknownTopicPartitionError` for the first partition Kafka lacks."""
        for tp in tps:
            parts = self.partitions_of(tp.topic)
            if tp.partition not in parts:
                parts = self.partitions_of(tp.topic, refresh=True)  # cached metadata may be old
            if tp.partition not in parts:
                raise UnknownTopicPartitionError(
                    f"Partition {tp.partition} of topic {tp.topic!r} does not exist: the topic has "
                    f"partitions {_spans(parts)}"
                )

    def topics_matching(self, pattern: str) -> list[str]:
        """Return the topics whose name contains a match of ``pattern`` (Spark's admin reader)."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(
                f"subscribePattern {pattern!r} is not a valid regular expression: {exc}"
            ) from None
        return sorted(t for t in self._consumer.topics() if regex.search(t))

    def leader_host(self, tp: TopicPartition) -> str | None:
        """Return the host of ``tp``'s leader broker from the metadata, or None if unknown."""
        return leader_host(self._consumer, tp)

    def earliest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Return the log start offset of each partition."""
        return self._offsets(self._consumer.beginning_offsets, tps)

    def latest(self, tps: Sequence[TopicPartition],
               timeout_ms: int = _TIMEOUT_MS) -> dict[TopicPartition, int]:
        """Return the log end offset (last stable offset under read_committed) of each partition,
        waiting at most ``timeout_ms`` for the brokers (then BrokerTimeoutError, or
        UnknownTopicPartitionError for a partition deleted meanwhile)."""
        return self._offsets(self._consumer.end_offsets, tps, timeout_ms)

    def for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Return the earliest offset with a timestamp >= the given one (None: no such)."""
        if not timestamps:
            return {}
        from kafka import TopicPartition as KafkaTopicPartition

        found = self._consumer.offsets_for_times(
            {KafkaTopicPartition(*tp): ts for tp, ts in timestamps.items()}, timeout_ms=_TIMEOUT_MS
        )
        return {tp: (None if found.get(tp) is None else found[tp].offset) for tp in timestamps}

    def _offsets(self, lookup: Any, tps: Sequence[TopicPartition],
                 timeout_ms: int = _TIMEOUT_MS) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        from kafka import TopicPartition as KafkaTopicPartition

        from kafka.errors import KafkaTimeoutError

        try:
            found = lookup([KafkaTopicPartition(*tp) for tp in tps], timeout_ms=timeout_ms)
        except KafkaTimeoutError as exc:
            raise self._lookup_timed_out(tps, timeout_ms) from exc
        return {TopicPartition(*tp): offset for tp, offset in found.items()}

    def _lookup_timed_out(self, tps: Sequence[TopicPartition],
                          timeout_ms: int) -> DStreamKafkaError:
        """The error for an offset look-up of ``tps`` that timed out: the partitions that are
        gone from fresh metadata (a topic deleted moments before; the brokers answered its
        look-ups with "unknown partition" until the timeout), else a broker that did not answer."""
        from dstream_kafka.client.reachability import any_reachable

        servers = self._bootstrap
        servers = servers if isinstance(servers, str) else ",".join(map(str, servers or ()))
        existing: dict[str, set[int]] | None = None
        # kafka-python's metadata fetch has no bound: ask only brokers that accept connections
        # (the lag timer calls this with a broker down, and must see the error in time)
        if any_reachable(servers):
            try:
                existing = self.existing_partitions({tp.topic for tp in tps})
            except Exception:  # no fresh metadata either: the brokers do not answer
                existing = None
        gone = [tp for tp in tps if existing is not None and tp.partition not in existing[tp.topic]]
        if gone:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in gone)
            return UnknownTopicPartitionError(
                f"Topic partition {names} no longer exists in the Kafka cluster at "
                f"{self._bootstrap}: it was deleted while its offsets were looked up (the "
                f"brokers answered 'unknown partition' for {timeout_ms} ms); leave it out, or "
                "recreate the topic and read it again")
        return BrokerTimeoutError(
            f"The Kafka cluster at {self._bootstrap} did not answer the offsets of "
            f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in tps)} within {timeout_ms} ms "
            "(a partition without a leader, or brokers overloaded); check the brokers and try "
            "again")


def _spans(parts: Iterable[int]) -> str:
    ordered = sorted(parts)
    if ordered and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}..{ordered[-1]}"
    return ", ".join(map(str, ordered))


_pool: dict[str, KafkaOffsetReader] = {}
_pool_lock = threading.Lock()


@contextmanager
def offset_reader(kafkaParams: Mapping[str, Any] | ClientConfigs) -> Iterator[KafkaOffsetReader]:
    """Lend a pooled :class:`KafkaOffsetReader` for ``kafkaParams`` or ClientConfigs (thread-safe).

    The reader goes back to the pool when the block ends normally or with one of this
    package's errors (bad input leaves the client healthy); after any other error it is
    closed, since its client state is unknown.
    """
    key = params_fingerprint(driver_consumer_config(kafkaParams))
    with _pool_lock:
        reader = _pool.pop(key, None)
    if reader is None:
        reader = KafkaOffsetReader(kafkaParams)
    healthy = False
    try:
        yield reader
        healthy = True
    except DStreamKafkaError:
        healthy = True
        raise
    finally:
        with _pool_lock:
            keep = healthy and key not in _pool
            if keep:
                _pool[key] = reader
        if not keep:
            reader.close()


def close_offset_readers() -> None:
    """Close every pooled reader (also done at interpreter exit)."""
    with _pool_lock:
        readers = list(_pool.values())
        _pool.clear()
    for reader in readers:
        reader.close()


atexit.register(close_offset_readers)

"""Every use of kafka-python beyond its public API, in one module.

kafka-python has no public query for "a group rebalance is pending" or for "which broker leads
this partition", so the driver reads them from the consumer's coordinator and cluster
metadata. Executors turn kafka-python's fetched records into
:class:`~dstream_kafka.record.ConsumerRecord` by field name. Each accessor below names the
attribute it relies on; ``tests/unit/test_kafka_internals.py`` checks every one of them on the
installed kafka-python, so an upgrade that moves one fails there, by name, instead of
degrading a running stream. The tested range is pinned in ``setup.cfg``.
"""

from __future__ import annotations

import threading

from operator import attrgetter
from typing import Any, Callable

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "RECORD_FIELDS",
    "cluster_metadata",
    "finish_rejoin",
    "keep_rejoin_wanted",
    "leader_host",
    "needs_rejoin",
    "record_offset",
    "to_record",
    "transaction_step",
]

#: The fields of kafka-python's ``kafka.consumer.fetcher.ConsumerRecord`` that records are
#: built from (read by name; their positions changed between kafka-python releases before).
RECORD_FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
                 "headers")


def _internal(owner: Any, name: str, where: str) -> Any:
    """Return ``owner.<name>``, or fail naming the kafka-python internal that moved."""
    try:
        return getattr(owner, name)
    except AttributeError:
        import kafka

        raise AttributeError(
            f"kafka-python {kafka.__version__} has no {where}.{name}, which dstream_kafka reads "
            "(see setup.cfg for the kafka-python versions it is tested with)") from None


def needs_rejoin(consumer: Any) -> bool:
    """Return True while ``consumer``'s group wants it to rejoin (another member came or went).

    Reads ``KafkaConsumer._coordinator.need_rejoin()``. A consumer without a group (assigned
    partitions) never needs to rejoin.
    """
    coordinator = _internal(consumer, "_coordinator", "KafkaConsumer")
    return bool(_internal(coordinator, "need_rejoin", "ConsumerCoordinator")())


def request_rejoin(consumer: Any) -> None:
    """Make ``consumer``'s group rejoin stay wanted until the new assignment is in.

    Calls ``KafkaConsumer._coordinator.request_rejoin()``. A rejoin that a metadata change
    asks for (new partitions, a new matching topic) is otherwise wanted only until the leader
    has computed the new assignment, and kafka-python 3.0.12 then stops awaiting the join it
    started, so the new partitions are never assigned.
    """
    coordinator = _internal(consumer, "_coordinator", "KafkaConsumer")
    _internal(coordinator, "request_rejoin", "ConsumerCoordinator")()


def keep_rejoin_wanted(consumer: Any) -> None:
    """Keep ``consumer``'s group rejoin wanted until its assignment is in.

    Calls :func:`request_rejoin` when the group wants a rejoin (:func:`needs_rejoin`), or
    when the consumer is stranded mid-rebalance: ``_coordinator.rebalance_in_progress()``
    while no rejoin is wanted. kafka-python 3.0.12 strands a consumer so when a metadata
    change asked for the rejoin and the leader computed the new assignment before the join
    finished: it stops awaiting that join, stays REBALANCING, and fails every commit with
    RebalanceInProgressError.
    """
    coordinator = _internal(consumer, "_coordinator", "KafkaConsumer")
    if needs_rejoin(consumer) or _internal(coordinator, "rebalance_in_progress", "ConsumerCoordinator")():
        request_rejoin(consumer)


def finish_rejoin(consumer: Any, timeout_ms: int) -> bool:
    """Complete a wanted or stranded group rejoin of ``consumer`` without fetching records.

    Calls :func:`keep_rejoin_wanted`, then ``_coordinator.ensure_active_group(timeout_ms)``;
    returns True when the consumer is a stable group member again within ``timeout_ms``.
    """
    keep_rejoin_wanted(consumer)
    coordinator = _internal(consumer, "_coordinator", "KafkaConsumer")
    return bool(_internal(coordinator, "ensure_active_group", "ConsumerCoordinator")(timeout_ms=timeout_ms))


def cluster_metadata(consumer: Any) -> Any:
    """Return ``consumer``'s cluster metadata (``KafkaConsumer._client.cluster``)."""
    client = _internal(consumer, "_client", "KafkaConsumer")
    return _internal(client, "cluster", "KafkaConsumer._client")


def refresh_metadata(consumer: Any, timeout_ms: int) -> None:
    """Fetch fresh cluster metadata for ``consumer`` now, waiting at most ``timeout_ms``.

    The consumer's metadata listeners see it at once: its group coordinator re-matches a
    subscription pattern and, when partitions or matching topics changed, asks for a rejoin.
    Uses ``cluster.request_update()`` awaited through ``KafkaConsumer._net`` / ``._manager``
    (what ``KafkaConsumer.topics()`` does, but bounded, and for the subscribed topics only).

    Raises
    ------
    kafka.errors.KafkaTimeoutError
        When the brokers did not answer in time.
    """
    cluster = cluster_metadata(consumer)
    net = _internal(consumer, "_net", "KafkaConsumer")
    manager = _internal(consumer, "_manager", "KafkaConsumer")
    net.run(manager.wait_for, cluster.request_update(), timeout_ms)


def leader_host(consumer: Any, tp: TopicPartition) -> str | None:
    """Return the host of ``tp``'s leader broker in ``consumer``'s metadata, None if unknown.

    Metadata only: no request is sent, so a partition the consumer has not seen yet is unknown.
    """
    from kafka import TopicPartition as KafkaTopicPartition

    cluster = cluster_metadata(consumer)
    leader = cluster.leader_for_partition(KafkaTopicPartition(tp.topic, tp.partition))
    if leader is None or leader < 0:
        return None
    broker = cluster.broker_metadata(leader)
    return None if broker is None else str(broker.host)


def producer_partitions(producer: Any, topic: str, timeout_ms: int,
                        refresh: bool = False) -> int | None:
    """Return how many partitions ``topic`` has in ``KafkaProducer`` ``producer``'s metadata,
    waiting at most ``timeout_ms`` for it; None when the topic is not there by then.

    ``KafkaProducer._wait_on_metadata`` with the caller's bound: the public
    ``partitions_for`` (and ``send``) wait ``max.block.ms``, 60 s by default, for a topic that
    does not exist, and ``max.block.ms`` also bounds ``init_transactions``. ``refresh``
    first fetches fresh metadata (``_metadata.request_update()``, sent by the producer's
    sender thread), as the Java producer does for a partition past the known count: the
    kept metadata is otherwise refreshed every ``metadata.max.age.ms`` only.

    Raises
    ------
    kafka.errors.KafkaError
        A non-retriable metadata error (topic authorization ...).
    """
    from kafka.errors import KafkaTimeoutError

    if refresh:
        updated = threading.Event()
        future = _internal(producer, "_metadata", "KafkaProducer").request_update()
        future.add_both(lambda *_: updated.set())
        _internal(_internal(producer, "_sender", "KafkaProducer"), "wakeup",
                  "KafkaProducer._sender")()
        updated.wait(max(timeout_ms, 1) / 1000)
    wait = _internal(producer, "_wait_on_metadata", "KafkaProducer")
    try:
        found = wait(topic, max(int(timeout_ms), 1))
    except KafkaTimeoutError:
        return None
    return len(found) if found else None


def transaction_step(producer: Any, step: str, *args: Any, timeout_ms: int) -> bool:
    """Run the transaction step ``step`` of ``producer`` and wait at most ``timeout_ms``;
    return False when it has not completed by then.

    ``step`` is a method of ``KafkaProducer._transaction_manager`` that returns a
    ``TransactionalRequestResult``: ``send_offsets_to_transaction``, ``begin_commit`` or
    ``begin_abort``; ``KafkaProducer._sender.wakeup()`` then sends it. The public
    ``send_offsets_to_transaction``, ``commit_transaction`` and ``abort_transaction`` of
    kafka-python 3.0.12 wait without a bound, and its TxnOffsetCommit never completes when
    the group coordinator's broker dies meanwhile: the write task would hang for good.

    Raises
    ------
    kafka.errors.KafkaError
        The step's own error (fenced, aborted, not authorized ...).
    """
    manager = _internal(producer, "_transaction_manager", "KafkaProducer")
    result = _internal(manager, step, "KafkaProducer._transaction_manager")(*args)
    _internal(_internal(producer, "_sender", "KafkaProducer"), "wakeup", "KafkaProducer._sender")()
    return bool(result.wait(timeout_ms=timeout_ms))


#: ``record_offset(item)``: the offset of a record kafka-python fetched (a C-level callable,
#: so a whole batch can be checked at once).
record_offset: Callable[[Any], int] = attrgetter("offset")


def to_record(r: Any) -> ConsumerRecord:
    """Return kafka-python's fetched record ``r`` as a :class:`ConsumerRecord`."""
    # Runs per record: tuple.__new__ skips the NamedTuple constructor's argument handling.
    headers = r.headers
    return tuple.__new__(
        ConsumerRecord,
        (r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
         tuple(headers) if headers else ()),
    )

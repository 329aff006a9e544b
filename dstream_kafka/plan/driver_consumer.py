"""The direct stream's consumer on the driver: its member of the Kafka group.

Created on first use from the consumer strategy (Spark's ``ConsumerStrategy.onStart``), it is
the client every look-up of a batch's planning goes through, and, while it is the group's
member, the only client the broker accepts commits of that group from (offset stores commit
through it). Each batch keeps it in its group with a paused ``poll(0)`` that also applies
rebalances (Spark's ``paranoidPoll``); closing it leaves the group at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dstream_kafka import _kafka_internals
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.consumer_strategy import (
    Assign,
    ConsumerStrategy,
    assignment_timeout,
    discover_partitions,
    note_stranded_member,
    seek_back,
)
from dstream_kafka.client.latest_offsets import any_reachable

if TYPE_CHECKING:
    from dstream_kafka.stores.base import OffsetStore

__all__ = ["REJOIN_TIMEOUT_S", "DriverConsumer"]

#: Longest time one batch's driver poll waits for a group rebalance to complete.
REJOIN_TIMEOUT_S = 30.0


class DriverConsumer:
    """The stream's driver consumer, created on first use; thread-safe through :attr:`lock`.

    Parameters
    ----------
    strategy : ConsumerStrategy
    group_id : str or None
        The user's ``group.id``, if any.
    assignment_timeout_s : float
        ``spark.streaming.kafka.assignmentTimeout``: how long creating it waits for partitions.
    stopping : threading.Event
        Set when the stream's stop begins: a poll waiting for a rebalance gives up.
    start_offsets : callable
        The offsets the consumer starts at when it is created (the stream's current offsets).
    store : callable
        The stream's offset store, if any, which commits through the consumer.
    """

    def __init__(self, strategy: ConsumerStrategy, group_id: str | None,
                 assignment_timeout_s: float, stopping: threading.Event,
                 start_offsets: Callable[[], Mapping[TopicPartition, int]],
                 store: Callable[[], OffsetStore | None]) -> None:
        self.strategy = strategy
        self.group_id = group_id
        #: Held by whoever uses the consumer for more than one call (a batch's planning).
        self.lock = threading.RLock()
        self._assignment_timeout_s = assignment_timeout_s
        self._stopping = stopping
        self._start_offsets = start_offsets
        self._store = store
        self._consumer: Any = None

    def get(self) -> Any:
        """Return the consumer, creating it (and binding the offset store to it) first."""
        with self.lock:
            if self._consumer is None:
                with assignment_timeout(self._assignment_timeout_s):
                    self._consumer = self.strategy.onStart(dict(self._start_offsets()))
                store = self._store()
                if store is not None:
                    # While the driver is the group's member, the broker refuses commits from
                    # any other client of that group: stores commit through this consumer.
                    store.bind_consumer(self._consumer, self.lock)
            return self._consumer

    def paranoid_poll(self) -> None:
        """Find new partitions and keep the consumer in its group: a paused ``poll(0)``, then
        short polls while a rebalance is under way (at most :data:`REJOIN_TIMEOUT_S`)."""
        consumer = self.get()
        if not isinstance(self.strategy, Assign):
            discover_partitions(consumer)
        assigned = consumer.assignment()
        if assigned:
            consumer.pause(*assigned)
        records = consumer.poll(timeout_ms=0)
        # poll(0) cannot complete a group rejoin (JoinGroup/SyncGroup need round trips), so
        # when another member joined, poll briefly until the rebalance is through; otherwise
        # the group would wait for us until max.poll.interval.ms.
        deadline = time.monotonic() + REJOIN_TIMEOUT_S
        while True:
            _kafka_internals.keep_rejoin_wanted(consumer)
            if (not _kafka_internals.needs_rejoin(consumer) or time.monotonic() >= deadline
                    or self._stopping.is_set()):
                break
            records = {**records, **consumer.poll(timeout_ms=100)}
        if records:
            # A poll should not return data for paused partitions; if it did, undo it so the
            # driver's position never moves past what executors will read.
            seek_back(consumer, records)

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned to the consumer now."""
        return {TopicPartition(tp.topic, tp.partition) for tp in self.get().assignment()}

    def close(self) -> None:
        """Close the consumer, which leaves the group at once (no session timeout wait);
        with no broker reachable it cannot, and the next start of the group says why it waits."""
        with self.lock:
            if self._consumer is not None:
                servers = str(self.strategy.executorKafkaParams.get("bootstrap.servers", ""))
                if (self.group_id is not None and not isinstance(self.strategy, Assign)
                        and not any_reachable(servers)):
                    session_ms = int(getattr(self._consumer, "config", {}).get("session_timeout_ms", 45000))
                    note_stranded_member(servers, self.group_id, session_ms)
                try:
                    self._consumer.close(autocommit=False)
                finally:
                    self._consumer = None

"""The direct stream's consumer on the driver: its member of the Kafka group.

Created on first use from the consumer strategy (Spark's ``ConsumerStrategy.onStart``), it is
the client every look-up of a batch's planning goes through, and, while it is the group's
member, the only client the broker accepts commits of that group from (offset stores commit
through it). Each batch keeps it in its group with a paused ``poll(0)`` that also applies
rebalances (Spark's ``paranoidPoll``); closing it leaves the group at once.

What the group membership needs besides lives here too: the listener that pauses every
partition as soon as it is assigned (the driver never fetches records), the bound of the
strategies' wait for an assignment (``spark.streaming.kafka.assignmentTimeout``), the static
membership of a subscribing driver (:func:`static_instance_id`), the members of this process
that could not leave their group, partition discovery and undoing a poll.

Static membership (KIP-345): a subscribing driver joins its group with a ``group.instance.id``
derived from the group and what identifies the application and the stream in it (the user's
``group.instance.id`` wins). A driver killed without leaving its group (SIGKILL, a lost
machine) is a member until its ``session.timeout.ms`` expires, and a dynamic member that
restarts waits that out before the group assigns it partitions; a static member that restarts
with the same id takes the dead member's place at once, with its partitions. A static member
does not leave its group when it closes, so a stop with a reachable broker removes the derived
member explicitly (Admin ``remove_group_members``): a stopped stream leaves at once, as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafka import ConsumerRebalanceListener

from dstream_kafka import _kafka_internals
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.client.reachability import any_reachable
from dstream_kafka.errors import KafkaAuthenticationError

if TYPE_CHECKING:
    from dstream_kafka.client.configs import ClientConfigs
    from dstream_kafka.plan.consumer_strategy import ConsumerStrategy
    from dstream_kafka.stores.base import OffsetStore

__all__ = ["REJOIN_TIMEOUT_S", "DriverConsumer", "PauseOnAssign", "assignment_timeout", "assignment_wait_s",
           "application_identity", "discover_partitions", "forget_stranded_member",
           "leave_as_static_member",
           "note_stranded_member", "seek_back", "static_instance_id", "static_membership",
           "static_instance_wanted", "stranded_session_ms"]

log = logging.getLogger(__name__)

#: Longest time one batch's driver poll waits for a group rebalance to complete.
REJOIN_TIMEOUT_S = 30.0

#: How long onStart waits for the group coordinator to hand out partitions, unless a stream
#: sets its ``spark.streaming.kafka.assignmentTimeout`` through :func:`assignment_timeout`.
ASSIGNMENT_TIMEOUT_S = 60.0

# A context variable, not an onStart argument: onStart's signature is public (user strategies
# override it) and stays Spark's.
_assignment_timeout_s: contextvars.ContextVar[float] = contextvars.ContextVar(
    "assignment_timeout_s", default=ASSIGNMENT_TIMEOUT_S)


#: The ``group.instance.id`` a subscribing ``onStart`` called now joins with (None: dynamic);
#: a context variable for the same reason as the assignment timeout.
_static_instance: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "static_instance", default=None)

#: How long removing a stopped driver's static member from its group may take.
LEAVE_TIMEOUT_MS = 5_000


def static_instance_id(group: str, application: str) -> str:
    """The ``group.instance.id`` of the driver of ``application`` in ``group``.

    ``application`` names the application and the stream in it (the checkpoint folder or the
    Spark application's name, and the stream's number): the same inputs give the same id at
    every restart, different ones (another application, another stream) another id. A hash,
    so the id is valid whatever the inputs hold (Kafka takes ``[a-zA-Z0-9._-]``, 249 chars).
    """
    digest = hashlib.sha256(f"{group}\0{application}".encode()).hexdigest()[:24]
    return f"dstream_kafka-{digest}"


def application_identity(checkpoint: str | None, app_name: str, stream: int) -> str:
    """What identifies a stream's application across restarts: its checkpoint folder when it
    has one (``ssc.checkpoint``; ``getOrCreate`` restarts from it), else the Spark
    application's name; and the stream's number in its context."""
    where = f"checkpoint:{checkpoint.rstrip('/')}" if checkpoint else f"app:{app_name}"
    return f"{where}/stream:{stream}"


@contextlib.contextmanager
def static_membership(instance_id: str | None) -> Iterator[None]:
    """Make every subscribing ``onStart`` called inside the block join as static member
    ``instance_id`` (None: as a dynamic member), unless its params give ``group.instance.id``."""
    token = _static_instance.set(instance_id)
    try:
        yield
    finally:
        _static_instance.reset(token)


def static_instance_wanted() -> str | None:
    """The ``group.instance.id`` an ``onStart`` called now joins with (see :func:`static_membership`)."""
    return _static_instance.get()


def leave_as_static_member(kafkaParams: Mapping[str, Any] | ClientConfigs, group: str,
                           instance_id: str) -> None:
    """Remove static member ``instance_id`` from ``group`` (what its close does not do), within
    :data:`LEAVE_TIMEOUT_MS` per request; a failure is logged: the member then stays until its
    ``session.timeout.ms`` expires, or until a driver with the same id takes its place."""
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove

    from dstream_kafka.client.configs import store_client_config

    try:
        # Both bounds: with credentials the brokers refuse, the bootstrap alone would
        # otherwise wait the params' whole bootstrap.timeout.ms (30 s by default).
        config = store_client_config(kafkaParams, "admin",
                                     required={"request_timeout_ms": LEAVE_TIMEOUT_MS,
                                               "bootstrap_timeout_ms": LEAVE_TIMEOUT_MS})
        admin = KafkaAdminClient(**config)
        try:
            admin.remove_group_members(group, [MemberToRemove(group_instance_id=instance_id)])
        finally:
            admin.close()
    except Exception as exc:  # the stop goes on; the session timeout ends the membership
        log.warning("Could not remove static member %s from group %s (%s: %s); it stays a member "
                    "until its session.timeout.ms expires", instance_id, group,
                    type(exc).__name__, exc)


#: (bootstrap.servers, group.id) -> session.timeout.ms of a member of this process that could
#: not leave the group (its stream closed while no broker was reachable).
_stranded_members: dict[tuple[str, str], int] = {}


def note_stranded_member(servers: str, group: str, session_timeout_ms: int) -> None:
    """Remember that a consumer of ``group`` closed without reaching a broker: its LeaveGroup
    was never sent, so the group keeps it until its session expires, counted from when the
    coordinator is back, and a new member's join waits for that (the start then says so)."""
    _stranded_members[(servers, group)] = session_timeout_ms


def stranded_session_ms(servers: str, group: str) -> int | None:
    """The ``session.timeout.ms`` of a member of ``group`` noted by :func:`note_stranded_member`."""
    return _stranded_members.get((servers, group))


def forget_stranded_member(servers: str, group: str) -> None:
    """Forget the stranded member of ``group``: the group has assigned partitions again."""
    _stranded_members.pop((servers, group), None)


@contextlib.contextmanager
def assignment_timeout(seconds: float) -> Iterator[None]:
    """Bound the partition-assignment wait of every ``onStart`` called inside the block.

    Parameters
    ----------
    seconds : float
        How long a subscribing strategy waits for its group to assign it partitions.
    """
    token = _assignment_timeout_s.set(float(seconds))
    try:
        yield
    finally:
        _assignment_timeout_s.reset(token)


def assignment_wait_s() -> float:
    """How long an ``onStart`` called now waits for partitions (see :func:`assignment_timeout`)."""
    return _assignment_timeout_s.get()


class PauseOnAssign(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """Rebalance listener: pause new partitions at once, so the driver never fetches."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
        # Revoked partitions are found by the stream itself, by comparing the assignment
        # with the partitions it tracks.
        pass

    def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
        assigned = list(assigned)
        if assigned:
            self.consumer.pause(*assigned)


#: Longest wait of a batch's metadata refresh (partition discovery); on timeout the next
#: batch tries again.
DISCOVERY_TIMEOUT_MS = 2_000


def discover_partitions(consumer: Any, timeout_ms: int = DISCOVERY_TIMEOUT_MS) -> None:
    """Refresh a subscribed driver consumer's metadata now, so partitions added to its topics
    and new topics matching its pattern join the assignment at this batch, not after
    ``metadata.max.age.ms`` (Structured Streaming lists partitions at every trigger). The
    group rejoin this asks for runs in the next poll. A refresh that fails or times out is
    logged at DEBUG: discovery waits for the next batch, and an outage is for the
    latest-offsets look-up to report."""
    from kafka.errors import KafkaError

    try:
        _kafka_internals.refresh_metadata(consumer, timeout_ms)
    except KafkaError as exc:
        log.debug("Metadata refresh for partition discovery failed: %s", exc)


def seek_back(consumer: Any, records: Mapping[Any, list[Any]]) -> None:
    """Undo a poll that returned records: seek each partition to its smallest returned offset."""
    for tp, recs in records.items():
        if recs:
            consumer.seek(tp, min(r.offset for r in recs))


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
    subscribes : bool
        Whether the strategy subscribes (joins a group that assigns partitions) rather than
        assigning its partitions itself (``Assign``).
    application : callable, optional
        What identifies the application and this stream in it, asked when the consumer is
        created; with a ``group_id`` and ``subscribes``, the consumer joins as the static
        member :func:`static_instance_id` derives from them. None: a dynamic member.
    """

    def __init__(self, strategy: ConsumerStrategy, group_id: str | None,
                 assignment_timeout_s: float, stopping: threading.Event,
                 start_offsets: Callable[[], Mapping[TopicPartition, int]],
                 store: Callable[[], OffsetStore | None], *, subscribes: bool,
                 application: Callable[[], str] | None = None) -> None:
        self.strategy = strategy
        self.group_id = group_id
        #: Held by whoever uses the consumer for more than one call (a batch's planning).
        self.lock = threading.RLock()
        self._assignment_timeout_s = assignment_timeout_s
        self._stopping = stopping
        self._start_offsets = start_offsets
        self._store = store
        self._subscribes = subscribes
        self._application = application
        self._consumer: Any = None
        #: The static member id this driver derived and joined with (None: it did not).
        self.static_id: str | None = None

    def _derived_id(self) -> str | None:
        if self.group_id is None or not self._subscribes or self._application is None:
            return None
        return static_instance_id(self.group_id, self._application())

    def _servers(self) -> str:
        return str(self.strategy.executorKafkaParams.get("bootstrap.servers", ""))

    def get(self) -> Any:
        """Return the consumer, creating it (and binding the offset store to it) first."""
        with self.lock:
            if self._consumer is None:
                derived = self._derived_id()
                try:
                    with assignment_timeout(self._assignment_timeout_s), static_membership(derived):
                        self._consumer = self.strategy.onStart(dict(self._start_offsets()))
                except BaseException as exc:
                    # A start that failed after joining (no assignment) must not leave its
                    # static member behind either; one whose login the brokers refused never
                    # joined (and removing it would wait out a bootstrap that cannot succeed).
                    if (derived is not None and self.group_id is not None
                            and not isinstance(exc, KafkaAuthenticationError)
                            and any_reachable(self._servers())):
                        leave_as_static_member(self.strategy.client_configs, self.group_id, derived)
                    raise
                joined = getattr(self._consumer, "config", {}).get("group_instance_id")
                self.static_id = joined if derived is not None and joined == derived else None
                store = self._store()
                if store is not None:
                    # While the driver is the group's member, the broker refuses commits from
                    # any other client of that group: stores commit through this consumer.
                    store.bind_consumer(self._consumer, self.lock)
            return self._consumer

    def paranoid_poll(self, discover: bool = True) -> None:
        """Find new partitions (unless not ``discover``) and keep the consumer in its group: a
        paused ``poll(0)``, then short polls while a rebalance is under way (at most
        :data:`REJOIN_TIMEOUT_S`)."""
        consumer = self.get()
        if self._subscribes and discover:
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
        """Close the consumer, which leaves the group at once (no session timeout wait; a
        derived static member is removed from it); with no broker reachable it cannot, and the
        next start of the group says why it waits (a restart with the same static id does not
        wait). A static member the user named with ``group.instance.id`` stays in the group
        until its ``session.timeout.ms`` expires, as Kafka's static members do."""
        with self.lock:
            if self._consumer is not None:
                servers = self._servers()
                reachable = True
                if self.group_id is not None and self._subscribes and not any_reachable(servers):
                    reachable = False
                    session_ms = int(getattr(self._consumer, "config", {}).get("session_timeout_ms", 45000))
                    note_stranded_member(servers, self.group_id, session_ms)
                static_id, self.static_id = self.static_id, None
                try:
                    self._consumer.close(autocommit=False)
                finally:
                    self._consumer = None
                    if static_id is not None and reachable and self.group_id is not None:
                        leave_as_static_member(self.strategy.client_configs, self.group_id,
                                               static_id)

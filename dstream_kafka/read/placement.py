"""Location strategies, the executor lookup, and the hashing that places a Kafka partition
on an executor.

The strategy set is closed, as in Spark's sealed ``LocationStrategy``: ``PreferConsistent``
and ``PreferBrokers`` are singletons and ``PreferFixed`` compares by its host map. Users
reach them through :class:`LocationStrategies`. Placement follows Spark's
``KafkaRDD.getPreferredLocations``: executors sorted by host then executor id, both
descending, and ``floorMod(TopicPartition.hashCode, n)`` picks one, so a partition lands on
the same executor every batch and its cached consumer is reused. A location is only a
preference, never a requirement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition, as_topic_partition

__all__ = [
    "ExecutorLocation",
    "LocationStrategies",
    "LocationStrategy",
    "PreferBrokers",
    "PreferConsistent",
    "PreferFixed",
    "executor_location_string",
    "executor_locations",
    "locations_for",
    "preferred_hosts_for",
    "preferred_location",
    "preferred_locations_for",
    "sort_executors",
]

_BROKERS_NEED_LOOKUP = (
    "If you want to prefer brokers, you must provide a mapping using PreferFixed "
    "A single KafkaRDD does not have a driver consumer and cannot look up brokers for you."
)


class LocationStrategy:
    """Base of the closed set of location strategies; instances are immutable.

    Build them through :class:`LocationStrategies`, never by subclassing.
    """

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


class _Singleton(LocationStrategy):
    __slots__ = ()
    _name = ""

    def __new__(cls) -> _Singleton:
        instance = cls.__dict__.get("_instance")
        if instance is None:
            instance = super().__new__(cls)
            type.__setattr__(cls, "_instance", instance)
        return instance

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        # Unpickles to the module-level instance, so identity survives shipping to executors.
        return self._name


class _PreferConsistent(_Singleton):
    __slots__ = ()
    _name = "PreferConsistent"


class _PreferBrokers(_Singleton):
    __slots__ = ()
    _name = "PreferBrokers"


#: Distribute partitions consistently across all executors (the usual choice).
PreferConsistent: LocationStrategy = _PreferConsistent()
#: Prefer the executor on each partition's leader broker host (only when executors run there).
PreferBrokers: LocationStrategy = _PreferBrokers()


class PreferFixed(LocationStrategy):
    """Prefer the host given for each topic partition; others are placed consistently.

    Parameters
    ----------
    hostMap : Mapping
        ``{TopicPartition: host}``. Keys may be :class:`~dstream_kafka.offsets.TopicPartition`,
        kafka-python ``TopicPartition`` or ``(topic, partition)`` tuples.

    Raises
    ------
    ConfigurationError
        If ``hostMap`` is not a mapping, a key is not a topic partition or a host is not a
        non-empty string.
    """

    __slots__ = ("hostMap",)
    __match_args__ = ("hostMap",)

    hostMap: Mapping[TopicPartition, str]

    def __init__(self, hostMap: Mapping[Any, str]) -> None:
        if not isinstance(hostMap, Mapping):
            raise ConfigurationError(
                "PreferFixed needs a mapping of TopicPartition to host, "
                f"got {type(hostMap).__name__}; "
                "e.g. LocationStrategies.PreferFixed({TopicPartition('events', 0): 'host1'})"
            )
        hosts: dict[TopicPartition, str] = {}
        for key, host in hostMap.items():
            tp = as_topic_partition(key, "PreferFixed key")
            if not isinstance(host, str) or not host:
                raise ConfigurationError(
                    f"PreferFixed host for {tp} must be a non-empty host name string, got {host!r}"
                )
            hosts[tp] = host
        object.__setattr__(self, "hostMap", MappingProxyType(hosts))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PreferFixed):
            return NotImplemented
        return dict(self.hostMap) == dict(other.hostMap)

    def __hash__(self) -> int:
        return hash(frozenset(self.hostMap.items()))

    def __repr__(self) -> str:
        return f"PreferFixed({dict(self.hostMap)!r})"

    def __reduce__(self) -> tuple[type[PreferFixed], tuple[dict[TopicPartition, str]]]:
        return (PreferFixed, (dict(self.hostMap),))


class LocationStrategies:
    """Factory namespace for location strategies, as Spark's ``LocationStrategies``.

    Examples
    --------
    >>> LocationStrategies.PreferConsistent is LocationStrategies.PreferConsistent
    True
    >>> LocationStrategies.PreferFixed({("t", 0): "h"}) == PreferFixed({("t", 0): "h"})
    True
    """

    PreferConsistent = PreferConsistent
    PreferBrokers = PreferBrokers
    PreferFixed = PreferFixed

    def __init__(self) -> None:
        raise TypeError("LocationStrategies is a namespace; use its attributes")


class ExecutorLocation(NamedTuple):
    """An executor as a scheduling location (Spark's ``ExecutorCacheTaskLocation``)."""

    host: str
    executorId: str

    def __str__(self) -> str:
        return executor_location_string(self)


def executor_location_string(e: ExecutorLocation | tuple[str, str]) -> str:
    """Return Spark's location string ``executor_<host>_<executorId>``."""
    host, executor_id = e
    return f"executor_{host}_{executor_id}"


def _java_order(s: str) -> bytes:
    # Java compareTo orders by UTF-16 code unit; big-endian UTF-16 bytes sort the same way.
    return s.encode("utf-16-be", "surrogatepass")


def sort_executors(execs: Iterable[ExecutorLocation | tuple[str, str]]) -> list[ExecutorLocation]:
    """Sort executors by host descending, then executor id descending (string order).

    This is Spark's ``KafkaRDD.compareExecutors``: any permutation of ``(a,3) (a,4) (b,1)
    (b,2)`` sorts to ``[b2, b1, a4, a3]``.
    """
    locations = [e if isinstance(e, ExecutorLocation) else ExecutorLocation(*e) for e in execs]
    for e in locations:
        if not isinstance(e.host, str) or not isinstance(e.executorId, str):
            raise ConfigurationError(
                f"Executor {e!r} needs a string host and a string executorId, e.g. ('host1', '1')"
            )
    return sorted(
        locations, key=lambda e: (_java_order(e.host), _java_order(e.executorId)), reverse=True
    )


def preferred_location(
    tp: Any,
    executors: Iterable[ExecutorLocation | tuple[str, str]],
    preferred_host: str | None = None,
    *,
    presorted: bool = False,
) -> str | None:
    """Return the preferred executor location string for ``tp``, or ``None``.

    Candidates are the executors on ``preferred_host`` when there are any, else all
    executors. The choice is ``sorted[floorMod(tp.javaHash(), n)]``, which depends only on
    the topic partition and the executor set, so it is stable across batches.

    Parameters
    ----------
    tp : TopicPartition or (topic, partition)
    executors : iterable of ExecutorLocation or (host, executorId)
    preferred_host : str, optional
        Host from the location strategy (:func:`preferred_hosts_for`).
    presorted : bool
        Skip sorting when ``executors`` is already in :func:`sort_executors` order.
    """
    execs = list(executors) if presorted else sort_executors(executors)
    if preferred_host is not None:
        on_host = [e for e in execs if e[0] == preferred_host]
        if on_host:
            execs = on_host
    if not execs:
        return None
    # Python's % with a positive divisor is Java's Math.floorMod.
    index = as_topic_partition(tp).javaHash() % len(execs)
    return executor_location_string(execs[index])


def preferred_hosts_for(
    strategy: LocationStrategy,
    topic_partitions: Iterable[Any],
    leader_lookup: Callable[[TopicPartition], str | None] | None = None,
) -> dict[TopicPartition, str | None]:
    """Map each topic partition to the host ``strategy`` prefers (``None``: no preference).

    ``PreferConsistent`` prefers no host; ``PreferFixed`` uses its map and ``None`` for
    partitions it does not name; ``PreferBrokers`` asks ``leader_lookup(tp)`` for the
    leader's host.

    Raises
    ------
    ConfigurationError
        ``PreferBrokers`` without ``leader_lookup`` (a single KafkaRDD has no driver consumer
        to look brokers up with), or an unknown strategy.
    """
    tps = [as_topic_partition(tp) for tp in topic_partitions]
    if strategy is PreferConsistent:
        return {tp: None for tp in tps}
    if strategy is PreferBrokers:
        if leader_lookup is None:
            raise ConfigurationError(_BROKERS_NEED_LOOKUP)
        return {tp: leader_lookup(tp) for tp in tps}
    if isinstance(strategy, PreferFixed):
        return {tp: strategy.hostMap.get(tp) for tp in tps}
    raise ConfigurationError(
        f"Unknown location strategy {strategy!r}; use LocationStrategies.PreferConsistent, "
        "LocationStrategies.PreferBrokers or LocationStrategies.PreferFixed(hostMap)"
    )


def executor_locations(sc: Any) -> list[ExecutorLocation]:
    """Return the executors tasks can run on, in Spark's placement order.

    Read from the driver's status store; a JVM that cannot answer gives no executors (no
    preferences, not a failure). The driver counts only in local mode, where it is the
    executor (id ``driver``); elsewhere it runs no tasks.
    """
    from dstream_kafka._spark_internals import executor_list

    found = [ExecutorLocation(host, executor_id) for host, executor_id in executor_list(sc)]
    executors = [e for e in found if e.executorId != "driver"]
    master = str(sc.master)
    if not executors and master.startswith("local") and not master.startswith("local-cluster"):
        executors = [e for e in found if e.executorId == "driver"]
    return sort_executors(executors)


def preferred_locations_for(
    sc: Any,
    ranges: Sequence[OffsetRange],
    preferred_hosts: Mapping[TopicPartition, str | None] | None = None,
    executors: Sequence[ExecutorLocation] | None = None,
) -> list[str | None]:
    """Return the preferred executor location string of each range (``None``: no preference).

    Spark's ``KafkaRDD.getPreferredLocations``: executors on the preferred host when there
    are any, else all executors; ``floorMod(tp.hashCode, n)`` picks one. ``executors=None``
    looks them up with :func:`executor_locations`.
    """
    execs = sort_executors(executors) if executors is not None else executor_locations(sc)
    hosts = preferred_hosts or {}
    tps = [r.topicPartition() for r in ranges]
    return [preferred_location(tp, execs, hosts.get(tp), presorted=True) for tp in tps]


def locations_for(
    sc: Any,
    strategy: LocationStrategy,
    ranges: Sequence[OffsetRange],
    leader_lookup: Callable[[TopicPartition], str | None] | None = None,
    executors: Sequence[ExecutorLocation] | None = None,
) -> list[str | None]:
    """Return the preferred executor location string of each range under ``strategy``.

    The host ``strategy`` prefers for each range's partition (:func:`preferred_hosts_for`;
    ``PreferBrokers`` asks ``leader_lookup``), then the executor on it
    (:func:`preferred_locations_for`; ``executors=None`` looks them up).

    Raises
    ------
    ConfigurationError
        As :func:`preferred_hosts_for`: ``PreferBrokers`` without ``leader_lookup``, or an
        unknown strategy.
    """
    hosts = preferred_hosts_for(strategy, [r.topicPartition() for r in ranges], leader_lookup)
    return preferred_locations_for(sc, ranges, hosts, executors)

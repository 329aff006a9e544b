"""The broker side of ``dstream-kafka offsets``: which brokers to ask, which partitions exist,
the log bounds an offset must lie in, and whether a stream still holds the group.

``describe``, ``import`` and ``reset`` share these checks so they refuse (or clamp) the same
input with the same words: a topic name Kafka would refuse, a topic or partition the cluster
does not have, an offset outside ``[log start, log end]``.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError, UnknownTopicPartitionError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.base import OffsetStore

__all__ = ["OffsetsBroker", "bound_note", "brokers_for", "check_named_partitions", "check_topic_name"]

# Kafka's own rule for topic names (Topic.validate).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topic_name(topic: str, field: str = "") -> None:
    """Refuse a name Kafka refuses as a topic name, naming ``field`` (when given).

    Raises
    ------
    ConfigurationError
        ``"<field>: 'x y' is not a Kafka topic name: use 1 to 249 of A-Z a-z 0-9 . _ -"``.
    """
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise ConfigurationError(f"{field}: " * bool(field)
                                 + f"{topic!r} is not a Kafka topic name: use 1 to 249 of A-Z a-z 0-9 . _ -")


def brokers_for(store: OffsetStore | str, bootstrap_servers: str | None) -> str:
    """Return ``bootstrap_servers``, or the hosts of a ``kafka://`` store URI.

    Raises
    ------
    ConfigurationError
        Neither is given, naming ``--bootstrap-servers``.
    """
    from dstream_kafka.stores.uri import parse_store_uri

    if bootstrap_servers is None and isinstance(store, str) and parse_store_uri(store).scheme == "kafka":
        bootstrap_servers = parse_store_uri(store).host_list()
    if bootstrap_servers is None:
        raise ConfigurationError(
            "--bootstrap-servers: the store is not kafka://, so name the brokers of its topics, "
            "e.g. --bootstrap-servers 127.0.0.1:9092")
    return bootstrap_servers


def bound_note(asked: int, start: int, end: int) -> str:
    """Return ``""`` for an offset within ``[start, end]``, else why it is not (the note a reset
    shows for an offset it clamps)."""
    if asked < start:
        return f"asked {asked}, below the log start"
    if asked > end:
        return f"asked {asked}, above the log end"
    return ""


def check_named_partitions(broker: OffsetsBroker, offsets: Iterable[TopicPartition], field: str) -> None:
    """Refuse partitions a file names that the cluster does not have (nothing is written).

    Raises
    ------
    ConfigurationError
        Naming ``field``, the topic (a name Kafka refuses, or one that does not exist) or the
        partition and how many the topic has.
    """
    for tp in sorted(offsets):
        check_topic_name(tp.topic, field)
        existing = broker.partitions_of(tp.topic, what=field)
        if tp.partition not in existing:
            raise ConfigurationError(
                f"{field}: topic {tp.topic!r} has no partition {tp.partition} (it has {len(existing)}); fix the file")


class OffsetsBroker:
    """The broker look-ups of the offsets commands, with errors that name ``--bootstrap-servers``.

    A context manager: the consumer it opens is closed on exit.
    """

    def __init__(self, servers: str, timeout: float) -> None:
        self._servers, self._timeout = servers, timeout
        self._reader: Any = None

    def __enter__(self) -> OffsetsBroker:
        from kafka.errors import KafkaError

        from dstream_kafka.client.offset_reader import KafkaOffsetReader

        ms = int(self._timeout * 1000)
        try:
            self._reader = KafkaOffsetReader({"bootstrap.servers": self._servers, "request.timeout.ms": ms,
                                              "bootstrap.timeout.ms": ms})
        except (KafkaError, BrokerTimeoutError) as exc:
            raise ConfigurationError(
                f"--bootstrap-servers: no broker answered at {self._servers} within {self._timeout:g}s "
                f"({type(exc).__name__}); check the address and that Kafka runs") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.close()

    @contextlib.contextmanager
    def _asking(self) -> Iterator[None]:
        """Turn a broker that stops answering into one line naming ``--bootstrap-servers`` (an
        unknown topic or partition passes unchanged)."""
        from kafka.errors import KafkaError

        try:
            yield
        except KafkaError as exc:
            raise ConfigurationError(
                f"--bootstrap-servers: the broker at {self._servers} did not answer within "
                f"{self._timeout:g}s ({type(exc).__name__})") from None

    def partitions_of(self, topic: str, what: str = "--topic") -> set[int]:
        """Return the partitions of ``topic``; a topic that does not exist is an error naming ``what``."""
        try:
            with self._asking():
                return set(self._reader.partitions_of(topic))
        except UnknownTopicPartitionError as exc:
            raise ConfigurationError(f"{what}: {exc}; check the topic name") from None

    def existing(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """Return ``{partition: ""}`` for partitions the cluster has, else why not: ``"topic
        deleted"`` (the topic is gone) or ``"partition deleted"`` (the topic has fewer now)."""
        tps = list(tps)
        with self._asking():
            found = self._reader.existing_partitions({tp.topic for tp in tps})
        return {tp: "" if tp.partition in found[tp.topic] else
                ("topic deleted" if not found[tp.topic] else "partition deleted") for tp in tps}

    def log_offsets(self, tps: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Return the log start and log end offsets of ``tps`` (which must exist)."""
        with self._asking():
            self._reader.check_partitions(tps)
            return self._reader.earliest(tps), self._reader.latest(tps)

    def for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """Return the first offset at or after each time (None: no record that late)."""
        with self._asking():
            return cast("dict[TopicPartition, int | None]", self._reader.for_times(timestamps))

    def check_no_members(self, group: str, command: str = "reset") -> None:
        """Refuse while consumers are members of ``group`` (a stream's subscribed driver), as
        Kafka's own tool does; the message asks to run ``command`` again once it stopped."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        ms = int(self._timeout * 1000)
        admin = KafkaAdminClient(bootstrap_servers=self._servers, request_timeout_ms=ms,
                                 client_id="dstream-kafka-offsets-reset")
        deadline = time.monotonic() + self._timeout
        try:
            while True:
                try:
                    info = admin.describe_groups([group]).get(group) or {}
                    break
                except KafkaError as exc:  # e.g. no coordinator yet on a new cluster: retriable
                    if not getattr(exc, "retriable", False) or time.monotonic() > deadline:
                        raise ConfigurationError(
                            f"--bootstrap-servers: the broker at {self._servers} could not describe group "
                            f"{group!r} within {self._timeout:g}s ({type(exc).__name__}); nothing was "
                            "written") from None
                    time.sleep(0.2)
        finally:
            admin.close()
        members = info.get("members") or []
        if members:
            hosts = sorted({str(m.get("client_host", "?")).lstrip("/") for m in members})
            raise ConfigurationError(
                f"--group: a stream holds group {group!r}: the Kafka group has {len(members)} active "
                f"member(s) (state {info.get('group_state', '?')}, from {', '.join(hosts)}). Stop the stream "
                f"and {command} again; nothing was written.")


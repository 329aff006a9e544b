"""The harness clients of a local Kafka cluster and the topic-and-record helpers they serve.

:class:`KafkaClusterClients` is the base of :class:`~dstream_kafka.operate.services.kafka.KafkaCluster`:
a cached kafka-python admin client and producer bound to the cluster's ``bootstrap_servers``,
and the test helpers Spark's ``KafkaTestUtils`` had: create, grow and delete topics, produce
keyed records, read the log start and end offsets, delete records. It knows nothing of nodes,
processes or configuration files; the cluster supplies the addresses and node ids.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from dstream_kafka.operate.services.environment import wait_until

__all__ = ["KafkaClusterClients"]


class KafkaClusterClients:
    """Cached admin and producer clients of a cluster, and its topic-and-record helpers."""

    def __init__(self) -> None:
        self._admin: Any = None
        self._producer: Any = None

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``127.0.0.1:port`` the clients connect to; the cluster defines it."""
        raise NotImplementedError

    @property
    def node_ids(self) -> list[int]:
        """Ids of the cluster's nodes; the cluster defines it."""
        raise NotImplementedError

    # ------------------------------------------------------------------ clients
    def admin(self) -> Any:
        """Return a cached ``kafka.KafkaAdminClient`` bound to this cluster."""
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers,
                                           client_id="dstream-kafka-harness",
                                           request_timeout_ms=30000)
        return self._admin

    def producer(self) -> Any:
        """Return a cached ``kafka.KafkaProducer`` (acks=all, no compression)."""
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all",
                                           linger_ms=5, batch_size=256 * 1024,
                                           client_id="dstream-kafka-harness-producer")
        return self._producer

    def _close_clients(self) -> None:
        for attr in ("_producer", "_admin"):
            client = getattr(self, attr)
            setattr(self, attr, None)
            if client is not None:
                try:
                    client.close(timeout=5) if attr == "_producer" else client.close()
                except Exception:
                    pass

    # ------------------------------------------------------------------ topics and records
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        """Create ``name`` and wait until every partition has a leader."""
        from kafka.admin import NewTopic

        rf = replication_factor or min(3, len(self.node_ids))
        topic = NewTopic(name, partitions, rf, topic_configs={k: str(v) for k, v in (config or {}).items()})
        self.admin().create_topics([topic], timeout_ms=int(timeout * 1000))
        self.wait_for_partitions(name, partitions, timeout)

    def add_partitions(self, name: str, total: int, timeout: float = 30.0) -> None:
        """Grow topic ``name`` to ``total`` partitions."""
        from kafka.admin import NewPartitions

        self.admin().create_partitions({name: NewPartitions(total)}, timeout_ms=int(timeout * 1000))
        self.wait_for_partitions(name, total, timeout)
        # The cached producer's metadata does not know the new partitions yet.
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=5)

    def delete_topic(self, name: str) -> None:
        self.admin().delete_topics([name])

    def partitions_for(self, name: str) -> list[int]:
        """Return the partition numbers of ``name`` that have a leader."""
        try:
            described = self.admin().describe_topics([name])
        except Exception:
            return []
        for topic in described:
            if topic.get("name") == name and not topic.get("error_code"):
                return sorted(p["partition_index"] for p in topic.get("partitions", [])
                              if p.get("leader_id", -1) >= 0)
        return []

    def leaders(self, name: str) -> dict[int, int]:
        """Return the leader's node id per partition of ``name`` (-1 while one has none).

        Empty when no broker answers: a fresh admin client may pick a node that was just
        stopped, and the caller polls again rather than fail on that node's refused connection.
        """
        try:
            described = self.admin().describe_topics([name])
        except Exception:
            self._close_clients()
            return {}
        for topic in described:
            if topic.get("name") == name and not topic.get("error_code"):
                return {p["partition_index"]: int(p.get("leader_id", -1))
                        for p in topic.get("partitions", [])}
        return {}

    def wait_for_partitions(self, name: str, count: int, timeout: float = 30.0) -> None:
        wait_until(lambda: len(self.partitions_for(name)) >= count, timeout,
                   f"{count} partition(s) of topic {name} to get leaders")

    def produce(self, topic: str, records: Iterable[Any], partition: int | None = None,
                headers: Sequence[tuple[str, bytes]] | None = None) -> list[tuple[int, int]]:
        """Send records and wait for acknowledgement.

        ``records`` holds values, or ``(key, value)`` tuples; str is UTF-8 encoded.
        Returns ``(partition, offset)`` per record, in order.
        """
        producer = self.producer()
        futures = []
        for rec in records:
            key, value = rec if isinstance(rec, tuple) else (None, rec)
            futures.append(producer.send(topic, key=_bytes(key), value=_bytes(value),
                                         partition=partition, headers=list(headers or [])))
        producer.flush(timeout=60)
        out = []
        for fut in futures:
            meta = fut.get(timeout=60)
            out.append((meta.partition, meta.offset))
        return out

    def send_messages(self, topic: str, counts: Mapping[str, int], partition: int | None = None) -> int:
        """Send each value ``counts[value]`` times with a null key, as Spark's KafkaTestUtils did."""
        values = [v for v, n in counts.items() for _ in range(n)]
        self.produce(topic, values, partition=partition)
        return len(values)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Return the log end offset (next offset to be written) per partition."""
        return self._list_offsets(topic, "latest")

    def beginning_offsets(self, topic: str) -> dict[int, int]:
        """Return the log start offset per partition."""
        return self._list_offsets(topic, "earliest")

    def _list_offsets(self, topic: str, which: str) -> dict[int, int]:
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        spec = OffsetSpec.LATEST if which == "latest" else OffsetSpec.EARLIEST
        parts = self.partitions_for(topic)
        result = self.admin().list_partition_offsets({TopicPartition(topic, p): spec for p in parts})
        return {tp.partition: _offset_of(info) for tp, info in result.items()}

    def delete_records(self, topic: str, before: Mapping[int, int]) -> None:
        """Delete records of ``topic`` below ``before[partition]`` (moves the log start offset)."""
        from kafka import TopicPartition

        self.admin().delete_records({TopicPartition(topic, p): o for p, o in before.items()})


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return str(value).encode("utf-8")


def _offset_of(info: Any) -> int:
    # kafka-python returns an OffsetAndTimestamp-like value; accept plain ints too.
    return int(getattr(info, "offset", info))

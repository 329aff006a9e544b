"""The benchmark's local broker and its topics, filled fast with Kafka's own producer tool.

kafka-python produces ~40-50k records/s on this machine (platform notes, section 6), so filling
2 million records would take a minute per topic. Kafka's ``ProducerPerformance`` (kafka-tools, on
the broker's classpath) writes the same in a few seconds, with random ``--record-size`` values or
values drawn from a ``--payload-file`` (used for the JSON workload).
"""

from __future__ import annotations

import json
import random
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import require_java
from dstream_kafka.operate.services.kafka import KafkaCluster, kafka_classpath

__all__ = ["TopicInfo", "start_broker", "fill_topic", "json_payloads", "JSON_FIELDS"]

#: The JSON workload sums these two integer fields of every value.
JSON_FIELDS = ("a", "b")


@dataclass
class TopicInfo:
    """A filled topic: what every contender reads, and what it should count."""

    name: str
    partitions: int
    records: int
    value_bytes: float  # mean value size, for MB/s
    kind: str  # "bytes" or "json"
    end_offsets: dict[int, int]

    def to_json(self) -> dict:
        return asdict(self)


def start_broker() -> KafkaCluster:
    """Start one KRaft node on 127.0.0.1 with its data in a temporary folder (removed on stop).

    A 1 GiB heap keeps the broker from garbage-collecting during the 2M-record drains.
    """
    cluster = KafkaCluster(brokers=1, heap="1g")
    cluster.start()
    return cluster


def json_payloads(value_bytes: int, count: int = 1000, seed: int = 7) -> list[str]:
    """Return ``count`` distinct JSON lines padded to about ``value_bytes`` bytes.

    ProducerPerformance picks payload lines at random, so the harness cannot know the exact
    field sum of the topic in advance; contenders report their sums and the harness checks that
    every contender agrees instead.
    """
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        doc = {"id": i, "a": rng.randrange(1000), "b": rng.randrange(1000), "pad": ""}
        base = len(json.dumps(doc, separators=(",", ":")))
        doc["pad"] = "x" * max(0, value_bytes - base)
        lines.append(json.dumps(doc, separators=(",", ":")))
    return lines


def fill_topic(cluster: KafkaCluster, name: str, partitions: int, records: int, value_bytes: int,
               kind: str, workdir: Path, log: Path) -> TopicInfo:
    """Create ``name`` and write ``records`` values with ProducerPerformance (acks=1, lz4 off).

    Raises
    ------
    ServiceError
        When the tool fails or the topic ends up with a different record count.
    """
    cluster.create_topic(name, partitions=partitions, replication_factor=1)
    argv = [require_java(), "-Xmx512m", "-cp", kafka_classpath(),
            "org.apache.kafka.tools.ProducerPerformance", "--topic", name,
            "--num-records", str(records), "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}", "acks=1",
            "linger.ms=5", "batch.size=262144", "compression.type=none",
            "buffer.memory=134217728",
            # Round-robin spreads records evenly; the default sticky partitioner skews 2:1.
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner"]
    mean_bytes: float = value_bytes
    if kind == "json":
        lines = json_payloads(value_bytes)
        payload = workdir / f"{name}.payloads"
        payload.write_text("\n".join(lines) + "\n")
        argv += ["--payload-file", str(payload)]
        mean_bytes = sum(len(x) for x in lines) / len(lines)
    else:
        argv += ["--record-size", str(value_bytes)]
    with open(log, "ab") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=900)
    if proc.returncode != 0:
        raise ServiceError(f"ProducerPerformance failed for {name}; see {log}")
    ends = cluster.end_offsets(name)
    if sum(ends.values()) != records:
        raise ServiceError(f"topic {name} holds {sum(ends.values())} records, expected {records}")
    return TopicInfo(name=name, partitions=partitions, records=records, value_bytes=mean_bytes,
                     kind=kind, end_offsets=ends)

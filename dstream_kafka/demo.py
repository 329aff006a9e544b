"""``dstream-kafka demo``: produce a synthetic stream into a local broker and show its offsets."""

from __future__ import annotations

import argparse
import random
import time

__all__ = ["run_demo", "WORDS"]

#: Vocabulary of the synthetic stream (word counts make a readable running total).
WORDS = ("kafka", "spark", "offset", "stream", "batch", "range", "commit", "python")


def _sample_lines(count: int, rng: random.Random) -> list[tuple[str, str]]:
    return [(str(i), " ".join(rng.choice(WORDS) for _ in range(4))) for i in range(count)]


def run_demo(args: argparse.Namespace) -> int:
    """Start (or use) a broker, produce sample records and print the offsets per partition."""
    from dstream_kafka.services.environment import cache_dir
    from dstream_kafka.services.kafka import KafkaCluster

    cluster = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        # A fixed data folder, so a second demo run finds the first run's records and offsets.
        cluster = KafkaCluster(data_dir=cache_dir() / "demo-broker")
        print("Starting a local Kafka broker ...", flush=True)
        cluster.start()
        bootstrap = cluster.bootstrap_servers
    try:
        from kafka import KafkaAdminClient, KafkaProducer
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(args.topic, 4, 1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        rng = random.Random(time.time())
        count = max(args.rate, 1) * 5
        for key, line in _sample_lines(count, rng):
            producer.send(args.topic, key=key.encode(), value=line.encode())
        producer.flush()
        producer.close()
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        parts = consumer.partitions_for_topic(args.topic) or set()
        from kafka import TopicPartition

        tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
        ends = consumer.end_offsets(tps)
        starts = consumer.beginning_offsets(tps)
        consumer.close()
        print(f"Produced {count} records to {args.topic} at {bootstrap}")
        for tp in tps:
            print(f"  partition {tp.partition}: offsets [{starts[tp]}, {ends[tp]})")
        return 0
    finally:
        if cluster is not None:
            cluster.stop()

"""Issue #13 item 3: partition discovery at the next batch, with Kafka's default
``metadata.max.age.ms`` (5 minutes) untouched, against the real broker.

Each test notes when the broker has reported the new partitions or topic and the records are
in, and requires the first batch holding those records to carry a batch time at most two batch
intervals later (batch times are when batches are due, so a loaded machine cannot make them
late, only the jobs).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

from stream_runs import params
from support import wait_until

BATCH = 1.0  # seconds


class FirstSeen:
    """Records, per value, the batch time (ms) of the batch that read it."""

    def __init__(self, stream: Any) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        stream.foreachRDD(self._add)

    def _add(self, batch_time: Any, rdd: Any) -> None:
        values = rdd.map(lambda r: r.value).collect()
        with self.lock:
            for value in values:
                self.seen.setdefault(value, int(batch_time.timestamp() * 1000))

    def batch_of(self, values: list[str]) -> int:
        wait_until(lambda: all(v in self.seen for v in values), f"records {values}")
        with self.lock:
            return max(self.seen[v] for v in values)


def start(make_ssc: Any, strategy: Any) -> FirstSeen:
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent, strategy)
    seen = FirstSeen(stream)
    context.start()
    wait_until(lambda: stream.lastProgress is not None, "the first batch")
    return seen


def test_a_partition_added_to_a_subscribed_topic_is_read_within_two_batch_intervals(
        kafka, make_ssc, unique):
    topic = unique("discover")
    kafka.create_topic(topic, partitions=1)
    seen = start(make_ssc, ConsumerStrategies.Subscribe([topic], params(kafka, unique("g"))))
    kafka.add_partitions(topic, 2)
    kafka.wait_for_partitions(topic, 2)
    kafka.produce(topic, ["new-partition"], partition=1)
    reported_ms = int(time.time() * 1000)
    assert seen.batch_of(["new-partition"]) <= reported_ms + 2 * BATCH * 1000


def test_a_new_topic_matching_the_pattern_is_read_from_its_first_offset_within_two_intervals(
        kafka, make_ssc, unique):
    prefix = unique("pattern")
    kafka.create_topic(f"{prefix}-a", partitions=1)
    strategy = ConsumerStrategies.SubscribePattern(f"{prefix}-.*", params(kafka, unique("g")))
    seen = start(make_ssc, strategy)
    kafka.create_topic(f"{prefix}-b", partitions=1)
    kafka.wait_for_partitions(f"{prefix}-b", 1)
    kafka.produce(f"{prefix}-b", ["first", "second"])
    reported_ms = int(time.time() * 1000)
    assert seen.batch_of(["first", "second"]) <= reported_ms + 2 * BATCH * 1000

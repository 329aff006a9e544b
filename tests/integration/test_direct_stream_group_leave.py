"""plan/direct_stream.py leaves its consumer group when its start fails or it stops (issue #18
item 3), so that a new stream of the group is assigned the partitions at once; real broker."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import DataLossError
from dstream_kafka.stores import OffsetStores

from stream_runs import _members, _params, _values
from support import wait_until


def _failing_start(kafka: Any, make_ssc: Any, unique: Any, tmp_path: Any) -> tuple[str, str]:
    """Start a stream whose stored offset is past the log end; return (topic, group)."""
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, f"v{i}".encode()) for i in range(10)])
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    store.commit(group, 1, [OffsetRange(topic, 0, 0, 100)])  # the log ends at 10
    ssc = make_ssc()
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], _params(
                                               kafka.bootstrap_servers, group)),
                                           offsetStore=store)
    stream.foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError):
        ssc.start()
    return topic, group


# -- item 3: a failed or stopped stream leaves its group -------------------------------------
def test_a_stream_that_fails_at_start_leaves_its_consumer_group(kafka, make_ssc, unique, tmp_path) -> None:
    _topic, group = _failing_start(kafka, make_ssc, unique, tmp_path)
    assert _members(kafka, group) == 0


def test_a_new_stream_of_the_group_reads_right_after_a_failed_start(
        kafka, make_ssc, unique, tmp_path, spark_conf) -> None:
    topic, group = _failing_start(kafka, make_ssc, unique, tmp_path)
    spark_conf("spark.streaming.kafka.assignmentTimeout", "20s")
    ssc = make_ssc()
    seen = _values(KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group))))
    started = time.monotonic()
    ssc.start()
    assert time.monotonic() - started < 15
    wait_until(lambda: len(seen) >= 10, "the 10 records")
    assert sorted(seen) == sorted(f"v{i}" for i in range(10))


def test_a_stopped_stream_leaves_its_consumer_group(kafka, make_ssc, unique) -> None:
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group))
    ).foreachRDD(lambda rdd: None)
    ssc.start()
    assert _members(kafka, group) == 1
    ssc.stop(stopSparkContext=False)
    assert _members(kafka, group) == 0

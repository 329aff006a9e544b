"""A topic deleted after the stream read it to its end is not data loss, even with failOnDataLoss.

The stream reads two topics with failOnDataLoss=true (the default); one of them, read to its last
record, is deleted. Nothing was lost, so the stream goes on with the other topic and records no
loss; a topic deleted with records not read yet still fails the stream (test_hardening_stream.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

pytestmark = pytest.mark.integration


def test_a_topic_read_to_its_end_and_deleted_leaves_a_fail_on_data_loss_stream_running(
        kafka: Any, make_ssc: Callable[..., Any], unique: Callable[[str], str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    from support import string_params, wait_until

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    kept, doomed, group = unique("kept"), unique("doomed"), unique("g")
    for topic in (kept, doomed):
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, [(None, topic.encode())] * 2)
    ssc = make_ssc()
    params = string_params(kafka, group, **{"auto.offset.reset": "earliest"})
    strategy = ConsumerStrategies.Subscribe([kept, doomed], params)
    seen: list[str] = []
    with OffsetStores.sqlite(str(tmp_path / "offsets.db")) as store:
        KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy, offsetStore=store,
                                      failOnDataLoss=True).foreachRDD(
            lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
        with caplog.at_level(logging.WARNING, logger="dstream_kafka.plan.positions"):
            ssc.start()
            wait_until(lambda: len(seen) == 4, "the 4 records")
            kafka.delete_topic(doomed)
            wait_until(lambda: any(f"Topic '{doomed}' was deleted" in m for m in caplog.messages)
                       or ssc.getState() == "STOPPED", "the stream noticing the deletion")
            kafka.produce(kept, [(None, b"after")])
            wait_until(lambda: "after" in seen or ssc.getState() == "STOPPED", "the record sent after the deletion")
            ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
        assert "after" in seen
        assert any(f"{doomed}-0 (up to offset 2)" in m and "nothing is lost" in m for m in caplog.messages)
        assert store.data_losses(group) == []
        wait_until(lambda: store.load(group).get(TopicPartition(kept, 0)) == 3, "the commit of the new record")
        ssc.stop(stopSparkContext=False)  # before the store closes

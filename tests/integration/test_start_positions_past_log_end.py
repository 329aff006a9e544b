"""plan/start_positions.py with a stored offset past the log end (a topic recreated smaller,
issue #18 item 10): the start fails even with failOnDataLoss=False, says why and keeps the store."""

from __future__ import annotations

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import DataLossError
from dstream_kafka.stores import OffsetStores

from stream_runs import _params


# -- item 10: failOnDataLoss=False and a topic recreated smaller -------------------------------
def test_a_stored_offset_past_the_log_end_with_fail_on_data_loss_off_does_not_hint_to_turn_it_off(
        kafka, make_ssc, unique, tmp_path) -> None:
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, b"v")] * 5)
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    store.commit(group, 1, [OffsetRange(topic, 0, 0, 20)])  # the recreated log ends at 5
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group)),
        offsetStore=store, failOnDataLoss=False).foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError) as caught:
        ssc.start()
    message = str(caught.value)
    assert "set failOnDataLoss=False" not in message
    assert f"stored offset 20 of {topic}-0" in message
    assert "failOnDataLoss=False does not skip this case" in message
    assert "new group.id" in message


def test_a_stored_offset_past_the_log_end_is_kept_in_the_store(kafka, make_ssc, unique, tmp_path) -> None:
    from dstream_kafka.offsets import TopicPartition

    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, b"v")] * 5)
    db = str(tmp_path / "offsets.db")
    OffsetStores.sqlite(db).commit(group, 1, [OffsetRange(topic, 0, 0, 20)])
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group)),
        offsetStore=OffsetStores.sqlite(db), failOnDataLoss=False).foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError):
        ssc.start()
    assert OffsetStores.sqlite(db).load(group) == {TopicPartition(topic, 0): 20}

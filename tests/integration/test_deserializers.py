"""client/deserializers.py on executors against the real broker: a deserializer that cannot
read a record names the topic, partition and offset (and the deserializer); a fitting one reads."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange

from support import STRING_DESERIALIZER


INT_DESERIALIZER = "org.apache.kafka.common.serialization.IntegerDeserializer"


UUID_DESERIALIZER = "org.apache.kafka.common.serialization.UUIDDeserializer"


@pytest.mark.parametrize("field", ["value", "key"])
def test_an_integer_deserializer_over_text_names_topic_partition_and_offset(
        kafka: Any, sc: Any, text_topic: str, backend: str, field: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              f"{field}.deserializer": INT_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 2, 4)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    text = str(info.value)
    assert "KafkaReadError" in text
    assert f"{field}.deserializer" in text and "IntegerDeserializer" in text
    assert f"topic {text_topic} partition 0 offset 2" in text


def test_a_uuid_deserializer_over_text_names_the_offset(kafka: Any, sc: Any,
                                                        text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              "value.deserializer": UUID_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)])
    with pytest.raises(Exception, match=f"topic {text_topic} partition 0 offset 0"):
        rdd.collect()


def test_a_failing_user_deserializer_names_the_offset_and_the_callable(
        kafka: Any, sc: Any, text_topic: str) -> None:
    def strict(data: bytes) -> int:
        return int(data)

    params = {"bootstrap.servers": kafka.bootstrap_servers, "value_deserializer": strict}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 1, 5)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    text = str(info.value)
    assert f"topic {text_topic} partition 0 offset 1" in text and "strict" in text


def test_a_string_deserializer_still_reads_text(kafka: Any, sc: Any, text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              "value.deserializer": STRING_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)])
    assert [r.value for r in rdd.collect()] == [f"word-{i}" for i in range(5)]

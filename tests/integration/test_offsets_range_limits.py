"""offsets.py's limits on an offset range (Kafka's 64-bit offsets, 32-bit partitions), checked
on the driver against the real broker before any job."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.errors import InvalidOffsetRangeError
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange


@pytest.mark.parametrize("fields", [(0, 2**63, 2**63 + 5), (0, 0, 2**63), (2**31, 0, 1)])
def test_offsets_beyond_the_kafka_range_are_refused_before_any_job(
        kafka: Any, sc: Any, topic: str, fields: tuple[int, int, int]) -> None:
    with pytest.raises(InvalidOffsetRangeError) as info:
        KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                             [OffsetRange(topic, *fields)])
    assert topic in str(info.value) and "at most" in str(info.value)

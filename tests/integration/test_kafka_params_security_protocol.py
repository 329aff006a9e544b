"""client/kafka_params.py against the real broker: security.protocol is read as Java reads it."""

from __future__ import annotations

from typing import Any

from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange


def test_a_lowercase_security_protocol_is_read_as_java_reads_it(kafka: Any, sc: Any,
                                                                 text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "security.protocol": "plaintext",
              "bootstrap.timeout.ms": "5000"}
    assert KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)]).count() == 5

"""offsets_json.py's checks of the JSON offset options (startingOffsets, assign) on createRDDFromOptions."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.kafka_utils import KafkaUtils


def test_starting_offsets_json_beyond_the_64_bit_range_is_refused(
        kafka: Any, sc: Any, topic: str) -> None:
    with pytest.raises(ConfigurationError, match="startingOffsets"):
        KafkaUtils.createRDDFromOptions(
            sc, {"bootstrap.servers": kafka.bootstrap_servers},
            {"assign": f'{{"{topic}":[0]}}', "startingOffsets": f'{{"{topic}":{{"0":{2**63}}}}}'})


def test_create_rdd_from_options_refuses_a_partition_assigned_twice(
        kafka: Any, sc: Any, text_topic: str) -> None:
    with pytest.raises(ConfigurationError, match="given twice"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {"assign": f'{{"{text_topic}":[0,0]}}'})

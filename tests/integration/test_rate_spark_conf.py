"""plan/rate.py and config.py read the rate keys from a real SparkConf: a negative rate is refused."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.plan.rate import DefaultPerPartitionConfig


@pytest.mark.parametrize("key,value", [
    ("spark.streaming.kafka.maxRatePerPartition", "-5"),
    ("spark.streaming.kafka.minRatePerPartition", "-1"),
    ("spark.streaming.backpressure.initialRate", "-1"),
])
def test_a_negative_rate_is_refused_naming_the_key(sc: Any, key: str, value: str) -> None:
    conf = sc.getConf().set(key, value)
    with pytest.raises(ConfigurationError) as info:
        DefaultPerPartitionConfig(conf)
        SparkConfReader(conf).backpressure_initial_rate  # noqa: B018 - read for its check
    assert key in str(info.value) and value in str(info.value)

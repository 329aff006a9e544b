"""plan/source_options.py: createRDDFromOptions refuses options that are not a mapping of names."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.kafka_utils import KafkaUtils


@pytest.mark.parametrize("options", ["subscribe=x", ["subscribe", "x"], 42])
def test_create_rdd_from_options_refuses_options_that_are_not_a_mapping(
        kafka: Any, sc: Any, options: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        options)
    assert "options must be a dict" in str(info.value) and '{"subscribe"' in str(info.value)


def test_create_rdd_from_options_refuses_a_non_string_option_name(kafka: Any, sc: Any) -> None:
    with pytest.raises(ConfigurationError, match="option names must be strings"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {1: "x"})

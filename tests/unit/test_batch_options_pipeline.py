"""plan_batch_read, the one pipeline of both reads from options: what it refuses before any
broker round trip (the resolved part runs against a real broker in
tests/integration/test_offset_resolution.py)."""

from __future__ import annotations

import pytest

from dstream_kafka.client.configs import ClientConfigs
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.plan.batch_options import plan_batch_read

# Nothing listens on port 9: a pipeline that reached for the broker would fail differently
# (after bootstrap.timeout.ms), so these errors prove the checks come first.
_NOWHERE = {"bootstrap.servers": "127.0.0.1:9", "bootstrap.timeout.ms": "1000"}


@pytest.mark.parametrize(("option", "value"), [("minPartitions", 0),
                                               ("maxRecordsPerPartition", "many")])
def test_split_options_are_refused_before_any_broker_round_trip(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=option):
        plan_batch_read(_NOWHERE, {"subscribe": "t"}, {option: value}, {})


def test_the_reads_own_check_gets_the_translated_parameters_before_the_option_checks() -> None:
    seen: list[ClientConfigs] = []

    def check(configs: ClientConfigs) -> None:
        seen.append(configs)
        raise ConfigurationError("the read's own check")

    with pytest.raises(ConfigurationError, match="the read's own check"):
        plan_batch_read(_NOWHERE, {"subscribe": "t", "minPartitions": 0}, {}, {}, check=check)
    assert seen[0].executor["bootstrap_servers"] == "127.0.0.1:9"


def test_include_headers_is_a_dataframe_option_only() -> None:
    with pytest.raises(ConfigurationError, match="unknown Kafka batch option 'includeHeaders'"):
        plan_batch_read(_NOWHERE, {"subscribe": "t"}, {"includeHeaders": "true"}, {})
    with pytest.raises(ConfigurationError, match=r"option includeHeaders must be 'true' or 'false'"):
        plan_batch_read(_NOWHERE, {"subscribe": "t"}, {"includeHeaders": "yes"}, {}, dataframe=True)


def test_kafka_params_that_are_not_a_dict_are_refused_with_an_example() -> None:
    with pytest.raises(ConfigurationError, match=r"kafkaParams must be a dict, got str "
                                                 r"'bootstrap.servers=x'; e\.g\. "):
        plan_batch_read("bootstrap.servers=x", {"subscribe": "t"}, {}, {})  # type: ignore[arg-type]

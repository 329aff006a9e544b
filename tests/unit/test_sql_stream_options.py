"""The trigger options a DataFrame stream (dstream_kafka.sql.stream) takes and refuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.sql.stream import _trigger_options


def test_the_max_offsets_per_trigger_option_caps_a_dataframe_streams_batches() -> None:
    options = SimpleNamespace(max_offsets=lambda keyword: keyword or 5)
    assert _trigger_options(options, None) == 5  # type: ignore[arg-type]
    assert _trigger_options(options, 7) == 7  # type: ignore[arg-type]


def test_options_without_trigger_settings_leave_the_keyword_as_it_is() -> None:
    assert _trigger_options(SimpleNamespace(), 3) == 3  # type: ignore[arg-type]


@pytest.mark.parametrize("field, option", [("min_offsets_per_trigger", "minOffsetsPerTrigger"),
                                           ("min_partitions", "minPartitions")])
def test_a_dataframe_stream_refuses_trigger_options_it_does_not_apply(field, option) -> None:
    with pytest.raises(ConfigurationError, match=f"option {option} is not supported"):
        _trigger_options(SimpleNamespace(**{field: 4}), None)  # type: ignore[arg-type]

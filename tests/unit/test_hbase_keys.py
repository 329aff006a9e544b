"""Row keys of the HBase offset store: round trips, prefix isolation and scan order (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.stores.hbase_keys import (
    batch_row_key,
    decode_group,
    encode_group,
    group_row_key,
    offsets_row_key,
    offsets_row_prefix,
    parse_offsets_row_key,
)

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789._-", min_size=1, max_size=30)
groups = st.text(min_size=1, max_size=30).filter(lambda g: "\x00" not in g)
millis = st.integers(min_value=0, max_value=10 ** 13 - 1)


@given(groups)
def test_group_encoding_round_trips_and_never_holds_a_colon(group):
    encoded = encode_group(group)
    assert ":" not in encoded
    assert decode_group(encoded) == group


@given(topics, groups, millis)
def test_offsets_row_key_round_trips(topic, group, ms):
    key = offsets_row_key(topic, group, ms)
    assert parse_offsets_row_key(key) == (topic, group, ms)
    assert key.startswith(offsets_row_prefix(topic, group))
    assert len(key) - len(offsets_row_prefix(topic, group)) == 13


@given(topics, groups, millis, millis)
def test_byte_order_of_keys_is_the_order_of_batch_times(topic, group, a, b):
    # What the reversed scan relies on: the newest batch has the greatest key, whatever the digit count.
    ka, kb = offsets_row_key(topic, group, a), offsets_row_key(topic, group, b)
    assert (ka < kb) == (a < b)
    assert batch_row_key(group, a) < batch_row_key(group, b) or a >= b


@given(topics, groups, groups, millis)
def test_a_group_never_falls_under_another_groups_prefix(topic, g1, g2, ms):
    if g1 != g2:
        assert not offsets_row_key(topic, g2, ms).startswith(offsets_row_prefix(topic, g1))


@given(topics, groups, millis)
def test_keys_sort_below_the_scan_start_of_their_prefix(topic, group, ms):
    prefix = offsets_row_prefix(topic, group)
    assert prefix <= offsets_row_key(topic, group, ms) < prefix + b"\xff"
    assert not group_row_key(group).startswith(prefix)  # store rows start with '#', topics cannot


def test_the_guide_layout_for_a_real_batch_time():
    assert offsets_row_key("clicks", "app", 1_700_000_000_000) == b"clicks:app:1700000000000"
    assert offsets_row_key("clicks", "a:b%", 1000) == b"clicks:a%3Ab%25:0000000001000"


@pytest.mark.parametrize("key, part", [
    (b"clicks:app:1000", "is not 13 digits"),
    (b"clicks:app:17000000000x0", "is not 13 digits"),
    (b"clicks:app", "does not have the form"),
    (b"clicks:app:x:1700000000000", "does not have the form"),
    (b"cl icks:app:1700000000000", "is not a Kafka topic name"),
    (b"\xff:app:1700000000000", "is not UTF-8"),
])
def test_keys_of_another_layout_are_rejected_with_the_reason(key, part):
    with pytest.raises(ValueError, match=part):
        parse_offsets_row_key(key)


@pytest.mark.parametrize("call", [
    lambda: offsets_row_key("bad topic", "g", 1),
    lambda: offsets_row_key("t", "", 1),
    lambda: offsets_row_key("t", "g", -1),
    lambda: offsets_row_key("t", "g", 10 ** 13),
    lambda: offsets_row_key("t", "g", True),
])
def test_bad_names_and_times_are_configuration_errors(call):
    with pytest.raises(ConfigurationError):
        call()


@pytest.mark.parametrize("text", ["a:b", "%zz", "a%3", ""])
def test_decode_group_rejects_bad_escapes(text):
    with pytest.raises(ValueError):
        decode_group(text)

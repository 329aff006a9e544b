"""Offset store helpers that need no service: records, range merging, fencing messages, parsing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import pickle
import sys

import pytest

from dstream_kafka.errors import (
    ConfigurationError,
    CorruptCheckpointError,
    MissingDependencyError,
    OffsetFencedError,
)
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import CommitRecord, DataLossRecord, OffsetStores, PlannedBatch
from dstream_kafka.stores.records import (
    advance_offsets,
    batch_time_to_ms,
    chain_breaks,
    check_continuation,
    merge_ranges,
    same_ranges,
    utc_from_ms,
)
from dstream_kafka.stores.checkpoint_format import parse as _parse
from dstream_kafka.stores.kafka_group import kafka_client_config
from dstream_kafka.stores.sql_dialects import PostgresDialect, quote_identifier, validate_prefix


def r(partition: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


def test_records_are_frozen_values():
    at = utc_from_ms(1_700_000_000_000)
    commit = CommitRecord(1, (r(0, 0, 5), r(1, 2, 2)), at)
    assert commit.offsets() == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 2}
    loss = DataLossRecord("t", 0, 10, 40, None, at)
    assert loss.count == 30 and at.tzinfo is dt.timezone.utc
    for record in (commit, loss, PlannedBatch(1, (r(0, 0, 1),))):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.batch_time_ms = 2  # type: ignore[misc]


def test_merge_ranges_sorts_and_joins_contiguous_splits():
    assert merge_ranges([r(1, 0, 5), r(0, 5, 9), r(0, 0, 5)]) == (r(0, 0, 9), r(1, 0, 5))
    assert same_ranges([r(0, 0, 5), r(0, 5, 9)], [r(0, 0, 9)])
    with pytest.raises(ConfigurationError, match="contiguous"):
        merge_ranges([r(0, 0, 5), r(0, 6, 9)])
    with pytest.raises(ConfigurationError, match="OffsetRange"):
        merge_ranges([("t", 0, 0, 5)])


def test_check_continuation_names_every_mismatch_and_accepts_new_partitions():
    stored = {TopicPartition("t", 0): 10, TopicPartition("t", 1): 4}
    check_continuation("g", stored, [r(0, 10, 12), r(2, 7, 9)])
    with pytest.raises(OffsetFencedError) as caught:
        check_continuation("g", stored, [r(0, 9, 12), r(1, 5, 6)])
    text = str(caught.value)
    assert "'g'" in text
    assert "topic t partition 0: stored offset 10, batch expects 9" in text
    assert "topic t partition 1: stored offset 4, batch expects 5" in text
    assert advance_offsets(stored, [r(2, 7, 9)]) == {**stored, TopicPartition("t", 2): 9}


def test_batch_times_from_pyspark_datetimes_round_trip():
    for ms in (0, 1_700_000_000_001, 1_700_000_000_999):
        assert batch_time_to_ms(dt.datetime.fromtimestamp(ms / 1000.0)) == ms
    assert batch_time_to_ms(5) == 5
    for bad in (-1, 1.5, "5", True):
        with pytest.raises(ConfigurationError):
            batch_time_to_ms(bad)


@pytest.mark.parametrize("data, expected", [
    (b"", "empty"),
    (b"v1", "invalid or truncated"),
    (b"v1\n{\"a\": 1", "invalid or truncated"),
    (b"V1\n{}", "format version"),
    (b"v0\n{}", "unknown format version"),
    (b"v7\n{}", "written by a newer dstream_kafka"),
    (b"v1\n{}", r"missing keys \['a'\]"),
])
def test_checkpoint_parser_rejects_damaged_files_with_their_name(data, expected):
    with pytest.raises(CorruptCheckpointError, match=expected) as caught:
        _parse("/cp/commits/7", data, ["a"])
    assert "/cp/commits/7" in str(caught.value)
    assert _parse("/cp/commits/7", b"v1\n{\"a\": 1}\n", ["a"]) == {"a": 1}


def test_identifiers_are_validated_and_quoted():
    assert validate_prefix("dstream_kafka_") == "dstream_kafka_" and validate_prefix("") == ""
    for bad in ("a b", "a;", '"', "9x", "x" * 42):
        with pytest.raises(ConfigurationError):
            validate_prefix(bad)
    assert quote_identifier('we"ird') == '"we""ird"'


def test_kafka_params_become_kafka_python_arguments():
    config = kafka_client_config({"bootstrap.servers": "h:1", "group.id": "g", "sasl.plain.password": "s",
                                  "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
                                  "enable.auto.commit": "false"})
    assert config == {"bootstrap_servers": "h:1", "group_id": "g", "sasl_plain_password": "s",
                      "enable_auto_commit": False, "reconnect_backoff_max_ms": 1000}
    with pytest.raises(ConfigurationError, match="not.a.setting"):
        kafka_client_config({"bootstrap.servers": "h:1", "not.a.setting": 1})
    assert "group_id" not in kafka_client_config({"bootstrap.servers": "h:1", "group.id": "g"}, "admin")
    with pytest.raises(ConfigurationError, match="bootstrap.servers"):
        kafka_client_config({"group.id": "g"})


def test_postgres_dialect_hides_the_password():
    dialect = PostgresDialect("postgresql://u:hunter2secret@db.example:5432/prod", {"connect_timeout": 3})
    assert "hunter2secret" not in dialect.describe()
    wrapped = dialect.wrap("connecting", RuntimeError("FATAL: bad password hunter2secret for u"))
    assert "hunter2secret" not in str(wrapped) and "***" in str(wrapped)
    store = OffsetStores.postgres(host="h", password="hunter2secret")
    assert "hunter2secret" not in repr(store)
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(store)
    with pytest.raises(ConfigurationError) as caught:
        OffsetStores.postgres("host=h password hunter2secret")
    assert "hunter2secret" not in str(caught.value)


def test_missing_optional_dependencies_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "kazoo", None)
    monkeypatch.setitem(sys.modules, "kazoo.client", None)
    with pytest.raises(MissingDependencyError, match=r"dstream_kafka\[zookeeper\]"):
        OffsetStores.zookeeper("127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(MissingDependencyError, match=r"dstream_kafka\[postgres\]"):
        OffsetStores.postgres(host="h")


def test_a_data_loss_record_round_trips_through_its_json_document():
    doc = DataLossRecord.doc(TopicPartition("t", 3), 10, 40, None, 1_700_000_000_000)
    assert list(doc) == ["topic", "partition", "lost_from", "lost_until", "batch_time_ms", "recorded_at_ms"]
    assert DataLossRecord.from_doc(doc) == DataLossRecord("t", 3, 10, 40, None, utc_from_ms(1_700_000_000_000))
    with pytest.raises(ValueError):
        DataLossRecord.from_doc({**doc, "lost_from": "ten"})


# chain_breaks: a stored commit must match its own ranges and continue its predecessor
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_a_commit_continuing_its_predecessor_has_no_break() -> None:
    assert chain_breaks({T0: 12, T1: 4}, [r(0, 12, 20)], {T0: 20, T1: 4}, reset=False, previous="p") == []


def test_offsets_that_contradict_the_commits_own_range_are_a_break() -> None:
    assert chain_breaks(None, [r(0, 12, 20)], {T0: 28}, reset=False, previous="p") == [
        "topic t partition 0: the commit stores offset 28, but its own range ends at 20"]


def test_a_range_that_does_not_start_where_the_previous_commit_ended_is_a_break() -> None:
    assert chain_breaks({T0: 12}, [r(0, 20, 28)], None, reset=False, previous="commit 1") == [
        "topic t partition 0: its range starts at 20, but commit 1 ended at 12"]


def test_a_reset_may_start_anywhere() -> None:
    assert chain_breaks({T0: 12}, [r(0, 4, 4)], {T0: 4}, reset=True, previous="p") == []


def test_an_offset_of_a_partition_outside_the_ranges_must_stay_as_the_predecessor_left_it() -> None:
    assert chain_breaks({T0: 12, T1: 4}, [r(0, 12, 20)], {T0: 20, T1: 9}, reset=False, previous="p") == [
        "topic t partition 1: the commit stores offset 9, but p and its ranges give 4"]

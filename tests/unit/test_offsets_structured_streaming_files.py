"""The Structured Streaming checkpoint store on hand-written folders of Spark's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from dstream_kafka.errors import ConfigurationError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.structured_streaming import StructuredStreamingCheckpoint

META = '{"batchWatermarkMs":0,"batchTimestampMs":1764000000000,"conf":{"spark.sql.shuffle.partitions":"1"}}'


def _checkpoint(root: Path, offsets: list[str], commits: int, version: str = "v1") -> StructuredStreamingCheckpoint:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, source in enumerate(offsets):
        (root / "offsets" / str(batch)).write_text(f"{version}\n{META}\n{source}")
    for batch in range(commits):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return StructuredStreamingCheckpoint(root)


def test_the_offsets_are_those_of_the_newest_committed_batch(tmp_path: Path) -> None:
    store = _checkpoint(tmp_path, ['{"t":{"0":5}}', '{"t":{"0":9}}'], commits=1)
    assert store.load("q") == {TopicPartition("t", 0): 5}
    assert store.pending("q") is not None


def test_a_reset_writes_the_next_batch_and_its_commit_keeping_the_metadata_and_other_partitions(
        tmp_path: Path) -> None:
    store = _checkpoint(tmp_path, ['{"t":{"0":5,"1":7}}'], commits=1)
    store.reset("q", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 5}, user="u", host="h",
                batch_time_ms=1764000000500)
    lines = (tmp_path / "offsets" / "1").read_text().split("\n")
    assert lines[0] == "v1" and lines[2] == '{"t":{"0":2,"1":7}}'
    assert '"spark.sql.shuffle.partitions":"1"' in lines[1] and '"batchTimestampMs":1764000000500' in lines[1]
    assert (tmp_path / "commits" / "1").read_text() == 'v1\n{"nextBatchWatermarkMs":0}'
    assert store.load("q") == {TopicPartition("t", 0): 2, TopicPartition("t", 1): 7}
    assert store.history("q", 1)[0].reset is not None


def test_a_reset_over_an_uncommitted_batch_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = _checkpoint(tmp_path, ['{"t":{"0":5}}', '{"t":{"0":9}}'], commits=1)
    with pytest.raises(OffsetFencedError, match=r"batch 1 is planned but not committed"):
        store.reset("q", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 5}, user="u", host="h")
    assert sorted(p.name for p in (tmp_path / "commits").iterdir()) == ["0"]


def test_an_offsets_log_of_a_newer_format_is_refused_naming_the_upgrade(tmp_path: Path) -> None:
    store = _checkpoint(tmp_path, ['{"t":{"0":5}}'], commits=1, version="v2")
    with pytest.raises(OffsetStoreError, match=r"offsets log format v2, newer than the v1 .* upgrade dstream_kafka"):
        store.load("q")


def test_a_folder_without_offsets_is_no_such_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"No such offset store: .* holds no offsets/ folder, so it is not a "
                                                 r"Structured Streaming checkpoint"):
        StructuredStreamingCheckpoint(tmp_path).load("q")
    with pytest.raises(ConfigurationError, match=r"No such offset store: .*/gone does not exist"):
        StructuredStreamingCheckpoint(tmp_path / "gone").load("q")
    assert not (tmp_path / "gone").exists()


def test_a_checkpoint_takes_no_ordinary_commit(tmp_path: Path) -> None:
    from dstream_kafka.offsets import OffsetRange

    store = _checkpoint(tmp_path, ['{"t":{"0":5}}'], commits=1)
    with pytest.raises(OffsetStoreError, match="takes no commits; move its offsets with `dstream-kafka offsets reset`"):
        store.commit("q", 1, [OffsetRange("t", 0, 5, 6)])

"""Which files a file stream's batch takes (Spark's FileInputDStream rules), and the key
that sets how long taken files are remembered."""

from __future__ import annotations

import pytest

from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming.sources import select_new_files

KEY = "spark.streaming.fileStream.minRememberDuration"


def paths(selected: list[tuple[str, int, int]]) -> list[str]:
    return [path for path, _, _ in selected]


MS = 1_000_000  # ns per ms: modification times and thresholds are epoch ns


def test_a_file_modified_after_the_threshold_and_by_the_batch_time_is_taken() -> None:
    files = [("/d/b", 1500 * MS, 3), ("/d/a", 2000 * MS, 3)]
    assert paths(select_new_files(files, 1000 * MS, 2000, set())) == ["/d/a", "/d/b"]


def test_a_file_modified_at_the_threshold_is_not_taken() -> None:
    assert select_new_files([("/d/a", 1000 * MS, 3)], 1000 * MS, 2000, set()) == []


def test_a_file_modified_later_in_the_thresholds_millisecond_is_taken() -> None:
    """A file moved in right after the stream was created, in the same millisecond."""
    files = [("/d/a", 1000 * MS + 700_000, 3)]
    assert paths(select_new_files(files, 1000 * MS + 400_000, 2000, set())) == ["/d/a"]


def test_a_file_modified_within_the_batch_times_millisecond_is_taken() -> None:
    files = [("/d/a", 2000 * MS + 999_999, 3)]
    assert paths(select_new_files(files, 1000 * MS, 2000, set())) == ["/d/a"]


def test_a_file_modified_after_the_batch_time_waits_for_a_later_batch() -> None:
    files = [("/d/a", 2001 * MS, 3)]
    assert select_new_files(files, 1000 * MS, 2000, set()) == []
    assert paths(select_new_files(files, 1000 * MS, 2100, set())) == ["/d/a"]


def test_a_file_a_remembered_batch_took_is_not_taken_again() -> None:
    assert select_new_files([("/d/a", 1500 * MS, 3)], 1000 * MS, 2000, {"/d/a"}) == []


def test_hidden_files_are_never_taken() -> None:
    assert select_new_files([("/d/.a.tmp", 1500 * MS, 3)], 1000 * MS, 2000, set()) == []


def test_files_are_remembered_for_60_seconds_by_default() -> None:
    assert SparkConfReader({}).file_stream_min_remember_ms == 60_000


def test_a_bare_remember_duration_is_in_seconds_as_spark_reads_it() -> None:
    assert SparkConfReader({KEY: "90"}).file_stream_min_remember_ms == 90_000
    assert SparkConfReader({KEY: "2min"}).file_stream_min_remember_ms == 120_000


def test_a_remember_duration_that_is_not_a_time_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigurationError, match=KEY):
        _ = SparkConfReader({KEY: "a while"}).file_stream_min_remember_ms
    with pytest.raises(ConfigurationError, match=KEY):
        _ = SparkConfReader({KEY: "-5s"}).file_stream_min_remember_ms

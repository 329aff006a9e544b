"""The pure parts of ``offsets reset``: scenario values, the plan table, the audit and the
store template's reset (compare-and-set instead of continuation)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError, OffsetFencedError, OffsetsJsonError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.operate.reset import (
    ResetRow,
    Scenario,
    format_reset,
    parse_datetime,
    parse_duration,
    parse_offsets_file,
)
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, PlannedBatch, ResetAudit, advance_offsets


@pytest.mark.parametrize(("text", "expected"), [
    ("P1D", _dt.timedelta(days=1)),
    ("PT30M", _dt.timedelta(minutes=30)),
    ("P1DT2H3M4.5S", _dt.timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
    ("pt10s", _dt.timedelta(seconds=10)),
])
def test_a_duration_is_read_as_iso_8601_pndtnhnmns(text: str, expected: _dt.timedelta) -> None:
    assert parse_duration(text) == expected


@given(st.integers(0, 999), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_every_written_duration_reads_back(days: int, hours: int, minutes: int, seconds: int) -> None:
    text = f"P{days}DT{hours}H{minutes}M{seconds}S"
    assert parse_duration(text) == _dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


@pytest.mark.parametrize("text", ["1 day", "P", "PT", "P1H", "-P1D", "P1DT", ""])
def test_a_malformed_duration_names_by_duration_and_the_form(text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^--by-duration: .* is not an ISO 8601 duration; use PnDTnHnMnS"):
        parse_duration(text)


def test_a_datetime_with_a_zone_is_that_instant() -> None:
    assert parse_datetime("2025-11-24T16:00:00Z") == 1764000000000
    assert parse_datetime("2025-11-24T17:00:00.250+01:00") == 1764000000250


def test_a_datetime_without_a_zone_is_local_time_as_in_kafkas_tool() -> None:
    assert parse_datetime("2025-11-24T16:00:00") == int(_dt.datetime(2025, 11, 24, 16).timestamp() * 1000)


def test_a_malformed_datetime_names_to_datetime_and_the_form() -> None:
    with pytest.raises(ConfigurationError, match=r"^--to-datetime: 'yesterday' is not an ISO 8601 date-time; use "
                                                 r"YYYY-MM-DDTHH:mm:SS"):
        parse_datetime("yesterday")


def test_a_file_is_kafkas_csv_with_or_without_the_group_column() -> None:
    text = "events,0,23\n\ngroup-a, events, 1, 7\n"
    assert parse_offsets_file(text) == {TopicPartition("events", 0): 23, TopicPartition("events", 1): 7}


def test_a_file_starting_with_a_brace_is_offsets_json() -> None:
    assert parse_offsets_file(' {"events":{"2":5}}') == {TopicPartition("events", 2): 5}


@pytest.mark.parametrize("text", ["events,0", "events,x,1", "events,0,-3", "a,b,c,d,e", "", "\n\n"])
def test_a_malformed_csv_file_names_from_file(text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^--from-file: "):
        parse_offsets_file(text)


def test_a_csv_file_giving_a_partition_twice_is_refused_naming_the_partition_and_both_lines() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_offsets_file("events,0,23\nevents,1,7\nevents,0,40\n")
    assert str(info.value) == ("--from-file: partition 0 of topic 'events' is given twice, on lines 1 and 3; keep "
                               "one line per partition")


def test_offsets_json_with_sentinels_is_refused_naming_from_file() -> None:
    with pytest.raises(OffsetsJsonError, match="--from-file"):
        parse_offsets_file('{"events":{"0":-2}}')


def test_an_unknown_scenario_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="one of to-earliest, to-latest, .*from-file; got 'to-middle'"):
        Scenario("to-middle")


def test_the_plan_table_shows_before_and_after_and_says_nothing_was_written_in_a_dry_run() -> None:
    rows = [ResetRow("g", "t", 0, 118, 0, 0, 120), ResetRow("g", "t", 2, None, 25, 25, 40, "CLAMPED: asked 10, below "
                                                                                           "the log start")]
    assert format_reset(rows, executed=False).splitlines() == [
        "GROUP  TOPIC  PARTITION  CURRENT-OFFSET  NEW-OFFSET  LOG-START-OFFSET  LOG-END-OFFSET  NOTE",
        "g      t              0             118           0                 0             120",
        "g      t              2               -          25                25              40  CLAMPED: asked 10, "
        "below the log start",
        "DRY RUN: 2 partitions planned; 1 clamped into [log start, log end]; nothing written (add --execute to write)"]
    assert format_reset(rows[:1], executed=True).splitlines()[-1] == "RESET: 1 partitions written"


def test_a_skipped_partition_shows_dashes_and_is_counted_apart_from_the_written_ones() -> None:
    rows = [ResetRow("g", "t", 0, 118, 0, 0, 120), ResetRow("g", "gone", 0, 7, None, None, None,
                                                            "SKIPPED: topic deleted")]
    lines = format_reset(rows, executed=True).splitlines()
    assert lines[2].split() == ["g", "gone", "0", "7", "-", "-", "-", "SKIPPED:", "topic", "deleted"]
    assert lines[-1] == ("RESET: 1 partitions written; 1 skipped (topic gone from the cluster, the store keeps its "
                         "offset)")


@given(st.dictionaries(st.tuples(st.text("abc-._", min_size=1, max_size=5), st.integers(0, 2**31 - 1)),
                       st.integers(0, 2**63 - 1), max_size=5), st.text(max_size=8), st.text(max_size=8))
def test_a_reset_audit_survives_its_json_document(previous: dict[tuple[str, int], int], user: str,
                                                   host: str) -> None:
    import json

    audit = ResetAudit(user, host, {TopicPartition(t, p): o for (t, p), o in previous.items()})
    assert ResetAudit.from_doc(json.loads(json.dumps(audit.doc()))) == audit


class DictStore(OffsetStore):
    """Offsets and commits in memory, committed through the template's rules like the real stores."""

    def __init__(self) -> None:
        super().__init__()
        self.offsets: dict[TopicPartition, int] = {}
        self.commits: list[CommitRecord] = []
        self.planned: PlannedBatch | None = None

    def _load(self, group_id: str, topics: Collection[str] | None) -> Mapping[TopicPartition, int]:
        return dict(self.offsets)

    def _pending(self, group_id: str) -> PlannedBatch | None:
        return self.planned

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        done = next((c.ranges for c in self.commits if c.batch_time_ms == t), None)
        stored = self._admit_commit(group_id, t, merged, done, lambda: dict(self.offsets), holder="memory",
                                    place="memory",
                                    reset=self._reset_audit)
        if stored is None:
            return False
        self.offsets = advance_offsets(stored, merged)
        self.commits.insert(0, CommitRecord(t, merged, _dt.datetime.now(_dt.timezone.utc), self._reset_audit))
        return True

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        return self.commits[:limit]

    def _record_data_loss(self, *args: Any) -> None:
        raise NotImplementedError

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        return []


def _store_at(offsets: dict[int, int]) -> DictStore:
    store = DictStore()
    store.commit("g", 1_000, [OffsetRange("t", p, 0, o) for p, o in offsets.items()])
    return store


def test_a_reset_moves_back_as_a_new_audited_commit_after_the_newest_and_keeps_other_partitions() -> None:
    store = _store_at({0: 8, 1: 3})
    t = store.reset("g", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 8}, user="ann", host="h1",
                    batch_time_ms=500)
    assert t == 1_001
    assert store.load("g") == {TopicPartition("t", 0): 2, TopicPartition("t", 1): 3}
    newest = store.history("g", 1)[0]
    assert newest.ranges == (OffsetRange("t", 0, 2, 2),)
    assert newest.reset == ResetAudit("ann", "h1", {TopicPartition("t", 0): 8})
    store.commit("g", 2_000, [OffsetRange("t", 0, 2, 5)])  # the next batch continues the reset
    assert store.history("g", 1)[0].reset is None


def test_a_reset_planned_from_offsets_that_changed_since_is_fenced_and_writes_nothing() -> None:
    store = _store_at({0: 8})
    with pytest.raises(OffsetFencedError, match=r"t-0 holds 8, the reset was planned from 6\)\. A stream is "
                                                r"committing to this group"):
        store.reset("g", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 6}, user="u", host="h")
    assert store.load("g") == {TopicPartition("t", 0): 8} and len(store.commits) == 1


def test_a_reset_is_refused_while_a_planned_batch_is_not_committed() -> None:
    store = _store_at({0: 8})
    store.planned = PlannedBatch(2_000, (OffsetRange("t", 0, 8, 9),))
    with pytest.raises(OffsetFencedError, match=r"a stream holds group 'g' \(batch 2000 is planned but not "
                                                r"committed\)"):
        store.reset("g", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 8}, user="u", host="h")
    assert len(store.commits) == 1


def test_a_stream_batch_after_a_reset_it_did_not_see_is_fenced() -> None:
    store = _store_at({0: 8})
    store.reset("g", {TopicPartition("t", 0): 2}, expected={TopicPartition("t", 0): 8}, user="u", host="h")
    with pytest.raises(OffsetFencedError, match="stored offset 2, batch expects 8"):
        store.commit("g", 5_000, [OffsetRange("t", 0, 8, 10)])

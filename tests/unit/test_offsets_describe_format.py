"""``offsets describe`` renders its rows as a plain or rich table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest

from dstream_kafka.cli import build_parser
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.operate.describe import COLUMNS, OffsetRow, format_rows

ROWS = [OffsetRow("etl", "clicks", 0, 118, 0, 120, 2, 1_764_000_005_000, 0, lag_seconds=1.25),
        OffsetRow("etl", "clicks", 2, 10, 25, 40, 30, None, 15)]
GONE = OffsetRow("etl", "views", 0, 7, None, None, None, 1_764_000_005_000, 0, "topic deleted")


def test_the_plain_table_has_the_kafka_columns_a_lost_mark_and_a_total_line() -> None:
    lines = format_rows(ROWS).splitlines()
    assert lines[0].split() == list(COLUMNS)
    assert lines[1].split() == ["etl", "clicks", "0", "118", "0", "120", "2", "1.2",
                                "2025-11-24T16:00:05.000Z"]
    assert lines[2].split() == ["etl", "clicks", "2", "10", "25", "40", "30", "-", "-", "LOST", "15"]
    assert lines[3] == "TOTAL: 2 partitions, lag 32, 15 records LOST (committed offset below the log start)"
    assert "\x1b[" not in "\n".join(lines)


def test_a_partition_of_a_deleted_topic_shows_dashes_a_topic_deleted_mark_and_stays_out_of_the_lag() -> None:
    lines = format_rows([*ROWS, GONE]).splitlines()
    assert lines[3].split() == ["etl", "views", "0", "7", "-", "-", "-", "-", "2025-11-24T16:00:05.000Z",
                                "TOPIC", "DELETED"]
    assert lines[4] == ("TOTAL: 3 partitions, lag 32, 15 records LOST (committed offset below the log start), "
                        "1 GONE from the cluster (topic deleted; not in the lag)")
    parsed = json.loads(format_rows([GONE], "json"))[0]
    assert (parsed["gone"], parsed["logStartOffset"], parsed["logEndOffset"], parsed["lag"]) == (
        "topic deleted", None, None, None)


PAST = OffsetRow("etl", "clicks", 1, 9, 0, 3, None, 1_764_000_005_000, 0,
                 note="the committed offset 9 is past the log end 3: ... `dstream-kafka offsets reset ...`")


def test_a_committed_offset_past_the_log_end_has_no_lag_a_mark_a_total_and_its_note() -> None:
    lines = format_rows([ROWS[0], PAST]).splitlines()
    assert lines[2].split() == ["etl", "clicks", "1", "9", "0", "3", "-", "-", "2025-11-24T16:00:05.000Z",
                                "PAST", "LOG", "END"]
    assert lines[3] == ("TOTAL: 2 partitions, lag 2, 1 PAST the LOG END (committed offset beyond it; not in "
                        "the lag)")
    assert lines[4] == f"NOTE clicks-1: {PAST.note}"
    assert PAST.past_log_end and not ROWS[0].past_log_end and not GONE.past_log_end
    parsed = json.loads(format_rows([PAST], "json"))[0]
    assert (parsed["lag"], parsed["note"]) == (None, PAST.note)
    assert list(csv.reader(io.StringIO(format_rows([PAST], "csv"))))[1][-1] == "PAST LOG END"


def test_a_total_without_lost_records_names_only_the_lag() -> None:
    assert format_rows(ROWS[:1]).splitlines()[-1] == "TOTAL: 1 partitions, lag 2"


def test_the_terminal_table_is_drawn_by_rich_with_colour_and_keeps_the_total_line() -> None:
    text = format_rows(ROWS, terminal=True)
    assert "\x1b[" in text and "LOST 15" in text
    assert text.splitlines()[-1].startswith("TOTAL: 2 partitions, lag 32")


def test_json_lists_every_field_in_camel_case_with_the_batch_time_in_iso_8601() -> None:
    parsed = json.loads(format_rows(ROWS, "json"))
    assert parsed[0] == {"group": "etl", "topic": "clicks", "partition": 0, "currentOffset": 118,
                         "logStartOffset": 0, "logEndOffset": 120, "lag": 2, "lagSeconds": 1.25,
                         "lastBatchTimeMs": 1_764_000_005_000, "dataLost": 0, "gone": "", "note": "",
                         "lastBatchTime": "2025-11-24T16:00:05.000Z"}
    assert parsed[1]["lastBatchTime"] == "-" and parsed[1]["dataLost"] == 15
    assert parsed[1]["lagSeconds"] is None


def test_csv_has_a_header_of_the_columns_and_one_line_per_partition() -> None:
    table = list(csv.reader(io.StringIO(format_rows(ROWS, "csv"))))
    assert table[0] == list(COLUMNS)
    assert table[2] == ["etl", "clicks", "2", "10", "25", "40", "30", "-", "-", "LOST 15"]
    assert len(table) == 3


def test_an_unknown_format_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigurationError, match="--format"):
        format_rows(ROWS, "xml")


def test_the_parser_keeps_the_old_commands_and_reads_offsets_describe() -> None:
    parser = build_parser()
    args = parser.parse_args(["offsets", "describe", "--store", "sqlite:///o.db", "--group", "g",
                              "--format", "csv", "--topic", "t"])
    assert (args.command, args.action, args.store, args.group, args.format, args.topic, args.timeout) == (
        "offsets", "describe", "sqlite:///o.db", "g", "csv", "t", 10.0)
    assert parser.parse_args(["broker", "status"]).action == "status"
    assert parser.parse_args(["demo"]).topic == "dstream-demo"


def test_history_renders_batches_with_their_record_counts_as_a_table_and_as_json() -> None:
    import datetime as dt

    from dstream_kafka.offsets import OffsetRange
    from dstream_kafka.operate.describe import format_history
    from dstream_kafka.stores.records import CommitRecord

    at = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)
    records = [CommitRecord(2_000, (OffsetRange("t", 0, 5, 9),), at),
               CommitRecord(1_000, (OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 3)), at)]
    lines = format_history(records).splitlines()
    assert lines[0].split() == ["BATCH-TIME", "COMMITTED-AT", "RECORDS", "RANGES"]
    assert lines[1].split() == ["1970-01-01T00:00:02.000Z", "2026-01-02T03:04:05.006Z", "4", "t-0:[5,9)"]
    assert lines[2].split()[2:] == ["8", "t-0:[0,5)", "t-1:[0,3)"]
    parsed = json.loads(format_history(records, "json"))
    assert parsed[1]["records"] == 8 and parsed[1]["ranges"][1] == {
        "topic": "t", "partition": 1, "fromOffset": 0, "untilOffset": 3}
    with pytest.raises(ConfigurationError, match="--format"):
        format_history(records, "csv")


def test_the_offsets_command_silences_the_client_loggers_only_while_it_runs(tmp_path, capsys) -> None:
    import logging

    from dstream_kafka.cli import main

    store = tmp_path / "offsets.db"
    kafka = logging.getLogger("kafka")
    before = kafka.level
    kafka.setLevel(logging.INFO)
    try:
        # no such store: the command fails (exit 1), and restores the levels all the same
        assert main(["offsets", "export", "--store", f"sqlite:///{store}", "--group", "g"]) == 1
        assert "No such offset store" in capsys.readouterr().err
        assert kafka.level == logging.INFO
    finally:
        kafka.setLevel(before)


def _visible(text: str) -> list[str]:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()


LONG = [OffsetRow("clicks-etl-production", "clicks-events-from-web", p, 118, 0, 120, 2,
                  1_764_000_005_000, 0, lag_seconds=1.5) for p in range(3)]


def test_a_terminal_table_fits_120_columns_and_breaks_headers_only_at_hyphens() -> None:
    from dstream_kafka.operate.common import render_table

    lines = _visible(render_table(COLUMNS, [(r.cells(), False) for r in LONG], terminal=True,
                                  width=120))
    assert max(len(line) for line in lines) <= 120
    pieces = {piece for name in COLUMNS for piece in name.replace("-", "- ").split()}
    header = lines[:lines.index(next(line for line in lines if line.startswith("─")))]
    assert {word for line in header for word in line.split()} <= pieces


def test_a_terminal_table_takes_its_width_from_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    lines = _visible(format_rows(LONG, terminal=True))
    assert max(len(line) for line in lines) <= 100


def test_a_wide_terminal_keeps_one_header_line_and_a_pipe_is_never_wrapped() -> None:
    from dstream_kafka.operate.common import render_table

    wide = _visible(render_table(COLUMNS, [(r.cells(), False) for r in LONG], terminal=True,
                                 width=250))
    assert wide[0].split() == list(COLUMNS)
    assert format_rows(LONG).splitlines()[0].split() == list(COLUMNS)


def test_a_terminal_too_narrow_for_the_table_keeps_every_column(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    text = format_rows(ROWS, terminal=True)
    for part in ("GROUP", "TOPIC", "PARTITION", "LAG", "DATA-", "LOST"):
        assert part in text

"""``dstream-kafka offsets reset`` against the real services: every store, every scenario."""

from __future__ import annotations

import datetime as _dt
import logging
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.cli import main
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.operate.describe import history
from dstream_kafka.operate.reset import Scenario, reset
from dstream_kafka.stores.uri import open_store

from test_offsets_cli import STORES, _cli, _store_uri

pytestmark = pytest.mark.integration


def _topic_with_records(kafka: Any, unique: Callable[[str], str]) -> str:
    """A new topic of two partitions holding offsets 0-9 and 0-3."""
    topic = unique("topic")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"a{i}" for i in range(10)], partition=0)
    kafka.produce(topic, [f"b{i}" for i in range(4)], partition=1)
    return topic


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["offsets", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _first_offsets(make_ssc: Callable[..., Any], kafka: Any, topic: str, group: str, store: Any
                   ) -> dict[int, int]:
    """Start a stream on ``store``; return the first offset it reads per partition."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from support import wait_until

    ssc = make_ssc(0.3)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "earliest"}
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params), offsetStore=store)
    seen: list[tuple[int, int]] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: (r.partition, r.offset)).collect()))
    ssc.start()
    try:
        wait_until(lambda: len(seen) > 0, "the first records after the reset")
    finally:
        ssc.stop(stopSparkContext=False)
    first: dict[int, int] = {}
    for partition, offset in seen:
        first[partition] = min(offset, first.get(partition, offset))
    return first


@pytest.mark.parametrize("kind", STORES)
def test_a_reset_of_each_store_is_a_dry_run_until_execute_and_a_stream_then_resumes_exactly_there(
        kind: str, request: pytest.FixtureRequest, kafka: Any, tmp_path: Path, make_ssc: Callable[..., Any],
        unique: Callable[[str], str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group = _topic_with_records(kafka, unique), unique("group")
    uri, env, store = _store_uri(kind, request, tmp_path, unique)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 8), OffsetRange(topic, 1, 0, 3)])
    args = ("reset", "--store", uri, "--group", group, "--topic", f"{topic}:0", "--to-offset", "2",
            "--bootstrap-servers", kafka.bootstrap_servers)

    code, out, err = _run(capsys, *args)
    assert code == 0, err
    assert out.splitlines()[1].split() == [group, topic, "0", "8", "2", "0", "10"]
    assert out.splitlines()[-1].startswith("DRY RUN: 1 partitions planned")
    with open_store(uri) as again:
        assert again.load(group)[TopicPartition(topic, 0)] == 8

    code, out, err = _run(capsys, *args, "--execute")
    assert code == 0, err
    assert out.splitlines()[-1] == "RESET: 1 partitions written"
    newest = history(uri, group, limit=1)[0]
    assert newest.reset is not None and newest.reset.previous == {TopicPartition(topic, 0): 8}
    with open_store(uri) as resumed:
        assert _first_offsets(make_ssc, kafka, topic, group, resumed) == {0: 2, 1: 3}


@pytest.fixture
def sqlite_group(kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> tuple[str, str, str]:
    """(uri, group, topic): a SQLite store whose group committed 8 of 10 and 3 of 4 records."""
    topic, group = _topic_with_records(kafka, unique), unique("group")
    uri = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 8), OffsetRange(topic, 1, 0, 3)])
    return uri, group, topic


def _plan(kafka: Any, uri: str, group: str, scenario: Scenario, **kwargs: Any) -> list[tuple[int, int | None, int, str]]:
    rows = reset(uri, group, scenario, bootstrap_servers=kafka.bootstrap_servers, **kwargs)
    return [(r.partition, r.current_offset, r.new_offset, r.note) for r in rows]


@pytest.mark.parametrize(("scenario", "expected"), [
    (Scenario("to-earliest"), [(0, 8, 0, ""), (1, 3, 0, "")]),
    (Scenario("to-latest"), [(0, 8, 10, ""), (1, 3, 4, "")]),
    (Scenario("to-current"), [(0, 8, 8, ""), (1, 3, 3, "")]),
    (Scenario("to-offset", 1), [(0, 8, 1, ""), (1, 3, 1, "")]),
    (Scenario("shift-by", -2), [(0, 8, 6, ""), (1, 3, 1, "")]),
    (Scenario("by-duration", "PT1H"), [(0, 8, 0, ""), (1, 3, 0, "")]),
    (Scenario("to-datetime", "2999-01-01T00:00:00Z"), [(0, 8, 10, ""), (1, 3, 4, "")]),
    (Scenario("from-file", "{t}, 0, 5\n{t},1,2\n"), [(0, 8, 5, ""), (1, 3, 2, "")]),
    (Scenario("from-file", '{{"{t}":{{"0":9,"1":4}}}}'), [(0, 8, 9, ""), (1, 3, 4, "")]),
])
def test_each_scenario_plans_the_offsets_kafka_consumer_groups_would_and_writes_nothing_in_a_dry_run(
        kafka: Any, sqlite_group: tuple[str, str, str], scenario: Scenario, expected: list[Any]) -> None:
    uri, group, topic = sqlite_group
    if scenario.kind == "from-file":
        scenario = Scenario("from-file", scenario.value.format(t=topic))
    assert _plan(kafka, uri, group, scenario, all_topics=scenario.kind != "from-file") == expected
    with open_store(uri) as store:
        assert store.load(group) == {TopicPartition(topic, 0): 8, TopicPartition(topic, 1): 3}


def test_to_datetime_finds_the_first_offset_at_or_after_the_time_and_execute_writes_it(
        kafka: Any, sqlite_group: tuple[str, str, str]) -> None:
    uri, group, topic = sqlite_group
    time.sleep(0.05)
    cut = _dt.datetime.now(_dt.timezone.utc)
    time.sleep(0.05)
    kafka.produce(topic, ["late0", "late1"], partition=0)  # offsets 10 and 11
    rows = _plan(kafka, uri, group, Scenario("to-datetime", cut.isoformat()), topics=[f"{topic}:0"],
                 execute=True)
    assert rows == [(0, 8, 10, "")]
    with open_store(uri) as store:
        assert store.load(group) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 3}


def test_targets_outside_the_log_are_clamped_and_flagged(
        kafka: Any, sqlite_group: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, topic = sqlite_group
    kafka.delete_records(topic, {1: 2})
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--topic", topic,
                          "--shift-by", "-100", "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split() == [group, topic, "0", "8", "0", "0", "10", "CLAMPED:", "asked", "-92,", "below",
                                "the", "log", "start"]
    assert lines[2].split()[:7] == [group, topic, "1", "3", "2", "2", "4"]
    assert lines[-1] == ("DRY RUN: 2 partitions planned; 2 clamped into [log start, log end]; nothing "
                         "written (add --execute to write)")
    assert _plan(kafka, uri, group, Scenario("to-offset", 99), topics=[f"{topic}:1"]) == [
        (1, 3, 4, "CLAMPED: asked 99, above the log end")]


def test_history_shows_the_reset_with_who_and_old_to_new_next_to_the_commits(
        kafka: Any, sqlite_group: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    import getpass
    import socket

    uri, group, topic = sqlite_group
    reset(uri, group, Scenario("to-earliest"), all_topics=True, bootstrap_servers=kafka.bootstrap_servers,
          execute=True)
    code, out, err = _run(capsys, "history", "--store", uri, "--group", group)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split()[2:] == ["0", "RESET", "by", f"{getpass.getuser()}@{socket.gethostname()}:",
                                    f"{topic}-0:", "8", "->", "0", f"{topic}-1:", "3", "->", "0"]
    assert lines[2].split()[2:] == ["11", f"{topic}-0:[0,8)", f"{topic}-1:[0,3)"]


def test_the_next_stream_start_logs_that_it_starts_from_a_reset(
        kafka: Any, sqlite_group: tuple[str, str, str], make_ssc: Callable[..., Any],
        caplog: pytest.LogCaptureFixture) -> None:
    import getpass
    import socket

    uri, group, topic = sqlite_group
    reset(uri, group, Scenario("to-offset", 5), topics=[f"{topic}:0"], bootstrap_servers=kafka.bootstrap_servers,
          execute=True)
    at = history(uri, group, limit=1)[0].committed_at.isoformat(timespec="seconds")
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.plan.positions"), open_store(uri) as store:
        _first_offsets(make_ssc, kafka, topic, group, store)
    assert [r.getMessage() for r in caplog.records if "starts from a reset" in r.getMessage()] == [
        f"Group {group!r} starts from a reset by {getpass.getuser()}@{socket.gethostname()} at {at}: "
        f"{topic}-0 8 -> 5"]


def test_a_reset_is_refused_while_a_stream_holds_the_group_and_writes_nothing(
        kafka: Any, sqlite_group: tuple[str, str, str], make_ssc: Callable[..., Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from support import wait_until

    uri, group, topic = sqlite_group
    ssc = make_ssc(0.3)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group}
    seen: list[int] = []
    with open_store(uri) as store:
        stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                               ConsumerStrategies.Subscribe([topic], params), offsetStore=store)
        stream.foreachRDD(lambda rdd: seen.append(rdd.count()))
        ssc.start()
        try:
            wait_until(lambda: sum(seen) >= 3, "the stream's first records")
            code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--all-topics",
                                  "--to-earliest", "--execute", "--bootstrap-servers", kafka.bootstrap_servers)
            after = store.history(group, 1)[0]
        finally:
            ssc.stop(stopSparkContext=False)
    assert code == 1 and out == ""
    assert err.startswith(f"dstream-kafka: error: --group: a stream holds group {group!r}: the Kafka group has")
    assert err.rstrip().endswith("Stop the stream and reset again; nothing was written.")
    assert after.reset is None


@pytest.mark.parametrize(("args", "message"), [
    (("--to-datetime", "yesterday"), "--to-datetime: 'yesterday' is not an ISO 8601 date-time; use "),
    (("--by-duration", "1 day"), "--by-duration: '1 day' is not an ISO 8601 duration; use PnDTnHnMnS"),
    (("--to-earliest", "--topic", "{t}:7"), "--topic: topic '{t}' has no partition 7 (it has 2: 0, 1)"),
    (("--to-earliest", "--topic", "no-such-topic"), "--topic: Topic 'no-such-topic' does not exist"),
    (("--to-earliest",), "--topic/--all-topics: name what to reset"),
])
def test_bad_input_is_one_error_line_naming_the_option_and_nothing_is_written(
        kafka: Any, sqlite_group: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
        args: tuple[str, ...], message: str) -> None:
    uri, group, topic = sqlite_group
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--execute",
                          "--bootstrap-servers", kafka.bootstrap_servers, *(a.format(t=topic) for a in args))
    assert code == 1 and out == ""
    assert err.startswith("dstream-kafka: error: " + message.format(t=topic)) and err.count("\n") == 1
    assert history(uri, group, limit=5)[0].reset is None


def test_a_file_naming_an_unknown_topic_is_refused_and_nothing_is_written(
        kafka: Any, sqlite_group: tuple[str, str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, topic = sqlite_group
    path = tmp_path / "offsets.csv"
    path.write_text(f"{topic},0,1\nnot-a-topic-here,0,1\n")
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--execute", "--from-file",
                          str(path), "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 1 and out == ""
    assert err.startswith("dstream-kafka: error: --from-file: Topic 'not-a-topic-here' does not exist")
    with open_store(uri) as store:
        assert store.load(group)[TopicPartition(topic, 0)] == 8


def test_a_file_naming_an_unknown_partition_is_refused_and_nothing_is_written(
        kafka: Any, sqlite_group: tuple[str, str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, topic = sqlite_group
    path = tmp_path / "offsets.json"
    path.write_text(f'{{"{topic}":{{"0":1,"5":1}}}}')
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--execute", "--from-file",
                          str(path), "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: --from-file: topic {topic!r} has no partition 5 (it has 2); fix the "
                   "file\n")
    with open_store(uri) as store:
        assert store.load(group)[TopicPartition(topic, 0)] == 8


def test_offsets_reset_accepts_dry_run_as_kafkas_tool_spells_it_and_writes_nothing(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.send_messages(topic, {"v": 10})
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 8)])
    out = _cli("offsets", "reset", "--store", uri, "--group", group, "--topic", topic,
               "--to-earliest", "--dry-run", "--bootstrap-servers", kafka.bootstrap_servers)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[3:5] == ["8", "0"]  # CURRENT-OFFSET, NEW-OFFSET
    with open_store(uri) as store:
        assert store.load(group) == {(topic, 0): 8}
    both = _cli("offsets", "reset", "--store", uri, "--group", group, "--topic", topic,
                "--to-earliest", "--dry-run", "--execute")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr

"""``dstream-kafka offsets``: read-only commands create no store, ``import`` checks its input
against the broker as ``reset`` does, and a topic the broker deleted is shown as gone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.cli import main
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.uri import open_store

from support import wait_until

pytestmark = pytest.mark.integration

READ_ONLY = [
    ("describe", "--bootstrap-servers", "127.0.0.1:1"),
    ("export",),
    ("history",),
    ("reset", "--all-topics", "--to-earliest", "--bootstrap-servers", "127.0.0.1:1"),
]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["offsets", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# -- item: no such store --------------------------------------------------------------------------

@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
@pytest.mark.parametrize("kind", ["sqlite", "checkpoint"])
def test_a_read_only_command_on_a_missing_store_says_no_such_store_and_creates_nothing(
        kind: str, command: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "nope" / ("missing.db" if kind == "sqlite" else "nock")
    uri = f"sqlite:///{where}" if kind == "sqlite" else f"checkpoint:{where}"
    code, out, err = _run(capsys, command[0], "--store", uri, "--group", "g", *command[1:])
    assert code == 1 and out == ""
    what = "the SQLite file" if kind == "sqlite" else "the checkpoint directory"
    assert err == (f"dstream-kafka: error: No such offset store: {what} {where} does not exist. Check the path "
                   "in the store URI (a stream creates its store when it first starts); nothing was created.\n")
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
def test_a_structured_streaming_folder_that_does_not_exist_is_no_such_store_in_one_line(
        command: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "query-ck"
    code, out, err = _run(capsys, command[0], "--store", f"structured-streaming:{where}", "--group", "q", *command[1:])
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: No such offset store: {where} does not exist, so it is not a Structured "
                   "Streaming checkpoint. Check the path in the store URI: give the query's checkpointLocation; "
                   "nothing was created.\n")
    assert _tree(tmp_path) == []


def test_an_existing_folder_or_file_that_holds_no_store_is_no_such_store_and_stays_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, "history", "--store", f"checkpoint:{tmp_path / 'empty'}", "--group", "g")
    assert code == 1
    assert "No such offset store: the checkpoint directory" in err and "no commits/ folder" in err
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (x TEXT)")
    code, _, err = _run(capsys, "export", "--store", f"sqlite:///{other}", "--group", "g")
    assert code == 1 and 'has no table "dstream_kafka_offsets"' in err
    assert _tree(tmp_path) == ["empty", "other.db"]
    with sqlite3.connect(other) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL


def test_the_cli_process_refuses_a_missing_store_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dstream_kafka.cli", "offsets", "history", "--store",
                          f"checkpoint:{tmp_path / 'nock'}", "--group", "g"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("dstream-kafka: error: No such offset store: ") and out.stderr.count("\n") == 1
    assert not (tmp_path / "nock").exists()


def test_a_postgresql_database_without_the_offset_tables_is_no_such_store_and_gets_none(
        postgres: Any, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg2

    dbname = unique("db").replace("-", "_").lower()
    admin = psycopg2.connect(**postgres.dsn_params())
    admin.autocommit = True
    try:
        admin.cursor().execute(f'CREATE DATABASE "{dbname}"')
    finally:
        admin.close()
    monkeypatch.setenv("PGPASSWORD", postgres.dsn_params()["password"])
    uri = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{dbname}"
    code, _, err = _run(capsys, "describe", "--store", uri, "--group", "g", "--bootstrap-servers", "127.0.0.1:1")
    assert code == 1
    assert err.startswith("dstream-kafka: error: No such offset store: PostgreSQL offset store (host=127.0.0.1")
    assert 'has no table "dstream_kafka_offsets"' in err
    assert postgres.dsn_params()["password"] not in err
    conn = psycopg2.connect(**{**postgres.dsn_params(), "dbname": dbname})
    try:
        cur = conn.cursor()
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
        assert cur.fetchone() == (0,)
    finally:
        conn.close()


def test_a_zookeeper_chroot_that_does_not_exist_is_no_such_store_and_is_not_created(
        zookeeper: Any, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str]) -> None:
    from kazoo.client import KazooClient

    root = unique("root")
    code, _, err = _run(capsys, "history", "--store", f"zookeeper://127.0.0.1:{zookeeper.port}/{root}",
                        "--group", "g")
    assert code == 1
    assert err.startswith(f"dstream-kafka: error: No such offset store: ZooKeeper 127.0.0.1:{zookeeper.port}/{root} "
                          f"has no node /{root} (the chroot)")
    client = KazooClient(hosts=f"127.0.0.1:{zookeeper.port}")
    client.start(timeout=10)
    try:
        assert client.exists(f"/{root}") is None
    finally:
        client.stop()
        client.close()


def test_an_hbase_table_that_does_not_exist_is_no_such_store_and_is_not_created(
        hbase: Any, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str]) -> None:
    table = unique("offsets").replace("-", "_")
    code, _, err = _run(capsys, "export", "--store", f"hbase://{hbase.thrift_url}/{table}", "--group", "g")
    assert code == 1
    assert err.startswith(f"dstream-kafka: error: No such offset store: HBase {hbase.thrift_url} has no table "
                          f"'{table}'")
    connection = hbase.connection()
    try:
        assert table.encode() not in connection.tables()
    finally:
        connection.close()


# -- item: import checks as reset does ------------------------------------------------------------

@pytest.fixture
def seeded(kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> tuple[str, str, str]:
    """(uri, group, topic): a SQLite store at offset 2 of a one-partition topic holding 0-9."""
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(10)], partition=0)
    uri = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 2)])
    return uri, group, topic


def _import(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, uri: str, group: str,
            text: str, *extra: str) -> tuple[int, str, str]:
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    return _run(capsys, "import", "--store", uri, "--group", group, *extra)


@pytest.mark.parametrize("text, message", [
    ('{{"bad topic!":{{"0":5}}}}', "--file: 'bad topic!' is not a Kafka topic name: use 1 to 249 of A-Z a-z 0-9 . _ -"),
    ('{{"no-such-topic-{t}":{{"0":5}}}}', "--file: Topic 'no-such-topic-{t}' does not exist in the Kafka cluster"),
    ('{{"{t}":{{"3":5}}}}', "--file: topic '{t}' has no partition 3 (it has 1); fix the file"),
    ('{{"{t}":{{"0":99}}}}', "--file: {t}-0 asked 99, above the log end (the log holds [0, 10]); an import stores "
                             "only offsets within [log start, log end]: fix the file, or use `dstream-kafka offsets "
                             "reset --from-file FILE`, which clamps into the log. Nothing was written."),
])
def test_an_import_is_checked_against_the_broker_as_a_reset_is_and_writes_nothing(
        kafka: Any, seeded: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, text: str, message: str) -> None:
    uri, group, topic = seeded
    code, out, err = _import(capsys, monkeypatch, uri, group, text.format(t=topic),
                             "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 1 and out == ""
    assert err.startswith("dstream-kafka: error: " + message.format(t=topic)), err
    assert err.count("\n") == 1
    with open_store(uri) as store:
        assert [r.batch_time_ms for r in store.history(group)] == [1_000]


def test_an_import_of_an_offset_beyond_int64_is_out_of_range_with_an_example_that_is_valid_there(
        kafka: Any, seeded: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    uri, group, topic = seeded
    text = json.dumps({topic: {"0": 2**70}})
    code, out, err = _import(capsys, monkeypatch, uri, group, text, "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: Invalid --file: offset {2**70} for {topic}-0 is out of range: offsets are "
                   f"0 to 9223372036854775807 (2**63 - 1). Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":42}}}}, got "
                   f"{text}\n")


def test_an_import_into_a_store_that_is_not_kafka_needs_the_brokers(
        seeded: tuple[str, str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    uri, group, topic = seeded
    code, _, err = _import(capsys, monkeypatch, uri, group, json.dumps({topic: {"0": 5}}))
    assert code == 1 and err.startswith("dstream-kafka: error: --bootstrap-servers: the store is not kafka://")


def test_an_import_within_the_log_is_written(
        kafka: Any, seeded: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    uri, group, topic = seeded
    code, out, err = _import(capsys, monkeypatch, uri, group, json.dumps({topic: {"0": 10}}),
                             "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 0, err
    assert out.startswith(f"imported 1 partitions into group '{group}'")
    with open_store(uri) as store:
        assert store.load(group) == {TopicPartition(topic, 0): 10}


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_an_offsets_file_that_is_not_utf8_is_one_error_line(
        source: str, seeded: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    uri, group, topic = seeded
    data = b'{"' + topic.encode() + b'":{"0":5}}\xff'
    path = tmp_path / "latin1.json"
    path.write_bytes(data)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = _run(capsys, "import", "--store", uri, "--group", group,
                          *(("--file", str(path)) if source == "file" else ()))
    where = repr(str(path)) if source == "file" else "standard input"
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: --file: {where} is not UTF-8 text (byte 0xff at position "
                   f"{len(data) - 1}); save the offsets as UTF-8 and try again; nothing was written\n")


def test_a_reset_file_giving_a_partition_twice_is_refused_naming_both_lines_and_writes_nothing(
        kafka: Any, seeded: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, topic = seeded
    path = tmp_path / "offsets.csv"
    path.write_text(f"{topic},0,5\n{topic},0,7\n")
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--from-file", str(path), "--execute",
                          "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: --from-file: partition 0 of topic {topic!r} is given twice, on lines 1 "
                   "and 2; keep one line per partition\n")
    with open_store(uri) as store:
        assert store.load(group) == {TopicPartition(topic, 0): 2}


# -- item: a topic the broker deleted -------------------------------------------------------------

@pytest.fixture
def one_topic_deleted(kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> tuple[str, str, str, str]:
    """(uri, group, kept topic, deleted topic): both committed to a SQLite store, then one deleted."""
    kept, deleted, group = unique("kept"), unique("deleted"), unique("group")
    for topic in (kept, deleted):
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, [f"v{i}" for i in range(6)], partition=0)
    uri = f"sqlite:///{tmp_path / 'offsets.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(kept, 0, 0, 4), OffsetRange(deleted, 0, 0, 3)])
    kafka.delete_topic(deleted)
    wait_until(lambda: deleted not in kafka.admin().list_topics(), f"topic {deleted} to be deleted", timeout=60,
               interval=0.2)
    return uri, group, kept, deleted


def test_describe_shows_a_deleted_topic_as_gone_and_the_other_topics_as_usual(
        kafka: Any, one_topic_deleted: tuple[str, str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, kept, deleted = one_topic_deleted
    code, out, err = _run(capsys, "describe", "--store", uri, "--group", group,
                          "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 0, err
    lines = {line.split()[1]: line.split() for line in out.splitlines()[1:-1]}
    # LAG-SECONDS (index 7) is the age of the record at the committed offset: it grows with time
    assert lines[kept][:7] + lines[kept][8:] == [group, kept, "0", "4", "0", "6", "2",
                                                 "1970-01-01T00:00:01.000Z"]
    assert float(lines[kept][7]) >= 0
    assert lines[deleted] == [group, deleted, "0", "3", "-", "-", "-", "-", "1970-01-01T00:00:01.000Z",
                              "TOPIC", "DELETED"]
    assert out.splitlines()[-1] == "TOTAL: 2 partitions, lag 2, 1 GONE from the cluster (topic deleted; not in the lag)"

    code, out, _ = _run(capsys, "describe", "--store", uri, "--group", group, "--format", "json",
                        "--bootstrap-servers", kafka.bootstrap_servers)
    gone = {row["topic"]: (row["gone"], row["lag"]) for row in json.loads(out)}
    assert gone == {kept: ("", 2), deleted: ("topic deleted", None)}


def test_reset_all_topics_skips_a_deleted_topic_with_a_note_and_resets_the_rest(
        kafka: Any, one_topic_deleted: tuple[str, str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    uri, group, kept, deleted = one_topic_deleted
    code, out, err = _run(capsys, "reset", "--store", uri, "--group", group, "--all-topics", "--to-earliest",
                          "--execute", "--bootstrap-servers", kafka.bootstrap_servers)
    assert code == 0, err
    lines = {line.split()[1]: line.split() for line in out.splitlines()[1:-1]}
    assert lines[kept] == [group, kept, "0", "4", "0", "0", "6"]
    assert lines[deleted] == [group, deleted, "0", "3", "-", "-", "-", "SKIPPED:", "topic", "deleted"]
    assert out.splitlines()[-1] == ("RESET: 1 partitions written; 1 skipped (topic gone from the cluster, the store "
                                    "keeps its offset)")
    with open_store(uri) as store:
        assert store.load(group) == {TopicPartition(kept, 0): 0, TopicPartition(deleted, 0): 3}


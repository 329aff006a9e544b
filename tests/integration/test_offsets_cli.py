"""``dstream-kafka offsets describe`` and store URIs against the real services."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.operate.describe import describe
from dstream_kafka.stores.uri import open_store
from dstream_kafka.stores import OffsetStores

pytestmark = pytest.mark.integration

STORES = ["checkpoint", "sqlite", "kafka", "postgresql", "zookeeper", "hbase"]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})}, input=stdin)


def _committed(uri: str, group: str, batch_time_ms: int, *ranges: OffsetRange) -> str:
    """Commit ``ranges`` to the store at ``uri`` and return ``uri``."""
    with open_store(uri) as store:
        store.commit(group, batch_time_ms, list(ranges))
    return uri


def _store_uri(kind: str, request: pytest.FixtureRequest, tmp_path: Path,
               unique: Callable[[str], str]) -> tuple[str, dict[str, str], Any]:
    """Return (URI, environment for the CLI, a store to write with)."""
    if kind == "checkpoint":
        uri = f"checkpoint:{tmp_path / 'ckpt'}"
        return uri, {}, open_store(uri)
    if kind == "sqlite":
        uri = f"sqlite:///{tmp_path / 'offsets.db'}"
        return uri, {}, open_store(uri)
    if kind == "kafka":
        kafka = request.getfixturevalue("kafka")
        uri = f"kafka://{kafka.bootstrap_servers}"
        return uri, {}, open_store(uri)
    if kind == "postgresql":
        pg = request.getfixturevalue("postgres")
        env = {"PGPASSWORD": pg.dsn_params()["password"]}
        uri = f"postgresql://{pg.user}@127.0.0.1:{pg.port}/{pg.dbname}"
        return uri, env, OffsetStores.postgres(None, **pg.dsn_params())
    if kind == "zookeeper":
        zk = request.getfixturevalue("zookeeper")
        uri = f"zookeeper://127.0.0.1:{zk.port}"
        return uri, {}, open_store(uri)
    hbase = request.getfixturevalue("hbase")
    table = unique("offsets").replace("-", "_")
    uri = f"hbase://{hbase.thrift_url}/{table}"
    return uri, {}, OffsetStores.hbase(hbase.host, hbase.thrift_port, table=table, create_table=True)


@pytest.mark.parametrize("kind", STORES)
def test_describe_shows_what_was_committed_through_each_store_with_log_offsets_and_lag(
        kind: str, request: pytest.FixtureRequest, kafka: Any, tmp_path: Path,
        unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"a{i}" for i in range(10)], partition=0)
    kafka.produce(topic, [f"b{i}" for i in range(4)], partition=1)
    uri, env, store = _store_uri(kind, request, tmp_path, unique)
    with store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 5), OffsetRange(topic, 1, 0, 3)])
        store.commit(group, 2_000, [OffsetRange(topic, 0, 5, 8)])

    for key, value in env.items():
        request.getfixturevalue("monkeypatch").setenv(key, value)
    rows = describe(uri, group, bootstrap_servers=kafka.bootstrap_servers, timeout=10.0)
    got = [(r.topic, r.partition, r.current_offset, r.log_start_offset, r.log_end_offset, r.lag,
            r.data_lost) for r in rows]
    assert got == [(topic, 0, 8, 0, 10, 2, 0), (topic, 1, 3, 0, 4, 1, 0)]
    if kind != "kafka":  # the Kafka group keeps no batch history
        assert [r.last_batch_time_ms for r in rows] == [2_000, 1_000]

    out = _cli("offsets", "describe", "--store", uri, "--group", group, "--format", "json",
               "--bootstrap-servers", kafka.bootstrap_servers, env=env)
    assert out.returncode == 0, out.stderr
    parsed = json.loads(out.stdout)
    assert [(p["partition"], p["currentOffset"], p["logEndOffset"], p["lag"]) for p in parsed] == [
        (0, 8, 10, 2), (1, 3, 4, 1)]
    for secret in env.values():
        assert secret not in out.stdout + out.stderr


def test_describe_gives_the_lag_in_seconds_as_the_age_of_the_oldest_unread_record(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    producer = kafka.producer()
    now_ms = int(time.time() * 1000)
    for i in range(6):  # partition 0: records stamped 10 min, 9 min ... ago
        producer.send(topic, value=b"v", partition=0, timestamp_ms=now_ms - (10 - i) * 60_000)
    producer.send(topic, value=b"v", partition=1, timestamp_ms=now_ms)
    producer.flush(timeout=60)
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 5_000, [OffsetRange(topic, 0, 0, 2), OffsetRange(topic, 1, 0, 1)])

    rows = describe(uri, group, bootstrap_servers=kafka.bootstrap_servers, timeout=10.0)
    aged, caught_up = rows
    assert aged.lag == 4 and 8 * 60 <= aged.lag_seconds < 8 * 60 + 120  # offset 2: 8 min old
    assert caught_up.lag == 0 and caught_up.lag_seconds == 0.0


@pytest.mark.smoke
def test_describe_marks_a_committed_offset_below_the_log_start_as_lost_and_totals_the_lag(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(20)], partition=0)
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 5_000, [OffsetRange(topic, 0, 0, 6)])
    kafka.delete_records(topic, {0: 10})

    out = _cli("offsets", "describe", "--store", uri, "--group", group,
               "--bootstrap-servers", kafka.bootstrap_servers)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET",
                                "LOG-END-OFFSET", "LAG", "LAG-SECONDS", "LAST-BATCH-TIME", "DATA-LOST"]
    cells = lines[1].split()
    assert cells[:7] + cells[8:] == [group, topic, "0", "6", "10", "20", "14",
                                     "1970-01-01T00:00:05.000Z", "LOST", "4"]
    assert 0 <= float(cells[7]) < 600  # the age of offset 10, the first record left
    assert lines[-1] == "TOTAL: 1 partitions, lag 14, 4 records LOST (committed offset below the log start)"

    csv_out = _cli("offsets", "describe", "--store", uri, "--group", group, "--format", "csv",
                   "--bootstrap-servers", kafka.bootstrap_servers)
    row = csv_out.stdout.splitlines()[1].split(",")
    assert row[:7] + row[8:] == [group, topic, "0", "6", "10", "20", "14",
                                 "1970-01-01T00:00:05.000Z", "LOST 4"]


@pytest.mark.smoke
def test_describe_of_a_kafka_store_asks_the_stores_own_brokers(
        kafka: Any, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, ["x", "y", "z"], partition=0)
    uri = f"kafka://{kafka.bootstrap_servers}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 2)])
    out = _cli("offsets", "describe", "--store", uri, "--group", group, "--topic", topic)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:7] == [group, topic, "0", "2", "0", "3", "1"]


@pytest.mark.parametrize("args, fragment", [
    (["--store", "mysql://h/db"], "--store: unknown store scheme 'mysql'"),
    (["--store", "kafka://127.0.0.1:1", "--timeout", "2"], "--store: "),
    (["--store", "postgresql://u@127.0.0.1:1/db", "--timeout", "2"], "--store: "),
    (["--store", "zookeeper://127.0.0.1:1", "--timeout", "2"], "--store: "),
    (["--store", "hbase://127.0.0.1:1/t", "--timeout", "2"], "--store: "),
])
def test_describe_refuses_a_bad_or_unreachable_store_within_seconds_in_one_line(
        args: list[str], fragment: str) -> None:
    started = time.monotonic()
    out = _cli("offsets", "describe", "--group", "g", "--bootstrap-servers", "127.0.0.1:1", *args)
    assert time.monotonic() - started < 30
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("dstream-kafka: error: " + fragment), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_describe_refuses_an_unknown_group_an_unknown_topic_and_an_unreachable_broker(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 0)])
    base = ["offsets", "describe", "--store", uri, "--bootstrap-servers", kafka.bootstrap_servers]

    unknown_group = _cli(*base, "--group", "no-such-group")
    assert unknown_group.returncode == 1
    assert "--group/--topic" in unknown_group.stderr and "'no-such-group'" in unknown_group.stderr

    unknown_topic = _cli(*base, "--group", group, "--topic", "no-such-topic")
    assert unknown_topic.returncode == 1 and "'no-such-topic'" in unknown_topic.stderr

    no_broker = _cli("offsets", "describe", "--store", uri, "--group", group,
                     "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2")
    assert no_broker.returncode == 1
    assert no_broker.stderr.startswith("dstream-kafka: error: --bootstrap-servers: no broker answered")
    assert len(no_broker.stderr.strip().splitlines()) == 1, no_broker.stderr

    with pytest.raises(ConfigurationError, match="--bootstrap-servers"):
        describe(uri, group)  # a sqlite store names no brokers


def test_a_committed_topic_the_cluster_does_not_have_is_shown_as_deleted_not_an_error(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    group = unique("group")
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange("never-created-topic-x", 0, 0, 1)])
    out = _cli("offsets", "describe", "--store", uri, "--group", group,
               "--bootstrap-servers", kafka.bootstrap_servers)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[1:] == ["never-created-topic-x", "0", "1", "-", "-", "-", "-",
                                                      "1970-01-01T00:00:01.000Z", "TOPIC", "DELETED"]


@pytest.mark.smoke
def test_version_prints_the_package_version() -> None:
    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("dstream-kafka 0.1.0")


@pytest.mark.parametrize("source, target", [
    ("sqlite", "postgresql"), ("checkpoint", "zookeeper"), ("postgresql", "kafka"), ("kafka", "hbase"),
    ("zookeeper", "checkpoint"), ("hbase", "sqlite"),
])
def test_export_then_import_moves_a_groups_offsets_between_two_stores(
        source: str, target: str, request: pytest.FixtureRequest, kafka: Any, tmp_path: Path,
        unique: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(12)], partition=0)
    kafka.produce(topic, [f"v{i}" for i in range(6)], partition=1)
    src_uri, src_env, src = _store_uri(source, request, tmp_path / "src", unique)
    dst_uri, dst_env, dst = _store_uri(target, request, tmp_path / "dst", unique)
    with dst:
        assert dst.load(group) == {}  # creates the HBase table: an hbase:// URI names an existing one
    with src:
        src.commit(group, 1_000, [OffsetRange(topic, 0, 0, 9), OffsetRange(topic, 1, 0, 6)])
    env = {**src_env, **dst_env}
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    exported = _cli("offsets", "export", "--store", src_uri, "--group", group, env=env)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout) == {topic: {"0": 9, "1": 6}}
    brokers = () if target == "kafka" else ("--bootstrap-servers", kafka.bootstrap_servers)
    imported = _cli("offsets", "import", "--store", dst_uri, "--group", group, *brokers, env=env,
                    stdin=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"imported 2 partitions into group '{group}' as batch ")

    rows = describe(dst_uri, group, bootstrap_servers=kafka.bootstrap_servers)
    assert [(r.partition, r.current_offset, r.lag) for r in rows] == [(0, 9, 3), (1, 6, 0)]
    again = _cli("offsets", "export", "--store", dst_uri, "--group", group, env=env)
    assert again.stdout == exported.stdout


def test_an_import_is_a_new_commit_in_the_history_and_never_moves_back(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    group, t = unique("group"), unique("topic")
    kafka.create_topic(t, partitions=2)
    kafka.produce(t, [f"v{i}" for i in range(10)], partition=0)
    kafka.produce(t, [f"v{i}" for i in range(3)], partition=1)
    uri = _committed(f"sqlite:///{tmp_path / 'o.db'}", group, 1_000, OffsetRange(t, 0, 0, 5))
    from dstream_kafka.operate.describe import import_offsets

    record = import_offsets(uri, group, json.dumps({t: {"0": 8, "1": 2}}), bootstrap_servers=kafka.bootstrap_servers)
    assert record.batch_time_ms > 1_000
    with open_store(uri) as store:
        history = store.history(group)
        assert [h.batch_time_ms for h in history] == [record.batch_time_ms, 1_000]
        assert history[0].ranges == (OffsetRange(t, 0, 5, 8), OffsetRange(t, 1, 2, 2))
        assert history[1].ranges == (OffsetRange(t, 0, 0, 5),)

    brokers = ("--bootstrap-servers", kafka.bootstrap_servers)
    back = _cli("offsets", "import", "--store", uri, "--group", group, *brokers, stdin=json.dumps({t: {"0": 3}}))
    assert back.returncode == 1
    assert back.stderr.startswith(f"dstream-kafka: error: --file: {t}-0 would move back from 8 to 3")
    bad = _cli("offsets", "import", "--store", uri, "--group", group, *brokers, stdin=json.dumps({t: {"0": -1}}))
    assert bad.returncode == 1 and "--file" in bad.stderr
    assert 'Expected e.g. {"topicA":{"0":23,"1":42}}' in bad.stderr  # an example that is itself valid here
    with open_store(uri) as store:
        assert len(store.history(group)) == 2  # nothing written by the refused imports


def test_import_is_refused_while_a_stream_holds_the_store_with_a_planned_batch(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    group, t = unique("group"), unique("topic")
    kafka.create_topic(t, partitions=1)
    kafka.produce(t, [f"v{i}" for i in range(20)], partition=0)
    uri = f"checkpoint:{tmp_path / 'ckpt'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(t, 0, 0, 5)])
        store.plan(group, 2_000, [OffsetRange(t, 0, 5, 9)])  # a running stream's next batch
    out = _cli("offsets", "import", "--store", uri, "--group", group, "--bootstrap-servers", kafka.bootstrap_servers,
               stdin=json.dumps({t: {"0": 20}}))
    assert out.returncode == 1
    assert "a stream holds group" in out.stderr and "batch 2000 is planned" in out.stderr
    with open_store(uri) as store:
        assert store.load(group) == {(t, 0): 5}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "zookeeper", "checkpoint"])
def test_history_lists_committed_batches_and_imports_newest_first_with_their_records(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, unique: Callable[[str], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    group = unique("group")
    uri, env, store = _store_uri(kind, request, tmp_path, unique)
    with store:
        store.commit(group, 1_000, [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 3)])
        store.commit(group, 2_000, [OffsetRange("t", 0, 5, 9)])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = _cli("offsets", "history", "--store", uri, "--group", group, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["BATCH-TIME", "COMMITTED-AT", "RECORDS", "RANGES"]
    assert lines[1].split()[0] == "1970-01-01T00:00:02.000Z"
    assert lines[1].split()[2:] == ["4", "t-0:[5,9)"]
    assert lines[2].split()[2:] == ["8", "t-0:[0,5)", "t-1:[0,3)"]

    limited = _cli("offsets", "history", "--store", uri, "--group", group, "--limit", "1",
                   "--format", "json", env=env)
    parsed = json.loads(limited.stdout)
    assert [(p["batchTimeMs"], p["records"]) for p in parsed] == [(2_000, 4)]

    unknown = _cli("offsets", "history", "--store", uri, "--group", unique("other"), env=env)
    assert unknown.returncode == 1 and unknown.stderr.startswith("dstream-kafka: error: ")
    bad_limit = _cli("offsets", "history", "--store", uri, "--group", group, "--limit", "0", env=env)
    assert bad_limit.returncode == 2 and "--limit" in bad_limit.stderr


# -- issue #37 item 12: no silent surprises at the command line -----------------------------------

def test_an_import_is_refused_while_a_stream_is_a_member_of_the_group_as_a_reset_is(
        kafka: Any, make_ssc: Callable[..., Any], tmp_path: Path, unique: Callable[[str], str],
        capsys: pytest.CaptureFixture[str]) -> None:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.cli import main
    from dstream_kafka.offsets import TopicPartition
    from support import wait_until

    topic, other, group = unique("topic"), unique("other"), unique("group")
    for name in (topic, other):
        kafka.create_topic(name)
        kafka.produce(name, [f"v{i}" for i in range(5)])
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    offsets_file = tmp_path / "offsets.json"
    offsets_file.write_text(json.dumps({other: {"0": 5}}))  # a topic the stream never commits
    ssc = make_ssc(0.3)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"}
    seen: list[int] = []
    with open_store(uri) as store:
        stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                               ConsumerStrategies.Subscribe([topic], params), offsetStore=store)
        stream.foreachRDD(lambda rdd: seen.append(rdd.count()))
        ssc.start()
        try:
            wait_until(lambda: sum(seen) >= 5, "the stream's first records")
            code = main(["offsets", "import", "--store", uri, "--group", group, "--file", str(offsets_file),
                         "--bootstrap-servers", kafka.bootstrap_servers])
            out, err = capsys.readouterr()
        finally:
            ssc.stop(stopSparkContext=False)
        stored = store.load(group)
    assert code == 1 and out == ""
    assert err.startswith(f"dstream-kafka: error: --group: a stream holds group {group!r}: the Kafka group has")
    assert err.rstrip().endswith("Stop the stream and import again; nothing was written.")
    assert TopicPartition(other, 0) not in stored and stored[TopicPartition(topic, 0)] == 5


@pytest.mark.parametrize("command", [
    ("offsets", "import", "--store", "sqlite:///{dir}/o.db", "--group", "g", "--bootstrap-servers", "127.0.0.1:1"),
    ("offsets", "reset", "--store", "sqlite:///{dir}/o.db", "--group", "g", "--from-file", "-",
     "--bootstrap-servers", "127.0.0.1:1"),
], ids=["import", "reset"])
@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"t":' * 100_000 + "1" + "}" * 100_000],
                         ids=["array", "object"])
def test_json_nested_100000_deep_is_one_error_line_naming_the_input_and_the_limit(
        tmp_path: Path, command: tuple[str, ...], text: str) -> None:
    out = _cli(*(arg.format(dir=tmp_path) for arg in command), stdin=text)
    assert out.returncode == 1 and out.stdout == ""
    option = "--file" if "import" in command else "--from-file"
    assert out.stderr.startswith(f"dstream-kafka: error: Invalid {option}: arrays and objects nest 100000 levels "
                                 "deep, over the limit of 100 (offsets JSON nests 2)")
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1 and len(out.stderr) < 600
    assert not (tmp_path / "o.db").exists()  # refused before any store was opened


def _cli_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command with standard output a pipe whose reader has gone (as ``| head`` after its
    lines), closed before the command writes, so every write fails."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args], stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)


# 141 = 128 + SIGPIPE, the exit of a Unix tool whose reader went; argparse drops its own
# messages (--help, --version) and exits 0.
@pytest.mark.parametrize("args, code", [
    (("offsets", "history", "--store", "{uri}", "--group", "{group}"), 141),
    (("offsets", "history", "--store", "{uri}", "--group", "{group}", "--format", "json"), 141),
    (("offsets", "export", "--store", "{uri}", "--group", "{group}"), 141),
    (("offsets", "describe", "--store", "{uri}", "--group", "{group}", "--bootstrap-servers", "{servers}"), 141),
    (("offsets", "reset", "--store", "{uri}", "--group", "{group}", "--all-topics", "--to-earliest",
      "--bootstrap-servers", "{servers}"), 141),
    (("--version",), 0),
    (("offsets", "--help"), 0),
], ids=["history", "history-json", "export", "describe", "reset", "version", "help"])
def test_a_reader_that_stops_early_ends_the_command_quietly_like_a_unix_tool(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str], args: tuple[str, ...], code: int) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(5)])
    uri = _committed(f"sqlite:///{tmp_path / 'o.db'}", group, 1_000, OffsetRange(topic, 0, 0, 3))
    out = _cli_into_a_closed_pipe(*(a.format(uri=uri, group=group, servers=kafka.bootstrap_servers) for a in args))
    assert (out.returncode, out.stderr) == (code, "")  # no BrokenPipeError traceback


def test_describe_flags_a_committed_offset_past_the_log_end_with_the_reset_that_fixes_it(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    # The topic holds 3 records, the store says 9 were read: the topic was recreated (or truncated).
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(3)], partition=0)
    kafka.produce(topic, [f"v{i}" for i in range(2)], partition=1)
    uri = _committed(f"sqlite:///{tmp_path / 'o.db'}", group, 1_000, OffsetRange(topic, 0, 0, 9),
                     OffsetRange(topic, 1, 0, 1))
    servers = ("--bootstrap-servers", kafka.bootstrap_servers)
    table = _cli("offsets", "describe", "--store", uri, "--group", group, *servers)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[1].split()[2:7] == ["0", "9", "0", "3", "-"]  # LAG is no healthy 0
    assert lines[1].split()[-3:] == ["PAST", "LOG", "END"]
    assert lines[2].split()[2:7] == ["1", "1", "0", "2", "1"]
    assert lines[3] == ("TOTAL: 2 partitions, lag 1, 1 PAST the LOG END (committed offset beyond it; not in "
                        "the lag)")
    fix = (f"dstream-kafka offsets reset --store {uri} --group {group} --topic {topic}:0 --to-earliest")
    assert lines[4].startswith(f"NOTE {topic}-0: the committed offset 9 is past the log end 3: the topic may have "
                               "been recreated or truncated, and a stream refuses to start from it")
    assert f"`{fix}`" in lines[4]
    rows = json.loads(_cli("offsets", "describe", "--store", uri, "--group", group, *servers,
                           "--format", "json").stdout)
    assert (rows[0]["lag"], rows[0]["lagSeconds"]) == (None, None) and f"`{fix}`" in rows[0]["note"]
    assert rows[1]["note"] == ""
    # The command the note names moves the offset back into the log, and the note is gone.
    fixed = _cli(*fix.split()[1:], "--execute", *servers)
    assert fixed.returncode == 0, fixed.stderr
    after = describe(uri, group, bootstrap_servers=kafka.bootstrap_servers)
    assert [(r.current_offset, r.lag, r.note) for r in after] == [(0, 3, ""), (1, 1, "")]

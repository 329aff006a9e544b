"""Bad input to ``dstream-kafka offsets``: stores of a newer layout, older SQL tables, and the
PostgreSQL password prompt (a real terminal, a real server)."""

from __future__ import annotations

import os
import pty
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.cli import main
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.operate.describe import history
from dstream_kafka.operate.reset import Scenario, reset
from dstream_kafka.stores.uri import open_store
from dstream_kafka.stores import OffsetStores

pytestmark = pytest.mark.integration


@pytest.fixture
def committed(kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> tuple[str, str, str]:
    """(sqlite path, group, topic) with offsets 5 and 2 of a two-partition topic committed."""
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(8)], partition=0)
    path = str(tmp_path / "offsets.db")
    with open_store(f"sqlite:///{path}") as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 5), OffsetRange(topic, 1, 0, 0)])
    return path, group, topic


def test_sqlite_tables_of_a_newer_layout_are_refused_by_every_command_and_nothing_is_written(
        kafka: Any, committed: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    path, group, topic = committed
    with sqlite3.connect(path) as db:
        db.execute('UPDATE "dstream_kafka_layout" SET "layout_version" = 3')
    for args in (["describe", "--bootstrap-servers", kafka.bootstrap_servers],
                 ["reset", "--all-topics", "--to-earliest", "--execute", "--bootstrap-servers",
                  kafka.bootstrap_servers]):
        code = main(["offsets", args[0], "--store", f"sqlite:///{path}", "--group", group, *args[1:]])
        out, err = capsys.readouterr()
        assert code == 1 and out == ""
        assert err == ('dstream-kafka: error: --store: The offset tables "dstream_kafka_layout" say layout 3: they '
                       "were written by a newer dstream_kafka (this version reads layout 2). Nothing was read or "
                       "written; upgrade dstream_kafka to use them.\n")
    with sqlite3.connect(path) as db:
        assert db.execute('SELECT COUNT(*) FROM "dstream_kafka_commits"').fetchone() == (1,)
        assert db.execute('SELECT "layout_version" FROM "dstream_kafka_layout"').fetchall() == [(3,)]


def test_sqlite_tables_from_before_resets_are_upgraded_keeping_their_commits(
        kafka: Any, committed: tuple[str, str, str]) -> None:
    path, group, topic = committed
    with sqlite3.connect(path) as db:  # the layout of the previous release: no reset column, no layout table
        db.execute('ALTER TABLE "dstream_kafka_commits" DROP COLUMN "reset"')
        db.execute('DROP TABLE "dstream_kafka_layout"')
    rows = reset(f"sqlite:///{path}", group, Scenario("to-offset", 1), topics=[f"{topic}:0"],
                 bootstrap_servers=kafka.bootstrap_servers, execute=True)
    assert [(r.current_offset, r.new_offset) for r in rows] == [(5, 1)]
    records = history(f"sqlite:///{path}", group)
    assert [r.reset is not None for r in records] == [True, False]
    assert records[1].ranges == (OffsetRange(topic, 0, 0, 5), OffsetRange(topic, 1, 0, 0))
    with sqlite3.connect(path) as db:
        assert db.execute('SELECT "layout_version" FROM "dstream_kafka_layout"').fetchall() == [(2,)]


def test_a_checkpoint_store_of_a_newer_format_is_refused_naming_the_upgrade(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str]) -> None:
    group = unique("group")
    uri = f"checkpoint:{tmp_path / 'ck'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange("t", 0, 0, 5)])
    newest = tmp_path / "ck" / "commits" / "1000"
    newest.write_text("v9" + newest.read_text()[2:])
    code = main(["offsets", "export", "--store", uri, "--group", group])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == (f"dstream-kafka: error: --store: Checkpoint file {newest} was written by a newer dstream_kafka "
                   "(format v9; this version reads v1). Upgrade dstream_kafka to resume from it.\n")


def _terminal_session(argv: list[str], env: dict[str, str], answer: str) -> str:
    """Run ``argv`` on a new pseudo-terminal (its controlling terminal), answer the first prompt
    ending in ': ' with ``answer``, and return everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, so getpass reads /dev/tty
        try:
            os.execve(sys.executable, [sys.executable, *argv], env)
        finally:
            os._exit(127)
    shown, answered, deadline = b"", False, time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
        if not answered and shown.rstrip().endswith(b":"):
            os.write(fd, answer.encode() + b"\n")
            answered = True
    os.waitpid(pid, 0)
    os.close(fd)
    return shown.decode(errors="replace")


def test_a_postgresql_password_is_asked_on_a_terminal_without_echo_when_libpq_has_none(
        kafka: Any, postgres: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    params = postgres.dsn_params()
    with OffsetStores.postgres(None, **params) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 0)])
    env = {k: v for k, v in os.environ.items() if k not in ("PGPASSWORD", "PGPASSFILE")}
    env["HOME"] = str(tmp_path)  # no ~/.pgpass
    uri = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{postgres.dbname}"
    shown = _terminal_session(["-m", "dstream_kafka.cli", "offsets", "export", "--store", uri, "--group", group],
                              env, params["password"])
    assert shown.startswith(f"Password for {postgres.user}@127.0.0.1:{postgres.port}: ")
    assert shown.rstrip().endswith(f'{{"{topic}":{{"0":0}}}}')
    assert params["password"] not in shown
    with OffsetStores.postgres(None, **params) as store:
        assert store.load(group) == {TopicPartition(topic, 0): 0}


def _zookeeper_newer(request: pytest.FixtureRequest, unique: Callable[[str], str], group: str) -> str:
    """A group committed to ZooKeeper whose layout node then says 9; returns the store URI."""
    from kazoo.client import KazooClient

    zookeeper = request.getfixturevalue("zookeeper")
    uri = f"zookeeper://127.0.0.1:{zookeeper.port}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange("t", 0, 0, 5)])

    client = KazooClient(hosts=f"127.0.0.1:{zookeeper.port}")
    client.start(timeout=10)
    try:
        client.set(f"/consumers/{group}/dstream_kafka/layout", b"9")
    finally:
        client.stop()
        client.close()
    return uri


def _hbase_newer(request: pytest.FixtureRequest, unique: Callable[[str], str], group: str) -> str:
    """A group committed to a new HBase table whose group cell then says layout 9; returns the URI."""
    import json

    from dstream_kafka.stores.hbase_keys import group_row_key

    hbase = request.getfixturevalue("hbase")
    table = unique("offsets").replace("-", "_")
    with OffsetStores.hbase(hbase.host, hbase.thrift_port, table=table, create_table=True) as store:
        store.commit(group, 1_000, [OffsetRange("t", 0, 0, 5)])
    connection = hbase.connection()
    try:
        cells = connection.table(table).row(group_row_key(group))
        doc = json.loads(cells[b"meta:commit"])
        connection.table(table).put(group_row_key(group), {b"meta:commit": json.dumps({**doc, "layout": 9}).encode()})
    finally:
        connection.close()
    return f"hbase://{hbase.thrift_url}/{table}"


@pytest.mark.parametrize("kind", ["zookeeper", "hbase"])
def test_a_zookeeper_or_hbase_group_of_a_newer_layout_is_refused_naming_the_upgrade(
        kind: str, request: pytest.FixtureRequest, unique: Callable[[str], str],
        capsys: pytest.CaptureFixture[str]) -> None:
    group = unique("group")
    uri = (_zookeeper_newer if kind == "zookeeper" else _hbase_newer)(request, unique, group)
    code = main(["offsets", "export", "--store", uri, "--group", group])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("dstream-kafka: error: --store: ") and err.count("\n") == 1
    assert "written by a newer dstream_kafka (this version reads layout 1). Nothing was read or written; upgrade " \
           "dstream_kafka to use it." in err

"""``structured-streaming:DIR``: a checkpoint written by a real Structured Streaming query, read,
reset (the query then restarts from the reset offsets) and migrated to a dstream_kafka store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.cli import main
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.operate.describe import describe, export_offsets, history, import_offsets
from dstream_kafka.stores.uri import open_store

from test_offsets_reset import _first_offsets

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _query(kafka: Any, topic: str, checkpoint: Path) -> list[tuple[int, int]]:
    """Run the Structured Streaming query once (AvailableNow); return the (partition, offset) it read."""
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("structured_streaming_probe.py")),
                          kafka.bootstrap_servers, topic, str(checkpoint)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    return [tuple(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]  # type: ignore[misc]


@pytest.fixture(scope="module")
def query_checkpoint(kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(topic, checkpoint): a query read offsets 0-9 and 0-3 of a two-partition topic and committed."""
    topic = f"ss-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"a{i}" for i in range(10)], partition=0)
    kafka.produce(topic, [f"b{i}" for i in range(4)], partition=1)
    checkpoint = tmp_path_factory.mktemp("ss") / "checkpoint"
    assert len(_query(kafka, topic, checkpoint)) == 14
    yield topic, checkpoint


@pytest.fixture
def checkpoint_copy(query_checkpoint: tuple[str, Path], tmp_path: Path) -> tuple[str, Path]:
    topic, checkpoint = query_checkpoint
    shutil.copytree(checkpoint, tmp_path / "checkpoint")
    return topic, tmp_path / "checkpoint"


def test_describe_and_export_read_the_offsets_a_real_query_committed(
        kafka: Any, checkpoint_copy: tuple[str, Path]) -> None:
    topic, checkpoint = checkpoint_copy
    uri = f"structured-streaming:{checkpoint}"
    rows = describe(uri, "query", bootstrap_servers=kafka.bootstrap_servers)
    end = kafka.end_offsets(topic)
    assert [(r.partition, r.current_offset, r.lag) for r in rows] == [(0, 10, end[0] - 10), (1, 4, end[1] - 4)]
    assert json.loads(export_offsets(uri, "query")) == {topic: {"0": 10, "1": 4}}
    assert [[(x.partition, x.fromOffset, x.untilOffset) for x in r.ranges] for r in history(uri, "query")] == [
        [(0, 0, 10), (1, 0, 4)]]


def test_after_a_reset_the_real_query_restarts_from_the_reset_offsets(
        kafka: Any, checkpoint_copy: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topic, checkpoint = checkpoint_copy
    code = main(["offsets", "reset", "--store", f"structured-streaming:{checkpoint}", "--group", "query",
                 "--topic", f"{topic}:0", "--to-offset", "3", "--execute",
                 "--bootstrap-servers", kafka.bootstrap_servers])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[-1] == "RESET: 1 partitions written"
    assert sorted(os.listdir(checkpoint / "offsets")) == [".0.crc", "0", "1"]
    assert sorted(os.listdir(checkpoint / "commits")) == [".0.crc", "0", "1"]
    end = kafka.end_offsets(topic)
    read = _query(kafka, topic, checkpoint)
    assert read == [(0, o) for o in range(3, end[0])] + [(1, o) for o in range(4, end[1])]


def test_a_reset_is_refused_while_the_newest_batch_is_uncommitted_and_writes_nothing(
        kafka: Any, checkpoint_copy: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topic, checkpoint = checkpoint_copy
    shutil.copy(checkpoint / "offsets" / "0", checkpoint / "offsets" / "1")  # a query stopped mid-batch
    code = main(["offsets", "reset", "--store", f"structured-streaming:{checkpoint}", "--group", "query",
                 "--all-topics", "--to-earliest", "--execute", "--bootstrap-servers", kafka.bootstrap_servers])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == ("dstream-kafka: error: --store: Reset refused: a stream holds group 'query' (batch 1 is planned "
                   "but not committed). Stop the stream, or let it finish the batch, and reset again; nothing "
                   "was stored.\n")
    assert sorted(os.listdir(checkpoint / "commits")) == [".0.crc", "0"]
    assert not (checkpoint / "dstream_kafka").exists()


def test_offsets_exported_from_a_query_imported_into_sqlite_let_a_dstream_resume_there(
        kafka: Any, checkpoint_copy: tuple[str, Path], tmp_path: Path, make_ssc: Callable[..., Any]) -> None:
    topic, checkpoint = checkpoint_copy
    target = f"sqlite:///{tmp_path / 'migrated.db'}"
    import_offsets(target, "migrated", export_offsets(f"structured-streaming:{checkpoint}", "query"),
                   bootstrap_servers=kafka.bootstrap_servers)
    kafka.produce(topic, ["new0"], partition=0)
    kafka.produce(topic, ["new1"], partition=1)
    with open_store(target) as store:
        assert store.load("migrated") == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 4}
        first = _first_offsets(make_ssc, kafka, topic, "migrated", store)
    assert first == {0: 10, 1: 4}

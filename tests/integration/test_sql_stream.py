"""``dstream_kafka.sql.createDataFrameStream``: foreachBatch with the loop in the client, on a
Spark Connect session (the client in a child process, dataframe_stream_probe.py) and on a
classic one (in-process), with the same runs and the same expectations.

Each session kind runs, in order: a bounded run of 10 records in batches of at most 4 (SQLite
store, results written in its transaction), a run whose func fails on its first batch
(checkpoint store), a run kept in the Kafka group store and an unbounded run that func stops
after 4 of 6 records; then, after 3 more records in each
of the first two topics, the first two streams again (the second without failing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.connect import ROOT, connect_env

from dataframe_stream_probe import run_all

pytestmark = pytest.mark.integration


def _run(kind: str, request: pytest.FixtureRequest, spec: dict[str, Any], folder: Path) -> list[Any]:
    if kind == "classic":
        from pyspark.sql import SparkSession

        return run_all(SparkSession(request.getfixturevalue("sc")), spec)
    server = request.getfixturevalue("connect_server")
    path = folder / f"runs-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("dataframe_stream_probe.py")),
                          str(path)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env=connect_env(server))
    assert out.returncode == 0, out.stderr[-4000:] + "\nserver log:\n" + server.log_tail()
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(r["session"].startswith("pyspark.sql.connect") for r in results)
    return results


@pytest.fixture(scope="module", params=["classic", "connect"])
def runs(request: pytest.FixtureRequest, kafka: Any,
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    kind = request.param
    folder = tmp_path_factory.mktemp(f"dfstream-{kind}")
    name = f"dfstream-{kind}-{folder.name[-6:]}"
    good, bad = f"{name}-good", f"{name}-bad"
    kafka.create_topic(good, partitions=2)
    kafka.create_topic(bad)
    for partition in (0, 1):
        kafka.produce(good, [f"p{partition}-{i}" for i in range(5)], partition=partition)
    kafka.produce(bad, [f"b-{i}" for i in range(3)], partition=0)
    good_run = {"topic": good, "group": f"{good}-g", "store": f"sqlite:///{folder}/good.db",
                "maxOffsetsPerTrigger": 4, "transaction": True}
    # The checkpoint store keeps a write-ahead log: a failed batch is re-run with its ranges.
    bad_run = {"topic": bad, "group": f"{bad}-g", "store": f"checkpoint:{folder}/bad"}
    grouped = f"{name}-group"
    kafka.create_topic(grouped)
    kafka.produce(grouped, [f"g-{i}" for i in range(4)], partition=0)
    group_run = {"topic": grouped, "group": f"{grouped}-g",
                 "store": f"kafka://{kafka.bootstrap_servers.split(',')[0]}"}
    endless = f"{name}-endless"
    kafka.create_topic(endless)
    kafka.produce(endless, [f"e-{i}" for i in range(6)], partition=0)
    endless_run = {"topic": endless, "group": f"{endless}-g", "maxOffsetsPerTrigger": 2,
                   "store": f"sqlite:///{folder}/endless.db", "stopAfter": 4}
    spec = {"bootstrap": kafka.bootstrap_servers,
            "runs": [good_run, {**bad_run, "fail": True}, group_run, endless_run]}
    first, failed, in_group, stopped = _run(kind, request, spec, folder)
    kafka.produce(good, [f"p0-{i}" for i in range(5, 8)], partition=0)
    kafka.produce(bad, [f"b-{i}" for i in range(3, 6)], partition=0)
    spec = {"bootstrap": kafka.bootstrap_servers, "runs": [good_run, bad_run]}
    resumed, rerun = _run(kind, request, spec, folder)
    return {"first": first, "failed": failed, "resumed": resumed, "rerun": rerun,
            "group": in_group, "stopped": stopped}


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    return [row for batch in result["batches"] for row in batch["rows"]]


def test_a_bounded_dataframe_stream_sees_every_record_exactly_once_across_batches(runs):
    first = runs["first"]
    assert first["error"] is None and first["finished"]
    rows = _rows(first)
    assert sorted(rows) == sorted([[p, i, f"p{p}-{i}"] for p in (0, 1) for i in range(5)])
    assert max(len(b["rows"]) for b in first["batches"]) <= 4  # maxOffsetsPerTrigger
    assert len([b for b in first["batches"] if b["rows"]]) >= 3


def test_a_dataframe_streams_offsets_reach_the_store_only_after_func_returned(runs):
    first = runs["first"]
    # While a batch's func runs, the store holds where that batch starts: its own offsets
    # are not committed yet.
    for batch in first["batches"]:
        for partition, offset, _ in batch["rows"]:
            assert batch["stored"].get(str(partition), 0) <= offset
    assert first["stored"] == {"0": 5, "1": 5}


def test_a_dataframe_stream_batch_ids_are_batch_times_that_increase(runs):
    ids = [b["batch_id"] for b in runs["first"]["batches"]]
    assert ids == sorted(set(ids)) and ids[0] > 1_600_000_000_000


def test_a_dataframe_stream_records_each_batchs_progress_as_a_direct_stream_does(runs):
    first = runs["first"]
    progress = first["progress"]
    assert [p["batchId"] for p in progress] == list(range(len(first["batches"])))
    assert [p["numInputRows"] for p in progress] == [len(b["rows"]) for b in first["batches"]]
    assert len({p["runId"] for p in progress}) == 1


def test_a_restarted_dataframe_stream_resumes_from_the_store(runs):
    resumed = runs["resumed"]
    assert resumed["error"] is None
    assert _rows(resumed) == [[0, i, f"p0-{i}"] for i in range(5, 8)]
    assert resumed["stored"] == {"0": 8, "1": 5}


def test_a_failing_func_commits_nothing_and_stops_the_dataframe_stream(runs):
    failed = runs["failed"]
    assert failed["error"] == ["RuntimeError", "func failed on purpose"]
    assert len(failed["batches"]) == 1 and failed["stored"] == {}


def test_a_batch_whose_func_failed_is_read_again_with_the_same_batch_id(runs):
    failed, rerun = runs["failed"], runs["rerun"]
    assert rerun["error"] is None
    assert rerun["batches"][0]["batch_id"] == failed["batches"][0]["batch_id"]
    assert rerun["batches"][0]["rows"] == failed["batches"][0]["rows"]
    assert sorted(_rows(rerun)) == [[0, i, f"b-{i}"] for i in range(6)]
    assert rerun["stored"] == {"0": 6}


def test_rows_written_in_a_dataframe_streams_transaction_commit_with_its_offsets(runs):
    # Both runs of the SQLite-stored stream wrote each batch's rows in stream.transaction:
    # every record once, and the offsets stored with them.
    expected = [[p, i, f"p{p}-{i}"] for p in (0, 1) for i in range(5)]
    expected += [[0, i, f"p0-{i}"] for i in range(5, 8)]
    assert runs["resumed"]["written"] == sorted(expected)


def test_a_dataframe_stream_commits_to_the_kafka_group_store_after_func_returned(runs):
    grouped = runs["group"]
    assert grouped["error"] is None
    assert _rows(grouped) == [[0, i, f"g-{i}"] for i in range(4)]
    assert all(b["stored"] == {} for b in grouped["batches"])  # nothing before func returned
    assert grouped["stored"] == {"0": 4}


def test_an_unbounded_dataframe_stream_stopped_from_func_commits_that_batch_and_ends(runs):
    stopped = runs["stopped"]
    assert stopped["error"] is None and stopped["finished"]
    assert _rows(stopped) == [[0, i, f"e-{i}"] for i in range(4)]  # 2 a batch, then stop()
    assert stopped["stored"] == {"0": 4}


@pytest.fixture
def session(sc: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession(sc)


def _subscribe(kafka: Any, topic: str, **extra: Any) -> Any:
    from dstream_kafka import ConsumerStrategies

    return ConsumerStrategies.Subscribe([topic], {"bootstrap.servers": kafka.bootstrap_servers,
                                                  "group.id": f"{topic}-g", **extra})


@pytest.mark.parametrize("duration", [0, -1, 0.0004, float("nan"), "1", True])
def test_a_dataframe_stream_refuses_a_batch_duration_that_is_not_a_positive_number(
        session, kafka, unique, duration):
    from dstream_kafka.errors import ConfigurationError
    from dstream_kafka.sql import createDataFrameStream

    with pytest.raises(ConfigurationError, match="batchDuration must be a positive number"):
        createDataFrameStream(session, _subscribe(kafka, unique("t")), duration)


def test_a_dataframe_stream_refuses_a_value_deserializer_as_kafka_dataframes_do(session, kafka,
                                                                                unique):
    from dstream_kafka.errors import ConfigurationError
    from dstream_kafka.sql import createDataFrameStream

    strategy = _subscribe(kafka, unique("t"), **{"value.deserializer": bytes.decode})
    with pytest.raises(ConfigurationError, match="value.deserializer is not supported"):
        createDataFrameStream(session, strategy, 1.0)


def test_a_dataframe_stream_started_without_foreach_batch_names_the_call(session, kafka, unique):
    from dstream_kafka.errors import ConfigurationError
    from dstream_kafka.sql import createDataFrameStream

    stream = createDataFrameStream(session, _subscribe(kafka, unique("t")), 1.0)
    with pytest.raises(ConfigurationError, match=r"call stream.foreachBatch\(func\) before"):
        stream.start()


def test_a_dataframe_stream_refuses_a_spark_context_in_place_of_a_session(sc, kafka, unique):
    from dstream_kafka.errors import ConfigurationError
    from dstream_kafka.sql import createDataFrameStream

    with pytest.raises(ConfigurationError, match="spark must be a SparkSession"):
        createDataFrameStream(sc, _subscribe(kafka, unique("t")), 1.0)


def _aged_store(kafka: Any, topic: str, group: str, path: str) -> Any:
    """A store at offset 2 of ``topic``-0, whose records below 6 were then deleted."""
    from dstream_kafka import OffsetRange, OffsetStores

    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(10)], partition=0)
    store = OffsetStores.sqlite(path)
    store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 2)])
    kafka.delete_records(topic, {0: 6})
    return store


def test_a_dataframe_stream_whose_stored_offsets_left_retention_fails_at_start(
        session, kafka, unique, tmp_path):
    from dstream_kafka.errors import DataLossError
    from dstream_kafka.sql import createDataFrameStream

    topic = unique("t")
    store = _aged_store(kafka, topic, f"{topic}-g", str(tmp_path / "o.db"))
    stream = createDataFrameStream(session, _subscribe(kafka, topic), 0.2, offsetStore=store,
                                   options={"endingOffsets": "latest"})
    with pytest.raises(DataLossError):
        stream.foreachBatch(lambda df, batch_id: None).start()
    assert not stream.isActive


def test_a_dataframe_stream_without_fail_on_data_loss_records_the_loss_and_reads_on(
        session, kafka, unique, tmp_path):
    from dstream_kafka import OffsetStores
    from dstream_kafka.sql import createDataFrameStream

    topic = unique("t")
    group, path = f"{topic}-g", str(tmp_path / "o.db")
    store = _aged_store(kafka, topic, group, path)
    stream = createDataFrameStream(session, _subscribe(kafka, topic), 0.2, offsetStore=store,
                                   failOnDataLoss=False, options={"endingOffsets": "latest"})
    seen: list[int] = []
    stream.foreachBatch(lambda df, batch_id: seen.extend(
        r.offset for r in df.select("offset").collect())).start()
    assert stream.awaitTermination(120)
    assert sorted(seen) == [6, 7, 8, 9]
    with OffsetStores.sqlite(path) as look:
        assert [(d.lost_from, d.lost_until) for d in look.data_losses(group)] == [(2, 6)]
        assert list(look.load(group, [topic]).values()) == [10]

"""Lag in Kafka's own tools: a SQLite-store stream mirrors its offsets to its group by default, so
Kafka's kafka-consumer-groups (run from the Kafka jars) sees its lag; a group moved by that
tool's --reset-offsets makes the next start fail instead of being ignored."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.cli import main
from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.uri import open_store

pytestmark = pytest.mark.integration

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def _kafka_consumer_groups(kafka: Any, *args: str) -> str:
    """Run Kafka's kafka-consumer-groups (its class, from the broker's jars) and return stdout."""
    from dstream_kafka.operate.services.environment import require_java
    from dstream_kafka.operate.services.kafka import kafka_classpath

    out = subprocess.run([require_java(), "-Xmx128m", "-cp", kafka_classpath(), GROUP_COMMAND,
                          "--bootstrap-server", kafka.bootstrap_servers, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _stream(make_ssc: Callable[..., Any], kafka: Any, topic: str, group: str, store: Any) -> tuple[Any, list[Any]]:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    ssc = make_ssc(0.3)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"}
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params), offsetStore=store)
    seen: list[Any] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: (r.partition, r.offset)).collect()))
    return ssc, seen


def _read_all(make_ssc: Callable[..., Any], kafka: Any, topic: str, group: str, uri: str) -> None:
    """Run a SQLite-store stream until it committed offsets 10 and 4, then stop it."""
    from support import wait_until

    with open_store(uri) as store:
        ssc, _ = _stream(make_ssc, kafka, topic, group, store)
        ssc.start()
        try:
            wait_until(lambda: store.load(group) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 4},
                       "the stream's commit of every record")
        finally:
            ssc.stop(stopSparkContext=False)


@pytest.fixture
def read_by_stream(kafka: Any, tmp_path: Path, make_ssc: Callable[..., Any],
                   unique: Callable[[str], str]) -> tuple[str, str, str]:
    """(uri, group, topic): a SQLite-store stream read offsets 0-9 and 0-3 and stopped."""
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"a{i}" for i in range(10)], partition=0)
    kafka.produce(topic, [f"b{i}" for i in range(4)], partition=1)
    uri = f"sqlite:///{tmp_path / 'offsets.db'}"
    _read_all(make_ssc, kafka, topic, group, uri)
    return uri, group, topic


def test_kafka_consumer_groups_shows_the_lag_of_a_sqlite_store_stream(
        kafka: Any, read_by_stream: tuple[str, str, str]) -> None:
    _, group, topic = read_by_stream
    kafka.produce(topic, ["late0", "late1", "late2"], partition=0)
    out = _kafka_consumer_groups(kafka, "--describe", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    # the tool lists partitions in no fixed order
    assert sorted(row[1:6] for row in rows) == [[topic, "0", "10", "13", "3"], [topic, "1", "4", "4", "0"]]


def test_a_stream_whose_group_kafkas_reset_tool_moved_fails_at_start_naming_dstream_kafka_offsets_reset(
        kafka: Any, read_by_stream: tuple[str, str, str], make_ssc: Callable[..., Any]) -> None:
    uri, group, topic = read_by_stream
    _kafka_consumer_groups(kafka, "--reset-offsets", "--to-earliest", "--execute", "--group", group,
                           "--topic", topic)
    with open_store(uri) as store:
        ssc, seen = _stream(make_ssc, kafka, topic, group, store)
        with pytest.raises(OffsetStoreError) as info:
            ssc.start()
        ssc.stop(stopSparkContext=False)
    assert str(info.value).startswith(
        f"The offsets of Kafka group {group!r} were moved outside dstream_kafka ({topic}-0: group at 0, store at "
        f"10; {topic}-1: group at 0, store at 4), probably by kafka-consumer-groups --reset-offsets.")
    assert f"`dstream-kafka offsets reset --store URI --group {group} --from-file FILE`" in str(info.value)
    assert seen == []


def test_after_kafkas_reset_a_dstream_kafka_reset_to_current_lets_the_stream_start_from_its_store(
        kafka: Any, read_by_stream: tuple[str, str, str], make_ssc: Callable[..., Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    from support import wait_until

    uri, group, topic = read_by_stream
    _kafka_consumer_groups(kafka, "--reset-offsets", "--to-earliest", "--execute", "--group", group,
                           "--topic", topic)
    assert main(["offsets", "reset", "--store", uri, "--group", group, "--all-topics", "--to-current",
                 "--execute", "--bootstrap-servers", kafka.bootstrap_servers]) == 0, capsys.readouterr().err
    kafka.produce(topic, ["late0"], partition=0)
    with open_store(uri) as store:
        ssc, seen = _stream(make_ssc, kafka, topic, group, store)
        ssc.start()
        try:
            wait_until(lambda: seen, "the record produced after the reset")
        finally:
            ssc.stop(stopSparkContext=False)
    assert seen == [(0, 10)]

"""An empty offset store starts where auto.offset.reset says, not at the Kafka group's offsets.

Every store but the Kafka group store copies its commits to the stream's consumer group (the
lag mirror). A later stream of the same group.id with a new, empty store must still read every
record: the store is the source of truth, and the group's offsets are only named in a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

pytestmark = pytest.mark.integration

SIZES = (60, 40)  # records per partition: 100 in all


def _read_everything(make_ssc: Callable[..., Any], kafka: Any, topic: str, group: str, store: Any) -> list[Any]:
    """Run a stream of ``group`` over ``store`` until the store committed every record; return
    the (partition, offset) pairs it read."""
    from support import string_params, wait_until

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    ssc = make_ssc(0.3)
    strategy = ConsumerStrategies.Subscribe([topic], string_params(kafka, group, **{"auto.offset.reset": "earliest"}))
    seen: list[Any] = []
    KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy, offsetStore=store).foreachRDD(
        lambda rdd: seen.extend(rdd.map(lambda r: (r.partition, r.offset)).collect()))
    ends = {TopicPartition(topic, p): n for p, n in enumerate(SIZES)}
    ssc.start()
    try:
        wait_until(lambda: store.load(group) == ends, "the commit of every record")
    finally:
        ssc.stop(stopSparkContext=False)
    return seen


@pytest.fixture
def mirrored_group(kafka: Any, tmp_path: Path, make_ssc: Callable[..., Any],
                   unique: Callable[[str], str]) -> tuple[str, str]:
    """(topic, group): a SQLite-store stream read all 100 records, so the group's mirrored
    offsets are at the log ends."""
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=2)
    for p, n in enumerate(SIZES):
        kafka.produce(topic, [f"r{p}-{i}" for i in range(n)], partition=p)
    with OffsetStores.sqlite(str(tmp_path / "first.db")) as store:
        assert len(_read_everything(make_ssc, kafka, topic, group, store)) == 100
    return topic, group


def test_a_second_fresh_sqlite_store_in_the_same_group_reads_every_record(
        kafka: Any, tmp_path: Path, make_ssc: Callable[..., Any], mirrored_group: tuple[str, str]) -> None:
    topic, group = mirrored_group
    with OffsetStores.sqlite(str(tmp_path / "second.db")) as store:
        seen = _read_everything(make_ssc, kafka, topic, group, store)
    assert sorted(seen) == [(p, o) for p, n in enumerate(SIZES) for o in range(n)]


def test_a_fresh_postgres_store_in_a_mirrored_group_reads_every_record(
        kafka: Any, postgres: Any, make_ssc: Callable[..., Any], mirrored_group: tuple[str, str],
        unique: Callable[[str], str]) -> None:
    topic, group = mirrored_group
    prefix = "fresh_" + unique("p")[-8:] + "_"  # a new, empty set of tables
    with OffsetStores.postgres(table_prefix=prefix, **postgres.dsn_params()) as store:
        seen = _read_everything(make_ssc, kafka, topic, group, store)
    assert sorted(seen) == [(p, o) for p, n in enumerate(SIZES) for o in range(n)]


def test_an_empty_store_warns_naming_the_groups_offsets_and_the_starting_offsets_that_take_them(
        kafka: Any, tmp_path: Path, make_ssc: Callable[..., Any], mirrored_group: tuple[str, str],
        caplog: pytest.LogCaptureFixture) -> None:
    topic, group = mirrored_group
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.plan.positions"), \
            OffsetStores.sqlite(str(tmp_path / "second.db")) as store:
        _read_everything(make_ssc, kafka, topic, group, store)
    warning, = [r.getMessage() for r in caplog.records if "holds committed offsets" in r.getMessage()]
    assert f"{topic}-0 at 60" in warning and f"{topic}-1 at 40" in warning
    assert f"""'startingOffsets': '{{"{topic}":{{"0":60,"1":40}}}}'""" in warning

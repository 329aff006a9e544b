"""The Kafka output against the real broker: at-least-once, exactly-once transactions,
aborted attempts, zombie fencing, offsets committed in the transaction, refusals."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import ConfigurationError, OutputFencedError
from dstream_kafka.write import KafkaOutput
from dstream_kafka.write.settings import transactional_id

from support import wait_until

# Every test runs once per client backend: the output follows the consumers' backend.
pytestmark = pytest.mark.usefixtures("backend")

BATCH = 0.5


def _stream_params(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed", **extra}


def _read(kafka: Any, topic: str, isolation: str = "read_committed") -> list[tuple[Any, Any]]:
    """Every (key, value) of ``topic`` a consumer of ``isolation`` sees, up to the end."""
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, isolation_level=isolation)
    try:
        parts = [TopicPartition(topic, p) for p in kafka.partitions_for(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        # read_committed: the end is the last stable offset, so open transactions stop it.
        ends = consumer.end_offsets(parts)
        out: list[tuple[Any, Any]] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"reading {topic} did not reach {ends}"
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value) for r in records)
        return out
    finally:
        consumer.close(autocommit=False)


def _committed(kafka: Any, group: str, topic: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, isolation_level="read_committed")
    try:
        return {p: consumer.committed(TopicPartition(topic, p))
                for p in kafka.partitions_for(topic)}
    finally:
        consumer.close(autocommit=False)


def _values(n: int, prefix: str = "v") -> list[tuple[str, str]]:
    return [(f"k{i}", f"{prefix}{i}") for i in range(n)]


def _direct(ssc: Any, kafka: Any, topic: str, group: str, assign: bool = False,
            **extra: Any) -> Any:
    params = _stream_params(kafka, group, **extra)
    strategy = (ConsumerStrategies.Assign([TopicPartition(topic, p) for p in
                                           kafka.partitions_for(topic)], params)
                if assign else ConsumerStrategies.Subscribe([topic], params))
    return KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy)


def _run_until(ssc: Any, predicate: Any, what: str) -> None:
    ssc.start()
    try:
        wait_until(predicate, what, timeout=120, interval=0.5)
    finally:
        ssc.stop(stopSparkContext=False)


def test_an_at_least_once_stream_output_writes_every_record_with_keys_and_headers(
        kafka, make_ssc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target, partitions=2)
    kafka.produce(source, _values(20))
    ssc = make_ssc(BATCH)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target)
    _direct(ssc, kafka, source, group).map(
        lambda r: {"key": r.key, "value": r.value.upper(), "headers": [("from", b"in")]}
    ).foreachRDD(output)
    _run_until(ssc, lambda: len(_read(kafka, target)) >= 20, "20 records in the output")
    written = _read(kafka, target)
    assert sorted(written) == sorted((k.encode(), v.upper().encode()) for k, v in _values(20))


def test_an_exactly_once_stream_writes_each_record_once_and_commits_until_offsets(
        kafka, make_ssc, unique, backend):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target, partitions=1)
    kafka.produce(source, _values(30))
    ends = kafka.end_offsets(source)
    ssc = make_ssc(BATCH)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                         guarantee="exactly-once")
    assert output.settings.backend == backend
    output.writeStream(_direct(ssc, kafka, source, group).map(lambda r: (r.key, r.value)))
    _run_until(ssc, lambda: _committed(kafka, group, source) == ends,
               "the group's offsets at the input's end")
    assert sorted(_read(kafka, target)) == sorted(
        (k.encode(), v.encode()) for k, v in _values(30))


@pytest.mark.parametrize("assign", [False, True], ids=["subscribe", "assign"])
def test_a_restarted_exactly_once_stream_resumes_at_the_offsets_its_transactions_committed(
        kafka, make_ssc, unique, assign):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target, partitions=2)
    params = {"bootstrap.servers": kafka.bootstrap_servers}
    for run, prefix in enumerate(("first", "second")):
        kafka.produce(source, _values(10, prefix))
        ends = kafka.end_offsets(source)
        ssc = make_ssc(BATCH)
        KafkaOutput(params, topic=target, guarantee="exactly-once").writeStream(
            _direct(ssc, kafka, source, group, assign).map(lambda r: (r.key, r.value)))
        _run_until(ssc, lambda: _committed(kafka, group, source) == ends,
                   f"run {run}'s offsets committed")
    expected = [(k.encode(), v.encode()) for p in ("first", "second") for k, v in _values(10, p)]
    assert sorted(_read(kafka, target)) == sorted(expected)


def _killed_run(kafka: Any, unique: Any, n: int) -> tuple[str, str, str, Any]:
    """An input of ``n`` records, an output topic, and the producer of a run killed
    mid-transaction: a record and the group's offset of the input's partition 0 sent, never
    committed; its transaction stays open for 10 minutes. Returns (source, target, group,
    producer)."""
    from kafka.structs import OffsetAndMetadata

    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target)
    kafka.produce(source, _values(n))
    killed = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                           transactional_id=transactional_id(group, source, 0),
                           transaction_timeout_ms=600_000)
    killed.init_transactions()
    killed.begin_transaction()
    killed.send(target, key=b"k0", value=b"from the killed run").get(timeout=30)
    killed.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(5, "", -1)},
                                       group)
    return source, target, group, killed


def test_a_stream_restarted_after_a_kill_mid_transaction_ends_the_open_transaction_at_start(
        kafka, make_ssc, unique):
    source, target, group, killed = _killed_run(kafka, unique, 10)
    try:
        ssc = make_ssc(BATCH)
        KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                    guarantee="exactly-once").writeStream(
            _direct(ssc, kafka, source, group).map(lambda r: (r.key, r.value)))
        _run_until(ssc, lambda: _committed(kafka, group, source) == {0: 10},
                   "the group's offset at the input's end")
        assert sorted(_read(kafka, target)) == sorted(
            (k.encode(), v.encode()) for k, v in _values(10))
    finally:
        killed.close(timeout=0)


def test_a_start_held_by_another_open_transaction_says_so_instead_of_naming_the_reset(
        kafka, make_ssc, unique):
    from dstream_kafka.errors import BrokerTimeoutError

    source, target, group, killed = _killed_run(kafka, unique, 3)
    try:
        ssc = make_ssc(BATCH)  # no exactly-once output here: nothing ends that transaction
        _direct(ssc, kafka, source, group, **{"default.api.timeout.ms": 3000}).count().pprint()
        with pytest.raises(BrokerTimeoutError, match="a transaction that sent offsets for it is "
                                                     "still open"):
            ssc.start()
        ssc.stop(stopSparkContext=False)
    finally:
        killed.close(timeout=0)


def _written_input(kafka: Any, sc: Any, unique: Any, n: int) -> tuple[str, str, str, Any]:
    """A one-partition input topic of ``n`` records, its KafkaRDD, an empty output topic."""
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target)
    kafka.produce(source, _values(n))
    return source, target, group, _kafka_rdd(sc, kafka, source, group)


def _kafka_rdd(sc: Any, kafka: Any, topic: str, group: str) -> Any:
    ranges = [OffsetRange(topic, p, 0, end) for p, end in kafka.end_offsets(topic).items()]
    return KafkaUtils.createRDD(sc, _stream_params(kafka, group), ranges,
                                LocationStrategies.PreferConsistent)


def test_an_aborted_attempt_is_invisible_and_commits_no_offset(kafka, sc, unique):
    source, target, group, rdd = _written_input(kafka, sc, unique, 10)

    def fail_late(record: Any) -> Any:
        if record.offset == 9:
            raise ValueError("the transformation failed on the last record")
        return (record.key, record.value)

    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0},
                         topic=target, guarantee="exactly-once")
    with pytest.raises(Exception, match="failed on the last record"):
        output.write(rdd.map(fail_late), source=rdd, groupId=group)
    assert _read(kafka, target) == []
    assert _committed(kafka, group, source) == {0: None}
    # The retry (another attempt with the same transactional id) writes everything once.
    assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group) == 10
    assert len(_read(kafka, target)) == 10
    assert _committed(kafka, group, source) == {0: 10}


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
        kafka, sc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target)
    kafka.produce(source, _values(5))
    zombie = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                           transactional_id=transactional_id(group, source, 0))
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(target, key=b"zombie", value=b"written by the earlier attempt")
        zombie.flush()
        rdd = _kafka_rdd(sc, kafka, source, group)
        output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                             guarantee="exactly-once")
        assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd,
                            groupId=group) == 5
        with pytest.raises(KafkaError):
            zombie.commit_transaction()
    finally:
        zombie.close(timeout=5)
    assert sorted(_read(kafka, target)) == sorted(
        (k.encode(), v.encode()) for k, v in _values(5))
    assert (b"zombie", b"written by the earlier attempt") in _read(kafka, target,
                                                                   "read_uncommitted")


def test_a_range_the_group_already_committed_is_skipped_not_written_twice(kafka, sc, unique):
    source, target, group, rdd = _written_input(kafka, sc, unique, 4)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                         guarantee="exactly-once")
    assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group) == 4
    assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group) == 0
    assert len(_read(kafka, target)) == 4


def test_a_range_whose_start_the_group_has_passed_is_refused_as_fenced(kafka, sc, unique):
    source, target, group, _ = _written_input(kafka, sc, unique, 4)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                         guarantee="exactly-once")
    head = KafkaUtils.createRDD(sc, _stream_params(kafka, group), [OffsetRange(source, 0, 0, 2)],
                                LocationStrategies.PreferConsistent)
    output.write(head.map(lambda r: (r.key, r.value)), source=head, groupId=group)
    straddling = KafkaUtils.createRDD(sc, _stream_params(kafka, group),
                                      [OffsetRange(source, 0, 1, 4)],
                                      LocationStrategies.PreferConsistent)
    with pytest.raises(OutputFencedError, match="inside this range") as caught:
        output.write(straddling.map(lambda r: (r.key, r.value)), source=straddling,
                     groupId=group)
    assert OutputFencedError.__name__ in str(caught.value.__cause__)  # Spark's job failure
    assert len(_read(kafka, target)) == 2


def test_exactly_once_after_a_shuffle_is_refused_before_any_record_is_written(
        kafka, sc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target)
    kafka.produce(source, _values(6))
    rdd = _kafka_rdd(sc, kafka, source, group)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                         guarantee="exactly-once")
    shuffled = rdd.map(lambda r: (r.key, r.value)).reduceByKey(lambda a, b: a + b, 2)
    with pytest.raises(ConfigurationError, match="after a shuffle"):
        output.write(shuffled, source=rdd, groupId=group)
    with pytest.raises(ConfigurationError, match="partitions"):
        output.write(rdd.map(lambda r: (r.key, r.value)).repartition(3), source=rdd,
                     groupId=group)
    assert kafka.end_offsets(target) == {0: 0}


def test_an_exactly_once_output_refuses_a_stream_that_keeps_offsets_in_a_store(
        kafka, make_ssc, unique, tmp_path):
    from dstream_kafka import OffsetStores

    ssc = make_ssc(BATCH)
    params = _stream_params(kafka, unique("g"))
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([unique("in")], params),
        offsetStore=OffsetStores.sqlite(str(tmp_path / "offsets.db")))
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=unique("out"),
                         guarantee="exactly-once")
    with pytest.raises(ConfigurationError, match="without offsetStore"):
        output.writeStream(stream)


def test_an_exactly_once_output_refuses_a_stream_read_without_read_committed(
        kafka, make_ssc, unique):
    ssc = make_ssc(BATCH)
    stream = _direct(ssc, kafka, unique("in"), unique("g"),
                     **{"isolation.level": "read_uncommitted"})
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=unique("out"),
                         guarantee="exactly-once")
    with pytest.raises(ConfigurationError, match="isolation.level=read_committed"):
        output.writeStream(stream.map(lambda r: (r.key, r.value)))


def test_an_exactly_once_output_refuses_a_checkpointed_context(kafka, make_ssc, unique,
                                                               tmp_path):
    ssc = make_ssc(BATCH)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    stream = _direct(ssc, kafka, unique("in"), unique("g"))
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=unique("out"),
                         guarantee="exactly-once")
    with pytest.raises(ConfigurationError, match="checkpoint folder"):
        output.writeStream(stream)


@pytest.mark.parametrize("combine, cause", [
    (lambda a, b: a.union(b), "parent streams"),
    (lambda a, b: a.window(2 * BATCH, 2 * BATCH), "windowed"),
])
def test_an_exactly_once_output_refuses_combined_and_windowed_streams(
        kafka, make_ssc, unique, combine, cause):
    ssc = make_ssc(BATCH)
    first = _direct(ssc, kafka, unique("in"), unique("g"))
    second = _direct(ssc, kafka, unique("in"), unique("g"))
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=unique("out"),
                         guarantee="exactly-once")
    with pytest.raises(ConfigurationError, match=cause):
        output.writeStream(combine(first, second))


def test_a_second_exactly_once_output_on_one_stream_is_refused(kafka, make_ssc, unique):
    ssc = make_ssc(BATCH)
    stream = _direct(ssc, kafka, unique("in"), unique("g"))
    params = {"bootstrap.servers": kafka.bootstrap_servers}
    KafkaOutput(params, topic=unique("out"), guarantee="exactly-once").writeStream(stream)
    with pytest.raises(ConfigurationError, match="already has an exactly-once"):
        KafkaOutput(params, topic=unique("out"), guarantee="exactly-once").writeStream(
            stream.map(lambda r: r))


def test_records_land_on_their_given_partition_or_their_keys_murmur2_partition_with_headers(
        kafka, sc, unique):
    from kafka.partitioner.default import murmur2

    target = unique("out")
    kafka.create_topic(target, partitions=3)
    records = [{"key": f"key-{i}".encode(), "value": b"v", "headers": {"n": str(i)}}
               for i in range(12)] + [{"value": b"placed", "partition": 2}]
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target)
    assert output.write(sc.parallelize(records, 2)) == 13
    consumer = KafkaConsumer(target, bootstrap_servers=kafka.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        seen = [consumer.__next__() for _ in range(13)]
    finally:
        consumer.close(autocommit=False)
    for record in seen:
        if record.key is None:
            assert (record.partition, record.value) == (2, b"placed")
        else:
            assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % 3, record
            assert dict(record.headers) == {"n": record.key.split(b"-")[1]}

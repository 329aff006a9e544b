"""KafkaUtils.createDataFrame and createDataFrameFromOptions on the suite's classic session:
options, partitions, failOnDataLoss, and the errors raised before any job."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka import KafkaUtils, OffsetRange
from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.sql import lostOffsetRanges, offsetRanges

from support import STRING_DESERIALIZER

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark(sc: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession(sc)


def _params(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, **extra}


def _topic(kafka: Any, name: str, partitions: int = 1, records: int = 10) -> str:
    kafka.create_topic(name, partitions=partitions)
    for p in range(partitions):
        kafka.produce(name, [f"p{p}-{i}" for i in range(records)], partition=p)
    return name


def test_options_read_every_partition_from_earliest_to_latest_with_headers(spark, kafka, unique):
    topic = _topic(kafka, unique("t"), partitions=2, records=3)
    df = KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")),
                                               subscribe=topic, includeHeaders="true")
    rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) AS v", "headers").collect()
    assert sorted((r.partition, r.offset, r.v, r.headers) for r in rows) == [
        (p, i, f"p{p}-{i}", None) for p in (0, 1) for i in range(3)]
    assert offsetRanges(df) == [OffsetRange(topic, 0, 0, 3), OffsetRange(topic, 1, 0, 3)]


def test_min_partitions_splits_ranges_into_one_spark_partition_each(spark, kafka, unique):
    topic = _topic(kafka, unique("t"), records=10)
    df = KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")), {
        "assign": f'{{"{topic}":[0]}}', "startingOffsets": f'{{"{topic}":{{"0":2}}}}',
        "minPartitions": 4})
    assert df.rdd.getNumPartitions() == len(offsetRanges(df)) == 4
    assert [r.offset for r in df.select("offset").collect()] == list(range(2, 10))


def test_a_range_below_the_log_start_fails_before_any_job(spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    kafka.delete_records(topic, {0: 4})
    with pytest.raises(DataLossError, match="earliest offset still in Kafka"):
        KafkaUtils.createDataFrame(spark, _params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 10)])


def test_fail_on_data_loss_false_reads_what_is_left_and_reports_the_lost_range(
        spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    kafka.delete_records(topic, {0: 4})
    df = KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")), {
        "subscribe": topic, "startingOffsets": f'{{"{topic}":{{"0":1}}}}',
        "failOnDataLoss": "false"})
    assert [r.offset for r in df.select("offset").collect()] == list(range(4, 10))
    assert lostOffsetRanges(df) == [OffsetRange(topic, 0, 1, 4)]


def test_records_deleted_after_planning_fail_the_job_with_fail_on_data_loss(spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    df = KafkaUtils.createDataFrame(spark, _params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 10)])
    kafka.delete_records(topic, {0: 4})
    with pytest.raises(Exception, match="[Dd]ata ?[Ll]oss|no longer|deleted|OffsetOutOfRange"):
        df.collect()


def test_records_deleted_after_planning_are_skipped_without_fail_on_data_loss(
        spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    df = KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")),
                                               subscribe=topic, failOnDataLoss=False)
    kafka.delete_records(topic, {0: 4})
    assert [r.offset for r in df.select("offset").collect()] == list(range(4, 10))


def test_a_string_deserializer_is_refused_naming_the_cast(spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    params = _params(kafka, unique("g"), **{"value.deserializer": STRING_DESERIALIZER})
    with pytest.raises(ConfigurationError, match=r"value.deserializer .*CAST\(value AS STRING\)"):
        KafkaUtils.createDataFrame(spark, params, [OffsetRange(topic, 0, 0, 1)])


def test_include_headers_given_twice_is_refused(spark, kafka, unique):
    with pytest.raises(ConfigurationError, match="includeHeaders is given twice"):
        KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")),
                                              {"includeHeaders": "true", "subscribe": "x"},
                                              INCLUDEHEADERS="false")


def test_no_ranges_give_an_empty_dataframe_with_the_kafka_schema(spark, kafka, unique):
    df = KafkaUtils.createDataFrame(spark, _params(kafka, unique("g")), [], includeHeaders=True)
    assert (df.count(), df.columns[-1]) == (0, "headers")


def test_a_spark_context_instead_of_a_session_is_refused(sc, kafka, unique):
    with pytest.raises(ConfigurationError, match="spark must be a SparkSession"):
        KafkaUtils.createDataFrame(sc, _params(kafka, unique("g")), [])


def test_options_ending_past_the_log_end_are_refused_before_any_job_as_create_dataframe_does(
        spark, kafka, unique):
    from dstream_kafka.errors import InvalidOffsetRangeError

    topic = _topic(kafka, unique("t"))
    with pytest.raises(InvalidOffsetRangeError, match=r"the log ends at 10 .*end the range at 10"):
        KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")), subscribe=topic,
                                              endingOffsets=f'{{"{topic}":{{"0":20}}}}')


def test_a_topic_deleted_after_planning_fails_the_job_saying_it_is_gone_not_compacted(
        spark, kafka, unique):
    topic = _topic(kafka, unique("t"))
    df = KafkaUtils.createDataFrameFromOptions(spark, _params(kafka, unique("g")), subscribe=topic,
                                               **{"kafkaConsumer.pollTimeoutMs": "2000"})
    kafka.delete_topic(topic)
    with pytest.raises(Exception, match=rf"RecordsDeletedError: Topic partition {topic}-0 no "
                                        "longer exists in Kafka: it was deleted after") as failed:
        df.collect()
    assert "compacted" not in str(failed.value)


def test_a_topic_deleted_just_before_planning_is_refused_naming_the_topic(spark, kafka, unique):
    from dstream_kafka.errors import UnknownTopicPartitionError

    topic = _topic(kafka, unique("t"))
    params = _params(kafka, unique("g"))
    KafkaUtils.createDataFrameFromOptions(spark, params, subscribe=topic)  # metadata now cached
    kafka.delete_topic(topic)
    # The pooled look-up client's cached metadata still lists the topic: it is refreshed
    # first, so the call fails at once (the brokers would answer the offset look-ups with
    # "unknown partition" until kafka-python's KafkaTimeoutError, after 30 s).
    with pytest.raises(UnknownTopicPartitionError, match=rf"{topic}.*(does not exist|no longer exists)"):
        KafkaUtils.createDataFrameFromOptions(spark, params, subscribe=topic)
    with pytest.raises(UnknownTopicPartitionError, match=rf"{topic}.*(does not exist|no longer exists)"):
        KafkaUtils.createDataFrame(spark, params, [OffsetRange(topic, 0, 0, 10)])

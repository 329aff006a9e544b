"""Prometheus metrics of dstream_kafka.ui.metrics, updated from BatchProgress records."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from dstream_kafka.ui import metrics
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.progress import BatchProgress


def _value(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else float(value)


def test_a_progress_updates_counters_gauges_and_histograms_of_its_stream() -> None:
    stream = "9001"
    listener = metrics.StreamMetrics(9001, 0)
    progress = BatchProgress(
        batchTime=1000, ranges=(OffsetRange("m-t", 0, 10, 15), OffsetRange("m-t", 1, 3, 3)),
        numRecords=5, inputRate=5.0, processingRate=50.0, schedulingDelay=20,
        processingDelay=100, offsetsBehindLatest={TopicPartition("m-t", 0): 4,
                                                  TopicPartition("m-t", 1): 0},
        planMs=30.0, commitMs=10.0)
    listener(progress)
    listener(progress)
    assert _value("dstream_kafka_batches_completed_total", stream=stream) == 2
    assert _value("dstream_kafka_records_total", stream=stream, topic="m-t") == 10
    assert _value("dstream_kafka_committed_offset", stream=stream, topic="m-t",
                  partition="0") == 15
    assert _value("dstream_kafka_offsets_behind_latest", stream=stream, topic="m-t",
                  partition="0") == 4
    assert _value("dstream_kafka_batch_duration_seconds_sum", stream=stream) == 2 * 0.14
    assert _value("dstream_kafka_batch_scheduling_delay_seconds_count", stream=stream) == 2
    assert _value("dstream_kafka_batch_processing_seconds_sum", stream=stream) == 0.2
    assert _value("dstream_kafka_offset_commit_seconds_sum", stream=stream) == 0.02


def test_data_loss_events_are_counted_per_stream() -> None:
    before = _value("dstream_kafka_data_loss_events_total", stream="9002")
    metrics.count_data_loss(9002)
    assert _value("dstream_kafka_data_loss_events_total", stream="9002") == before + 1


def test_the_endpoint_serves_parseable_metrics_on_the_loopback_address() -> None:
    port = metrics.ensure_server(0)
    assert metrics.serving_port() == port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        names = {f.name for f in text_string_to_metric_families(reply.read().decode())}
    assert {"dstream_kafka_batches_completed", "dstream_kafka_records",
            "dstream_kafka_offset_commit_seconds"} <= names


def test_every_metric_name_follows_the_prometheus_naming_rules() -> None:
    for family in metrics.REGISTRY.collect():
        assert family.name.startswith("dstream_kafka_")
        if family.type == "histogram":
            assert family.name.endswith("_seconds")
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)


class _Log:
    """A driver consumer whose only partition holds offsets 10 to 20."""

    def beginning_offsets(self, tps: list[object]) -> dict[object, int]:
        return {tp: 10 for tp in tps}

    def end_offsets(self, tps: list[object]) -> dict[object, int]:
        return {tp: 20 for tp in tps}


def test_each_stored_offset_skipped_with_fail_on_data_loss_false_calls_the_data_loss_hook() -> None:
    from dstream_kafka.plan.consumer_strategy import ConsumerStrategies
    from dstream_kafka.plan.positions import PartitionPositions

    strategy = ConsumerStrategies.Subscribe(["t"], {"bootstrap.servers": "127.0.0.1:1",
                                                    "group.id": "g"})
    positions = PartitionPositions(strategy, group_id="g", store_group="g",
                                   fail_on_data_loss=False)
    events: list[int] = []
    positions.on_data_loss = lambda: events.append(1)
    positions.check_retention(_Log(), None, {TopicPartition("t", 0): 3,
                                             TopicPartition("t", 1): 12})
    assert events == [1]
    assert positions.current[TopicPartition("t", 0)] == 10


def test_streams_of_two_contexts_get_distinct_labels_and_a_context_keeps_its_number() -> None:
    class Context:
        pass

    one, two = Context(), Context()
    first = metrics.stream_label(one, 0)
    assert metrics.stream_label(one, 1) == first.split("-")[0] + "-1"
    assert metrics.stream_label(one, 0) == first
    assert metrics.stream_label(two, 0) != first
    assert metrics.stream_label(None, 0) != metrics.stream_label(None, 0)


def test_closing_a_streams_metrics_removes_its_series_and_no_other() -> None:
    gone, kept = metrics.stream_label(None, 0), metrics.stream_label(None, 0)
    progress = BatchProgress(
        batchTime=1000, ranges=(OffsetRange("rm-t", 0, 0, 5),), numRecords=5, inputRate=5.0,
        processingRate=5.0, schedulingDelay=1, processingDelay=2,
        offsetsBehindLatest={TopicPartition("rm-t", 0): 1})
    closing, staying = metrics.StreamMetrics(gone, None), metrics.StreamMetrics(kept, None)
    closing(progress)
    staying(progress)
    metrics.count_data_loss(gone)

    closing.close()
    closing(progress)  # a late progress sets nothing again

    labels = {s.labels.get("stream") for f in metrics.REGISTRY.collect() for s in f.samples}
    assert gone not in labels and kept in labels
    assert metrics.data_loss_events(gone) == 0
    staying.close()


def test_the_metrics_output_counts_a_data_loss_event_under_its_streams_label() -> None:
    from dstream_kafka.streaming.outputs import DataLoss
    from dstream_kafka.ui.outputs import MetricsOutput

    label = metrics.stream_label(None, 0)
    output = MetricsOutput(label, None)
    output.onDataLoss(DataLoss(label, "dl-t", 0, 3, 7))
    assert _value("dstream_kafka_data_loss_events_total", stream=label) == 1
    assert metrics.data_loss_events(label) == 1
    output.close()
    output.onDataLoss(DataLoss(label, "dl-t", 0, 7, 8))  # after the close: no series again
    assert _value("dstream_kafka_data_loss_events_total", stream=label) == 0

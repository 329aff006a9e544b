"""Driver side: turn Structured Streaming's batch offset options into concrete offset ranges.

Options and precedence are those of Spark's Kafka batch source (``KafkaSourceProvider``),
parsed by :mod:`dstream_kafka.plan.source_options` as a stream's are: exactly one of ``assign``/``subscribe``/``subscribePattern``;
start from ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets``
(default ``earliest``); end at ``endingTimestamp`` > ``endingOffsetsByTimestamp`` >
``endingOffsets`` (default ``latest``). Option names are case-insensitive. Offsets are looked
up with a driver kafka-python consumer that joins no group
(:func:`~dstream_kafka.client.offset_reader.offset_reader`); under
``isolation.level=read_committed`` "latest" is the last stable offset.

``failOnDataLoss`` decides what happens when a requested start is below the earliest offset
still in the log, or above its end (the topic was recreated or truncated): true raises
:class:`~dstream_kafka.errors.DataLossError` naming the topic, partition, requested and
available offsets; false logs a warning, reads what is still there and reports the lost
ranges (:func:`~dstream_kafka.plan.source_options.check_loss`). Unknown topics and partitions
always raise :class:`~dstream_kafka.errors.UnknownTopicPartitionError`. Nothing here runs a Spark
job.

:func:`plan_batch_read` is the one pipeline behind both reads from options,
``createRDDFromOptions`` and ``createDataFrameFromOptions``: options parsed, parameters
translated, option errors raised before any broker round trip, offsets resolved, ranges split,
read settings taken from the Spark configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from dstream_kafka.client.configs import ClientConfigs, bootstrap_errors
from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError
from dstream_kafka.client.offset_reader import KafkaOffsetReader, offset_reader
from dstream_kafka.offsets import OffsetRange, TopicPartition, as_topic_partition
from dstream_kafka.offsets_json import partitions_from_json
from dstream_kafka.plan.range_calculator import split_ranges
from dstream_kafka.plan.source_options import Side, SourceOptions, check_loss, options_of
from dstream_kafka.read.settings import read_settings
from dstream_kafka.read.task import ReadSettings

__all__ = ["BATCH_OPTIONS", "BatchOptions", "BatchRead", "DataFrameOptions", "OffsetResolution",
           "check_end", "plan_batch_read", "resolve_offset_ranges"]


#: Batch options understood by :func:`resolve_offset_ranges` and ``createRDDFromOptions``.
BATCH_OPTIONS = options_of("batch")


class BatchOptions(SourceOptions):
    """The parsed options of one batch read (``createRDDFromOptions``).

    Build it with :meth:`~dstream_kafka.plan.source_options.SourceOptions.parse`. A side
    without an option is ``earliest`` (start) or ``latest`` (end); of several options for one
    side the timestamp wins, then the by-timestamp JSON (Spark's precedence). ``None`` values
    count as not given, and the trigger options of streams are ignored with a warning.
    """

    mode = "batch"


class DataFrameOptions(BatchOptions):
    """The parsed options of one DataFrame batch read (``createDataFrameFromOptions``): the batch
    options plus ``includeHeaders`` (:attr:`include_headers`, false by default)."""

    dataframe = True


class OffsetResolution(NamedTuple):
    """Concrete ranges for every assigned partition, in (topic, partition) order.

    ``lost`` holds the ranges that were requested but are no longer (or not) in Kafka; they
    are only non-empty with ``failOnDataLoss=False``. ``leaders`` maps each partition to its
    leader broker's host (None when unknown), for ``PreferBrokers``.
    """

    ranges: list[OffsetRange]
    lost: list[OffsetRange]
    leaders: dict[TopicPartition, str | None]


def _assigned(reader: KafkaOffsetReader, opts: Mapping[str, Any]) -> list[TopicPartition]:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if name in opts]
    if not given:
        raise ConfigurationError(
            "One of the following options must be specified for Kafka source: assign, subscribe, "
            "subscribePattern. See the docs for more details."
        )
    if len(given) > 1:
        raise ConfigurationError(
            "Only one of the following options can be specified for Kafka source: assign, "
            f"subscribe, subscribePattern (got {', '.join(given)}). See the docs for more details."
        )
    name, value = given[0], opts[given[0]]
    if name == "assign":
        if isinstance(value, str):
            if not value.strip().startswith("{"):
                raise ConfigurationError(
                    f"No topicpartitions to assign as specified value for option 'assign' is "
                    f'\'{value}\'; expected JSON such as {{"topicA":[0,1],"topicB":[2,4]}}'
                )
            tps = partitions_from_json(value, field="assign")
        else:
            tps = [as_topic_partition(tp, "assign entry") for tp in value]
        if not tps:
            raise ConfigurationError(
                "No topicpartitions to assign as specified value for option 'assign' is empty"
            )
        reader.check_partitions(tps)
        return sorted(set(tps))
    if name == "subscribe":
        if isinstance(value, str):
            topics = [t.strip() for t in value.split(",")]
        elif isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
            topics = [t.strip() for t in value]
        else:
            raise ConfigurationError(
                f"Option 'subscribe' must be a comma-separated string or a list of topic names, "
                f"got {value!r}; e.g. \"events,clicks\""
            )
        topics = [t for t in topics if t]
        if not topics:
            raise ConfigurationError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
    else:
        if not str(value).strip():
            raise ConfigurationError(
                "Pattern to subscribe is empty as specified value for option "
                "'subscribePattern' is ''"
            )
        topics = reader.topics_matching(str(value))
    return sorted(
        TopicPartition(t, p) for t in dict.fromkeys(topics) for p in reader.partitions_of(t)
    )


def _check_covers(reader: KafkaOffsetReader, side: Side, assigned: Sequence[TopicPartition]) -> None:
    """Refuse JSON naming a partition Kafka lacks, or not naming every assigned one (Spark)."""
    if side.offsets is None:
        return
    reader.check_partitions(side.offsets)
    if set(side.offsets) != set(assigned):
        raise ConfigurationError(
            f"If {side.option} contains specific offsets, you must specify all TopicPartitions.\n"
            "Use -1 for latest, -2 for earliest.\n"
            f"Specified: {sorted(map(tuple, side.offsets))} Assigned: {sorted(map(tuple, assigned))}"
        )


def resolve_offset_ranges(
    kafkaParams: Mapping[str, Any] | ClientConfigs, options: Mapping[str, Any] | BatchOptions | None
) -> OffsetResolution:
    """Resolve batch ``options`` into one concrete range per assigned partition.

    Parameters
    ----------
    kafkaParams : mapping or ClientConfigs
        The user's Kafka parameters (``bootstrap.servers`` required), or them translated.
    options : mapping or BatchOptions
        Spark's batch source options, see :data:`BATCH_OPTIONS`, or them parsed;
        ``minPartitions`` and ``maxRecordsPerPartition`` are applied by the caller.

    Raises
    ------
    ConfigurationError
        Invalid or contradictory options (Spark's messages), incl. malformed JSON
        (:class:`~dstream_kafka.errors.OffsetsJsonError`, naming the key).
    UnknownTopicPartitionError
        A topic or partition that does not exist.
    DataLossError
        With ``failOnDataLoss`` (the default) when a start offset is no longer in the log.
    InvalidOffsetRangeError
        When a resolved start is after its end.
    """
    opts = options if isinstance(options, BatchOptions) else BatchOptions.parse(options)
    with offset_reader(kafkaParams) as reader:
        reader.refresh_metadata()
        assigned = _assigned(reader, opts.given)
        _check_covers(reader, opts.start, assigned)
        _check_covers(reader, opts.end, assigned)
        earliest = reader.earliest(assigned)
        latest = reader.latest(assigned)
        starts = opts.start.resolve(assigned, earliest, latest, reader.for_times, opts.no_match)
        ends = opts.end.resolve(assigned, earliest, latest, reader.for_times, "latest")
        leaders = {tp: reader.leader_host(tp) for tp in assigned}
    ranges, lost = [], []
    for tp in assigned:
        start, end, gone = check_loss(tp, starts[tp], ends[tp], earliest[tp], latest[tp],
                                      opts.fail_on_data_loss)
        if gone is not None:
            lost.append(gone)
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
        check_end(ranges[-1], latest[tp])
    return OffsetResolution(ranges, lost, leaders)


def check_end(r: OffsetRange, end: int | None) -> None:
    """Refuse a non-empty range ending past ``end``, the log end of its partition (the last
    stable offset under ``read_committed``); ``None``: unknown, not checked.

    Its missing offsets do not exist yet: a read would wait for them until its poll timeout.

    Raises
    ------
    InvalidOffsetRangeError
        Naming the range, the log end and the fix.
    """
    if r.count() > 0 and end is not None and r.untilOffset > end:
        raise InvalidOffsetRangeError(
            f"{r} ends past the end of the log of topic {r.topic} partition {r.partition}: "
            f"the log ends at {end} (the next offset to be written), so offsets "
            f"[{max(end, r.fromOffset)}, {r.untilOffset}) do not exist yet; end the range at "
            f"{end} or less (untilOffset, endingOffsets), or read it once they are written"
        )


class BatchRead(NamedTuple):
    """What a batch read from options reads, planned by :func:`plan_batch_read`.

    ``ranges`` are the Spark partitions' ranges: the non-empty resolved ranges, split by
    ``minPartitions`` / ``maxRecordsPerPartition``; ``split`` is true when splitting changed
    them (the pieces then get no preferred location). ``resolution`` keeps every resolved
    range (empty ones too), the lost ranges and the partitions' leaders. ``settings`` are the
    executors' read settings with the options' poll timeout and ``failOnDataLoss``.
    """

    options: BatchOptions
    configs: ClientConfigs
    resolution: OffsetResolution
    ranges: list[OffsetRange]
    split: bool
    settings: ReadSettings


def plan_batch_read(
    kafkaParams: Mapping[str, Any],
    options: Mapping[str, Any] | None,
    more: Mapping[str, Any],
    conf: Any,
    *,
    dataframe: bool = False,
    check: Callable[[ClientConfigs], None] | None = None,
) -> BatchRead:
    """Plan a batch read from Structured Streaming's options, for both reads that take them.

    In order: ``kafkaParams`` must be a mapping; ``options`` and ``more`` (keyword options,
    which win) are parsed
    (:class:`DataFrameOptions` with ``dataframe``, else :class:`BatchOptions`); ``kafkaParams``
    is translated once (:class:`~dstream_kafka.client.configs.ClientConfigs`); ``check`` gets
    the translation (the read's own checks); ``minPartitions`` and ``maxRecordsPerPartition``
    are checked; then, the first broker round trip, the offsets are resolved
    (:func:`resolve_offset_ranges`, an unreachable bootstrap server explained by
    :func:`~dstream_kafka.client.configs.bootstrap_errors`); the non-empty ranges are split;
    last the read settings are read from ``conf`` (a SparkContext, or the configuration
    itself) with the consumer cache on.

    Raises
    ------
    ConfigurationError
        ``kafkaParams`` that is not a dict, a bad option or Kafka parameter, naming it; see
        :meth:`SourceOptions.parse <dstream_kafka.plan.source_options.SourceOptions.parse>`.
    BrokerTimeoutError
        No bootstrap server answered.
    UnknownTopicPartitionError, DataLossError, InvalidOffsetRangeError
        As :func:`resolve_offset_ranges`.
    """
    if not isinstance(kafkaParams, Mapping):
        raise ConfigurationError(
            f"kafkaParams must be a dict, got {type(kafkaParams).__name__} {kafkaParams!r:.60}; "
            'e.g. {"bootstrap.servers": "localhost:9092"}')
    opts = (DataFrameOptions if dataframe else BatchOptions).parse(options, more=more)
    configs = ClientConfigs.of(kafkaParams)  # translated once, for every client below
    if check is not None:
        check(configs)
    min_partitions = opts.given.get("minPartitions")
    max_records = opts.given.get("maxRecordsPerPartition")
    split_ranges([], min_partitions, max_records)  # option errors before any round trip
    with bootstrap_errors(configs):
        resolution = resolve_offset_ranges(configs, opts)
    non_empty = [r for r in resolution.ranges if r.count() > 0]
    ranges = [p.range for p in split_ranges(non_empty, min_partitions, max_records)]
    settings = read_settings(conf, configs, use_cache=True, poll_timeout_ms=opts.poll_timeout_ms)
    settings = settings._replace(failOnDataLoss=opts.fail_on_data_loss)
    return BatchRead(opts, configs, resolution, ranges, ranges != non_empty, settings)

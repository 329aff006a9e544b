"""Driver side: turn Structured Streaming's batch offset options into concrete offset ranges.

Options, precedence and messages are those of Spark's Kafka batch source
(``KafkaSourceProvider``): exactly one of ``assign``/``subscribe``/``subscribePattern``;
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
ranges. Unknown topics and partitions always raise
:class:`~dstream_kafka.errors.UnknownTopicPartitionError`. Nothing here runs a Spark job.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.client.offset_reader import KafkaOffsetReader, offset_reader
from dstream_kafka.offsets import INT64_MAX as _INT64_MAX
from dstream_kafka.offsets import EARLIEST, LATEST, OffsetRange, TopicPartition, as_topic_partition
from dstream_kafka.offsets_json import partition_offsets_from_json, partition_offsets_to_json, partitions_from_json

# KafkaOffsetReader lives in dstream_kafka.client.offset_reader; re-exported for existing imports.
__all__ = [
    "BATCH_OPTIONS",
    "KafkaOffsetReader",
    "OffsetResolution",
    "check_loss",
    "normalize_options",
    "resolve_offset_ranges",
]

log = logging.getLogger(__name__)

#: Batch options understood by :func:`resolve_offset_ranges` and ``createRDDFromOptions``.
BATCH_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "kafkaConsumer.pollTimeoutMs",
)
# Streaming-only options: accepted and ignored in batch with a warning, as Spark does.
_STREAMING_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_OPTION_NAMES = {name.lower(): name for name in BATCH_OPTIONS + _STREAMING_ONLY}
_TIMEOUT_MS = 30000


class OffsetResolution(NamedTuple):
    """Concrete ranges for every assigned partition, in (topic, partition) order.

    ``lost`` holds the ranges that were requested but are no longer (or not) in Kafka; they
    are only non-empty with ``failOnDataLoss=False``. ``leaders`` maps each partition to its
    leader broker's host (None when unknown), for ``PreferBrokers``.
    """

    ranges: list[OffsetRange]
    lost: list[OffsetRange]
    leaders: dict[TopicPartition, str | None]


def normalize_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return ``options`` under their canonical names (keys are case-insensitive).

    Raises
    ------
    ConfigurationError
        For an option name that is not a string, an unknown option (with the closest
        names) or one given twice.
    """
    result: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise ConfigurationError(
                f"Kafka batch option names must be strings, got {key!r}; e.g. "
                '{"subscribe": "events"}'
            )
        name = _OPTION_NAMES.get(key.lower())
        if name is None:
            close = difflib.get_close_matches(str(key), BATCH_OPTIONS, n=2)
            hint = (
                f"; did you mean {' or '.join(close)}?"
                if close
                else f"; known options: {', '.join(BATCH_OPTIONS)}"
            )
            raise ConfigurationError(f"Unknown Kafka batch option {key!r}{hint}")
        if name in result:
            raise ConfigurationError(
                f"Option {name} is given twice (option names are case-insensitive)"
            )
        if name in _STREAMING_ONLY:
            log.warning("%s is ignored in batch reads", name)
            continue
        if value is not None:
            result[name] = value
    return result


def _json_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return json.dumps(value)
        return partition_offsets_to_json({as_topic_partition(k): v for k, v in value.items()})
    raise ConfigurationError(
        f"{name} must be a JSON string or a mapping, got {type(value).__name__}"
    )


def _long(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        number = int(value)
    else:
        raise ConfigurationError(f"Expected a single long value, got {value} for {name}")
    if number < 0:
        raise ConfigurationError(f"{name} must be a timestamp in ms >= 0, got {number}")
    if number > _INT64_MAX:
        raise ConfigurationError(
            f"{name} is out of range: a timestamp in ms is 0 to {_INT64_MAX} (2**63 - 1), got {number}")
    return number


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigurationError(f"{name} must be true or false, got {value!r}")


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


def _specific(
    reader: KafkaOffsetReader,
    name: str,
    text: str,
    assigned: Sequence[TopicPartition],
    sentinels: tuple[int, ...],
) -> dict[TopicPartition, int]:
    offsets = partition_offsets_from_json(text, field=name, allowed_sentinels=sentinels)
    reader.check_partitions(offsets)
    if set(offsets) != set(assigned):
        raise ConfigurationError(
            f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
            "Use -1 for latest, -2 for earliest.\n"
            f"Specified: {sorted(map(tuple, offsets))} Assigned: {sorted(map(tuple, assigned))}"
        )
    return offsets


def _limit(
    reader: KafkaOffsetReader,
    opts: Mapping[str, Any],
    side: str,
    assigned: Sequence[TopicPartition],
) -> tuple[str, Any]:
    """Return ("earliest"|"latest"|"offsets"|"timestamps", detail) for one side."""
    prefix = "starting" if side == "start" else "ending"
    if f"{prefix}Timestamp" in opts:
        ts = _long(f"{prefix}Timestamp", opts[f"{prefix}Timestamp"])
        return "timestamps", {tp: ts for tp in assigned}
    if f"{prefix}OffsetsByTimestamp" in opts:
        name = f"{prefix}OffsetsByTimestamp"
        return "timestamps", _specific(reader, name, _json_text(name, opts[name]), assigned, ())
    name = f"{prefix}Offsets"
    value = opts.get(name, "earliest" if side == "start" else "latest")
    if isinstance(value, str) and value.strip().lower() in ("earliest", "latest"):
        word = value.strip().lower()
        if side == "start" and word == "latest":
            raise ConfigurationError("starting offset can't be latest for batch queries on Kafka")
        if side == "end" and word == "earliest":
            raise ConfigurationError("ending offset can't be earliest for batch queries on Kafka")
        return word, None
    offsets = _specific(reader, name, _json_text(name, value), assigned, (EARLIEST, LATEST))
    forbidden, word = (LATEST, "latest") if side == "start" else (EARLIEST, "earliest")
    for tp, offset in offsets.items():
        if offset == forbidden:
            raise ConfigurationError(
                f"{name} for {tp.topic}-{tp.partition} can't be {word} for batch queries on Kafka"
            )
    return "offsets", offsets


def _resolve_side(
    reader: KafkaOffsetReader,
    kind: str,
    detail: Any,
    side: str,
    strategy: str,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    assigned: Sequence[TopicPartition],
) -> dict[TopicPartition, int]:
    if kind == "earliest":
        return {tp: earliest[tp] for tp in assigned}
    if kind == "latest":
        return {tp: latest[tp] for tp in assigned}
    if kind == "offsets":
        return {
            tp: earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
            for tp, o in detail.items()
        }
    found = reader.for_times(detail)
    result = {}
    for tp, offset in found.items():
        if offset is None:
            if side == "start" and strategy == "error":
                raise ConfigurationError(
                    "No offset matched from request of topic-partition "
                    f"{tp.topic}-{tp.partition} and timestamp {detail[tp]}; set "
                    "startingOffsetsByTimestampStrategy=latest to start "
                    "such partitions at the latest offset"
                )
            offset = latest[tp]  # no record that late: start (strategy latest) or end at latest
        result[tp] = offset
    return result


def resolve_offset_ranges(
    kafkaParams: Mapping[str, Any], options: Mapping[str, Any] | None
) -> OffsetResolution:
    """Resolve batch ``options`` into one concrete range per assigned partition.

    Parameters
    ----------
    kafkaParams : mapping
        The user's Kafka parameters (``bootstrap.servers`` required).
    options : mapping
        Spark's batch source options, see :data:`BATCH_OPTIONS`; ``minPartitions`` and
        ``maxRecordsPerPartition`` are validated here but applied by the caller.

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
    opts = normalize_options(options)
    fail_on_data_loss = _bool("failOnDataLoss", opts.get("failOnDataLoss", True))
    strategy = str(opts.get("startingOffsetsByTimestampStrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigurationError(
            "startingOffsetsByTimestampStrategy must be error or latest, got "
            f"{opts['startingOffsetsByTimestampStrategy']!r}"
        )
    with offset_reader(kafkaParams) as reader:
        assigned = _assigned(reader, opts)
        start_kind, start_detail = _limit(reader, opts, "start", assigned)
        end_kind, end_detail = _limit(reader, opts, "end", assigned)
        earliest = reader.earliest(assigned)
        latest = reader.latest(assigned)
        starts = _resolve_side(
            reader, start_kind, start_detail, "start", strategy, earliest, latest, assigned
        )
        ends = _resolve_side(
            reader, end_kind, end_detail, "end", strategy, earliest, latest, assigned
        )
        leaders = {tp: reader.leader_host(tp) for tp in assigned}
    ranges, lost = [], []
    for tp in assigned:
        start, end = starts[tp], ends[tp]
        start, end, gone = check_loss(tp, start, end, earliest[tp], latest[tp], fail_on_data_loss)
        if gone is not None:
            lost.append(gone)
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return OffsetResolution(ranges, lost, leaders)


def check_loss(
    tp: TopicPartition, start: int, end: int, earliest: int, latest: int, fail: bool
) -> tuple[int, int, OffsetRange | None]:
    """Check a requested ``[start, end)`` of ``tp`` against the log ``[earliest, latest]``.

    Returns the range still readable and the lost range (None when nothing is lost). A start
    below the log start moves up to it; a start past the log end moves down to it.

    Raises
    ------
    DataLossError
        Naming the topic, partition and offsets, when ``fail`` and records are lost.
    """
    name = f"{tp.topic}-{tp.partition}"
    if start < earliest and start < end:
        lost = OffsetRange(tp.topic, tp.partition, start, min(earliest, end))
        message = (
            f"Requested offset {start} for topic {tp.topic} partition {tp.partition} is below the "
            f"earliest available offset {earliest}: records [{start}, {min(earliest, end)}) are no "
            "longer in Kafka (retention, delete-records, or the topic was recreated)."
        )
        if fail:
            raise DataLossError(
                message
                + " Set failOnDataLoss=false to read from the earliest available offset instead."
            )
        log.warning("%s Reading from %d because failOnDataLoss is false.", message, earliest)
        return earliest, max(end, earliest), lost
    if start > latest:
        message = (
            f"Partition {name}'s offset was changed from {start} to {latest}, some data may have "
            "been missed. This could either be a user error that the start offset is set too high, "
            "or the kafka topic-partition was deleted and recreated."
        )
        if fail:
            raise DataLossError(message + " Set failOnDataLoss=false to skip such partitions.")
        log.warning("%s Skipping it because failOnDataLoss is false.", message)
        return latest, latest, OffsetRange(tp.topic, tp.partition, start, max(start, end))
    return start, end, None

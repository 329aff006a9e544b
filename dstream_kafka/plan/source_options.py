"""Structured Streaming's Kafka source options, parsed once for both reads that take them.

``KafkaUtils.createRDDFromOptions`` (a batch read, :mod:`dstream_kafka.plan.batch_options`) and
``KafkaUtils.createDirectStream(options=)`` (a stream, :mod:`dstream_kafka.plan.stream_options`)
take Spark's option names, case-insensitively. :meth:`SourceOptions.parse` checks every option
without a broker: one name table (:data:`OPTIONS`, with close-name suggestions), one reader per
value kind, one message per mistake. The subclass of each read keeps what differs: a batch read
takes its topics from ``assign``/``subscribe``/``subscribePattern`` and picks one start and one
end by Spark's precedence; a stream refuses two options for one side and reads only strings,
as ``DataStreamReader.option`` stores them. A DataFrame read (``createDataFrameFromOptions``)
takes the batch options plus ``includeHeaders``. :func:`check_loss` is what both reads do with a
requested range the log no longer holds (``failOnDataLoss``).
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from dstream_kafka.config import parse_time_string, true_or_false
from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.offsets import (
    EARLIEST, INT64_MAX, LATEST, OffsetRange, TopicPartition, as_topic_partition)
from dstream_kafka.offsets_json import partition_offsets_from_json, partition_offsets_to_json

__all__ = ["OPTIONS", "Side", "SourceOptions", "check_loss", "options_of"]

log = logging.getLogger(__name__)

_BOTH = ("batch", "stream")
#: Every Kafka source option, with the reads that take it: ``batch`` (createRDDFromOptions and
#: createDataFrameFromOptions), ``stream`` (createDirectStream's ``options``) and ``dataframe``
#: (createDataFrameFromOptions only, on top of the batch options).
OPTIONS: Mapping[str, tuple[str, ...]] = {
    "assign": ("batch",),
    "subscribe": ("batch",),
    "subscribePattern": ("batch",),
    "startingOffsets": _BOTH,
    "endingOffsets": _BOTH,
    "startingOffsetsByTimestamp": _BOTH,
    "endingOffsetsByTimestamp": _BOTH,
    "startingTimestamp": _BOTH,
    "endingTimestamp": _BOTH,
    "startingOffsetsByTimestampStrategy": _BOTH,
    "failOnDataLoss": _BOTH,
    "minPartitions": _BOTH,
    "maxOffsetsPerTrigger": ("stream",),
    "minOffsetsPerTrigger": ("stream",),
    "maxTriggerDelay": ("stream",),
    "maxRecordsPerPartition": ("batch",),
    "kafkaConsumer.pollTimeoutMs": ("batch",),
    "includeHeaders": ("dataframe",),
}
# Trigger options: a batch read accepts and ignores them with a warning, as Spark does.
_IGNORED_IN_BATCH = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_READ_NAME = {"batch": "Kafka batch", "stream": "direct stream"}
_EXAMPLE = {"batch": '{"subscribe": "events"}', "stream": '{"startingOffsets": "earliest"}'}
_TIMESTAMP = "a timestamp in milliseconds since the epoch"
#: Structured Streaming's DEFAULT_MAX_TRIGGER_DELAY: 15 minutes.
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000


def options_of(mode: str) -> tuple[str, ...]:
    """The option names read ``mode`` (``"batch"``, ``"stream"`` or ``"dataframe"``) takes, in
    table order (``"dataframe"``: only those a DataFrame read adds to the batch options)."""
    return tuple(name for name, modes in OPTIONS.items() if mode in modes)


def _example(name: str) -> str:
    if "ByTimestamp" in name:
        return '{"events":{"0":1700000000000}}'
    if name.endswith("Timestamp"):
        return "1700000000000"
    return {"failOnDataLoss": "false", "startingOffsetsByTimestampStrategy": "latest",
            "kafkaConsumer.pollTimeoutMs": "512", "minPartitions": "8",
            "maxOffsetsPerTrigger": "10000", "minOffsetsPerTrigger": "1000",
            "maxTriggerDelay": "5s"}.get(name, '{"events":{"0":23,"1":-2}}')


def _text(name: str, value: Any) -> str:
    """A stream's option value as Spark's ``DataStreamReader.option`` stores it: a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    raise ConfigurationError(
        f"option {name} must be a string (as DataStreamReader.option takes), got "
        f"{type(value).__name__} {value!r:.60}; e.g. {{'{name}': '{_example(name)}'}}")


def _bool(name: str, value: Any) -> bool:
    flag = true_or_false(value)
    if flag is None:
        raise ConfigurationError(f"option {name} must be 'true' or 'false', got {value!r}")
    return flag


def _whole(name: str, value: Any, what: str = _TIMESTAMP) -> int:
    """Read a whole number >= 0 that fits a Java long; ``what`` says what it counts."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    # ASCII digits only: str.isdigit() also takes superscripts, which int() refuses.
    if not re.fullmatch(r"[0-9]+", text):
        raise ConfigurationError(
            f"option {name} must be {what} (a whole number >= 0), got {value!r}; "
            f"e.g. {{'{name}': '{_example(name)}'}}")
    if int(text) > INT64_MAX:
        raise ConfigurationError(
            f"option {name} is out of range: {what} is 0 to {INT64_MAX} (2**63 - 1), got "
            f"{text}; e.g. {{'{name}': '{_example(name)}'}}")
    return int(text)


def _bad_option(name: str, value: Any, expected: str) -> ConfigurationError:
    return ConfigurationError(
        f"option {name} must be {expected}, got {value!r}; e.g. {{'{name}': '{_example(name)}'}}")


def _positive(name: str, value: Any, what: str) -> int:
    """Read a whole number >= 1 that fits a Java long; ``what`` says what it counts."""
    number = _whole(name, value, what)
    if number < 1:
        raise _bad_option(name, value, f"positive ({what}, at least 1)")
    return number


def _delay_ms(name: str, value: Any) -> int:
    """Read a Spark time string (a bare number is ms), as ``Utils.timeStringAsMs``."""
    try:
        delay = parse_time_string(str(value).strip(), "ms", key=f"option {name}")
    except ConfigurationError:
        delay = -1
    if delay < 0:
        raise _bad_option(name, value, "a time such as '500ms', '5s' or '15m' (a bare number "
                                       "is milliseconds, at least 0)")
    return delay


def _json_text(name: str, value: Any) -> str:
    """A JSON option as text: a batch read also takes a dict (topic names or partitions as keys)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return json.dumps(value)
        return partition_offsets_to_json({as_topic_partition(k): v for k, v in value.items()})
    raise ConfigurationError(
        f"option {name} must be JSON text or a dict, got {type(value).__name__}; "
        f"e.g. {{'{name}': '{_example(name)}'}}")


@dataclass(frozen=True)
class Side:
    """One side (start or end) of a read: the option that set it, and its parsed value."""

    option: str | None = None
    kind: str | None = None  # "earliest" | "latest" | "offsets" | "timestamps" | "timestamp"
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None

    def topics(self) -> set[str]:
        """The topics the side's JSON names."""
        return {tp.topic for tp in self.offsets or {}}

    def resolve(self, tps: Sequence[TopicPartition], earliest: Mapping[TopicPartition, int],
                latest: Mapping[TopicPartition, int],
                for_times: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int | None]],
                no_match: str) -> dict[TopicPartition, int]:
        """The offsets this side gives those of ``tps`` it covers (others are left out).

        ``for_times`` looks timestamps up (``KafkaOffsetReader.for_times``); ``no_match`` is
        what a timestamp without a record that late gives: ``"latest"`` or ``"error"``.

        Raises
        ------
        ConfigurationError
            A timestamp without a record that late while ``no_match`` is ``"error"``.
        """
        if self.kind == "earliest":
            return {tp: earliest[tp] for tp in tps}
        if self.kind == "latest":
            return {tp: latest[tp] for tp in tps}
        if self.kind == "offsets":
            given = self.offsets or {}
            return {tp: earliest[tp] if given[tp] == EARLIEST else latest[tp]
                    if given[tp] == LATEST else given[tp] for tp in tps if tp in given}
        if self.kind is None:
            return {}
        stamps = (dict.fromkeys(tps, self.timestamp or 0) if self.kind == "timestamp"
                  else {tp: ts for tp, ts in (self.offsets or {}).items() if tp in tps})
        found = for_times(stamps) if stamps else {}
        result: dict[TopicPartition, int] = {}
        for tp, ts in stamps.items():
            hit = found.get(tp)
            if hit is None and no_match == "error":
                raise ConfigurationError(
                    f"option {self.option}: no record of {tp.topic}-{tp.partition} has a timestamp "
                    f"at or after {ts}; set startingOffsetsByTimestampStrategy=latest to start such "
                    "partitions at their latest offset")
            result[tp] = latest[tp] if hit is None else hit
        return result


@dataclass(frozen=True)
class SourceOptions:
    """Parsed source options of one read; a subclass per read sets :attr:`mode`.

    ``start`` and ``end`` are the two sides; ``no_match`` is
    ``startingOffsetsByTimestampStrategy`` (``error`` or ``latest``); ``given`` holds every
    option under its canonical name (a batch read's values as given, a stream's as strings);
    ``include_headers`` is ``includeHeaders`` (false unless a DataFrame read sets it).
    """

    #: ``"batch"`` or ``"stream"``: which options the read takes, and how.
    mode: ClassVar[str]
    #: True for a DataFrame read: it takes the ``"dataframe"`` options of :data:`OPTIONS` too.
    dataframe: ClassVar[bool] = False

    start: Side = Side()
    end: Side = Side()
    no_match: str = "error"
    fail_on_data_loss: bool = True
    poll_timeout_ms: int | None = None
    given: Mapping[str, Any] = field(default_factory=dict)
    #: A stream's trigger options (Structured Streaming's names), ``None`` when not given.
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    include_headers: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None, failOnDataLoss: bool | None = None, *,
              more: Mapping[str, Any] | None = None) -> Self:
        """Check and parse ``options`` (and ``more``, keyword arguments that win over them).

        ``failOnDataLoss`` is a keyword argument of the read, if given: the option must agree.

        Raises
        ------
        ConfigurationError
            Naming the option and the fix: options that are not a dict, an unknown option
            (with the closest names), one given twice, a bad value, malformed JSON
            (:class:`~dstream_kafka.errors.OffsetsJsonError`), or for a stream two options
            that set the same side.
        """
        if options is not None and not isinstance(options, Mapping):
            raise ConfigurationError(
                f"options must be a dict of option name to value, got {type(options).__name__}; "
                f"e.g. {_EXAMPLE[cls.mode]}")
        known = options_of(cls.mode) + (options_of("dataframe") if cls.dataframe else ())
        names = {n.lower(): n for n in known + (_IGNORED_IN_BATCH if cls.mode == "batch" else ())}
        opts: dict[str, Any] = {}
        for key, value in {**(options or {}), **(more or {})}.items():
            if not isinstance(key, str):
                raise ConfigurationError(
                    f"option names must be strings, got {key!r}; e.g. {_EXAMPLE[cls.mode]}")
            name = names.get(key.lower())
            if name is None:
                close = difflib.get_close_matches(key, known, n=2)
                hint = (f"did you mean {' or '.join(close)}?" if close
                        else f"known options: {', '.join(known)}")
                raise ConfigurationError(f"unknown {_READ_NAME[cls.mode]} option {key!r}; {hint}")
            if name in opts:
                raise ConfigurationError(
                    f"option {name} is given twice (option names are case-insensitive)")
            if cls.mode == "batch" and name in _IGNORED_IN_BATCH:
                log.warning("%s is ignored in batch reads", name)
            elif cls.mode == "stream":
                opts[name] = _text(name, value)
            elif value is not None:
                opts[name] = value
        headers = "includeHeaders" in opts and _bool("includeHeaders", opts["includeHeaders"])
        no_match = str(opts.get("startingOffsetsByTimestampStrategy", "error")).strip().lower()
        if no_match not in ("error", "latest"):
            raise ConfigurationError(
                "option startingOffsetsByTimestampStrategy must be 'error' or 'latest', got "
                f"{opts['startingOffsetsByTimestampStrategy']!r}")
        fail = True if failOnDataLoss is None else bool(failOnDataLoss)
        if "failOnDataLoss" in opts:
            fail = _bool("failOnDataLoss", opts["failOnDataLoss"])
            if failOnDataLoss is not None and bool(failOnDataLoss) != fail:
                raise ConfigurationError(
                    f"failOnDataLoss={failOnDataLoss!r} and option failOnDataLoss="
                    f"{opts['failOnDataLoss']!r} disagree; give it once")
        poll = opts.get("kafkaConsumer.pollTimeoutMs")
        return cls(cls._side(opts, "starting"), cls._side(opts, "ending"), no_match, fail,
                   None if poll is None else _whole("kafkaConsumer.pollTimeoutMs", poll,
                                                    "a time in milliseconds"), opts,
                   include_headers=headers,
                   **(cls._trigger(opts) if cls.mode == "stream" else {}))

    @staticmethod
    def _trigger(opts: Mapping[str, Any]) -> dict[str, Any]:
        """A stream's trigger options, each checked as Structured Streaming checks it."""
        top = opts.get("maxOffsetsPerTrigger")
        low = opts.get("minOffsetsPerTrigger")
        parts = opts.get("minPartitions")
        delay = opts.get("maxTriggerDelay")
        parsed: dict[str, Any] = {
            "max_offsets_per_trigger": None if top is None else _positive(
                "maxOffsetsPerTrigger", top, "offsets per batch"),
            "min_offsets_per_trigger": None if low is None else _positive(
                "minOffsetsPerTrigger", low, "offsets per batch"),
            "min_partitions": None if parts is None else _positive(
                "minPartitions", parts, "Spark partitions"),
        }
        if delay is not None:
            parsed["max_trigger_delay_ms"] = _delay_ms("maxTriggerDelay", delay)
        return parsed  # minOffsetsPerTrigger <= the cap: StartOptions.max_offsets

    @classmethod
    def _side(cls, opts: Mapping[str, Any], prefix: str) -> Side:
        names = [n for n in (f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets")
                 if n in opts]
        if len(names) > 1 and cls.mode == "stream":
            raise ConfigurationError(
                f"options {' and '.join(reversed(names))} are both given, but they set the same "
                f"{'start' if prefix == 'starting' else 'end'}; keep one of them")
        if not names:  # a batch read defaults to all there is; a stream to its offset store
            word = "earliest" if prefix == "starting" else "latest"
            return Side(kind=word) if cls.mode == "batch" else Side()
        name = names[0]  # a batch read's precedence: the timestamp, then by-timestamp JSON
        value = opts[name]
        if name.endswith("ByTimestamp"):
            return Side(name, "timestamps", partition_offsets_from_json(
                _json_text(name, value), field=f"option {name}", allowed_sentinels=()))
        if name.endswith("Timestamp"):
            return Side(name, "timestamp", timestamp=_whole(name, value))
        word = value.strip().lower() if isinstance(value, str) else ""
        if word == "earliest" and prefix == "ending":
            raise ConfigurationError(
                "option endingOffsets can't be 'earliest' (nothing would be read); "
                "use 'latest' or JSON offsets such as {\"events\":{\"0\":100}}")
        if word == "latest" and prefix == "starting" and cls.mode == "batch":
            raise ConfigurationError("starting offset can't be latest for batch queries on Kafka")
        if word in ("earliest", "latest"):
            return Side(name, word)
        offsets = partition_offsets_from_json(
            _json_text(name, value), field=f"option {name}",
            allowed_sentinels=(EARLIEST, LATEST) if prefix == "starting" else (LATEST,))
        for tp, offset in offsets.items():
            if offset == LATEST and prefix == "starting" and cls.mode == "batch":
                raise ConfigurationError(
                    f"{name} for {tp.topic}-{tp.partition} can't be latest for batch queries on Kafka")
        return Side(name, "offsets", offsets)


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

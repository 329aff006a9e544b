"""Structured Streaming's start and end options on a direct stream: where it starts and stops.

``KafkaUtils.createDirectStream(..., options={...})`` takes the options of Spark's Kafka source
with their names and JSON (``DataStreamReader.option`` style: a mapping of str to str; names are
case-insensitive):

- ``startingOffsets``: ``earliest``, ``latest`` or ``{"t":{"0":23,"1":-2}}`` (-2 earliest,
  -1 latest); ``startingOffsetsByTimestamp`` (``{"t":{"0":1700000000000}}``) or
  ``startingTimestamp`` (one ms value for every partition), with
  ``startingOffsetsByTimestampStrategy`` (``error`` or ``latest``: what a partition without a
  record that late does);
- ``endingOffsets`` (``latest`` or JSON, -1 latest), ``endingOffsetsByTimestamp``,
  ``endingTimestamp``: any of them makes the stream a bounded run (Trigger.AvailableNow);
- ``failOnDataLoss`` (``true``/``false``).

Starting options apply only to partitions the offset store knows nothing of; stored offsets win.
A partition the JSON does not name starts where Kafka says: ``auto.offset.reset`` (the
group's committed offset first only with the Kafka group store or no store; see
:mod:`dstream_kafka.plan.positions`). Everything that can be checked without a broker is checked when the
stream is created; topics and partitions are checked against the cluster when it starts, before
any batch.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dstream_kafka.plan.consumer_strategy import ConsumerStrategy
from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.plan.batch_options import check_loss
from dstream_kafka.offsets import INT64_MAX as _INT64_MAX
from dstream_kafka.offsets import EARLIEST, LATEST, OffsetRange, TopicPartition
from dstream_kafka.offsets_json import partition_offsets_from_json, partition_offsets_to_json

__all__ = ["STREAM_OPTIONS", "StartOptions", "resolved_offsets"]

logger = logging.getLogger(__name__)

#: The options ``createDirectStream`` understands (Structured Streaming's names).
STREAM_OPTIONS = (
    "startingOffsets",
    "startingOffsetsByTimestamp",
    "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingOffsetsByTimestamp",
    "endingTimestamp",
    "failOnDataLoss",
)
_NAMES = {name.lower(): name for name in STREAM_OPTIONS}
_TIMEOUT_MS = 30_000


def _text(name: str, value: Any) -> str:
    """An option value as Spark's ``DataStreamReader.option`` stores it: a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    raise ConfigurationError(
        f"option {name} must be a string (as DataStreamReader.option takes), got "
        f"{type(value).__name__} {value!r:.60}; e.g. {{'{name}': '{_example(name)}'}}")


def _example(name: str) -> str:
    if "ByTimestamp" in name:
        return '{"events":{"0":1700000000000}}'
    if name.endswith("Timestamp"):
        return "1700000000000"
    if name == "failOnDataLoss":
        return "false"
    if name == "startingOffsetsByTimestampStrategy":
        return "latest"
    return '{"events":{"0":23,"1":-2}}'


def _bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise ConfigurationError(f"option {name} must be 'true' or 'false', got {text!r}")
    return word == "true"


def _millis(name: str, text: str) -> int:
    value = text.strip()
    # ASCII digits only: str.isdigit() also takes superscripts, which int() refuses.
    if not re.fullmatch(r"[0-9]+", value):
        raise ConfigurationError(
            f"option {name} must be a timestamp in milliseconds since the epoch (a whole number "
            f">= 0), got {text!r}; e.g. {{'{name}': '1700000000000'}}")
    if int(value) > _INT64_MAX:
        raise ConfigurationError(
            f"option {name} is out of range: a timestamp in milliseconds since the epoch is 0 to "
            f"{_INT64_MAX} (2**63 - 1), got {value}; e.g. {{'{name}': '1700000000000'}}")
    return int(value)


@dataclass(frozen=True)
class _Side:
    """One side (start or end) of the options: which option, and its parsed value."""

    option: str | None = None
    kind: str | None = None  # "earliest" | "latest" | "offsets" | "timestamps" | "timestamp"
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.offsets or {}}


def _side(opts: Mapping[str, str], prefix: str) -> _Side:
    names = [n for n in (f"{prefix}Offsets", f"{prefix}OffsetsByTimestamp", f"{prefix}Timestamp")
             if n in opts]
    if len(names) > 1:
        raise ConfigurationError(
            f"options {' and '.join(names)} are both given, but they set the same "
            f"{'start' if prefix == 'starting' else 'end'}; keep one of them")
    if not names:
        return _Side()
    name = names[0]
    text = opts[name]
    if name.endswith("ByTimestamp"):
        return _Side(name, "timestamps", partition_offsets_from_json(
            text, field=f"option {name}", allowed_sentinels=()))
    if name.endswith("Timestamp"):
        return _Side(name, "timestamp", timestamp=_millis(name, text))
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if prefix == "ending" and word == "earliest":
            raise ConfigurationError(
                "option endingOffsets can't be 'earliest' (a bounded run would read nothing); "
                "use 'latest' or JSON offsets such as {\"events\":{\"0\":100}}")
        return _Side(name, word)
    allowed = (EARLIEST, LATEST) if prefix == "starting" else (LATEST,)
    return _Side(name, "offsets", partition_offsets_from_json(
        text, field=f"option {name}", allowed_sentinels=allowed))


def resolved_offsets(consumer: Any, side: _Side, tps: Sequence[TopicPartition],
                     earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                     no_match: str) -> dict[TopicPartition, int]:
    """The offsets ``side`` gives the partitions ``tps`` it covers (others are left out).

    ``no_match`` is what a timestamp without a later record gives: ``"latest"`` or ``"error"``.
    """
    if side.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if side.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if side.kind == "offsets":
        given = side.offsets or {}
        return {tp: earliest[tp] if given[tp] == EARLIEST else latest[tp]
                if given[tp] == LATEST else given[tp] for tp in tps if tp in given}
    if side.kind is None:
        return {}
    stamps = ({tp: side.timestamp for tp in tps} if side.kind == "timestamp"
              else {tp: ts for tp, ts in (side.offsets or {}).items() if tp in tps})
    if not stamps:
        return {}
    from kafka import TopicPartition as KafkaTopicPartition

    found = consumer.offsets_for_times(
        {KafkaTopicPartition(tp.topic, tp.partition): ts for tp, ts in stamps.items()},
        timeout_ms=_TIMEOUT_MS)
    result: dict[TopicPartition, int] = {}
    for tp, ts in stamps.items():
        hit = found.get(KafkaTopicPartition(tp.topic, tp.partition))
        if hit is None and no_match == "error":
            raise ConfigurationError(
                f"option {side.option}: no record of {tp.topic}-{tp.partition} has a timestamp at "
                f"or after {ts}; set startingOffsetsByTimestampStrategy=latest to start such "
                "partitions at their latest offset")
        result[tp] = latest[tp] if hit is None else int(hit.offset)
    return result


@dataclass(frozen=True)
class StartOptions:
    """The parsed start and end options of one direct stream.

    Build it with :meth:`parse`. ``bounded`` is true when an ending option was given: the
    stream then reads up to the end offsets resolved at its start and the context stops.
    """

    start: _Side = _Side()
    end: _Side = _Side()
    no_match: str = "error"
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None,
              failOnDataLoss: bool | None = None) -> StartOptions:
        """Check and parse ``options``; ``failOnDataLoss`` is the keyword argument, if given.

        Raises
        ------
        ConfigurationError
            Naming the option and the fix: an unknown option (with the closest names), a value
            that is not a string, malformed JSON (:class:`~dstream_kafka.errors.OffsetsJsonError`),
            two options that set the same side, or a ``failOnDataLoss`` option that contradicts
            the keyword argument.
        """
        if options is not None and not isinstance(options, Mapping):
            raise ConfigurationError(
                f"options must be a dict of option name to value, got {type(options).__name__}; "
                "e.g. {'startingOffsets': 'earliest'}")
        opts: dict[str, str] = {}
        for key, value in (options or {}).items():
            name = _NAMES.get(str(key).lower())
            if name is None:
                close = difflib.get_close_matches(str(key), STREAM_OPTIONS, n=2)
                hint = (f"did you mean {' or '.join(close)}?" if close
                        else f"known options: {', '.join(STREAM_OPTIONS)}")
                raise ConfigurationError(f"unknown direct stream option {key!r}; {hint}")
            if name in opts:
                raise ConfigurationError(
                    f"option {name} is given twice (option names are case-insensitive)")
            opts[name] = _text(name, value)
        no_match = opts.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
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
        return cls(_side(opts, "starting"), _side(opts, "ending"), no_match, fail)

    @property
    def bounded(self) -> bool:
        """Whether an ending option makes the stream stop at its end offsets."""
        return self.end.kind is not None

    def checked(self, strategy: ConsumerStrategy) -> StartOptions:
        """Return these options after checking them against the consumer ``strategy``.

        Raises
        ------
        ConfigurationError
            JSON naming a topic the strategy does not read, or starting offsets given both
            as an option and to the strategy.
        """
        self.check_topics(strategy.topic_names())
        if self.start.kind is not None and strategy.starting_offsets():
            raise ConfigurationError(
                f"option {self.start.option} and the consumer strategy's offsets both set where "
                "partitions start; give the offsets in one place")
        return self

    def check_cluster(self, kafkaParams: Mapping[str, Any]) -> None:
        """Refuse JSON naming topics or partitions the cluster lacks (one metadata request)."""
        topics = self.json_topics()
        if topics:
            from dstream_kafka.client.offset_reader import offset_reader

            with offset_reader(kafkaParams) as reader:
                self.check_partitions(reader.existing_partitions(topics))

    def check_topics(self, topics: Sequence[str] | None) -> None:
        """Refuse JSON that names a topic the consumer strategy does not read.

        ``topics`` is the strategy's topic list, None when only the cluster knows it (a pattern).
        """
        if topics is None:
            return
        for side in (self.start, self.end):
            unknown = sorted(side.topics() - set(topics))
            if unknown:
                raise ConfigurationError(
                    f"option {side.option} names topic {unknown[0]!r}, which this stream does not "
                    f"read (it reads {', '.join(topics)}); fix the topic name in the JSON or add "
                    "the topic to the consumer strategy")

    def check_partitions(self, existing: Mapping[str, set[int]]) -> None:
        """Refuse JSON naming a topic or partition that does not exist in the cluster.

        ``existing`` maps each topic the JSON names to its partitions (empty: no such topic).
        """
        for side in (self.start, self.end):
            for tp in sorted(side.offsets or {}):
                parts = existing.get(tp.topic, set())
                if tp.partition not in parts:
                    what = (f"partition {tp.partition} of topic {tp.topic!r}, which has partitions "
                            f"{sorted(parts)}" if parts else f"topic {tp.topic!r}, which does not "
                            "exist in the Kafka cluster")
                    raise ConfigurationError(
                        f"option {side.option} names {what}; fix the JSON or create it first")

    def json_topics(self) -> set[str]:
        """Every topic the JSON options name."""
        return self.start.topics() | self.end.topics()

    def starts(self, consumer: Any, tps: Sequence[TopicPartition]
               ) -> tuple[dict[TopicPartition, int], list[OffsetRange]]:
        """Resolve the starting options for ``tps`` (partitions the store does not hold).

        Returns the start of every partition the options cover, and the ranges skipped as lost
        (offsets below the log start or past its end) when ``failOnDataLoss`` is false.

        Raises
        ------
        DataLossError
            A requested start outside the log while ``failOnDataLoss`` is true.
        ConfigurationError
            A timestamp without a later record under strategy ``error``.
        """
        if self.start.kind is None or not tps:
            return {}, []
        earliest, latest = _bounds(consumer, tps)
        found = resolved_offsets(consumer, self.start, tps, earliest, latest, self.no_match)
        starts: dict[TopicPartition, int] = {}
        lost: list[OffsetRange] = []
        for tp, offset in found.items():
            try:
                start, _end, gone = check_loss(tp, offset, latest[tp], earliest[tp], latest[tp],
                                               self.fail_on_data_loss)
            except DataLossError as exc:
                raise DataLossError(f"option {self.start.option}: {exc}") from None
            starts[tp] = start
            if gone is not None:
                lost.append(gone)
        return starts, lost

    def ends(self, consumer: Any, current: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Resolve the ending options for the partitions at ``current`` (never below them).

        A partition the JSON does not name ends at its latest offset now.
        """
        tps = sorted(current)
        if not self.bounded or not tps:
            return {}
        earliest, latest = _bounds(consumer, tps)
        ends = dict(latest)
        ends.update(resolved_offsets(consumer, self.end, tps, earliest, latest, "latest"))
        for tp in tps:
            if ends[tp] < current[tp]:
                logger.warning("%s ends partition %s-%s at %d, before its start %d: it reads "
                               "nothing", self.end.option, tp.topic, tp.partition, ends[tp],
                               current[tp])
        result = {tp: max(ends[tp], current[tp]) for tp in tps}
        logger.info("Bounded run (%s): reading up to %s, then stopping", self.end.option,
                    partition_offsets_to_json(result))
        return result


def _bounds(consumer: Any, tps: Sequence[TopicPartition]
            ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    from kafka import TopicPartition as KafkaTopicPartition

    ktps = [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps]
    first = consumer.beginning_offsets(ktps, timeout_ms=_TIMEOUT_MS)
    last = consumer.end_offsets(ktps, timeout_ms=_TIMEOUT_MS)
    return ({TopicPartition(k.topic, k.partition): int(v) for k, v in first.items()},
            {TopicPartition(k.topic, k.partition): int(v) for k, v in last.items()})

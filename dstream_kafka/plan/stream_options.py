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
- ``failOnDataLoss`` (``true``/``false``);
- trigger options: ``maxOffsetsPerTrigger`` (as the keyword argument), ``minOffsetsPerTrigger``
  with ``maxTriggerDelay`` (default ``15m``): new offsets wait until at least that many are
  available or the delay has passed since the last batch that read any (a batch of a fixed
  interval then reads nothing; with ``batchDuration=0`` no batch runs), and ``minPartitions``:
  batches split large ranges into at least that many Spark partitions
  (:mod:`dstream_kafka.plan.range_calculator`).

Starting options apply only to partitions the offset store knows nothing of; stored offsets win.
A partition the JSON does not name starts where Kafka says: ``auto.offset.reset`` (the
group's committed offset first only with the Kafka group store or no store; see
:mod:`dstream_kafka.plan.positions`). Everything that can be checked without a broker is checked when the
stream is created; topics and partitions are checked against the cluster when it starts, before
any batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dstream_kafka.client.configs import ClientConfigs
from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.client.offset_reader import KafkaOffsetReader, offset_reader
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import partition_offsets_to_json
from dstream_kafka.plan.consumer_strategy import ConsumerStrategy
from dstream_kafka.plan.source_options import SourceOptions, check_loss, options_of

__all__ = ["STREAM_OPTIONS", "StartOptions"]

log = logging.getLogger(__name__)

#: The options ``createDirectStream`` understands (Structured Streaming's names).
STREAM_OPTIONS = options_of("stream")


class StartOptions(SourceOptions):
    """The parsed start and end options of one direct stream.

    Build it with :meth:`~dstream_kafka.plan.source_options.SourceOptions.parse`: an unknown
    option, a value that is not a string, two options that set the same side, or a
    ``failOnDataLoss`` option that contradicts the keyword argument is refused there.
    ``bounded`` is true when an ending option was given: the stream then reads up to the end
    offsets resolved at its start and the context stops.
    """

    mode = "stream"

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

    def max_offsets(self, keyword: int | None) -> int | None:
        """The batch cap: the ``maxOffsetsPerTrigger`` keyword argument or option.

        Raises
        ------
        ConfigurationError
            When both are given and disagree, or ``minOffsetsPerTrigger`` exceeds the cap.
        """
        option = self.max_offsets_per_trigger
        if keyword is not None and option is not None and keyword != option:
            raise ConfigurationError(
                f"maxOffsetsPerTrigger={keyword!r} and option maxOffsetsPerTrigger={option!r} "
                "disagree; give it once")
        cap = keyword if keyword is not None else option
        low = self.min_offsets_per_trigger
        if cap is not None and low is not None and low > cap:
            raise ConfigurationError(
                f"The value of minOffsetPerTrigger({low}) is higher than the "
                f"maxOffsetsPerTrigger({cap}); lower minOffsetsPerTrigger or raise "
                "maxOffsetsPerTrigger")
        return cap

    def check_cluster(self, kafkaParams: Mapping[str, Any] | ClientConfigs) -> None:
        """Refuse JSON naming topics or partitions the cluster lacks (one metadata request)."""
        topics = self.json_topics()
        if topics:
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
        reader = KafkaOffsetReader(consumer=consumer)
        earliest, latest = reader.earliest(tps), reader.latest(tps)
        found = self.start.resolve(tps, earliest, latest, reader.for_times, self.no_match)
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
        reader = KafkaOffsetReader(consumer=consumer)
        earliest, latest = reader.earliest(tps), reader.latest(tps)
        ends = dict(latest)
        ends.update(self.end.resolve(tps, earliest, latest, reader.for_times, "latest"))
        for tp in tps:
            if ends[tp] < current[tp]:
                log.warning("%s ends partition %s-%s at %d, before its start %d: it reads "
                               "nothing", self.end.option, tp.topic, tp.partition, ends[tp],
                               current[tp])
        result = {tp: max(ends[tp], current[tp]) for tp in tps}
        log.info("Bounded run (%s): reading up to %s, then stopping", self.end.option,
                    partition_offsets_to_json(result))
        return result


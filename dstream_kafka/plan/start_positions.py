"""Where a direct stream's partitions start and resume, and the data loss found on resume.

On start, a stream resumes from its offset store: the stored offsets, and the batch that was
planned but never committed, which is re-run with exactly its ranges first. Partitions
without a stored offset start at the strategy's explicit offset, else, for a stream whose
offsets live in the Kafka group (the Kafka group store, or no store), at the group's committed
offset, else at ``auto.offset.reset``. Any other store is the source of truth: a partition it
does not hold never starts at the group's committed offset (the lag mirror writes one for
every store commit, so a new, empty store would resume where another store left off); the
group's offsets found for such partitions are named in a WARNING. A stored offset
outside the log (retention, a recreated topic) is data loss: it fails the start, or with
``failOnDataLoss=False`` is recorded in the store and skipped. A partition the group assigns
while the stream runs starts by the same rules. A start from a reset (``offsets reset``) is
logged at WARNING.

:class:`StartPositions` holds these rules; :mod:`dstream_kafka.plan.positions` builds on it
the positions that move batch by batch. It is given its collaborators (the driver consumer,
the offset store, the consumer strategy) as arguments, so it does not need a running stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dstream_kafka.plan.consumer_strategy import ConsumerStrategy
from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError, DataLossError
from dstream_kafka.client.configs import ClientConfigs
from dstream_kafka.client.kafka_params import API_TIMEOUT_KEY, DEFAULT_API_TIMEOUT_MS
from dstream_kafka.offsets import OffsetRange, TopicPartition

if TYPE_CHECKING:
    from dstream_kafka.plan.stream_options import StartOptions
    from dstream_kafka.stores.base import OffsetStore

__all__ = ["API_TIMEOUT_MS", "StartPositions", "api_timeout_ms", "vanished_partitions"]

# The same logger as the batch-by-batch positions: the start lines have always been logged
# under this name, and users filter on it.
log = logging.getLogger("dstream_kafka.plan.positions")

#: Longest wait for the broker's answer to a driver look-up that needs the group coordinator
#: unless kafkaParams set ``default.api.timeout.ms``; without one, kafka-python waits for ever.
API_TIMEOUT_MS = DEFAULT_API_TIMEOUT_MS

def _ktp(tp: TopicPartition) -> Any:
    from kafka import TopicPartition as KafkaTopicPartition

    return KafkaTopicPartition(tp.topic, tp.partition)


def api_timeout_ms(kafkaParams: Mapping[str, Any]) -> int:
    """Return ``default.api.timeout.ms`` of ``kafkaParams`` (Kafka's default: 60000).

    The stream driver bounds its look-ups that need the group coordinator (a partition's
    starting position and committed offset) by it.

    Raises
    ------
    ConfigurationError
        When the value is not a whole number of milliseconds above 0.
    """
    value = kafkaParams.get(API_TIMEOUT_KEY, DEFAULT_API_TIMEOUT_MS)
    try:
        ms = int(str(value).strip()) if not isinstance(value, (bool, float)) else -1
    except ValueError:
        ms = -1
    if ms <= 0:
        raise ConfigurationError(
            f"Kafka parameter {API_TIMEOUT_KEY} must be a whole number of milliseconds above 0, "
            f"got {value!r}; e.g. {{'{API_TIMEOUT_KEY}': 60000}} (Kafka's default)")
    return ms


def _no_answer(what: str, timeout_ms: int) -> BrokerTimeoutError:
    return BrokerTimeoutError(
        f"Kafka did not return {what} within {timeout_ms / 1000:g} s (the group coordinator "
        "did not answer); check that the brokers in bootstrap.servers are up and reachable "
        f"(kafkaParams['{API_TIMEOUT_KEY}'] sets this bound)")


def _unstable(tp: TopicPartition, group: str | None, timeout_ms: int) -> BrokerTimeoutError:
    return BrokerTimeoutError(
        f"The committed offset of group {group!r} for {tp.topic}-{tp.partition} could not be "
        f"read within {timeout_ms / 1000:g} s: a transaction that sent offsets for it is still "
        "open (read_committed reads only stable offsets). It ends when the producer that opened "
        "it commits or aborts, when its transaction.timeout.ms passes, or at once when a "
        "producer with the same transactional.id initialises; start again then")


def _log_reset_start(store: OffsetStore, group: str) -> None:
    """Log a warning when ``group``'s newest commit is a reset: the stream starts from it."""
    newest = store.last_reset(group)
    if newest is not None and newest.reset is not None:
        audit = newest.reset
        moves = ", ".join(f"{r.topic}-{r.partition} {audit.previous.get(r.topicPartition(), '-')} -> {r.untilOffset}"
                          for r in newest.ranges)
        log.warning("Group %r starts from a reset by %s@%s at %s: %s", group, audit.user, audit.host,
                       newest.committed_at.isoformat(timespec="seconds"), moves)


def _no_reset(tp: TopicPartition) -> ConfigurationError:
    return ConfigurationError(
        f"No starting offset for {tp.topic}-{tp.partition}: it has no stored (or, with the Kafka "
        "group store, committed) offset and auto.offset.reset is 'none'; give explicit offsets to "
        "the consumer strategy (or the startingOffsets option) or set auto.offset.reset to "
        "'earliest' or 'latest'")


def vanished_partitions(kafkaParams: Mapping[str, Any] | ClientConfigs,
                        parts: Sequence[TopicPartition]) -> set[TopicPartition]:
    """Return those of ``parts`` whose topic or partition no longer exists in Kafka.

    Asked with fresh metadata through a group-less pooled reader (one round trip), not the
    driver consumer, whose own metadata requests fail on the very topics that vanished.
    kafka-python's error is raised when the brokers do not answer.
    """
    from dstream_kafka.client.offset_reader import offset_reader

    with offset_reader(kafkaParams) as reader:
        existing = reader.existing_partitions({tp.topic for tp in parts})
    return {tp for tp in parts if tp.partition not in existing[tp.topic]}


class StartPositions:
    """Where every partition a stream reads starts and resumes, on the driver.

    The start-and-resume half of :class:`~dstream_kafka.plan.positions.PartitionPositions`,
    which adds how the positions move batch by batch (and :meth:`lose`, the data loss of a
    deleted partition, which a start finds too).

    Parameters
    ----------
    strategy : ConsumerStrategy
        Gives the topics to load from the store and the explicit starting offsets.
    group_id : str or None
        The Kafka ``group.id``; without one, committed offsets are not looked up.
    store_group : str
        Whose offsets the store keeps (the group id, or the stream's own name).
    fail_on_data_loss : bool
        Fail on a stored offset outside the log, instead of recording the loss and skipping.
    find_vanished : callable, optional
        ``find_vanished(consumer, partitions)`` returns those of ``partitions`` that no longer
        exist in Kafka; by default :func:`vanished_partitions` with the strategy's params.
    start_options : StartOptions, optional
        Structured Streaming's starting options, for partitions the store does not hold.

    Attributes
    ----------
    current : dict of TopicPartition to int
        The position of every tracked (assigned) partition.
    unassigned : dict of TopicPartition to int
        Where partitions continue that the store (or a re-run batch) knows but the group has
        not assigned to this driver yet, e.g. while a killed driver still holds them.
    replay : (int, list of OffsetRange) or None
        The batch time and ranges of the planned but uncommitted batch to re-run first.
    """

    def __init__(self, strategy: ConsumerStrategy, *, group_id: str | None, store_group: str,
                 fail_on_data_loss: bool,
                 find_vanished: Callable[[Any, Sequence[TopicPartition]], set[TopicPartition]]
                 | None = None, start_options: StartOptions | None = None) -> None:
        self.strategy = strategy
        self.start_options = start_options
        self.find_vanished = find_vanished or (
            lambda _consumer, parts: vanished_partitions(strategy.client_configs, parts))
        self.group_id = group_id
        self.store_group = store_group
        self.fail_on_data_loss = fail_on_data_loss
        #: Bound of the look-ups that need the group coordinator (``default.api.timeout.ms``).
        self.api_timeout_ms = api_timeout_ms(strategy.executorKafkaParams)
        #: Called once per data-loss event skipped with failOnDataLoss=False (metrics hook).
        self.on_data_loss: Callable[[], None] = lambda: None
        self.current: dict[TopicPartition, int] = {}
        self.unassigned: dict[TopicPartition, int] = {}
        self.replay: tuple[int, list[OffsetRange]] | None = None
        # Deleted partitions given up (failOnDataLoss=False) that the driver consumer may
        # still have assigned until its group rebalances; never started again meanwhile.
        self.lost: set[TopicPartition] = set()
        # The newest end offset seen of every partition (planning, retention check): a deleted
        # partition read up to it lost nothing.
        self.known_ends: dict[TopicPartition, int] = {}
        # If the group handed out nothing at start (a slow join), partitions that arrive later
        # are still the first start's: they begin at the strategy's offsets / auto.offset.reset.
        self._first_start_pending = False
        # Whether the Kafka group's committed offsets are where this stream resumes (the Kafka
        # group store, or no store); set by load().
        self.group_is_store = True

    def lose(self, partitions: Collection[TopicPartition], store: OffsetStore | None) -> None:
        """Stop tracking ``partitions``, which no longer exist in Kafka (see the subclass)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ start and resume
    def load(self, store: OffsetStore | None) -> dict[TopicPartition, int]:
        """Take the stored offsets and the pending batch from ``store``; return the offsets.

        The positions become the stored offsets (none without a store).
        """
        stored: dict[TopicPartition, int] = {}
        self.group_is_store = store is None or store.keeps_group_offsets
        if store is not None:
            stored = store.load(self.store_group, self.strategy.topic_names())
            _log_reset_start(store, self.store_group)  # a reset by hand is worth a line in the log
            pending = store.pending(self.store_group)
            if pending is not None:
                # A batch was planned but never committed: re-run exactly its ranges first.
                self.replay = (pending.batch_time_ms, list(pending.ranges))
                log.warning("Re-running uncommitted batch %s over %s", pending.batch_time_ms,
                               list(pending.ranges))
        self.current = dict(stored)
        return stored

    def start(self, consumer: Any, store: OffsetStore | None, stored: Mapping[TopicPartition, int],
              assigned: set[TopicPartition]) -> None:
        """Position the ``assigned`` partitions and seek ``consumer`` to them.

        ``stored`` is what :meth:`load` returned. Stored partitions the group did not assign
        are remembered (or are data loss when they vanished); the others start as
        :meth:`start_offset` says; stored offsets are checked against the log.
        """
        self._first_start_pending = not stored and not assigned
        if store is not None and stored:
            from dstream_kafka.stores.mirror import check_group_not_moved

            check_group_not_moved(consumer, store, self.store_group, stored)  # Kafka's reset tool
        for tp in sorted(set(self.current) - assigned):
            self.forget_unassigned(consumer, store, tp)
        if self.current:
            # Assigned (Assign strategy) but deleted from Kafka: data loss now, rather than
            # offset look-ups that wait for a partition that is not coming back.
            self.lose(self.find_vanished(consumer, sorted(self.current)), store)
        for tp in sorted(self.current):
            log.info("Partition %s-%s starts at offset %s (from the offset store)", tp.topic,
                        tp.partition, self.current[tp])
        if stored:
            self.check_retention(consumer, store, self.current)
        self.place(consumer, store, sorted(assigned - set(self.current) - self.lost),
                   first_start=not stored)
        for tp, off in self.current.items():
            consumer.seek(_ktp(tp), off)

    def place(self, consumer: Any, store: OffsetStore | None, tps: Sequence[TopicPartition],
              first_start: bool, use_options: bool = True) -> None:
        """Give each of ``tps`` (partitions without a stored offset) its start, and log it.

        The starting options decide first (on a start, not for partitions found later; lost
        ranges they skip are recorded in ``store``), then :meth:`start_offset`.
        """
        chosen: dict[TopicPartition, int] = {}
        options = self.start_options if use_options else None
        if options is not None and tps:
            chosen, lost = options.starts(consumer, tps)
            for gone in lost:
                self.on_data_loss()
                if store is not None:
                    store.record_data_loss(self.store_group, gone.topicPartition(),
                                           gone.fromOffset, gone.untilOffset, None)
        from_option = f"option {options.start.option}" if options is not None else ""
        defaulted = []  # started by auto.offset.reset or at the first offset: no offset was given
        for tp in tps:
            if tp in chosen:
                origin = from_option
                self.current[tp] = chosen[tp]
            else:
                self.current[tp], origin = self.start_offset_and_origin(consumer, tp, first_start)
            log.info("Partition %s-%s starts at offset %s (from %s)", tp.topic, tp.partition,
                        self.current[tp], origin)
            if origin.startswith(("auto.offset.reset", "the first offset")):
                defaulted.append(tp)
        if not self.group_is_store and defaulted:
            self._warn_group_offsets_ignored(consumer, store, defaulted)

    def _warn_group_offsets_ignored(self, consumer: Any, store: OffsetStore | None,
                                    tps: Sequence[TopicPartition]) -> None:
        """Log at WARNING the group's committed offsets of ``tps``, which the store did not hold.

        They are not where the stream starts (the store is the source of truth); the message
        gives the ``startingOffsets`` option that starts from them on purpose.
        """
        held = {tp: off for tp in tps if (off := self._committed(consumer, tp)) is not None}
        if not held:
            return
        from dstream_kafka.offsets_json import partition_offsets_to_json

        names = ", ".join(f"{tp.topic}-{tp.partition} at {off} (starts at {self.current.get(tp)})"
                          for tp, off in sorted(held.items()))
        log.warning(
            "Kafka group %s holds committed offsets for partitions that %s holds no offset for: %s. They "
            "were not used: the offset store is the source of truth, and the group's offsets may be "
            "another store's lag copy (also_commit_to_kafka_group). To start from them on purpose, "
            "pass options={'startingOffsets': '%s'} to createDirectStream (or give them as the "
            "consumer strategy's offsets).", self.group_id, f"offset store {store!r}", names,
            partition_offsets_to_json(held))

    def forget_unassigned(self, consumer: Any, store: OffsetStore | None, tp: TopicPartition) -> None:
        """Stop tracking a stored partition the driver was not given; a vanished one is data loss.

        Raises
        ------
        DataLossError
            When ``tp`` no longer exists in Kafka and data loss fails the stream.
        """
        off = self.current.pop(tp)
        existing = consumer.partitions_for_topic(tp.topic) or set()
        if tp.partition in existing:
            log.warning("Stored offset %s of %s-%s is not read by this stream (not assigned "
                           "to it); leaving it as it is", off, tp.topic, tp.partition)
            self.unassigned[tp] = off  # where it continues if it is assigned later
            return
        problem = (f"partition {tp.topic}-{tp.partition} has stored offset {off} for group "
                   f"{self.store_group} but no longer exists in Kafka (topic deleted or recreated)")
        if self.fail_on_data_loss:
            raise DataLossError(problem + "; restore it, or set failOnDataLoss=False to continue "
                                "without it (the loss is recorded in the offset store)")
        log.warning("%s; continuing without it (failOnDataLoss=False)", problem)
        self.on_data_loss()
        if store is not None:
            store.record_data_loss(self.store_group, tp, off, off, None)

    def start_offset(self, consumer: Any, tp: TopicPartition, first_start: bool) -> int:
        """Where a partition without a stored offset starts: :meth:`start_offset_and_origin`."""
        return self.start_offset_and_origin(consumer, tp, first_start)[0]

    def start_offset_and_origin(self, consumer: Any, tp: TopicPartition,
                                first_start: bool) -> tuple[int, str]:
        """Where a partition without a stored offset starts, and where that offset came from.

        On a first start: the strategy's explicit offset, else, when the group is the store
        (:attr:`group_is_store`), the position Kafka gives the driver consumer (committed
        offset, else ``auto.offset.reset``), else ``auto.offset.reset`` alone. A partition that
        appears later starts where the offset store (or a re-run batch) left it when the group
        assigned it only after the start, else (group store only) at its committed offset,
        else at its first offset.

        Raises
        ------
        BrokerTimeoutError
            When the group coordinator does not answer within :attr:`api_timeout_ms`.
        ConfigurationError
            On a first start without a starting offset and with ``auto.offset.reset=none``.
        """
        explicit = self.strategy.starting_offsets()
        if tp in explicit:
            return explicit[tp], "the consumer strategy's offsets"
        if tp in self.unassigned:
            # Stored (or re-run) before the group gave it to us: the store's offset wins over
            # Kafka's committed offset, which a store other than Kafka never moves.
            return self.unassigned.pop(tp), "the offset store"
        from kafka.errors import KafkaTimeoutError

        ktp = _ktp(tp)
        if not first_start:
            committed = self._committed(consumer, tp) if self.group_is_store else None
            if committed is not None:
                return committed, f"the committed offset of group {self.group_id}"
            return int(consumer.beginning_offsets([ktp])[ktp]), "the first offset (a new partition)"
        params = self.strategy.executorKafkaParams
        reset = str(params.get("auto.offset.reset", params.get("auto_offset_reset", "latest")))
        if not self.group_is_store:
            # The consumer's position would be the group's committed offset when it has one.
            return self._reset_offset(consumer, tp, reset), f"auto.offset.reset={reset}"
        try:
            found = consumer.position(ktp, timeout_ms=self.api_timeout_ms)
        except KafkaTimeoutError as exc:
            raise _no_answer(f"the starting position of {tp.topic}-{tp.partition}",
                             self.api_timeout_ms) from exc
        except Exception as exc:  # kafka-python's NoOffsetForPartitionError and its kin
            raise _no_reset(tp) from exc
        if found is None:  # kafka-python's answer when the committed offset stayed unreadable
            raise _unstable(tp, self.group_id, self.api_timeout_ms)
        position = int(found)
        # The position is the committed offset when there is one; ask only to log the origin.
        if self._committed(consumer, tp) is not None:
            return position, f"the committed offset of group {self.group_id}"
        return position, f"auto.offset.reset={reset}"

    def _reset_offset(self, consumer: Any, tp: TopicPartition, reset: str) -> int:
        """The offset ``auto.offset.reset`` gives ``tp`` (log start or end), never the group's."""
        from kafka.errors import KafkaTimeoutError

        ktp = _ktp(tp)
        policy = reset.strip().lower()
        if policy in ("earliest", "smallest"):
            lookup = consumer.beginning_offsets
        elif policy in ("latest", "largest"):
            lookup = consumer.end_offsets
        else:
            raise _no_reset(tp)
        try:
            return int(lookup([ktp])[ktp])
        except KafkaTimeoutError as exc:
            raise _no_answer(f"the starting position of {tp.topic}-{tp.partition}",
                             self.api_timeout_ms) from exc

    def _committed(self, consumer: Any, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp`` in Kafka, None without one (or a group)."""
        from kafka.errors import KafkaTimeoutError

        if not self.group_id:
            return None
        try:
            committed = consumer.committed(_ktp(tp), timeout_ms=self.api_timeout_ms)
        except KafkaTimeoutError as exc:
            raise _no_answer(f"the committed offset of {tp.topic}-{tp.partition}",
                             self.api_timeout_ms) from exc
        return None if committed is None else int(committed)

    def check_retention(self, consumer: Any, store: OffsetStore | None,
                        offsets: Mapping[TopicPartition, int]) -> None:
        """Check stored ``offsets`` against the log; skip lost records when allowed.

        Raises
        ------
        DataLossError
            For an offset past the log end, or before its start when data loss fails the
            stream.
        """
        ktps = [_ktp(tp) for tp in offsets]
        earliest = consumer.beginning_offsets(ktps)
        latest = consumer.end_offsets(ktps)
        for tp, off in list(offsets.items()):
            ktp = _ktp(tp)
            first, last = int(earliest[ktp]), int(latest[ktp])
            self.known_ends[tp] = last
            if first <= off <= last:
                continue
            problem = (f"stored offset {off} of {tp.topic}-{tp.partition} for group {self.group_id} "
                       f"is outside the log: earliest available {first}, latest {last}")
            if off > last:
                # Not a gap failOnDataLoss can skip: the offsets ahead of the log were never
                # written to it, so reading on from the new log's start would be a silent reset.
                raise DataLossError(
                    problem + ". The stored offset is ahead of the log end: the topic was "
                    "recreated or truncated, and failOnDataLoss=False does not skip this case "
                    "(offsets the log never had cannot be resumed from). Restore the topic's "
                    "data, or start over from the new log under a new group.id (or after removing "
                    "this group's offsets from the offset store).")
            if self.fail_on_data_loss:
                raise DataLossError(
                    problem + ". Records were deleted (retention) or the topic was recreated. "
                    "Restore the data, or set failOnDataLoss=False to continue from the earliest "
                    "offset and record the lost range in the offset store.")
            log.warning("%s; continuing from %s (failOnDataLoss=False)", problem, first)
            self.on_data_loss()
            if store is not None:
                store.record_data_loss(self.store_group, tp, off, first, None)
            self.current[tp] = first


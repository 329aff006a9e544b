"""The Kafka output on the driver: :class:`KafkaOutput`, for streams and RDDs.

``at-least-once`` writes any RDD: every task sends its partition's records with an
idempotent producer and flushes, and a stream's batch commits its offsets only after its
output operations finished (the engine's commit-after-output order).

``exactly-once`` writes each input partition's outputs in a Kafka transaction that also
commits that partition's ``untilOffset`` to the stream's group
(:func:`~dstream_kafka.write.task.write_exactly_once`). It holds only where task ``i`` writes
what was derived from input partition ``i`` alone, so the output refuses, before any record
is written, what it cannot prove:

* an RDD whose lineage is not a chain of narrow Python transformations (``map``,
  ``filter``, ``flatMap``, ``mapPartitions``, ...) of the batch's ``KafkaRDD``: a shuffle
  (``reduceByKey``, ``repartition``, joins), a ``union``, a window, ``coalesce`` or a
  checkpointed RDD;
* a stream that keeps its offsets anywhere but in its Kafka group (an offset store or a
  checkpoint folder would be committed after the output, outside the transaction), reads
  without ``isolation.level=read_committed``, has no ``group.id``, or already has an
  exactly-once output (two outputs cannot both commit the input's offsets).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import weakref
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dstream_kafka.client.security import check_credentials
from dstream_kafka.errors import ConfigurationError, KafkaWriteError, OutputFencedError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.write.producers import consumer_settings, open_producer
from dstream_kafka.write.settings import AT_LEAST_ONCE, EXACTLY_ONCE, OutputSettings, transactional_id
from dstream_kafka.write.settings import DEFAULT_TOPIC_WAIT_S
from dstream_kafka.write.task import write_at_least_once, write_exactly_once

__all__ = ["KafkaOutput", "check_narrow_lineage"]

log = logging.getLogger(__name__)

# One line of RDD.toDebugString(): the RDD's class and id; a shuffle starts a "+-(" branch.
_RDD_LINE = re.compile(r"([A-Za-z0-9_$]+)\[(\d+)\]")
_SHUFFLE_FIX = ("write before the shuffle, or write at-least-once (guarantee='at-least-once'); "
                "exactly-once needs task i to write only what input partition i produced")
# Streams that already have an exactly-once output.
_exactly_once_sources: weakref.WeakSet[Any] = weakref.WeakSet()


def _lineage(rdd: Any) -> list[tuple[str, str, str]]:
    text = rdd.toDebugString()
    text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
    lines = []
    for line in text.splitlines():
        match = _RDD_LINE.search(line)
        if match is not None:
            lines.append((match.group(1), match.group(2), line))
    return lines


def check_narrow_lineage(rdd: Any, source: Any) -> None:
    """Refuse ``rdd`` unless it is ``source`` (a ``KafkaRDD``) or a narrow Python
    transformation of it: the same partitions, partition ``i`` computed from ``i`` alone.

    Read from Spark's public ``toDebugString``: every RDD above the source must be a
    ``PythonRDD`` (a pipelined Python function over one parent partition) with no shuffle
    boundary, and the deepest RDD must be the source's.

    Raises
    ------
    ConfigurationError
        Naming what breaks the partition correspondence and the fix.
    """
    ranges = source.offsetRanges()
    if rdd.getNumPartitions() != len(ranges):
        raise ConfigurationError(
            f"exactly-once output got an RDD of {rdd.getNumPartitions()} partitions for a batch "
            f"of {len(ranges)} input partitions (a repartition, coalesce or union changed the "
            f"partitioning): {_SHUFFLE_FIX}")
    mine, theirs = _lineage(rdd), _lineage(source)
    if any("+-" in line for _, _, line in mine):
        shuffled = next(name for name, _, line in mine if "+-" in line)
        raise ConfigurationError(
            f"exactly-once output got an RDD computed after a shuffle ({shuffled}: "
            f"reduceByKey, groupByKey, join, repartition, sortBy, ...): {_SHUFFLE_FIX}")
    if not mine or not theirs or mine[-1][:2] != theirs[-1][:2]:
        raise ConfigurationError(
            "exactly-once output got an RDD that is not derived from this batch's KafkaRDD "
            "(or was checkpointed, which hides its lineage): write the stream's own RDDs, "
            f"transformed by map, filter, flatMap or mapPartitions only; {_SHUFFLE_FIX}")
    others = sorted({name for name, _, _ in mine[:-1] if name != "PythonRDD"})
    if others:
        raise ConfigurationError(
            f"exactly-once output got an RDD built with {', '.join(others)}, which does not "
            f"keep partition i of the input as partition i of the output: {_SHUFFLE_FIX}")


class KafkaOutput:
    """Writes records to Kafka from streams and RDDs, at least once or exactly once.

    Records are ``(key, value)`` pairs or dicts with ``value`` and optionally ``key``,
    ``headers``, ``topic``, ``partition`` (:mod:`dstream_kafka.write.records`).

    Parameters
    ----------
    kafkaParams : dict
        Producer settings, Java or kafka-python names: ``bootstrap.servers`` (required), TLS
        and SASL as for the streams, ``linger.ms``, ``compression.type``,
        ``key.serializer``/``value.serializer`` (a class name or a callable
        ``object -> bytes``), ``transaction.timeout.ms`` ... Consumer settings are refused.
    topic : str, optional
        The topic of records that name none.
    guarantee : str
        ``"at-least-once"`` (default) or ``"exactly-once"``.
    backend : str, optional
        ``"kafka-python"`` or ``"confluent-kafka"``; default the stream consumers' backend,
        ``spark.streaming.kafka.consumer.backend`` of the active SparkContext.
    applicationId : str, optional
        Exactly-once: the prefix of the transactional ids ``<applicationId>-<topic>-<partition>``
        of the input partitions; default the input's ``group.id``. Keep it across restarts.

    Raises
    ------
    ConfigurationError
        For bad parameters or options (:meth:`OutputSettings.of`): an illegal topic name, a
        numeric producer setting outside Kafka's range ..., before any data moves.
    KafkaAuthenticationError
        When the brokers refuse the SASL credentials (checked here, never quoting them).
    BrokerTimeoutError
        With SASL: when no broker bootstraps within ``bootstrap.timeout.ms``, or at once when
        the listener refuses the SASL handshake (a PLAINTEXT listener), as ``createRDD``.
    """

    def __init__(self, kafkaParams: Mapping[str, Any], topic: str | None = None,
                 guarantee: str = AT_LEAST_ONCE, backend: str | None = None,
                 applicationId: str | None = None) -> None:
        if backend is None:
            backend = _default_backend()
        settings = OutputSettings.of(kafkaParams, topic, guarantee, backend, applicationId)
        self.settings = dataclasses.replace(settings, cache=_producer_cache_enabled(),
                                            topic_wait_s=_topic_wait_s())
        # Refused SASL credentials fail here, in seconds, not in every task after a timeout.
        check_credentials(consumer_settings(self.settings))
        self._source: Any = None
        self._group: str | None = None

    @property
    def guarantee(self) -> str:
        """``"at-least-once"`` or ``"exactly-once"``."""
        return self.settings.guarantee

    def __repr__(self) -> str:
        return f"KafkaOutput({self.settings!r})"

    # ------------------------------------------------------------------ streams
    def writeStream(self, stream: Any) -> None:
        """Write every batch of ``stream`` (an output operation, like ``foreachRDD``).

        Exactly-once: ``stream`` must be a direct stream or a chain of single-parent
        transformations of one, checked now (see the module) and again for every batch.

        Raises
        ------
        ConfigurationError
            For a stream exactly-once cannot hold for, naming the cause and the fix.
        """
        if self.guarantee == EXACTLY_ONCE:
            source = _direct_source(stream)
            self._group = _check_source(source)
            if source in _exactly_once_sources:
                raise ConfigurationError(
                    "this direct stream already has an exactly-once Kafka output: each input "
                    "partition's offsets can be committed by one transaction only. Write every "
                    "result in one output (records may name their own topic)")
            _check_same_cluster(self.settings, source)
            _exactly_once_sources.add(source)
            self._source = source
            source.add_start_hook(self._end_open_transactions)
        stream.foreachRDD(self._write_batch)

    def _end_open_transactions(self, partitions: set[Any]) -> None:
        """Initialise the transactional id of every input partition on the driver, once.

        A run killed mid-transaction leaves that transaction open, and with it the group's
        pending offsets, until ``transaction.timeout.ms`` passes: the restarted stream's read
        of its start offsets (stable offsets, read_committed) would wait for them, a minute by
        default. ``init_transactions`` with the same id aborts the transaction at once, as it
        fences a retried task's earlier attempt.
        """
        assert self._group is not None
        settings = _with_application_id(self.settings, self._group)  # as the write tasks have it
        assert settings.application_id is not None
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
            producer = open_producer(
                settings, transactional_id(settings.application_id, tp.topic, tp.partition))
            try:
                producer.init()
            finally:
                producer.close()

    def __call__(self, time: datetime, rdd: Any) -> None:
        """``stream.foreachRDD(output)``: at-least-once only (use :meth:`writeStream`)."""
        if self.guarantee == EXACTLY_ONCE:
            raise ConfigurationError(
                "an exactly-once KafkaOutput must be attached with output.writeStream(stream), "
                "which checks the stream's offsets and lineage before it starts, not passed to "
                "foreachRDD")
        self.write(rdd)

    def _write_batch(self, time: datetime, rdd: Any) -> None:
        if self.guarantee != EXACTLY_ONCE:
            self.write(rdd)
            return
        from dstream_kafka.streaming import datetime_to_ms

        source = self._source
        _check_source(source)  # start() may have added a checkpoint store since writeStream
        batch = source.slice(time, time)
        if len(batch) != 1:
            raise ConfigurationError(
                f"exactly-once output found no KafkaRDD of its direct stream at {time}; write "
                "a stream derived from the direct stream by per-batch transformations only")
        assert self._group is not None
        self._write_transactions(rdd, batch[0], self._group, datetime_to_ms(time))

    # ------------------------------------------------------------------ RDDs
    def write(self, rdd: Any, source: Any = None, groupId: str | None = None) -> int:
        """Write the records of ``rdd``; return how many were written.

        Exactly-once: ``source`` is the ``KafkaRDD`` that ``rdd`` was derived from by narrow
        transformations (default: ``rdd`` itself when it is one) and ``groupId`` the group
        whose committed offsets the transactions move (the group must be at each range's
        start or have none).

        Raises
        ------
        ConfigurationError
            For an exactly-once write without a KafkaRDD source or group, or after a shuffle.
        KafkaWriteError
            When a task could not write or commit (the job fails).
        """
        if self.guarantee != EXACTLY_ONCE:
            settings = self.settings
            counts = rdd.mapPartitions(lambda records: write_at_least_once(settings, records),
                                       preservesPartitioning=True).collect()
            return int(sum(counts))
        if source is None:
            source = rdd
        if not hasattr(source, "offsetRanges"):
            raise ConfigurationError(
                "exactly-once output needs the KafkaRDD the records come from: "
                "output.write(rdd, source=kafka_rdd, groupId=...)")
        if not groupId:
            raise ConfigurationError(
                "exactly-once output of an RDD needs groupId: the group whose committed "
                "offsets each partition's transaction moves")
        return self._write_transactions(rdd, source, groupId, 0)

    def _write_transactions(self, rdd: Any, source: Any, group: str, batch_ms: int) -> int:
        check_narrow_lineage(rdd, source)
        ranges: list[OffsetRange] = source.offsetRanges()
        settings = _with_application_id(self.settings, group)

        def write(index: int, records: Any) -> Any:
            return write_exactly_once(settings, group, batch_ms, ranges[index], records)

        try:
            counts = rdd.mapPartitionsWithIndex(write, preservesPartitioning=True).collect()
        except Exception as error:
            ours = _task_error(error)
            if ours is None:
                raise
            raise ours from error
        log.info("exactly-once output wrote %d records for group %s in %d partition "
                 "transactions", sum(counts), group, sum(1 for r in ranges if r.count()))
        return int(sum(counts))


# A write task's own error, as Spark's job failure quotes it (the task's traceback).
_TASK_ERROR = re.compile(r"dstream_kafka\.errors\.(OutputFencedError|KafkaWriteError): ([^\n]+)")


def _task_error(error: BaseException) -> KafkaWriteError | None:
    """The :class:`OutputFencedError` or :class:`KafkaWriteError` a write task failed with,
    found in the text of Spark's job failure ``error``; None for any other failure.

    The driver raises it (chained from Spark's error, which keeps the task's traceback and
    the client's raw error): a fenced driver stops with the error the guide names.
    """
    # The last: a traceback ends with the error the task raised (its causes come first).
    found = None
    for found in _TASK_ERROR.finditer(str(error)):
        pass
    if found is None:
        return None
    kind = OutputFencedError if found.group(1) == "OutputFencedError" else KafkaWriteError
    return kind(found.group(2).strip())


def _with_application_id(settings: OutputSettings, group: str) -> OutputSettings:
    """``settings`` whose transactional ids derive from ``group`` unless an application id
    was given: what the write tasks and the start's fencing both use."""
    if settings.application_id is not None:
        return settings
    return dataclasses.replace(settings, application_id=group)


def _default_backend() -> str:
    from dstream_kafka._spark_internals import active_context
    from dstream_kafka.config import SparkConfReader

    sc = active_context()
    return "kafka-python" if sc is None else SparkConfReader(sc.getConf()).consumer_backend


def _producer_cache_enabled() -> bool:
    from dstream_kafka._spark_internals import active_context
    from dstream_kafka.config import SparkConfReader

    sc = active_context()
    return True if sc is None else SparkConfReader(sc.getConf()).producer_cache_enabled


def _topic_wait_s() -> float:
    from dstream_kafka._spark_internals import active_context
    from dstream_kafka.config import SparkConfReader

    sc = active_context()
    conf = None if sc is None else SparkConfReader(sc.getConf())
    return DEFAULT_TOPIC_WAIT_S if conf is None else conf.producer_topic_wait_ms / 1000.0


def _direct_source(stream: Any) -> Any:
    """The direct stream ``stream`` derives from through single-parent streams."""
    from dstream_kafka.plan.direct_stream import DirectKafkaInputDStream

    node = stream
    while not isinstance(node, DirectKafkaInputDStream):
        parents: tuple[Any, ...] = tuple(getattr(node, "_parents", ()))
        if len(parents) != 1:
            raise ConfigurationError(
                "exactly-once output needs a stream derived from one direct stream by "
                f"per-batch transformations; {type(node).__name__} has {len(parents)} parent "
                "streams (a union, join or cogroup): write before combining streams, or "
                "write at-least-once")
        if node._slide_ms != parents[0]._slide_ms:
            raise ConfigurationError(
                "exactly-once output cannot write a windowed stream (its RDDs span several "
                "batches): write the per-batch stream, or write at-least-once")
        node = parents[0]
    return node


def _servers(value: Any) -> set[str]:
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return {str(item).strip() for item in items if str(item).strip()}


def _cluster_id(config: Mapping[str, Any]) -> str:
    from kafka import KafkaAdminClient

    known = KafkaAdminClient.DEFAULT_CONFIG
    admin = KafkaAdminClient(**{k: v for k, v in config.items()
                                if k in known and not k.endswith(("_serializer",
                                                                  "_deserializer"))})
    try:
        return str(admin.describe_cluster().get("cluster_id"))
    finally:
        admin.close()


def _check_same_cluster(settings: OutputSettings, source: Any) -> None:
    """Refuse an exactly-once output to another cluster than its stream reads: the
    transactions commit the input offsets in the output's cluster, where a restart of the
    stream would never look. Same server lists need no look-up."""
    driver = source.consumerStrategy.client_configs.driver
    if _servers(driver.get("bootstrap_servers")) == _servers(
            settings.producer.get("bootstrap_servers")):
        return
    reads, writes = _cluster_id(driver), _cluster_id(settings.producer)
    if reads != writes:
        raise ConfigurationError(
            f"exactly-once output writes to Kafka cluster {writes} but its stream reads cluster "
            f"{reads}: a transaction commits the input offsets in the cluster it writes to, "
            "so input and output must be one cluster. Write at-least-once to another cluster")


def _check_source(source: Any) -> str:
    """Check that exactly-once can hold for direct stream ``source``; return its group."""
    params = source.consumerStrategy.executorKafkaParams
    group = params.get("group.id") or params.get("group_id")
    if not group:
        raise ConfigurationError(
            "exactly-once output commits the input offsets to the stream's Kafka group: set "
            "kafkaParams['group.id'] of the direct stream")
    isolation = source.consumerStrategy.client_configs.driver.get("isolation_level")
    if isolation != "read_committed":
        raise ConfigurationError(
            "exactly-once output needs the direct stream's kafkaParams to set "
            "isolation.level=read_committed: a restart must read the group's offsets only "
            "once their transaction completed, and the input must skip aborted records")
    store = source.offsetStore
    if store is not None or source.checkpoint_layout is not None:
        what = type(store).__name__ if store is not None else "a checkpoint folder"
        raise ConfigurationError(
            f"exactly-once output keeps the stream's offsets in its Kafka group, committed in "
            f"each partition's transaction; this stream also keeps them in {what}, which would "
            "be committed after the output, outside the transactions, and decide where a "
            "restart resumes. Create the stream without offsetStore and do not call "
            "ssc.checkpoint(...)")
    return str(group)

"""What a write task does on an executor: one producer, one partition's records.

* :func:`write_at_least_once`: an idempotent producer sends every record of the partition
  and flushes; the task ends only when each record is acknowledged by all in-sync replicas,
  so the batch's offsets (committed after its output) never pass an unwritten record.
* :func:`write_exactly_once`: a transactional producer whose ``transactional.id`` belongs to
  the input partition calls ``init_transactions`` when it is created (which fences every
  earlier attempt and completes or aborts its transaction), checks that the group's
  committed offset is where the range starts, sends the range's ``untilOffset`` for the
  group with ``send_offsets_to_transaction``, writes the records and commits: the records
  and the offset become visible together, or neither does.

Both keep their producer across tasks and batches in this Python worker
(:mod:`~dstream_kafka.write.producer_cache`) and close it when anything failed.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from dstream_kafka.errors import KafkaWriteError, OutputFencedError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.write import producer_cache
from dstream_kafka.write.records import message_builder
from dstream_kafka.write.settings import OutputSettings, serializer_for, transactional_id

__all__ = ["transaction_timeout_ms", "write_at_least_once", "write_exactly_once"]

log = logging.getLogger(__name__)


def _builder(settings: OutputSettings) -> Any:
    return message_builder(settings.topic, serializer_for("key", settings.key_serializer),
                           serializer_for("value", settings.value_serializer))


def write_at_least_once(settings: OutputSettings, records: Iterable[Any]) -> Iterator[int]:
    """Send ``records`` with an idempotent producer and flush; yield how many were written.

    The producer is this worker's cached one (:mod:`~dstream_kafka.write.producer_cache`),
    kept for the next task when the flush succeeded and closed when anything failed.
    """
    it = iter(records)
    first = next(it, _NOTHING)
    if first is _NOTHING:
        yield 0
        return
    build = _builder(settings)
    lease = producer_cache.acquire(settings, None, settings.cache)
    count = 0
    healthy = False
    try:
        for record in itertools.chain((first,), it):
            lease.producer.send(build(record))
            count += 1
        lease.producer.flush()
        healthy = True
    finally:
        producer_cache.release(lease, healthy)
    yield count


_NOTHING = object()


def offset_metadata(batch_time_ms: int, from_offset: int) -> str:
    """The metadata committed with an offset, as the Kafka group store writes it."""
    return json.dumps({"dstream_kafka": 1, "batch_time_ms": batch_time_ms, "from": from_offset,
                       "committed_at_ms": int(time.time() * 1000)}, separators=(",", ":"))


def write_exactly_once(settings: OutputSettings, group: str, batch_time_ms: int,
                       offset_range: OffsetRange, records: Iterable[Any]) -> Iterator[int]:
    """Write ``records``, derived from ``offset_range`` alone, in one Kafka transaction that
    also commits ``offset_range.untilOffset`` for ``group``; yield how many were written.

    An empty range with no records writes nothing (there is no position to move).

    A range the group's committed offset has already passed (read after
    ``init_transactions``, so no earlier attempt's transaction is still open) is skipped: an
    earlier attempt wrote it.

    Raises
    ------
    OutputFencedError
        When ``group``'s committed offset is neither absent, nor the range's start, nor past
        its end: records before the range were never written, or part of it was.
    KafkaWriteError
        When a record or the commit failed; the transaction is aborted first.
    """
    it = iter(records)
    first = next(it, _NOTHING)
    r = offset_range
    if first is _NOTHING and r.fromOffset == r.untilOffset:
        yield 0
        return
    build = _builder(settings)
    assert settings.application_id is not None  # set by the output for exactly-once
    txn_id = transactional_id(settings.application_id, r.topic, r.partition)
    records_left = itertools.chain(() if first is _NOTHING else (first,), it)
    for attempt in (0, 1):
        lease = producer_cache.acquire(settings, txn_id, settings.cache)
        healthy = False
        outcome = _Outcome()
        try:
            count = _transaction(settings, lease, group, batch_time_ms, r, build, records_left,
                                 replace_if_fenced=attempt == 0 and not lease.fresh,
                                 outcome=outcome)
            healthy = True
        except _StaleProducer:
            # Another worker ran this partition's task since this producer's last use and
            # its init_transactions fenced this one, before any record was taken: a new
            # producer (whose init_transactions fences the other's) redoes the transaction.
            producer_cache.count("fenced_replacements")
            log.info("the cached producer of %s was fenced by another worker; replaced", txn_id)
            continue
        finally:
            producer_cache.release(lease, healthy)
            if outcome.unsettled:
                _replace_unsettled(settings, txn_id)
        yield count
        return


class _Outcome:
    """How a transaction ended, beyond its result: ``unsettled`` when its commit or abort
    (EndTxn) failed or timed out, so its producer's last requests may still be in flight."""

    __slots__ = ("unsettled",)

    def __init__(self) -> None:
        self.unsettled = False


def _replace_unsettled(settings: OutputSettings, txn_id: str) -> None:
    """Replace the producer of ``txn_id`` whose commit or abort failed, at once.

    Without KIP-890 (librdkafka has none of it, kafka-python part), the broker cannot tell a
    late produce request of the ended transaction from one of the next transaction of the same
    producer epoch. A new producer's ``init_transactions`` completes or aborts the transaction
    and bumps the epoch, so every request still in flight from the failed producer is fenced;
    the new producer is kept for the partition's next task. When the brokers are unreachable
    this fails too (within ``max.block.ms`` / ``transaction.timeout.ms``), and the next
    attempt's ``init_transactions`` does the same.
    """
    lease = producer_cache.acquire(settings, txn_id, settings.cache)
    initialised = False
    try:
        lease.producer.init()
        initialised = True
        producer_cache.count("unsettled_replacements")
        log.warning("the transaction of %s did not end cleanly; its producer was replaced "
                    "(the new epoch fences its late requests)", txn_id)
    except Exception as error:
        log.warning("replacing the producer of %s after its failed commit or abort failed "
                    "(%s); the next attempt's init_transactions fences it",
                    txn_id, type(error).__name__)
    finally:
        # Kept initialised: the next task of the partition takes it without init_transactions.
        producer_cache.release(lease, initialised)


class _StaleProducer(Exception):
    """A cached transactional producer turned out fenced before its transaction wrote."""


def _transaction(settings: OutputSettings, lease: producer_cache.Lease, group: str,
                 batch_time_ms: int, r: OffsetRange, build: Any, records: Iterator[Any],
                 replace_if_fenced: bool, outcome: _Outcome) -> int:
    producer = lease.producer
    if lease.fresh:
        producer.init()
    # Read after init_transactions (or, for a kept producer, as stable offsets, which wait
    # for any open transaction's offsets), so no earlier attempt's transaction is pending.
    committed = producer.committed(group, r.topic, r.partition)
    if committed is not None and committed >= r.untilOffset and r.count():
        # An earlier attempt (a task that died after its commit, before Spark heard of
        # it) or another run wrote this whole range: its outputs exist, once.
        log.warning("%s-%d [%d, %d) was already written and committed (group %s is at %d); "
                    "skipped", r.topic, r.partition, r.fromOffset, r.untilOffset, group,
                    committed)
        return 0
    if committed is not None and committed != r.fromOffset:
        raise OutputFencedError(_fenced_message(group, r, committed))
    began = time.monotonic()
    producer.begin()
    count = 0
    committing = False
    try:
        # The offsets go first: for a kept producer this is the transaction's first broker
        # call, so a producer fenced since its last task fails here, before any record is
        # taken from the task's iterator. The order inside a transaction changes nothing.
        try:
            producer.send_offsets(r.topic, r.partition, r.untilOffset,
                                  offset_metadata(batch_time_ms, r.fromOffset), group)
        except Exception as error:
            if replace_if_fenced and producer.fenced(error):
                raise _StaleProducer() from error
            raise
        for record in records:
            producer.send(build(record))
            count += 1
        committing = True
        producer.commit()
    except _StaleProducer:
        raise  # a fenced producer cannot abort; its transaction never commits
    except Exception as error:
        # A newer epoch of this transactional id exists when the producer is fenced: the
        # broker aborted this transaction and no request of this producer can land any more,
        # so there is nothing to abort or replace (a replacement would fence the newer one).
        # librdkafka may fail a call without its fencing error (a SystemError out of flush
        # seen with confluent-kafka 2.16); the abort's own error then tells.
        evidence: Exception | None = error if producer.fenced(error) else None
        if evidence is None:
            abort_error = _abort(producer, r)
            if abort_error is not None and producer.fenced(abort_error):
                evidence = abort_error
            outcome.unsettled = evidence is None and (committing or abort_error is not None)
        if evidence is not None:  # chained from the client's fencing error
            raise _fenced_error(settings, r, group, time.monotonic() - began) from evidence
        raise
    except BaseException:
        _abort(producer, r)
        raise
    return count


def _abort(producer: Any, r: OffsetRange) -> Exception | None:
    """Abort the producer's transaction; return the abort's error, if any."""
    try:
        producer.abort()
    except Exception as abort_error:  # a fenced or dead producer cannot abort
        log.warning("aborting the transaction of %s-%d failed (%s: %s)", r.topic, r.partition,
                    type(abort_error).__name__, abort_error)
        return abort_error
    return None


def transaction_timeout_ms(settings: OutputSettings) -> int:
    """The ``transaction.timeout.ms`` the output's producers run with (the client default,
    60 s, unless set)."""
    return int(settings.producer.get("transaction_timeout_ms", 60000))


def _fenced_error(settings: OutputSettings, r: OffsetRange, group: str,
                  elapsed_s: float) -> KafkaWriteError:
    """The error of a transaction whose producer was fenced: by the broker when the
    transaction outlived ``transaction.timeout.ms``, else by another producer of its id."""
    where = f"{r.topic}-{r.partition} [{r.fromOffset}, {r.untilOffset})"
    timeout_ms = transaction_timeout_ms(settings)
    if elapsed_s * 1000 >= timeout_ms:
        return KafkaWriteError(
            f"the exactly-once transaction of {where} ran {elapsed_s:.1f} s and outlived "
            f"transaction.timeout.ms={timeout_ms}: the broker aborted it and fenced its "
            "producer, so nothing of it is visible and the group's offset did not move. Raise "
            "transaction.timeout.ms in the output's kafkaParams (the broker caps it with "
            "transaction.max.timeout.ms, 15 min by default), or make the batches or tasks "
            "shorter (maxRatePerPartition, maxOffsetsPerTrigger, a shorter batch interval, "
            "less work per record)")
    return OutputFencedError(
        f"the exactly-once transaction of {where} for group {group!r} was fenced after "
        f"{elapsed_s:.1f} s (within transaction.timeout.ms={timeout_ms}) by another producer "
        f"with its transactional.id: another driver of this application (the same "
        "applicationId, or group.id by default) started or wrote this partition (or "
        "a speculative copy of this task ran). Its transaction is aborted and this driver's batch fails, which stops its streaming "
        "context; no record is written twice. Run one driver per application")


def _fenced_message(group: str, r: OffsetRange, committed: int) -> str:
    if committed > r.fromOffset:
        why = ("the group is inside this range: part of its records were written by another "
               "run of this application (two drivers with one applicationId)")
    else:
        why = ("the group is behind this range: records between were never written "
               "(a batch that failed, or starting offsets other than the group's)")
    return (f"exactly-once output refused to write {r.topic}-{r.partition} "
            f"[{r.fromOffset}, {r.untilOffset}): group {group!r} has committed offset "
            f"{committed}; {why}. Exactly-once output resumes only from the group's committed "
            "offsets: stop the other run, or restart the stream (it then starts at the group's "
            "offsets), or move the group's offsets with the offsets CLI")

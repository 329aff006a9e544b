"""Decoding RDDs of :class:`~dstream_kafka.record.ConsumerRecord`: fail on a bad record, or skip it
and count it.

:class:`RecordDecoder` decodes one record's key and value (``rdd.map(RecordDecoder(...))``).
:func:`decode_records` applies it to a whole RDD with a ``failOnDataLoss``-style choice:
``on_error="fail"`` stops the job at the first record that does not decode, ``"skip"`` drops such
records and adds them to a Spark accumulator: how many, and the first ones by position, which
:meth:`DecodedRecords.skipped` reads on the driver after an action.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NamedTuple

from pyspark.accumulators import AccumulatorParam

from dstream_kafka.errors import ConfigurationError, RecordDecodeError
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.record import ConsumerRecord

__all__ = ["RecordDecoder", "decode_records", "DecodedRecords", "SkippedRecord", "SkippedRecords",
           "ON_ERROR"]

log = logging.getLogger(__name__)

#: The choices of ``on_error``.
ON_ERROR = ("fail", "skip")


class SkippedRecord(NamedTuple):
    """A record ``on_error="skip"`` dropped, and why."""

    topic: str
    partition: int
    offset: int
    schema_id: int | str | None
    reason: str


@dataclass(frozen=True)
class SkippedRecords:
    """How many records were skipped, and the first of them by topic, partition and offset."""

    count: int
    first: tuple[SkippedRecord, ...]


class _SkippedParam(AccumulatorParam[SkippedRecords]):
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def zero(self, value: SkippedRecords) -> SkippedRecords:
        return SkippedRecords(0, ())

    def addInPlace(self, value1: SkippedRecords, value2: SkippedRecords) -> SkippedRecords:
        first = sorted({*value1.first, *value2.first}, key=lambda r: (r.topic, r.partition, r.offset))
        return SkippedRecords(value1.count + value2.count, tuple(first[:self.limit]))


class RecordDecoder:
    """Decode the key and value of :class:`ConsumerRecord` objects; a callable for ``rdd.map``.

    Parameters
    ----------
    value : RegistryDecoder, optional
        Decodes the value; ``None`` leaves the value as it is.
    key : RegistryDecoder, optional
        Decodes the key; ``None`` leaves the key as it is.

    Raises
    ------
    ConfigurationError
        When neither decoder is given or one is not a :class:`RegistryDecoder`.
    """

    def __init__(self, value: RegistryDecoder | None = None, key: RegistryDecoder | None = None) -> None:
        for name, given in (("value", value), ("key", key)):
            if given is not None and not isinstance(given, RegistryDecoder):
                raise ConfigurationError(
                    f"RecordDecoder {name} must be a decoder such as AvroDecoder, ProtobufDecoder or "
                    f"JsonSchemaDecoder, got {type(given).__name__}")
        if value is None and key is None:
            raise ConfigurationError("RecordDecoder needs a value decoder, a key decoder or both")
        self.value = value
        self.key = key

    def __repr__(self) -> str:
        return f"RecordDecoder(value={self.value!r}, key={self.key!r})"

    def __call__(self, record: ConsumerRecord) -> ConsumerRecord:
        """Return ``record`` with its key and value decoded.

        Raises
        ------
        RecordDecodeError
            The record does not decode (:class:`~dstream_kafka.errors.UnknownSchemaError` when
            its schema id is unknown); the message names topic, partition, offset and schema id.
        """
        key, value = record.key, record.value
        if self.key is not None:
            key = self.key.decode(key, record.headers, True, record.topic, record.partition, record.offset)
        if self.value is not None:
            value = self.value.decode(value, record.headers, False, record.topic, record.partition,
                                      record.offset)
        return record._replace(key=key, value=value)


def _skipping(decoder: RecordDecoder, accumulator: Any, limit: int,
              records: Iterable[ConsumerRecord]) -> Iterator[ConsumerRecord]:
    count = 0
    first: list[SkippedRecord] = []
    try:
        for record in records:
            try:
                yield decoder(record)
            except RecordDecodeError as exc:
                count += 1
                if len(first) < limit:
                    first.append(SkippedRecord(record.topic, record.partition, record.offset,
                                               exc.schema_id, str(exc)))
                    log.warning("skipped a record (on_error='skip'): %s", exc)
    finally:
        # once per partition, also when the consumer stops early (take, first)
        if count:
            accumulator.add(SkippedRecords(count, tuple(first)))


class DecodedRecords:
    """The decoded RDD and, for ``on_error="skip"``, the report of what it skipped."""

    def __init__(self, rdd: Any, accumulator: Any | None) -> None:
        self.rdd = rdd
        self._accumulator = accumulator

    def skipped(self) -> SkippedRecords:
        """Return the records skipped so far by the actions run on :attr:`rdd` (driver side).

        Like any Spark accumulator updated in a transformation, each evaluation adds again:
        cache :attr:`rdd` to count each record once over several actions.
        """
        if self._accumulator is None:
            return SkippedRecords(0, ())
        value: SkippedRecords = self._accumulator.value
        return value


def decode_records(rdd: Any, value: RegistryDecoder | None = None, key: RegistryDecoder | None = None,
                   on_error: str = "fail", report_first: int = 10) -> DecodedRecords:
    """Return an RDD of the records of ``rdd`` with keys and values decoded, lazily.

    Parameters
    ----------
    rdd : pyspark.RDD of ConsumerRecord
        Records of :func:`~dstream_kafka.KafkaUtils.createRDD` or of a direct stream's batch,
        read with raw bytes (no ``value.deserializer``): headers must be present.
    value, key : RegistryDecoder, optional
        As for :class:`RecordDecoder`.
    on_error : {"fail", "skip"}
        ``"fail"`` raises :class:`~dstream_kafka.errors.RecordDecodeError` from the action at the
        first undecodable record; ``"skip"`` leaves such records out and reports them through
        :meth:`DecodedRecords.skipped`. A registry that fails or refuses the credentials
        always fails the job: that is not a fault of the records.
    report_first : int
        How many skipped records :meth:`DecodedRecords.skipped` lists (the count is exact).

    Raises
    ------
    ConfigurationError
        For an ``on_error`` outside :data:`ON_ERROR` or a bad decoder, before any data moves.
    """
    decoder = RecordDecoder(value=value, key=key)
    if on_error not in ON_ERROR:
        raise ConfigurationError(f"decode_records on_error must be 'fail' or 'skip', got {on_error!r}")
    if not isinstance(report_first, int) or report_first < 0:
        raise ConfigurationError(f"decode_records report_first must be an int >= 0, got {report_first!r}")
    if on_error == "fail":
        return DecodedRecords(rdd.map(decoder), None)
    accumulator = rdd.context.accumulator(SkippedRecords(0, ()), _SkippedParam(report_first))

    def run(records: Iterable[ConsumerRecord]) -> Iterator[ConsumerRecord]:
        return _skipping(decoder, accumulator, report_first, records)

    return DecodedRecords(rdd.mapPartitions(run, preservesPartitioning=True), accumulator)

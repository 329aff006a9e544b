"""Kafka DataFrames with registry-encoded values decoded into Spark columns, built in Arrow.

:func:`decode_frame` takes a DataFrame in Structured Streaming's Kafka schema (as
``KafkaUtils.createDataFrame`` returns it) and replaces its binary ``value`` (and ``key``)
column by the decoded column: a struct for an Avro record. A DataFrame has one schema, fixed
when it is planned, so the Avro decoder must carry a reader schema: given by the caller
(``AvroDecoder(registry, reader_schema=...)``) or fetched once on the driver from a subject's
version by :func:`subject_decoder`. Every record is read into that schema by Avro schema
resolution, whatever writer version wrote it; a record whose writer schema does not resolve
(an incompatible change) fails like a corrupt one, under ``on_error``.

On executors, ``mapInArrow`` decodes each Arrow batch's values with the decoder (writer
schemas fetched once per worker, as for RDDs) and builds the column with one ``pa.array`` call
of the target Arrow type; the other columns are passed through untouched (filtered when rows
are skipped).
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

from dstream_kafka.errors import ConfigurationError, MissingDependencyError, RecordDecodeError
from dstream_kafka.formats.avro import AvroDecoder
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.formats.records import ON_ERROR, SkippedRecord, SkippedRecords, _SkippedParam
from dstream_kafka.formats.registry import RegistrySettings, registry_client, registry_failure
from dstream_kafka.formats.spark_types import ColumnType, avro_types

__all__ = ["DecodedFrame", "decode_frame", "subject_decoder"]

log = logging.getLogger(__name__)


def subject_decoder(registry: RegistrySettings, subject: str,
                    version: int | str = "latest") -> AvroDecoder:
    """Return an :class:`AvroDecoder` whose reader schema is ``subject``'s ``version``.

    The schema is fetched now, on the driver, once: a DataFrame built with the decoder keeps
    that schema even if newer versions are registered while it runs.

    Raises
    ------
    ConfigurationError
        The subject or version does not exist, or the schema is not Avro.
    SchemaRegistryError
        The registry failed, could not be reached or refused the credentials.
    """
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError(f"subject_decoder subject must be a subject name, got {subject!r}")
    if not (version == "latest" or (isinstance(version, int) and not isinstance(version, bool)
                                    and version >= 1)):
        raise ConfigurationError(
            f"subject_decoder version must be 'latest' or a version number >= 1, got {version!r}")
    client = registry_client(registry)
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    what = f"subject {subject!r} version {version}"
    try:
        found = (client.get_latest_version(subject) if version == "latest"
                 else client.get_version(subject, version))
    except ClientError as exc:
        if exc.http_status_code == 404:
            raise ConfigurationError(
                f"the Schema Registry at {registry.display_url} has no {what}: check the subject "
                "name (the serializer's default is '<topic>-value' or '<topic>-key')") from None
        raise registry_failure(registry, f"to return {what}", exc) from None
    except Exception as exc:  # connection refused, TLS, timeouts
        raise registry_failure(registry, f"to return {what}", exc) from None
    kind = (found.schema.schema_type or "AVRO").upper()
    if kind != "AVRO":
        raise ConfigurationError(f"{what} is a {kind} schema; subject_decoder reads Avro subjects")
    return AvroDecoder(registry, reader_schema=found.schema.schema_str)


class DecodedFrame:
    """The decoded DataFrame and, for ``on_error="skip"``, the report of what it skipped."""

    def __init__(self, df: Any, accumulator: Any | None, skipping: bool) -> None:
        self.df = df
        self._accumulator = accumulator
        self._skipping = skipping

    def skipped(self) -> SkippedRecords:
        """Return the records skipped so far by the actions run on :attr:`df` (driver side).

        Each action adds again (a Spark accumulator): cache :attr:`df` to count each record
        once over several actions.

        Raises
        ------
        ConfigurationError
            On Spark Connect, which has no accumulators: executors log each skipped record.
        """
        if not self._skipping:
            return SkippedRecords(0, ())
        if self._accumulator is None:
            raise ConfigurationError(
                "skipped() needs a classic SparkSession (Spark Connect has no accumulators); "
                "the executors' logs name each skipped record")
        value: SkippedRecords = self._accumulator.value
        return value


def _column_type(decoder: RegistryDecoder | None, where: str) -> ColumnType | None:
    if decoder is None:
        return None
    if not isinstance(decoder, AvroDecoder):
        raise ConfigurationError(
            f"decode_frame {where} must be an AvroDecoder, got {type(decoder).__name__}: "
            "Protobuf and JSON Schema columns are not supported yet; decode the records of "
            "KafkaUtils.createRDD with decode_records instead")
    if decoder.return_record_name:
        raise ConfigurationError(
            f"decode_frame {where} decoder has return_record_name=True, which gives tuples, not "
            "Spark values: leave it False")
    if decoder.reader_schema is None:
        raise ConfigurationError(
            f"decode_frame {where} decoder needs a reader schema (a DataFrame has one schema): "
            "give AvroDecoder(registry, reader_schema=...) or subject_decoder(registry, subject)")
    return avro_types(decoder.reader_schema, where)


def _classic_context(df: Any) -> Any | None:
    try:
        return df.sparkSession.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        return None


def decode_frame(df: Any, value: RegistryDecoder | None = None, key: RegistryDecoder | None = None,
                 on_error: str = "fail", report_first: int = 10) -> DecodedFrame:
    """Return ``df`` with its ``value`` and/or ``key`` column decoded into Spark types, lazily.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        A DataFrame with binary ``key``/``value`` columns, such as ``createDataFrame`` returns;
        ``topic``, ``partition``, ``offset`` (named in errors) and ``headers`` (schema ids in
        headers) are used when present. Every other column passes through unchanged.
    value, key : AvroDecoder, optional
        With a reader schema (see :func:`subject_decoder`); its Spark type (see
        :mod:`dstream_kafka.formats.spark_types`) replaces the binary column, in place and
        under the same name. A null key or value (a tombstone) stays null.
    on_error : {"fail", "skip"}
        ``"fail"``: the action fails with :class:`~dstream_kafka.errors.RecordDecodeError` at
        the first row that does not decode (or whose writer schema does not resolve to the
        reader schema). ``"skip"``: such rows are left out of the DataFrame, logged by the
        executor and reported by :meth:`DecodedFrame.skipped`. A failing registry always fails.
    report_first : int
        How many skipped records :meth:`DecodedFrame.skipped` lists (the count is exact).

    Raises
    ------
    ConfigurationError
        Before any data moves: no decoder, a decoder without a reader schema or not Avro, a
        schema without a Spark type (naming the field), a missing or non-binary column, or a
        bad ``on_error``.
    """
    if value is None and key is None:
        raise ConfigurationError("decode_frame needs a value decoder, a key decoder or both")
    if on_error not in ON_ERROR:
        raise ConfigurationError(f"decode_frame on_error must be 'fail' or 'skip', got {on_error!r}")
    if not isinstance(report_first, int) or report_first < 0:
        raise ConfigurationError(f"decode_frame report_first must be an int >= 0, got {report_first!r}")
    targets = {name: (decoder, _column_type(decoder, name))
               for name, decoder in (("key", key), ("value", value)) if decoder is not None}
    from pyspark.sql.types import BinaryType, StructField, StructType

    columns = {f.name: f for f in df.schema.fields}
    for name in targets:
        if name not in columns or not isinstance(columns[name].dataType, BinaryType):
            found = columns[name].dataType.simpleString() if name in columns else "no such column"
            raise ConfigurationError(
                f"decode_frame needs a binary {name!r} column ({found}): pass the DataFrame of "
                "KafkaUtils.createDataFrame before selecting or casting its columns")
    out = StructType([StructField(f.name, targets[f.name][1].spark, True)  # type: ignore[union-attr]
                      if f.name in targets else f for f in df.schema.fields])
    plan = {name: (decoder, column) for name, (decoder, column) in targets.items()}
    context = _classic_context(df) if on_error == "skip" else None
    accumulator = (None if context is None
                   else context.accumulator(SkippedRecords(0, ()), _SkippedParam(report_first)))
    run = _batches_decoder(plan, list(columns), on_error == "skip", accumulator, report_first)
    return DecodedFrame(df.mapInArrow(run, out), accumulator, on_error == "skip")


def _batches_decoder(plan: dict[str, tuple[Any, Any]], names: list[str], skip: bool,
                     accumulator: Any | None, report_first: int) -> Any:
    """Return the ``mapInArrow`` function (runs on executors; pickled with its arguments)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        try:
            import pyarrow as pa
        except ImportError:  # pragma: no cover - mapInArrow needs pyarrow itself
            raise MissingDependencyError("pip install dstream_kafka[dataframe]") from None
        count = 0
        first: list[SkippedRecord] = []
        try:
            for batch in batches:
                decoded, keep, bad = _decode_batch(batch, plan, names, skip)
                for record in bad:
                    count += 1
                    if len(first) < report_first:
                        first.append(record)
                        log.warning("skipped a record (on_error='skip'): %s", record.reason)
                if bad:
                    batch = batch.take(pa.array(keep, pa.int64()))
                arrays, fields = [], []
                for i, name in enumerate(names):
                    if name in plan:
                        arrow_type = plan[name][1].arrow
                        arrays.append(_build(pa, decoded[name], arrow_type, name))
                        fields.append(pa.field(name, arrow_type))
                    else:
                        arrays.append(batch.column(i))
                        fields.append(batch.schema.field(i))
                yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        finally:
            if count and accumulator is not None:
                accumulator.add(SkippedRecords(count, tuple(first)))

    return run


def _build(pa: Any, values: list[Any], arrow_type: Any, name: str) -> Any:
    try:
        return pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        # the reader schema resolved every value, so this is a mapping gap, not a bad record
        raise ConfigurationError(
            f"decode_frame cannot build the {name} column as {arrow_type}: {exc}") from None


def _decode_batch(batch: Any, plan: dict[str, tuple[Any, Any]], names: list[str],
                  skip: bool) -> tuple[dict[str, list[Any]], list[int], list[SkippedRecord]]:
    """Decode one batch: the Python values per decoded column, the rows kept, the rows skipped."""
    def column(name: str) -> list[Any] | None:
        return batch.column(names.index(name)).to_pylist() if name in names else None

    n = batch.num_rows
    topics = column("topic") or ["?"] * n
    partitions = column("partition") or [-1] * n
    offsets = column("offset") or [-1] * n
    headers = column("headers")
    raw = {name: column(name) for name in plan}
    decoded: dict[str, list[Any]] = {name: [] for name in plan}
    keep: list[int] = []
    bad: list[SkippedRecord] = []
    for row in range(n):
        # a headers column holds {key, value} structs; the decoder takes (key, value) pairs
        pairs = [(h["key"], h["value"]) for h in headers[row] or ()] if headers is not None else ()
        try:
            values = {}
            for name, (decoder, column_type) in plan.items():
                got = decoder.decode(raw[name][row], pairs, name == "key",  # type: ignore[index]
                                     topics[row], partitions[row], offsets[row])
                if got is not None and column_type.convert is not None:
                    got = column_type.convert(got)
                values[name] = got
        except RecordDecodeError as exc:
            if not skip:
                raise
            bad.append(SkippedRecord(topics[row], partitions[row], offsets[row], exc.schema_id,
                                     str(exc)))
            continue
        keep.append(row)
        for name, got in values.items():
            decoded[name].append(got)
    return decoded, keep, bad

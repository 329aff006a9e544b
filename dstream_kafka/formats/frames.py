"""Kafka DataFrames with registry-encoded values decoded into Spark columns, built in Arrow.

:func:`decode_frame` takes a DataFrame in Structured Streaming's Kafka schema (as
``KafkaUtils.createDataFrame`` returns it) and replaces its binary ``value`` (and ``key``)
column by the decoded column: a struct for an Avro record. A DataFrame has one schema, fixed
when it is planned, so the Avro decoder must carry a reader schema: given by the caller
(``AvroDecoder(registry, reader_schema=...)``) or fetched once on the driver from a subject's
version by :func:`subject_decoder`. Every record is read into that schema by Avro schema
resolution, whatever writer version wrote it; a record whose writer schema does not resolve
(an incompatible change) fails like a corrupt one, under ``on_error``.

A JSON Schema column's type comes from a JSON schema given as ``value_schema``/``key_schema``
(:func:`subject_schema` fetches a subject's), a Protobuf column's from a message class or
Descriptor; neither format resolves schemas, so a decoded value that does not fit the column is
a bad record, under ``on_error`` (Protobuf fields the column lacks are dropped, fields the
record lacks are null).

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
from dstream_kafka.formats.registry import RegistrySettings, bounded_call, registry_client, registry_failure
from dstream_kafka.formats.json_schema import JsonSchemaDecoder
from dstream_kafka.formats.protobuf import ProtobufDecoder
from dstream_kafka.formats.spark_types import ColumnType, avro_types, json_schema_types, protobuf_types

__all__ = ["DecodedFrame", "decode_frame", "subject_decoder", "subject_schema"]

log = logging.getLogger(__name__)


def _registered(registry: RegistrySettings, subject: str, version: int | str, caller: str) -> Any:
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError(f"{caller} subject must be a subject name, got {subject!r}")
    if not (version == "latest" or (isinstance(version, int) and not isinstance(version, bool)
                                    and version >= 1)):
        raise ConfigurationError(
            f"{caller} version must be 'latest' or a version number >= 1, got {version!r}")
    client = registry_client(registry)
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    what = f"subject {subject!r} version {version}"
    try:
        return bounded_call(registry, lambda: (client.get_latest_version(subject) if version == "latest"
                                               else client.get_version(subject, version)))
    except ClientError as exc:
        if exc.http_status_code == 404:
            raise ConfigurationError(
                f"the Schema Registry at {registry.display_url} has no {what}: check the subject "
                "name (the serializer's default is '<topic>-value' or '<topic>-key')") from None
        raise registry_failure(registry, f"to return {what}", exc) from None
    except Exception as exc:  # connection refused, TLS, timeouts
        raise registry_failure(registry, f"to return {what}", exc) from None


def subject_schema(registry: RegistrySettings, subject: str, version: int | str = "latest") -> str:
    """Return the schema text of ``subject``'s ``version``, fetched now on the driver.

    For a JSON Schema column: ``decode_frame(df, value=JsonSchemaDecoder(registry),
    value_schema=subject_schema(registry, subject))``.

    Raises
    ------
    ConfigurationError
        The subject or version does not exist.
    SchemaRegistryError
        The registry failed, could not be reached or refused the credentials.
    """
    schema_str: str = _registered(registry, subject, version, "subject_schema").schema.schema_str
    return schema_str


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
    found = _registered(registry, subject, version, "subject_decoder")
    kind = (found.schema.schema_type or "AVRO").upper()
    if kind != "AVRO":
        raise ConfigurationError(
            f"subject {subject!r} holds {kind} schemas; subject_decoder reads Avro subjects (for "
            "JSON Schema pass value_schema=subject_schema(registry, subject) to decode_frame)")
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


def _column_type(decoder: RegistryDecoder | None, where: str, schema: Any) -> ColumnType | None:
    if decoder is None:
        if schema is not None:
            raise ConfigurationError(f"decode_frame {where}_schema is given without a {where} decoder")
        return None
    if isinstance(decoder, JsonSchemaDecoder):
        if schema is None:
            raise ConfigurationError(
                f"decode_frame needs {where}_schema for a JsonSchemaDecoder (a DataFrame has one "
                f"schema): a JSON schema, or subject_schema(registry, subject)")
        return json_schema_types(schema, where)
    if isinstance(decoder, ProtobufDecoder):
        message = schema if schema is not None else decoder.message_type
        if message is None or isinstance(message, (str, dict)):
            raise ConfigurationError(
                f"decode_frame needs {where}_schema for a ProtobufDecoder: the message's generated "
                "class or its Descriptor (a DataFrame has one schema)")
        if not decoder.as_dict:
            raise ConfigurationError(f"decode_frame {where} ProtobufDecoder needs as_dict=True")
        return protobuf_types(message, where)
    if not isinstance(decoder, AvroDecoder):
        raise ConfigurationError(
            f"decode_frame {where} must be an AvroDecoder, JsonSchemaDecoder or ProtobufDecoder, "
            f"got {type(decoder).__name__}")
    if schema is not None:
        raise ConfigurationError(
            f"decode_frame {where}_schema is for JSON Schema; an Avro column's type is its "
            "decoder's reader_schema")
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
                 on_error: str = "fail", report_first: int = 10,
                 value_schema: Any = None, key_schema: Any = None) -> DecodedFrame:
    """Return ``df`` with its ``value`` and/or ``key`` column decoded into Spark types, lazily.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        A DataFrame with binary ``key``/``value`` columns, such as ``createDataFrame`` returns;
        ``topic``, ``partition``, ``offset`` (named in errors) and ``headers`` (schema ids in
        headers) are used when present. Every other column passes through unchanged.
    value, key : AvroDecoder, JsonSchemaDecoder or ProtobufDecoder, optional
        An Avro decoder with a reader schema (see :func:`subject_decoder`), a JSON Schema
        decoder with ``value_schema``/``key_schema``, or a Protobuf decoder (``as_dict=True``)
        with its ``message_type`` or a message class or Descriptor as the schema; the schema's Spark type (see
        :mod:`dstream_kafka.formats.spark_types`) replaces the binary column, in place and
        under the same name. A null key or value (a tombstone) stays null.
    on_error : {"fail", "skip"}
        ``"fail"``: the action fails with :class:`~dstream_kafka.errors.RecordDecodeError` at
        the first row that does not decode (or whose writer schema does not resolve to the
        reader schema). ``"skip"``: such rows are left out of the DataFrame, logged by the
        executor and reported by :meth:`DecodedFrame.skipped`. A failing registry always fails.
    report_first : int
        How many skipped records :meth:`DecodedFrame.skipped` lists (the count is exact).
    value_schema, key_schema : optional
        The JSON schema of a JSON Schema column (see :func:`subject_schema`), or the message
        class or Descriptor of a Protobuf column. A decoded value that does not fit its
        column's type (a string where the schema says integer) is a bad record, under ``on_error``.

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
    targets = {name: (decoder, _column_type(decoder, name, schema))
               for name, decoder, schema in (("key", key, key_schema), ("value", value, value_schema))
               if decoder is not None or schema is not None}
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
                built, keep, bad = _decode_batch(pa, batch, plan, names, skip)
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
                        arrays.append(built[name])
                        fields.append(pa.field(name, plan[name][1].arrow))
                    else:
                        arrays.append(batch.column(i))
                        fields.append(batch.schema.field(i))
                yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        finally:
            if count and accumulator is not None:
                accumulator.add(SkippedRecords(count, tuple(first)))

    return run


class _Rows:
    """The columns of one batch that name records in errors and carry schema-id headers."""

    def __init__(self, batch: Any, names: list[str]) -> None:
        def column(name: str) -> list[Any] | None:
            return batch.column(names.index(name)).to_pylist() if name in names else None

        n = batch.num_rows
        self.topics = column("topic") or ["?"] * n
        self.partitions = column("partition") or [-1] * n
        self.offsets = column("offset") or [-1] * n
        self.headers = column("headers")
        self.column = column

    def pairs(self, row: int) -> Any:
        # a headers column holds {key, value} structs; the decoder takes (key, value) pairs
        if self.headers is None:
            return ()
        return [(h["key"], h["value"]) for h in self.headers[row] or ()]

    def skipped(self, row: int, exc: RecordDecodeError) -> SkippedRecord:
        return SkippedRecord(self.topics[row], self.partitions[row], self.offsets[row],
                             exc.schema_id, str(exc))


def _decode_batch(pa: Any, batch: Any, plan: dict[str, tuple[Any, Any]], names: list[str],
                  skip: bool) -> tuple[dict[str, Any], list[int], list[SkippedRecord]]:
    """Decode one batch: the Arrow array per decoded column, the rows kept, the rows skipped."""
    rows = _Rows(batch, names)
    raw = {name: rows.column(name) for name in plan}
    values: dict[int, dict[str, Any]] = {}
    bad: dict[int, SkippedRecord] = {}
    for row in range(batch.num_rows):
        try:
            got = {}
            for name, (decoder, column_type) in plan.items():
                value = decoder.decode(raw[name][row], rows.pairs(row),  # type: ignore[index]
                                       name == "key", rows.topics[row], rows.partitions[row],
                                       rows.offsets[row])
                if value is not None and column_type.convert is not None:
                    value = column_type.convert(value)
                got[name] = value
            values[row] = got
        except RecordDecodeError as exc:
            if not skip:
                raise
            bad[row] = rows.skipped(row, exc)
    built: dict[str, Any] = {}
    for name, (decoder, column_type) in plan.items():
        try:
            built[name] = pa.array([values[r][name] for r in values], column_type.arrow)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            # a decoded value that does not fit the column (JSON against another schema): find it
            for row in list(values):
                try:
                    pa.array([values[row][name]], column_type.arrow)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
                    error = RecordDecodeError(
                        f"the {decoder.format_name} {name} of topic {rows.topics[row]!r} partition "
                        f"{rows.partitions[row]} offset {rows.offsets[row]} does not fit the column "
                        f"type {column_type.spark.simpleString()}: {type(exc).__name__}: {exc}",
                        rows.topics[row], rows.partitions[row], rows.offsets[row], None)
                    if not skip:
                        raise error from None
                    bad[row] = rows.skipped(row, error)
                    del values[row]
            return _rebuilt(pa, plan, values, bad)
    return built, list(values), [bad[r] for r in sorted(bad)]


def _rebuilt(pa: Any, plan: dict[str, tuple[Any, Any]], values: dict[int, dict[str, Any]],
             bad: dict[int, SkippedRecord]) -> tuple[dict[str, Any], list[int], list[SkippedRecord]]:
    """The arrays of the rows left once those that do not fit a column are out."""
    built = {name: pa.array([values[r][name] for r in values], column.arrow)
             for name, (_, column) in plan.items()}
    return built, list(values), [bad[r] for r in sorted(bad)]

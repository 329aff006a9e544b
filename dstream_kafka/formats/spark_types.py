"""Avro and JSON schemas and Protobuf messages as Spark and Arrow types (for :mod:`.frames`).

:func:`avro_types` maps one Avro schema to the Spark type of its column, the Arrow type
executors build it with, and, where fastavro's Python value is not what Arrow takes for that
type, a converter. The mapping follows Spark's ``from_avro`` (``SchemaConverters``):

=====================================  =====================================================
Avro                                   Spark (Arrow)
=====================================  =====================================================
null / boolean / int / long            NullType / BooleanType / IntegerType / LongType
float / double                         FloatType / DoubleType
string, enum, uuid                     StringType (enum by symbol)
bytes, fixed                           BinaryType
record                                 StructType (fields keep their order and names)
array / map                            ArrayType / MapType with string keys
union of null and one type             that type, nullable
date                                   DateType
timestamp-millis / -micros             TimestampType (microseconds, UTC)
local-timestamp-millis / -micros       TimestampNTZType
time-millis / time-micros              IntegerType millis / LongType micros of the day
decimal (bytes, fixed), precision<=38  DecimalType(precision, scale)
=====================================  =====================================================

Fields not in a union with null are not nullable, as in ``from_avro``. A union of two or more
non-null types, a recursive record, and a decimal wider than 38 digits have no Spark type here:
:class:`~dstream_kafka.errors.ConfigurationError` names the field and the fix. A logical type
Avro does not define is read as its underlying type, as the Avro specification says.
:func:`json_schema_types` and :func:`protobuf_types` do the same for JSON Schema and Protobuf.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Callable, NamedTuple

from dstream_kafka.errors import ConfigurationError

__all__ = ["ColumnType", "avro_types", "json_schema_types", "protobuf_types"]

Converter = Callable[[Any], Any]

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION


class ColumnType(NamedTuple):
    """The Spark and Arrow types of one Avro schema, and how its Python values are fixed up.

    Attributes
    ----------
    spark : pyspark.sql.types.DataType
    arrow : pyarrow.DataType
    nullable : bool
        True for ``null`` and unions with ``null``.
    convert : callable or None
        Applied to each non-null decoded value before Arrow builds the column; ``None`` when
        fastavro's values go to Arrow as they are (the common case: no per-value work).
    """

    spark: Any
    arrow: Any
    nullable: bool
    convert: Converter | None


def _time_millis(value: datetime.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _time_micros(value: datetime.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _nullable(convert: Converter) -> Converter:
    return lambda v: None if v is None else convert(v)


class _Walker:
    """One walk over a schema: named types seen so far, and those being expanded (recursion)."""

    def __init__(self, where: str) -> None:
        import pyarrow
        from pyspark.sql import types

        self.pa = pyarrow
        self.t = types
        self.where = where
        self.named: dict[str, Any] = {}
        self.expanding: set[str] = set()

    def fail(self, path: str, problem: str, fix: str) -> ConfigurationError:
        return ConfigurationError(f"{self.where} field {path or '<root>'!r}: {problem}; {fix}")

    @staticmethod
    def fullname(name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def walk(self, schema: Any, namespace: str, path: str) -> ColumnType:
        if isinstance(schema, list):
            return self.union(schema, namespace, path)
        if isinstance(schema, str):
            return self.named_or_primitive(schema, namespace, path)
        if not isinstance(schema, dict) or "type" not in schema:
            raise self.fail(path, f"{schema!r} is not an Avro schema", "check the reader schema")
        kind = schema["type"]
        logical = self.logical(schema, kind, path)
        if logical is not None:
            return logical
        if kind == "record" or kind == "error":
            return self.record(schema, namespace, path)
        if kind == "enum":
            self.register(schema, namespace)
            return ColumnType(self.t.StringType(), self.pa.string(), False, None)
        if kind == "fixed":
            self.register(schema, namespace)
            return ColumnType(self.t.BinaryType(), self.pa.binary(), False, None)
        if kind == "array":
            return self.array(schema["items"], namespace, path)
        if kind == "map":
            return self.map(schema["values"], namespace, path)
        return self.walk(kind, namespace, path)  # {"type": "int"}, or a nested definition

    def register(self, schema: dict[str, Any], namespace: str) -> str:
        name = self.fullname(schema["name"], schema.get("namespace", namespace))
        self.named[name] = schema
        return name

    def named_or_primitive(self, name: str, namespace: str, path: str) -> ColumnType:
        t, pa = self.t, self.pa
        simple = {
            "null": (t.NullType(), pa.null()),
            "boolean": (t.BooleanType(), pa.bool_()),
            "int": (t.IntegerType(), pa.int32()),
            "long": (t.LongType(), pa.int64()),
            "float": (t.FloatType(), pa.float32()),
            "double": (t.DoubleType(), pa.float64()),
            "bytes": (t.BinaryType(), pa.binary()),
            "string": (t.StringType(), pa.string()),
        }
        if name in simple:
            spark, arrow = simple[name]
            return ColumnType(spark, arrow, name == "null", None)
        for candidate in (self.fullname(name, namespace), name):
            if candidate in self.expanding:
                raise self.fail(path, f"type {candidate} contains itself (a recursive type has no "
                                      "finite Spark type)",
                                "read the records with decode_records, or give a reader schema "
                                "that stops the recursion")
            if candidate in self.named:
                schema = self.named[candidate]
                return self.walk(schema, candidate.rpartition(".")[0], path)
        raise self.fail(path, f"unknown type name {name!r}",
                        "define the named type before its use (schema references are not resolved)")

    def union(self, branches: list[Any], namespace: str, path: str) -> ColumnType:
        others = [b for b in branches if b != "null"]
        if len(others) > 1:
            raise self.fail(path, f"a union of {len(others)} non-null types "
                                  f"({', '.join(json.dumps(b)[:40] for b in others)}) has no single "
                                  "Spark type here",
                            "read the records with decode_records, or give a reader schema whose "
                            "union is [\"null\", T]")
        if not others:
            return self.named_or_primitive("null", namespace, path)
        inner = self.walk(others[0], namespace, path)
        convert = None if inner.convert is None else _nullable(inner.convert)
        return inner._replace(nullable=True, convert=convert)

    def record(self, schema: dict[str, Any], namespace: str, path: str) -> ColumnType:
        name = self.register(schema, namespace)
        inner_ns = name.rpartition(".")[0]
        self.expanding.add(name)
        try:
            fields = [(f["name"], self.walk(f["type"], inner_ns, f"{path}.{f['name']}" if path
                                            else f["name"])) for f in schema.get("fields", [])]
        finally:
            self.expanding.discard(name)
        return self.struct(fields, False)

    def struct(self, fields: list[tuple[str, ColumnType]], nullable: bool) -> ColumnType:
        """The struct of ``fields``; its converter fixes only the fields that need it."""
        t, pa = self.t, self.pa
        spark = t.StructType([t.StructField(n, c.spark, c.nullable) for n, c in fields])
        arrow = pa.struct([pa.field(n, c.arrow, c.nullable) for n, c in fields])
        converters = [(n, c.convert) for n, c in fields if c.convert is not None]
        convert: Converter | None = None
        if converters:
            def convert(value: dict[str, Any]) -> dict[str, Any]:
                fixed = dict(value)
                for name, each in converters:
                    fixed[name] = None if fixed.get(name) is None else each(fixed[name])
                return fixed
        return ColumnType(spark, arrow, nullable, convert)

    def array(self, items: Any, namespace: str, path: str) -> ColumnType:
        item = self.walk(items, namespace, f"{path}[]")
        spark = self.t.ArrayType(item.spark, item.nullable)
        arrow = self.pa.list_(self.pa.field("element", item.arrow, item.nullable))
        each = item.convert
        return ColumnType(spark, arrow, False, None if each is None else lambda v: [each(x) for x in v])

    def map(self, values: Any, namespace: str, path: str) -> ColumnType:
        item = self.walk(values, namespace, f"{path}{{}}")
        spark = self.t.MapType(self.t.StringType(), item.spark, item.nullable)
        arrow = self.pa.map_(self.pa.string(), self.pa.field("value", item.arrow, item.nullable))
        each = item.convert
        return ColumnType(spark, arrow, False,
                          None if each is None else lambda v: {k: each(x) for k, x in v.items()})

    def logical(self, schema: dict[str, Any], kind: Any, path: str) -> ColumnType | None:
        logical = schema.get("logicalType")
        t, pa = self.t, self.pa
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = schema.get("precision"), schema.get("scale", 0)
            if not isinstance(precision, int) or precision > _MAX_DECIMAL_PRECISION:
                raise self.fail(path, f"decimal precision {precision!r} is over Spark's maximum of "
                                      f"{_MAX_DECIMAL_PRECISION}",
                                "give a reader schema with a smaller precision, or read the records "
                                "with decode_records")
            if kind == "fixed" and "name" in schema:
                self.register(schema, "")
            return ColumnType(t.DecimalType(precision, scale), pa.decimal128(precision, scale),
                              False, None)
        table: dict[tuple[str, str], tuple[Any, Any, Converter | None]] = {
            ("int", "date"): (t.DateType(), pa.date32(), None),
            ("long", "timestamp-millis"): (t.TimestampType(), pa.timestamp("us", tz="UTC"), None),
            ("long", "timestamp-micros"): (t.TimestampType(), pa.timestamp("us", tz="UTC"), None),
            ("long", "local-timestamp-millis"): (t.TimestampNTZType(), pa.timestamp("us"), None),
            ("long", "local-timestamp-micros"): (t.TimestampNTZType(), pa.timestamp("us"), None),
            ("int", "time-millis"): (t.IntegerType(), pa.int32(), _time_millis),
            ("long", "time-micros"): (t.LongType(), pa.int64(), _time_micros),
            ("string", "uuid"): (t.StringType(), pa.string(), str),
        }
        found = table.get((kind, logical)) if isinstance(kind, str) and isinstance(logical, str) else None
        if found is None:
            return None  # no logical type, or one Avro does not define: the underlying type
        spark, arrow, convert = found
        return ColumnType(spark, arrow, False, convert)


def avro_types(schema: str | dict[str, Any] | list[Any], where: str = "value") -> ColumnType:
    """Return the Spark and Arrow types of the Avro ``schema`` (JSON text or parsed).

    ``where`` names the column in errors (``value`` or ``key``).

    Raises
    ------
    ConfigurationError
        For a schema or a field without a Spark type (see the module's table), naming the
        field's path (``address.lines[]``: items of the array ``lines`` in record ``address``).
    """
    if isinstance(schema, str) and schema.strip()[:1] in ("{", "[", '"'):
        try:
            schema = json.loads(schema)  # else a bare type name such as string
        except ValueError as exc:
            raise ConfigurationError(f"the {where} schema is not valid JSON: {exc}") from None
    return _Walker(where).walk(schema, "", "")


def json_schema_types(schema: str | dict[str, Any], where: str = "value") -> ColumnType:
    """Return the Spark and Arrow types of a JSON Schema (JSON text or parsed).

    ``object`` with ``properties`` is a struct of them in their order, every field nullable
    (a property may be absent); ``object`` with only an ``additionalProperties`` schema is a
    map with string keys; ``array`` is an array of its ``items``; ``integer`` is LongType,
    ``number`` DoubleType, ``string`` StringType (``format`` is not interpreted), ``boolean``
    BooleanType; a type list of one type and ``"null"`` is that type.

    Raises
    ------
    ConfigurationError
        For what has no single Spark type here (``oneOf``, ``anyOf``, ``allOf``, ``$ref``, a
        type list of two non-null types, an object without properties or value schema, an
        array without ``items``), naming the field.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise ConfigurationError(f"the {where} JSON schema is not valid JSON: {exc}") from None
    return _JsonWalker(where).walk(schema, "")


class _JsonWalker(_Walker):
    fix = "give a schema with one type there, or decode the records with decode_records"

    def walk(self, schema: Any, path: str) -> ColumnType:  # type: ignore[override]
        t, pa = self.t, self.pa
        if not isinstance(schema, dict):
            raise self.fail(path, f"{schema!r} is not a JSON schema object", self.fix)
        for word in ("$ref", "oneOf", "anyOf", "allOf"):
            if word in schema:
                raise self.fail(path, f"{word} has no single Spark type here", self.fix)
        kind = schema.get("type", "object" if "properties" in schema else None)
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                raise self.fail(path, f"type {kind!r} is not one type (or one and null)", self.fix)
            return self.walk({**schema, "type": others[0]}, path)._replace(nullable=True)
        simple = {"integer": (t.LongType(), pa.int64()), "number": (t.DoubleType(), pa.float64()),
                  "string": (t.StringType(), pa.string()), "boolean": (t.BooleanType(), pa.bool_()),
                  "null": (t.NullType(), pa.null())}
        if kind in simple:
            spark, arrow = simple[kind]
            return ColumnType(spark, arrow, True, None)
        if kind == "array" and isinstance(schema.get("items"), dict):
            item = self.walk(schema["items"], f"{path}[]")
            return ColumnType(t.ArrayType(item.spark, True),
                              pa.list_(pa.field("element", item.arrow, True)), True, None)
        if kind == "object" and isinstance(schema.get("properties"), dict):
            fields = [(name, self.walk(sub, f"{path}.{name}" if path else name))
                      for name, sub in schema["properties"].items()]
            return ColumnType(t.StructType([t.StructField(n, c.spark, True) for n, c in fields]),
                              pa.struct([pa.field(n, c.arrow, True) for n, c in fields]), True, None)
        if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            item = self.walk(schema["additionalProperties"], f"{path}{{}}")
            return ColumnType(t.MapType(t.StringType(), item.spark, True),
                              pa.map_(pa.string(), pa.field("value", item.arrow, True)), True, None)
        raise self.fail(path, f"type {kind!r} without properties, additionalProperties or items "
                              "has no Spark type here", self.fix)


def protobuf_types(descriptor: Any, where: str = "value") -> ColumnType:
    """Return the Spark and Arrow types of a Protobuf message ``descriptor`` (or generated class).

    As ``from_protobuf``: a message is a struct of its fields in declaration order (nullable:
    message fields, oneof members and proto3 ``optional``; other scalars always have a value),
    ``repeated`` an array, a ``map`` field a map, an enum its name (an unknown number its
    digits), ``int32``/``sint32``/``sfixed32`` IntegerType, ``uint32``/``fixed32`` and the
    signed 64-bit types LongType, ``uint64``/``fixed64`` DecimalType(20, 0) (no wrap-around),
    ``bytes`` BinaryType. Well-known types are messages like any other (``Timestamp`` is a
    struct of ``seconds`` and ``nanos``).

    Raises
    ------
    ConfigurationError
        For a message that contains itself, naming the field.
    """
    return _ProtoWalker(where).message(getattr(descriptor, "DESCRIPTOR", descriptor), "")


def _map_converter(keys: Converter | None, values: Converter | None) -> Converter | None:
    if keys is None and values is None:
        return None
    key_fix: Converter = keys or (lambda k: k)
    value_fix: Converter = values or (lambda x: x)
    return lambda v: {key_fix(k): None if x is None else value_fix(x) for k, x in v.items()}


def _enum_name(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


class _ProtoWalker(_Walker):
    def message(self, descriptor: Any, path: str) -> ColumnType:
        if descriptor.full_name in self.expanding:
            raise self.fail(path, f"message {descriptor.full_name} contains itself (a recursive "
                                  "type has no finite Spark type)", "decode the records with decode_records")
        self.expanding.add(descriptor.full_name)
        try:
            fields = [(f.name, self.field(f, f"{path}.{f.name}" if path else f.name))
                      for f in descriptor.fields]
        finally:
            self.expanding.discard(descriptor.full_name)
        return self.struct(fields, True)

    def field(self, field: Any, path: str) -> ColumnType:
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            key = self.single(entry.fields_by_name["key"], path)
            item = self.single(entry.fields_by_name["value"], f"{path}{{}}")
            return ColumnType(self.t.MapType(key.spark, item.spark, item.nullable),
                              self.pa.map_(key.arrow, self.pa.field("value", item.arrow, item.nullable)),
                              False, _map_converter(key.convert, item.convert))
        one = self.single(field, path)
        flag = getattr(field, "is_repeated", None)
        if not (bool(flag) if flag is not None else field.label == field.LABEL_REPEATED):
            nullable = one.nullable or field.containing_oneof is not None
            return one._replace(nullable=nullable)
        each = one.convert
        return ColumnType(self.t.ArrayType(one.spark, False),
                          self.pa.list_(self.pa.field("element", one.arrow, False)), False,
                          None if each is None else lambda v: [each(x) for x in v])

    def single(self, field: Any, path: str) -> ColumnType:
        import decimal

        t, pa = self.t, self.pa
        if field.message_type is not None:
            return self.message(field.message_type, path)
        if field.enum_type is not None:
            return ColumnType(t.StringType(), pa.string(), False, _enum_name)
        kind = field.type
        by_type = {
            1: (t.DoubleType(), pa.float64(), None), 2: (t.FloatType(), pa.float32(), None),
            3: (t.LongType(), pa.int64(), None), 4: (t.DecimalType(20, 0), pa.decimal128(20, 0), decimal.Decimal),
            5: (t.IntegerType(), pa.int32(), None), 6: (t.DecimalType(20, 0), pa.decimal128(20, 0), decimal.Decimal),
            7: (t.LongType(), pa.int64(), None), 8: (t.BooleanType(), pa.bool_(), None),
            9: (t.StringType(), pa.string(), None), 12: (t.BinaryType(), pa.binary(), None),
            13: (t.LongType(), pa.int64(), None), 15: (t.IntegerType(), pa.int32(), None),
            16: (t.LongType(), pa.int64(), None), 17: (t.IntegerType(), pa.int32(), None),
            18: (t.LongType(), pa.int64(), None),
        }  # FieldDescriptor.TYPE_* numbers (descriptor.proto): stable wire-level constants
        if kind not in by_type:
            raise self.fail(path, f"protobuf field type {kind} has no Spark type here",
                            "decode the records with decode_records")
        spark, arrow, convert = by_type[kind]
        return ColumnType(spark, arrow, False, convert)

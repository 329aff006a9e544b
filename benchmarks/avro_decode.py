"""``python -m benchmarks.avro_decode``: Avro decode rate, dstream_kafka.formats vs Spark's from_avro.

One fixed record schema, ``--records`` values written once in the registry wire format (the
5-byte prefix, then the Avro body) and held in memory, in ``--partitions`` Spark partitions
on ``local[2]``. Three contenders decode the same values, alternating, ``--rounds`` times each
(round 0 is a warm-up and is not reported):

* ``decode_records``: ``decode_records(rdd, value=AvroDecoder(registry))`` over ConsumerRecord
  tuples, counted; each Python worker fetches the writer schema by id once from the registry;
* ``decode_frame``: ``decode_frame(df, value=AvroDecoder(registry, reader_schema=SCHEMA))``
  over a DataFrame of the same values (a ``value`` binary column), the struct's fields selected
  and written to the ``noop`` sink as for ``from_avro``: the DataFrame path, Arrow-built;
* ``from_avro``: Spark's ``from_avro`` (the ``spark-avro`` jar from Maven Central) with the same
  schema as a fixed JSON string, after cutting the 5-byte prefix it cannot read; its struct's
  fields are selected and written to the ``noop`` sink, so every value is decoded.

The registry here is a one-schema HTTP stand-in on 127.0.0.1 serving the Confluent API's
``/schemas/ids/<id>``: the lookup happens once per worker, outside the per-record cost that is
measured. The published run is
``python -m benchmarks.avro_decode --records 2000000 --partitions 4 --rounds 4``.
"""

from __future__ import annotations

import argparse
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "country", "type": ["null", "string"], "default": None}]}
SCHEMA_ID = 7
SPARK_AVRO = ("org.apache.spark:spark-avro_2.13:4.2.0",)


def _values(n: int) -> list[bytes]:
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)
    prefix = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    out = []
    for i in range(n):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, {
            "id": i, "user": f"user-{i % 1000}", "amount": i * 0.25, "tags": ["a", "b"][: i % 3],
            "country": None if i % 4 else "NO"})
        out.append(prefix + buffer.getvalue())
    return out


def _serve_schema() -> ThreadingHTTPServer:
    body = json.dumps({"schema": json.dumps(SCHEMA), "schemaType": "AVRO"}).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        def do_GET(self) -> None:
            found = self.path.split("?")[0] == f"/schemas/ids/{SCHEMA_ID}"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            payload = body if found else b'{"error_code": 40403, "message": "Schema not found"}'
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _time(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.avro_decode", description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per contender, the first a warm-up")
    args = parser.parse_args(argv)
    load_before = Path("/proc/loadavg").read_text().split()[:3]

    import fastavro
    import pyspark

    from pyspark.sql import SparkSession
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import expr

    from benchmarks.jars import resolve_jars
    from benchmarks.publish import git_commit
    from dstream_kafka.formats import AvroDecoder, RegistrySettings, decode_frame, decode_records
    from dstream_kafka.record import ConsumerRecord
    from dstream_kafka.spark_settings import local_spark_conf

    jars = resolve_jars("spark-avro", SPARK_AVRO)
    conf = local_spark_conf("local[2]", "avro-decode-bench", extra={"spark.jars": ",".join(map(str, jars))})
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    sc = spark.sparkContext
    server = _serve_schema()
    registry = RegistrySettings(f"http://127.0.0.1:{server.server_address[1]}")
    values = _values(args.records)
    records = sc.parallelize([ConsumerRecord("bench", 0, i, -1, -1, None, v) for i, v in enumerate(values)],
                             args.partitions).cache()
    frame = spark.createDataFrame([(v,) for v in values], "value binary").repartition(args.partitions).cache()
    records.count()
    frame.count()
    decoder = AvroDecoder(registry)
    contenders = {
        "decode_records": lambda: decode_records(records, value=decoder).rdd.count(),
        "decode_frame": lambda: decode_frame(frame, value=AvroDecoder(registry, reader_schema=SCHEMA))
        .df.select("value.*").write.format("noop").mode("overwrite").save(),
        "from_avro": lambda: frame.select(from_avro(expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("v"))
        .select("v.*").write.format("noop").mode("overwrite").save(),
    }
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for round_no in range(args.rounds):
        for name, action in contenders.items():
            seconds = _time(action)
            if round_no > 0 or args.rounds == 1:
                rates[name].append(args.records / seconds)
    medians = {name: sorted(measured)[len(measured) // 2] for name, measured in rates.items()}
    print(f"| contender | records | partitions | records/s (median of {max(args.rounds - 1, 1)}) "
          "| x from_avro |")
    print("|---|---|---|---|---|")
    for name, median in medians.items():
        print(f"| {name} | {args.records} | {args.partitions} | {median:,.0f} | "
              f"{median / medians['from_avro']:.2f} |")
    print(f"commit {git_commit()}; pyspark {pyspark.__version__}, fastavro {fastavro.__version__}; "
          f"loadavg before {load_before}, after {Path('/proc/loadavg').read_text().split()[:3]}")
    server.shutdown()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""decode_frame on a Spark Connect session: the tests' Connect server and real registry.

The client runs in a child process (as in test_frame_spark_connect.py: a Connect session in the suite's
process could switch PySpark to Connect mode for the shared classic SparkContext).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.support.connect import ROOT, connect_env

pytestmark = pytest.mark.integration

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

ITEM = {"type": "record", "name": "Item", "fields": [
    {"name": "sku", "type": "string"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}

CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from dstream_kafka import KafkaUtils, OffsetRange
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.formats import RegistrySettings, decode_frame, subject_decoder

bootstrap, registry_url, topic = sys.argv[1:4]
spark = SparkSession.builder.getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
df = KafkaUtils.createDataFrame(spark, {"bootstrap.servers": bootstrap, "group.id": topic},
                                [OffsetRange(topic, 0, 0, 3)])
decoded = decode_frame(df, value=subject_decoder(RegistrySettings(registry_url), topic + "-value"),
                       on_error="skip")
rows = decoded.df.orderBy("offset").collect()
try:
    decoded.skipped()
    refused = "no error"
except ConfigurationError as exc:
    refused = str(exc)
print(json.dumps({"rows": [[r.offset, r.value.sku, list(r.value.tags)] for r in rows],
                  "type": decoded.df.schema["value"].dataType.simpleString(), "skipped": refused}))
"""


def test_decode_frame_on_connect_builds_the_column_and_skips_without_an_accumulator(
        kafka, connect_server, schema_registry, unique):
    topic = unique("srdfc")
    kafka.create_topic(topic)
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry.url}), json.dumps(ITEM))
    context = SerializationContext(topic, MessageField.VALUE)
    kafka.produce(topic, [serialize({"sku": "a", "tags": ["x"]}, context), b"not avro",
                          serialize({"sku": "b", "tags": []}, context)], partition=0)

    out = subprocess.run([sys.executable, "-c", CLIENT, kafka.bootstrap_servers, schema_registry.url,
                          topic], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=connect_env(connect_server))

    assert out.returncode == 0, out.stderr[-4000:] + "\nserver log:\n" + connect_server.log_tail()
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["type"] == "struct<sku:string,tags:array<string>>"
    assert result["rows"] == [[0, "a", ["x"]], [2, "b", []]]
    assert "Spark Connect has no accumulators" in result["skipped"]

"""The curated public surface: pinned, importable, and light to import."""

from __future__ import annotations

import subprocess
import sys

import dstream_kafka

PINNED = [
    "BatchInfo", "BatchProgress", "CanCommitOffsets", "ConsumerRecord", "ConsumerStrategies",
    "ConsumerStrategy", "DStream", "DStreamKafkaError", "DirectKafkaInputDStream", "EARLIEST",
    "HasOffsetRanges", "KafkaOutput", "KafkaRDD", "KafkaUtils", "LATEST", "LocationStrategies", "LocationStrategy",
    "OffsetRange", "OffsetStore", "OffsetStores", "PerPartitionConfig", "PreferBrokers",
    "PreferConsistent", "PreferFixed", "StreamingContext", "StreamingListener", "TopicPartition",
    "__version__", "errors",
]


def test_all_lists_exactly_the_pinned_public_names():
    assert sorted(dstream_kafka.__all__) == sorted(PINNED)


def test_every_public_name_resolves():
    for name in dstream_kafka.__all__:
        assert getattr(dstream_kafka, name) is not None, name


def test_unknown_attributes_raise_attribute_error():
    try:
        dstream_kafka.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_importing_the_package_does_not_import_pyspark():
    code = "import sys, dstream_kafka; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_exception_derives_from_the_single_root():
    from dstream_kafka import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), dstream_kafka.DStreamKafkaError), name

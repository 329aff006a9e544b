"""dstream_kafka: Kafka direct streams for PySpark on RDDs, with precise offset control.

The public surface is re-exported here; everything else is internal. Names ported from Spark
keep Spark's spelling (``KafkaUtils.createRDD``, ``OffsetRange``, ``LocationStrategies``).

Attributes load on first use, so ``import dstream_kafka`` (and the ``dstream-kafka`` command)
does not start importing PySpark until a Spark-facing name is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dstream_kafka import _moved, errors as errors
from dstream_kafka.errors import DStreamKafkaError as DStreamKafkaError

_moved.install()

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # offsets and records
    "TopicPartition": "dstream_kafka.offsets",
    "OffsetRange": "dstream_kafka.offsets",
    "HasOffsetRanges": "dstream_kafka.offsets",
    "CanCommitOffsets": "dstream_kafka.offsets",
    "EARLIEST": "dstream_kafka.offsets",
    "LATEST": "dstream_kafka.offsets",
    "ConsumerRecord": "dstream_kafka.record",
    # reading
    "KafkaUtils": "dstream_kafka.kafka_utils",
    "KafkaRDD": "dstream_kafka.read.kafka_rdd",
    "LocationStrategies": "dstream_kafka.read.placement",
    "LocationStrategy": "dstream_kafka.read.placement",
    "PreferConsistent": "dstream_kafka.read.placement",
    "PreferBrokers": "dstream_kafka.read.placement",
    "PreferFixed": "dstream_kafka.read.placement",
    "ConsumerStrategies": "dstream_kafka.plan.consumer_strategy",
    "ConsumerStrategy": "dstream_kafka.plan.consumer_strategy",
    "PerPartitionConfig": "dstream_kafka.plan.rate",
    # streaming
    "StreamingContext": "dstream_kafka.streaming",
    "DStream": "dstream_kafka.streaming",
    "StreamingListener": "dstream_kafka.streaming",
    "BatchInfo": "dstream_kafka.streaming",
    "DirectKafkaInputDStream": "dstream_kafka.plan.direct_stream",
    "BatchProgress": "dstream_kafka.plan.progress",
    # offset stores
    "OffsetStore": "dstream_kafka.stores",
    "OffsetStores": "dstream_kafka.stores",
    # writing
    "KafkaOutput": "dstream_kafka.write",
}

__all__ = sorted([*_EXPORTS, "DStreamKafkaError", "errors", "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dstream_kafka' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    # `import X as X` marks an explicit re-export, so users' code passes mypy --strict.
    from dstream_kafka.plan.consumer_strategy import (
        ConsumerStrategies as ConsumerStrategies,
        ConsumerStrategy as ConsumerStrategy,
    )
    from dstream_kafka.plan.direct_stream import (
        DirectKafkaInputDStream as DirectKafkaInputDStream,
    )
    from dstream_kafka.plan.progress import BatchProgress as BatchProgress
    from dstream_kafka.read.kafka_rdd import KafkaRDD as KafkaRDD
    from dstream_kafka.kafka_utils import KafkaUtils as KafkaUtils
    from dstream_kafka.offsets import (
        CanCommitOffsets as CanCommitOffsets,
        EARLIEST as EARLIEST,
        HasOffsetRanges as HasOffsetRanges,
        LATEST as LATEST,
        OffsetRange as OffsetRange,
        TopicPartition as TopicPartition,
    )
    from dstream_kafka.read.placement import (
        LocationStrategies as LocationStrategies,
        LocationStrategy as LocationStrategy,
        PreferBrokers as PreferBrokers,
        PreferConsistent as PreferConsistent,
        PreferFixed as PreferFixed,
    )
    from dstream_kafka.plan.rate import PerPartitionConfig as PerPartitionConfig
    from dstream_kafka.record import ConsumerRecord as ConsumerRecord
    from dstream_kafka.stores import (
        OffsetStore as OffsetStore,
        OffsetStores as OffsetStores,
    )
    from dstream_kafka.streaming import (
        BatchInfo as BatchInfo,
        DStream as DStream,
        StreamingContext as StreamingContext,
        StreamingListener as StreamingListener,
    )
    from dstream_kafka.write import KafkaOutput as KafkaOutput

"""Where records are written: the Kafka output, at least once or exactly once.

:class:`~dstream_kafka.write.output.KafkaOutput` writes a stream's batches
(``output.writeStream(stream)``, or ``stream.foreachRDD(output)`` at least once) and RDDs
(``output.write(rdd)``). Its producer settings are translated and checked once, on the
driver (:mod:`dstream_kafka.write.settings`); executors run
:mod:`dstream_kafka.write.task` through one producer interface for both client libraries
(:mod:`dstream_kafka.write.producers`), kept per Python worker across batches
(:mod:`dstream_kafka.write.producer_cache`). The guide is ``docs/guide/kafka-output.rst``.
"""

from dstream_kafka.write.output import KafkaOutput
from dstream_kafka.write.settings import AT_LEAST_ONCE, EXACTLY_ONCE, OutputSettings

__all__ = ["AT_LEAST_ONCE", "EXACTLY_ONCE", "KafkaOutput", "OutputSettings"]

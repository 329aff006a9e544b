"""The read settings of a Kafka RDD's tasks, read on the driver from the SparkConf (executors
have none) and shipped with every task as a :class:`~dstream_kafka.read.task.ReadSettings`.

Its own module so that every driver-side builder of Kafka reads (:mod:`dstream_kafka.read.kafka_rdd`,
:mod:`dstream_kafka.sql.frame`, the direct stream) takes them from one place without importing
one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dstream_kafka._spark_internals import live_conf
from dstream_kafka.client.configs import ClientConfigs, params_fingerprint
from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.read.backends import CONFLUENT, check_backend
from dstream_kafka.read.consumer_cache import CacheSettings
from dstream_kafka.read.task import ReadSettings

__all__ = ["read_settings"]


def read_settings(
    sc: Any,
    executor_params: Mapping[str, Any] | ClientConfigs,
    use_cache: bool | None = None,
    poll_timeout_ms: int | None = None,
    stream: bool = False,
) -> ReadSettings:
    """Read the executor settings on the driver (workers have no SparkConf).

    ``sc`` is a SparkContext (its live SparkConf is read) or the conf object itself: a
    direct stream passes the conf it reads its own settings from, so one stream reads one
    conf. ``use_cache=None`` takes ``spark.streaming.kafka.consumer.cache.enabled``;
    ``poll_timeout_ms=None`` takes ``spark.streaming.kafka.consumer.poll.ms`` (else
    ``spark.network.timeout``). ``stream`` marks a direct stream's RDDs, whose tasks
    pre-position cached confluent-kafka consumers unless
    ``spark.streaming.kafka.consumer.cache.prePosition`` is false. The consumer backend
    (``spark.streaming.kafka.consumer.backend``) is checked here, on the driver: selecting
    confluent-kafka without the package raises
    :class:`~dstream_kafka.errors.MissingDependencyError` before any job runs. Given
    ClientConfigs, their fingerprint and translations are used, not made again.
    """
    conf = SparkConfReader(live_conf(sc))
    backend = conf.consumer_backend
    librdkafka = check_backend(backend, executor_params)
    executor: Mapping[str, Any]
    if isinstance(executor_params, ClientConfigs):
        executor, fingerprint = executor_params.executor, executor_params.fingerprint
    else:
        executor, fingerprint = executor_params, params_fingerprint(executor_params)
    cache = CacheSettings(
        conf.cache_initial_capacity, conf.cache_max_capacity, conf.cache_load_factor
    ).validated()
    if poll_timeout_ms is not None and (
        isinstance(poll_timeout_ms, bool)
        or not isinstance(poll_timeout_ms, int)
        or poll_timeout_ms < 0
    ):
        raise ConfigurationError(
            f"pollTimeoutMs must be a whole number >= 0, got {poll_timeout_ms!r}"
        )
    return ReadSettings(
        groupId=str(executor.get("group_id")),
        pollTimeoutMs=conf.poll_timeout_ms if poll_timeout_ms is None else poll_timeout_ms,
        strict=not conf.allow_non_consecutive_offsets,
        useCache=conf.consumer_cache_enabled if use_cache is None else bool(use_cache),
        cache=cache,
        fingerprint=fingerprint,
        backend=backend,
        # kafka-python fetches only inside a read: moving its consumers ahead saves nothing.
        prePosition=stream and backend == CONFLUENT and conf.consumer_cache_pre_position,
        outageMs=((conf.max_retries + 1) * conf.lookup_timeout_ms
                  + conf.max_retries * conf.retry_backoff_ms) if stream else 0,
        librdkafka=librdkafka,
    )

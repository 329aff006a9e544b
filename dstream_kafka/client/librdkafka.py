"""Kafka client settings in librdkafka's names, for the confluent-kafka backends.

The one translation of kafka-python keyword arguments (what
:func:`~dstream_kafka.client.kafka_params.consumer_config` and
:func:`~dstream_kafka.client.kafka_params.producer_config` make of ``kafkaParams``) into
librdkafka properties: :func:`librdkafka_config` for the executor consumer
(:mod:`dstream_kafka.read.backends.confluent`; the driver's translation is kept in
:attr:`~dstream_kafka.client.configs.ClientConfigs.librdkafka`) and
:func:`librdkafka_producer_config` for the Kafka output's producer
(:class:`~dstream_kafka.write.settings.OutputSettings`). Both are pure: no client is created
and ``confluent_kafka`` is imported only by :func:`require_confluent`. Secret values are never
quoted in an error or a log line.

The consumer translation keeps the kafka-python backend's semantics:

* ``auto.offset.reset=error`` (Spark's ``none``): an offset outside the log is an error,
  never a silent jump;
* ``isolation.level`` defaults to ``read_uncommitted`` as in Java and kafka-python
  (librdkafka's own default is ``read_committed``);
* ``enable.partition.eof``: the end-of-partition event carries the offset the fetcher reached
  (the high watermark, or the last stable offset under ``read_committed``), past trailing
  transaction markers and aborted records, so a gap-skipping range that ends inside such a gap
  finishes at once;
* a cached consumer stays cheap while idle and after a seek: ``fetch.queue.backoff.ms`` is
  :data:`FETCH_QUEUE_BACKOFF_MS` (librdkafka's 1000 ms made the first fetch after a seek wait
  up to a second whenever the idle consumer's prefetch queue had filled, as it does on a
  multi-core executor where a partition's next task lands on another Python worker) and the
  prefetch queue holds at most :data:`PREFETCH_FETCHES` partition fetches
  (``queued.max.messages.kbytes``; librdkafka's 64 MiB per partition would be held by every
  idle cached consumer).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dstream_kafka.client.kafka_params import show_value
from dstream_kafka.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "FETCH_QUEUE_BACKOFF_MS",
    "INSTALL_HINT",
    "PREFETCH_FETCHES",
    "librdkafka_config",
    "librdkafka_producer_config",
    "require_confluent",
]

# The backend's logger: the "no librdkafka equivalent" warnings have always been logged under it.
log = logging.getLogger("dstream_kafka.read.backends.confluent")

INSTALL_HINT = "pip install dstream_kafka[fast]"
#: ``fetch.queue.backoff.ms``: how long a full prefetch queue postpones the next fetch. 0 makes
#: an idle consumer's fetcher spin (about one core); 10 ms costs nothing measurable idle.
FETCH_QUEUE_BACKOFF_MS = 10
#: The prefetch queue holds this many ``max.partition.fetch.bytes`` (default 1 MiB) fetches.
PREFETCH_FETCHES = 4
#: kafka-python's (and Java's) ``max.partition.fetch.bytes`` default.
_PARTITION_FETCH_BYTES = 1048576

# kafka-python keyword -> librdkafka property, values passed as they are.
_SAME = {
    "client_id": "client.id",
    "client_rack": "client.rack",
    "group_id": "group.id",
    "fetch_min_bytes": "fetch.min.bytes",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "fetch_max_bytes": "fetch.max.bytes",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
    "receive_message_max_bytes": "receive.message.max.bytes",
    "request_timeout_ms": "socket.timeout.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "check_crcs": "check.crcs",
    "isolation_level": "isolation.level",
    "allow_auto_create_topics": "allow.auto.create.topics",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "client_dns_lookup": "client.dns.lookup",
    "receive_buffer_bytes": "socket.receive.buffer.bytes",
    "send_buffer_bytes": "socket.send.buffer.bytes",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "sasl_kerberos_name": "sasl.kerberos.principal",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
}
# Handled apart: forced by the executor rules, applied in Python, or translated below.
_HANDLED = frozenset(
    {
        "bootstrap_servers",
        "enable_auto_commit",
        "auto_offset_reset",
        "key_deserializer",
        "value_deserializer",
        "max_poll_records",
        "security_protocol",
        "ssl_check_hostname",
    }
)
# Settings for group membership, commits or kafka-python internals: meaningless for a
# consumer that is assigned one partition and never commits, so dropped without a word.
_IRRELEVANT = frozenset(
    {
        "group_instance_id",
        "auto_commit_interval_ms",
        "default_offset_commit_callback",
        "partition_assignment_strategy",
        "max_poll_interval_ms",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "consumer_timeout_ms",
        "exclude_internal_topics",
        "enable_incremental_fetch_sessions",
        "metric_reporters",
        "metrics_enabled",
        "metrics_num_samples",
        "metrics_sample_window_ms",
        "metric_group_prefix",
    }
)
# Settings that would silently weaken security or change the route: refused with a reason.
_REFUSED = {
    "ssl_context": "an ssl.SSLContext cannot be given to librdkafka; pass ssl_cafile, "
    "ssl_certfile and ssl_keyfile (PEM files)",
    "sasl_oauth_token_provider": "a kafka-python token provider object cannot be used by "
    "librdkafka; use the kafka-python backend",
    "proxy_url": "librdkafka does not connect through proxies; use the kafka-python backend",
    "socks5_proxy": "librdkafka does not connect through proxies; use the kafka-python backend",
}
# Parameter names already warned about as having no librdkafka equivalent.
_warned: set[str] = set()


def require_confluent() -> Any:
    """Import and return ``confluent_kafka``, or raise :class:`MissingDependencyError`."""
    try:
        import confluent_kafka
    except ImportError as exc:
        raise MissingDependencyError(
            "spark.streaming.kafka.consumer.backend=confluent-kafka needs the confluent-kafka "
            f"package: {INSTALL_HINT} (or set the backend back to kafka-python)"
        ) from exc
    return confluent_kafka


def librdkafka_config(params: Mapping[str, Any]) -> dict[str, Any]:
    """Translate executor parameters (kafka-python names) into librdkafka properties.

    Executor rules are applied whatever the input says: ``enable.auto.commit=false``,
    ``enable.auto.offset.store=false``, ``auto.offset.reset=error`` (Spark's ``none``) and
    ``enable.partition.eof=true``; ``isolation.level`` defaults to ``read_uncommitted``.
    Settings without a librdkafka equivalent are dropped with a warning naming the key (never
    the value); group and commit settings are dropped silently. Pure: no client is created.

    Raises
    ------
    ConfigurationError
        For settings that cannot be honoured (an ``ssl_context`` object, token providers,
        proxies) or badly typed values. Secret values are never quoted.
    """
    out: dict[str, Any] = {}
    for name, value in params.items():
        if name in _REFUSED:
            if value is None:
                continue
            raise ConfigurationError(
                f"Kafka parameter {name} is not supported by the confluent-kafka backend: "
                f"{_REFUSED[name]}"
            )
        if name in _HANDLED or name in _IRRELEVANT or value is None:
            continue
        target = _SAME.get(name)
        if target is None:
            if name not in _warned:  # once per process: the driver translates every batch
                _warned.add(name)
                log.warning(
                    "Ignoring Kafka parameter %s for the confluent-kafka backend: it has no "
                    "librdkafka equivalent",
                    name,
                )
            continue
        if not isinstance(value, (str, int, float, bool)):
            raise ConfigurationError(
                f"Kafka parameter {name} must be a string, number or boolean for the "
                f"confluent-kafka backend, got {type(value).__name__} {show_value(name, value)}"
            )
        out[target] = value
    servers = params.get("bootstrap_servers")
    if isinstance(servers, (list, tuple)):
        servers = ",".join(str(s) for s in servers)
    if not servers:
        raise ConfigurationError("kafkaParams must set bootstrap.servers")
    out["bootstrap.servers"] = str(servers)
    protocol = params.get("security_protocol")
    if protocol is not None:
        out["security.protocol"] = str(protocol).lower()
    check_hostname = params.get("ssl_check_hostname")
    if check_hostname is not None:
        out["ssl.endpoint.identification.algorithm"] = "https" if check_hostname else "none"
    out.setdefault("isolation.level", "read_uncommitted")
    fetch_bytes = int(params.get("max_partition_fetch_bytes") or _PARTITION_FETCH_BYTES)
    out["fetch.queue.backoff.ms"] = FETCH_QUEUE_BACKOFF_MS
    out["queued.max.messages.kbytes"] = max(1, PREFETCH_FETCHES * fetch_bytes // 1024)
    if "group.id" not in out:
        # fix_kafka_params always sets one; librdkafka's consumer requires it.
        out["group.id"] = "spark-executor-None"
    out.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
    )
    return out



# kafka-python producer settings that librdkafka names differently (the rest of the client
# settings translate as the consumer's do).
_PRODUCER_NAMES = {
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "compression_type": "compression.type",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "max_request_size": "message.max.bytes",
    "transaction_timeout_ms": "transaction.timeout.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
}
# librdkafka consumer-only properties the shared translation adds; a producer refuses them.
_CONSUMER_ONLY = ("group.id", "isolation.level", "fetch.queue.backoff.ms",
                  "queued.max.messages.kbytes", "enable.auto.commit", "enable.auto.offset.store",
                  "auto.offset.reset", "enable.partition.eof", "check.crcs",
                  "allow.auto.create.topics")

def librdkafka_producer_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Translate kafka-python producer settings ``config`` into librdkafka properties.

    Client settings (servers, security, timeouts) translate as the consumer backend's do;
    producer settings by :data:`_PRODUCER_NAMES`; ``partitioner`` is ``murmur2_random``, so
    a keyed record lands on the partition Java and kafka-python choose.

    Raises
    ------
    ConfigurationError
        As :func:`librdkafka_config`.
    MissingDependencyError
        Without the confluent-kafka package.
    """
    require_confluent()
    producer_only = {k: v for k, v in config.items() if k in _PRODUCER_NAMES}
    client = {k: v for k, v in config.items()
              if k not in _PRODUCER_NAMES and k not in ("acks", "enable_idempotence")}
    out = {k: v for k, v in librdkafka_config(client).items() if k not in _CONSUMER_ONLY}
    for name, value in producer_only.items():
        if value is not None:
            out[_PRODUCER_NAMES[name]] = value
    out.update({"acks": "all", "enable.idempotence": True, "partitioner": "murmur2_random"})
    return out

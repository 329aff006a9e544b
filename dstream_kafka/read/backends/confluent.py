"""The confluent-kafka backend (``pip install dstream_kafka[fast]``): librdkafka underneath.

Selected with ``spark.streaming.kafka.consumer.backend=confluent-kafka``. The executor
parameters (kafka-python keyword names, from
:func:`~dstream_kafka.client.kafka_params.fix_kafka_params`) are translated to librdkafka settings
by :func:`librdkafka_config`; the driver translates them once before any job, so a setting
the backend cannot honour fails there. Reads keep the kafka-python backend's semantics:

* ``auto.offset.reset=error`` (Spark's ``none``): an offset outside the log is an error,
  never a silent jump;
* ``isolation.level`` defaults to ``read_uncommitted`` as in Java and kafka-python
  (librdkafka's own default is ``read_committed``);
* ``enable.partition.eof``: the end-of-partition event carries the offset the fetcher reached
  (the high watermark, or the last stable offset under ``read_committed``), past trailing
  transaction markers and aborted records, so a gap-skipping range that ends inside such a gap
  finishes at once;
* key and value deserializers are the same Python callables, applied to the raw bytes;
* a cached consumer stays cheap while idle and after a seek: ``fetch.queue.backoff.ms`` is
  :data:`FETCH_QUEUE_BACKOFF_MS` (librdkafka's 1000 ms made the first fetch after a seek wait
  up to a second whenever the idle consumer's prefetch queue had filled, as it does on a
  multi-core executor where a partition's next task lands on another Python worker) and the
  prefetch queue holds at most :data:`PREFETCH_FETCHES` partition fetches
  (``queued.max.messages.kbytes``; librdkafka's 64 MiB per partition would be held by every
  idle cached consumer).

This module imports ``confluent_kafka`` only when a client is created.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

from dstream_kafka.read.backends.base import LIBRDKAFKA_KEY, OffsetOutOfRange, record_decoder
from dstream_kafka.errors import (
    ConfigurationError,
    KafkaAuthenticationError,
    KafkaReadError,
    MissingDependencyError,
)
from dstream_kafka.client.kafka_params import show_value
from dstream_kafka.record import ConsumerRecord

__all__ = ["ConfluentBackend", "librdkafka_config", "require_confluent"]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install dstream_kafka[fast]"
#: Records taken from librdkafka's queue per call (``max.poll.records`` overrides it).
DEFAULT_BATCH = 10000
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
# librdkafka timestamp type -> Kafka's code (-1 none, 0 CreateTime, 1 LogAppendTime).
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}


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


def _shown(name: str, value: Any) -> str:
    return show_value(name, value)


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
                f"confluent-kafka backend, got {type(value).__name__} {_shown(name, value)}"
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


class ConfluentBackend:
    """A ``confluent_kafka.Consumer`` reading one partition through ``assign``/``consume``.

    The fetch position is tracked here: the offset after the last record delivered, raised
    by end-of-partition events (they report where the fetcher stopped, past control and
    aborted records) and set by each seek.
    """

    def __init__(self, topic: str, partition: int, config: Mapping[str, Any]) -> None:
        ck = require_confluent()
        self._ck = ck
        self.topic = topic
        self.partition = partition
        # The driver's translation when it shipped one (a dict of its own: callbacks go in).
        given = config.get(LIBRDKAFKA_KEY)
        conf = librdkafka_config(config) if given is None else dict(given)
        conf["logger"] = logging.getLogger("dstream_kafka.read.backends.librdkafka")
        # librdkafka retries a refused login for ever; the first refusal fails the read.
        self._auth_error: str | None = None
        conf["error_cb"] = self._on_client_error
        self._batch = int(config.get("max_poll_records") or DEFAULT_BATCH)
        self._key = record_decoder(config.get("key_deserializer"), "key", topic, partition)
        self._value = record_decoder(config.get("value_deserializer"), "value", topic, partition)
        self._consumer = ck.Consumer(conf)
        self.offset_of = ck.Message.offset
        self._error_of = ck.Message.error
        self._assigned = False
        self._position = -1
        self._floor = 0
        self._eof = ck.KafkaError._PARTITION_EOF
        self._out_of_range = (ck.KafkaError._AUTO_OFFSET_RESET, ck.KafkaError.OFFSET_OUT_OF_RANGE)

    def seek(self, offset: int) -> None:
        tp = self._ck.TopicPartition(self.topic, self.partition, offset)
        if self._assigned:
            try:
                self._consumer.seek(tp)
            except self._ck.KafkaException:
                # Not fetching yet ("Erroneous state"): the start offset goes in assign.
                self._consumer.assign([tp])
        else:
            # The start offset is given in assign: a seek right after assign can fail.
            self._consumer.assign([tp])
            self._assigned = True
        self._position = offset
        self._floor = offset

    def _on_client_error(self, error: Any) -> None:
        if error.code() == self._ck.KafkaError._AUTHENTICATION and self._auth_error is None:
            self._auth_error = str(error.str())

    def _raise_auth_error(self) -> None:
        if self._auth_error is not None:
            raise KafkaAuthenticationError(
                f"confluent-kafka consumer for {self.topic}-{self.partition}: the brokers refused "
                f"the SASL login ({self._auth_error}); check the user name and password in "
                "sasl.jaas.config")

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        self._raise_auth_error()
        consumer = self._consumer
        batch = self._batch if max_records is None else min(max_records, self._batch)
        # consume(n, timeout) waits until n messages or the timeout: take what is queued, and
        # only when nothing is, wait for one message and then take what followed it.
        messages = consumer.consume(batch, 0)
        if not messages and timeout_ms > 0:
            messages = consumer.consume(1, timeout_ms / 1000)
            if messages and messages[0].error() is None and batch > 1:
                messages.extend(consumer.consume(batch - 1, 0))
        if not messages:
            self._raise_auth_error()
            return []
        # Usually every message is a record at or past the last seek: checked in C, kept as is.
        if any(map(self._error_of, messages)) or messages[0].offset() < self._floor:
            messages = self._records_only(messages)
        if messages:
            self._position = max(self._position, messages[-1].offset() + 1)
        return cast("list[Any]", messages)

    def _records_only(self, messages: list[Any]) -> list[Any]:
        floor = self._floor
        records = []
        for message in messages:
            if message.error() is not None:
                self._on_error(message)
            elif message.offset() >= floor:  # older ones were prefetched before a seek
                records.append(message)  # (librdkafka#2256): never returned
        return records

    def to_record(self, message: Any) -> ConsumerRecord:
        ts_type, timestamp = message.timestamp()
        headers = message.headers()
        key = message.key()
        value = message.value()
        if self._key is not None:
            key = self._key(key, headers, message.offset())
        if self._value is not None:
            value = self._value(value, headers, message.offset())
        return tuple.__new__(
            ConsumerRecord,
            (
                self.topic,
                self.partition,
                message.offset(),
                timestamp if ts_type else -1,
                _TIMESTAMP_TYPES[ts_type],
                key,
                value,
                tuple(headers) if headers else (),
            ),
        )

    def _on_error(self, message: Any) -> None:
        error = message.error()
        code = error.code()
        if code == self._eof:
            # The offset the fetcher reached: everything before it was delivered or skipped.
            if message.offset() is not None and message.offset() >= 0:
                self._position = max(self._position, message.offset())
            return
        if code in self._out_of_range:
            raise OffsetOutOfRange()
        if error.fatal():
            raise KafkaReadError(
                f"confluent-kafka consumer for {self.topic}-{self.partition} failed: {error.str()}"
            )
        log.warning(
            "confluent-kafka consumer for %s-%d: %s", self.topic, self.partition, error.str()
        )

    def position(self) -> int:
        return self._position

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        tp = self._ck.TopicPartition(self.topic, self.partition)
        low, high = self._consumer.get_watermark_offsets(
            tp, timeout=timeout_ms / 1000, cached=False
        )
        return (low if low >= 0 else None), (high if high >= 0 else None)

    def close(self) -> None:
        self._consumer.close()

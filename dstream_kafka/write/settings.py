"""What a Kafka output is given: its producer settings, translated and checked once.

:class:`OutputSettings` is built on the driver from the user's producer ``kafkaParams`` and
options, before any data moves, and shipped to every write task as it is (frozen). It is the
one place where producer parameters are translated: kafka-python keyword arguments
(:func:`~dstream_kafka.client.kafka_params.producer_config`, which also reads the TLS and SASL
settings) and, for the confluent-kafka backend, librdkafka properties
(:func:`~dstream_kafka.client.librdkafka.librdkafka_producer_config`). Its ``repr`` never
shows a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dstream_kafka.client.kafka_params import is_secret_key, producer_config, redact
from dstream_kafka.client.librdkafka import librdkafka_producer_config, require_confluent
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.write.records import check_topic

__all__ = ["AT_LEAST_ONCE", "BACKENDS", "EXACTLY_ONCE", "GUARANTEES", "OutputSettings",
           "transactional_id"]

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
BACKENDS = ("kafka-python", "confluent-kafka")

# Settings the guarantees depend on, whatever the user's params say.
_REQUIRED = {"acks": -1, "enable_idempotence": True}
_APP_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
_INT_MAX = 2**31 - 1
#: Java's ranges (``ProducerConfig``) of the numeric producer settings passed to the clients,
#: by kafka-python name: (minimum, maximum). kafka-python checks none of them (it took
#: linger.ms=-1); librdkafka's own, sometimes narrower, ranges are checked on the driver too
#: for the confluent-kafka backend (:func:`_check_librdkafka`).
PRODUCER_RANGES: dict[str, tuple[float, float]] = {
    "batch_size": (0, _INT_MAX),
    "delivery_timeout_ms": (0, _INT_MAX),
    "linger_ms": (0, 2**63 - 1),
    "max_block_ms": (0, 2**63 - 1),
    # at most 5 with the idempotent producer the output always is (Java's ConfigException)
    "max_in_flight_requests_per_connection": (1, 5),
    "max_request_size": (0, _INT_MAX),
    "metadata_max_age_ms": (0, 2**63 - 1),
    "metrics_num_samples": (1, _INT_MAX),
    "metrics_sample_window_ms": (0, 2**63 - 1),
    "receive_buffer_bytes": (-1, _INT_MAX),
    "reconnect_backoff_max_ms": (0, 2**63 - 1),
    "reconnect_backoff_ms": (0, 2**63 - 1),
    "request_timeout_ms": (0, _INT_MAX),
    "retries": (0, float("inf")),
    "retry_backoff_ms": (0, 2**63 - 1),
    "send_buffer_bytes": (-1, _INT_MAX),
}
#: How long a write task waits for a record's topic to appear in the metadata, by default.
DEFAULT_TOPIC_WAIT_S = 10.0


def transactional_id(application_id: str, topic: str, partition: int) -> str:
    """Return the ``transactional.id`` of the task writing input ``topic``-``partition``.

    ``<application id>-<topic>-<partition>``: stable across batches, task retries and driver
    restarts, so a new attempt's ``init_transactions`` fences every earlier one.
    """
    return f"{application_id}-{topic}-{partition}"


@dataclass(frozen=True)
class OutputSettings:
    """A Kafka output's settings, checked on the driver and shipped to write tasks.

    Build it with :meth:`of`. Attributes are read-only.

    Attributes
    ----------
    producer : dict
        kafka-python ``KafkaProducer`` keyword arguments (no serializer: records are
        serialized by the output, the same way for both backends); ``acks=all`` and
        ``enable_idempotence=True``.
    librdkafka : dict or None
        The same settings as librdkafka properties, for the confluent-kafka backend.
    topic : str or None
        The topic of records that name none.
    guarantee : str
        ``at-least-once`` or ``exactly-once``.
    backend : str
        ``kafka-python`` or ``confluent-kafka``.
    key_serializer, value_serializer : None, "str", "bytes" or callable
        How keys and values become bytes (:func:`~dstream_kafka.client.kafka_params.validate_serializer`).
    application_id : str or None
        The prefix of the transactional ids (exactly-once).
    timeout_s : float
        How long a flush or a transaction call may take before the task fails.
    cache : bool
        Whether write tasks keep their producer in the Python worker for the next task
        (``spark.streaming.kafka.producer.cache.enabled``).
    topic_wait_s : float
        How long a write task waits for a record's topic to appear in the cluster's metadata
        before it fails naming the topic (``spark.streaming.kafka.producer.topicWait.ms``).
    """

    producer: dict[str, Any]
    librdkafka: dict[str, Any] | None
    topic: str | None
    guarantee: str
    backend: str
    key_serializer: Any = None
    value_serializer: Any = None
    application_id: str | None = None
    timeout_s: float = 60.0
    cache: bool = True
    topic_wait_s: float = DEFAULT_TOPIC_WAIT_S

    @classmethod
    def of(cls, kafkaParams: Mapping[str, Any], topic: str | None, guarantee: str,
           backend: str, application_id: str | None = None) -> OutputSettings:
        """Translate and check producer ``kafkaParams`` and the output's options.

        Raises
        ------
        ConfigurationError
            For bad producer parameters (as
            :func:`~dstream_kafka.client.kafka_params.producer_config`), ``acks`` other than
            ``all`` or ``enable.idempotence=false`` (the guarantees need both), an unknown
            guarantee or backend, a topic that is not a legal Kafka topic name
            (:func:`~dstream_kafka.write.records.check_topic`), a bad application id, or a
            numeric producer setting outside Java's range (:data:`PRODUCER_RANGES`).
        MissingDependencyError
            For the confluent-kafka backend without the package.
        """
        if guarantee not in GUARANTEES:
            raise ConfigurationError(
                f"guarantee must be one of {', '.join(GUARANTEES)}, got {guarantee!r}")
        if backend not in BACKENDS:
            raise ConfigurationError(
                f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if topic is not None:
            check_topic(topic, "the Kafka output's topic")
        if application_id is not None and (not isinstance(application_id, str)
                                           or not _APP_ID.fullmatch(application_id)):
            raise ConfigurationError(
                "applicationId must be 1-200 letters, digits, '.', '_' or '-' (it prefixes "
                f"the transactional ids), got {application_id!r}")
        config = producer_config(kafkaParams)
        if not config.get("bootstrap_servers"):
            raise ConfigurationError(
                "the Kafka output's kafkaParams need bootstrap.servers, e.g. "
                "{'bootstrap.servers': 'broker1:9092'}")
        for name, needed in _REQUIRED.items():
            if name in config and config[name] != needed:
                java = name.replace("_", ".")
                raise ConfigurationError(
                    f"the Kafka output needs {java}={'all' if needed == -1 else 'true'} (an "
                    f"idempotent producer: retries write no duplicates, and transactions need "
                    f"it); remove {java} from its kafkaParams")
        _check_ranges(config)
        key_ser = config.pop("key_serializer", None)
        value_ser = config.pop("value_serializer", None)
        config.update(_REQUIRED)
        librdkafka = librdkafka_producer_config(config) if backend == "confluent-kafka" else None
        if librdkafka is not None:
            _check_librdkafka(librdkafka)
        timeout_s = max(float(config.get("transaction_timeout_ms", 60000)) / 1000.0, 10.0)
        return cls(config, librdkafka, topic, guarantee, backend, key_ser, value_ser,
                   application_id, timeout_s)

    def __repr__(self) -> str:
        return (f"OutputSettings(topic={self.topic!r}, guarantee={self.guarantee!r}, "
                f"backend={self.backend!r}, application_id={self.application_id!r}, "
                f"producer={redact(self.producer)!r})")


def _check_ranges(config: Mapping[str, Any]) -> None:
    """Refuse numeric producer settings outside Java's range, naming the Java key and the
    range; the value itself is described, not quoted (it could be a misplaced secret)."""
    for name, (low, high) in PRODUCER_RANGES.items():
        value = config.get(name)
        if value is None or low <= value <= high:
            continue
        java = name.replace("_", ".")
        where = f"below its minimum {low}" if value < low else f"above its maximum {high}"
        if name == "max_in_flight_requests_per_connection" and value > high:
            where += " (the output's producer is idempotent, which allows at most 5)"
        upper = "" if high in (float("inf"), 2**63 - 1) else f" to {high}"
        raise ConfigurationError(
            f"Kafka parameter {java} is {where}: it takes {low}{upper or ' or more'}, as "
            f"in Kafka's producer; fix or remove {java} in the output's kafkaParams")


def _check_librdkafka(properties: Mapping[str, Any]) -> None:
    """Refuse librdkafka producer ``properties`` that librdkafka itself refuses (its ranges
    are narrower than Java's for some settings, e.g. ``linger.ms`` at most 900000,
    ``batch.size`` at least 1), on the driver instead of in every write task.

    A producer is created without ``bootstrap.servers`` (so it connects nowhere: a few ms)
    and dropped; its constructor checks every property and their combinations.
    """
    ck = require_confluent()
    probe = {k: v for k, v in properties.items() if k != "bootstrap.servers"}
    probe["log_level"] = 0  # no "no bootstrap.servers" warning
    try:
        ck.Producer(probe)
    except ck.KafkaException as exc:
        found = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        named = re.search(r'property "([^"]+)"', found)
        if named is not None and is_secret_key(named.group(1)):
            found = f"a bad value of {named.group(1)}"
        raise ConfigurationError(
            f"the confluent-kafka backend (librdkafka) refuses the output's producer settings: "
            f"{found.strip()}; fix the setting in the output's kafkaParams (librdkafka's name "
            "may differ: queue.buffering.max.ms is linger.ms, message.max.bytes is "
            "max.request.size, socket.timeout.ms is request.timeout.ms)") from None


def serializer_for(what: str, serializer: Any) -> Callable[[Any], bytes | None]:
    """Return ``serialize(obj) -> bytes | None`` for a record's ``what`` (key or value).

    ``None`` serializer: ``bytes`` pass, ``str`` is encoded as UTF-8; ``"str"`` or
    ``"bytes"`` (a Java class name was given): only that type; a callable: its result, which
    must be ``bytes``. ``None`` stays ``None`` (a null key, or a tombstone value).
    """
    def serialize(obj: Any) -> bytes | None:
        if obj is None:
            return None
        if callable(serializer):
            data = serializer(obj)
            if data is not None and not isinstance(data, (bytes, bytearray)):
                raise ConfigurationError(
                    f"{what}.serializer returned {type(data).__name__}; it must return bytes")
            return None if data is None else bytes(data)
        if isinstance(obj, (bytes, bytearray)) and serializer in (None, "bytes"):
            return bytes(obj)
        if isinstance(obj, str) and serializer in (None, "str"):
            return obj.encode("utf-8")
        wanted = {None: "bytes or str", "bytes": "bytes (ByteArraySerializer)",
                  "str": "str (StringSerializer)"}[serializer]
        raise ConfigurationError(
            f"a record's {what} is {type(obj).__name__}, but the Kafka output takes {wanted}; "
            f"convert it in a map() before the write, or set {what}.serializer to a callable "
            "object -> bytes")

    return serialize

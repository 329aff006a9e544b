"""Kafka client parameters: Java-style names to kafka-python, executor fixes, redaction.

Users pass ``kafkaParams`` as they would to Spark (``{"bootstrap.servers": ...,
"group.id": ..., "key.deserializer": "org.apache.kafka...StringDeserializer"}``) or with
kafka-python's keyword names (``bootstrap_servers``); both are accepted, also mixed.
:func:`consumer_config` turns them into keyword arguments for ``kafka.KafkaConsumer``,
checking every name, type and choice, and :func:`fix_kafka_params` applies Spark's
``KafkaUtils.fixKafkaParams`` for executors in one logged place. What each Kafka client
this package opens is given is built from this translation in
:mod:`dstream_kafka.client.configs`. Secret values (passwords, tokens, JAAS configs) never
reach a log line or an exception text: everything that prints parameters goes through
:func:`redact`.
"""
from __future__ import annotations

import difflib
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from dstream_kafka.client.deserializers import DESERIALIZER_CLASSES as DESERIALIZER_CLASSES
from dstream_kafka.client.deserializers import check_picklable
from dstream_kafka.client.deserializers import utf8_decoder as utf8_decoder
from dstream_kafka.client.deserializers import validate_deserializer as validate_deserializer
from dstream_kafka.config import true_or_false
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.client.param_checks import REDACTED as REDACTED
from dstream_kafka.client.param_checks import RENAMED
from dstream_kafka.client.param_checks import bootstrap_failure as bootstrap_failure
from dstream_kafka.client.param_checks import check_bootstrap_servers as check_bootstrap_servers
from dstream_kafka.client.param_checks import is_secret_key as is_secret_key
from dstream_kafka.client.param_checks import redact as redact
from dstream_kafka.client.param_checks import show_value as show_value
from dstream_kafka.client.security import SECURITY_KEYS, security_config

__all__ = [
    "API_TIMEOUT_KEY",
    "DEFAULT_API_TIMEOUT_MS",
    "DESERIALIZER_CLASSES",
    "EXECUTOR_GROUP_PREFIX",
    "JAVA_RECONNECT_BACKOFF_MAX_MS",
    "REDACTED",
    "bootstrap_failure",
    "check_bootstrap_servers",
    "consumer_config",
    "executor_fixes",
    "executor_group_id",
    "fix_kafka_params",
    "is_secret_key",
    "producer_config",
    "redact",
    "show_value",
    "utf8_decoder",
    "validate_deserializer",
    "validate_serializer",
]

log = logging.getLogger(__name__)

#: Java's ``reconnect.backoff.max.ms`` default, given to every client unless kafkaParams set it.
#: kafka-python's own default is 30000: after a broker restart its clients could wait up to
#: 30 s more before they try it again, which alone can exceed a stream's look-up retry bound.
JAVA_RECONNECT_BACKOFF_MAX_MS = 1000
#: Prefix Spark puts before the user's group id for executor consumers.
EXECUTOR_GROUP_PREFIX = "spark-executor-"
_MIN_RECEIVE_BUFFER = 65536  # KAFKA-3135


# Java-only settings with no kafka-python equivalent: dropped with a warning.
_JAVA_ONLY = frozenset(
    {
        "default.api.timeout.ms",
        "auto.include.jmx.reporter",
        "metric.reporters",
        "partition.assignment.strategy",
        "ssl.provider",
        "security.providers",
        "group.protocol",
        "sasl.login.class",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "client.dns.lookup.timeout.ms",
        "key.deserializer.encoding",
        "value.deserializer.encoding",
        "deserializer.encoding",
    }
)
# Settings that would change what is read or run user JVM code: refused with a reason.
_REFUSED = {
    "interceptor.classes": "consumer interceptors are Java classes and cannot run in Python",
}
# Producer settings the Kafka output decides itself: refused with the reason.
_PRODUCER_REFUSED = {
    **_REFUSED,
    "transactional.id": "the Kafka output derives it from (application, input topic, "
                        "partition) in exactly-once mode; set applicationId instead",
    "transactional_id": "the Kafka output derives it from (application, input topic, "
                        "partition) in exactly-once mode; set applicationId instead",
    "partitioner.class": "partitioners are Java classes; give a record a 'partition' to place it",
    "partitioner": "give a record a 'partition' to place it (both backends hash keys as Java does)",
}
#: Producer serializers known by Java class name: what a record's key or value may then be.
SERIALIZER_CLASSES = {
    "org.apache.kafka.common.serialization.StringSerializer": "str",
    "org.apache.kafka.common.serialization.ByteArraySerializer": "bytes",
}
# Types of kafka-python settings whose default is None.
_NONE_DEFAULT_TYPES: Mapping[str, type] = {
    "group_id": str,
    "group_instance_id": str,
    "receive_buffer_bytes": int,
    "send_buffer_bytes": int,
    "ssl_cafile": str,
    "ssl_certfile": str,
    "ssl_keyfile": str,
    "ssl_crlfile": str,
    "ssl_password": str,
    "ssl_ciphers": str,
    "sasl_mechanism": str,
    "sasl_plain_username": str,
    "sasl_plain_password": str,
    "sasl_kerberos_name": str,
    "sasl_kerberos_domain_name": str,
    "proxy_url": str,
    "socks5_proxy": str,
}
# Settings limited to a few words, checked here so kafka-python never sees another value.
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "auto_offset_reset": ("earliest", "latest", "none"),
    "compression_type": ("gzip", "snappy", "lz4", "zstd"),
    "isolation_level": ("read_uncommitted", "read_committed"),
    "security_protocol": ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
}


def _consumer_defaults() -> Mapping[str, Any]:
    from kafka import KafkaConsumer

    defaults: Mapping[str, Any] = KafkaConsumer.DEFAULT_CONFIG
    return defaults


def executor_group_id(group_id: Any) -> str:
    """Return Spark's executor group id ``spark-executor-<group.id>`` (``...-None`` if unset)."""
    return EXECUTOR_GROUP_PREFIX + str(group_id)


_show = show_value


def _coerce(key: str, shown: str, value: Any, defaults: Mapping[str, Any]) -> Any:
    default = defaults.get(key)
    kind = type(default) if default is not None else _NONE_DEFAULT_TYPES.get(key)
    if kind is bool:
        flag = true_or_false(value)
        if flag is not None:
            return flag
        raise ConfigurationError(
            f"Kafka parameter {shown} must be true or false, got {_show(key, value)}"
        )
    if kind is int and not isinstance(value, bool):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigurationError(
            f"Kafka parameter {shown} must be a whole number, got {_show(key, value)}"
        )
    if kind is float and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            raise ConfigurationError(
                f"Kafka parameter {shown} must be a number, got {_show(key, value)}"
            ) from None
    if key == "api_version" and isinstance(value, str):
        if not re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", value.strip()):
            raise ConfigurationError(
                f"Kafka parameter {shown} must be a broker version such as 2.8.0 (or unset to "
                f"detect it), got {_show(key, value)}"
            )
        return tuple(int(part) for part in value.strip().split("."))
    if key == "bootstrap_servers":
        return check_bootstrap_servers(value)
    choices = _CHOICES.get(key)
    if choices is not None and isinstance(value, str):
        # Java reads these case-insensitively; kafka-python compares exactly.
        value = value.strip().upper() if key == "security_protocol" else value.strip().lower()
    if choices is not None and value not in choices:
        raise ConfigurationError(
            f"Kafka parameter {shown} must be one of {', '.join(choices)}, got "
            f"{_show(key, value)}"
        )
    return value


def _did_you_mean(key: str, name: str, known: Mapping[str, Any]) -> str:
    """The closest known parameters to ``key`` in the user's spelling: Java (dotted) names for
    a dotted ``key``, kafka-python names otherwise; "" when none is close."""
    close = difflib.get_close_matches(name, list(known), n=3)
    if "." in key:
        renamed_from = {python: java for java, python in RENAMED.items()}
        # The plain dotted form where it means the same (bootstrap.servers), else the old name.
        close = [c.replace("_", ".") if c.replace("_", ".") not in RENAMED
                 else renamed_from.get(c, c) for c in close]
    return f"; did you mean {', '.join(close)}?" if close else ""


def consumer_config(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    """Translate ``kafkaParams`` into ``kafka.KafkaConsumer`` keyword arguments.

    Java names (``bootstrap.servers``) become kafka-python names (``bootstrap_servers``);
    string values are converted to the type kafka-python expects (``"false"`` to ``False``,
    ``"65536"`` to ``65536``); deserializers are checked with :func:`validate_deserializer`.
    Java-only settings without a Python meaning are dropped with a warning.
    ``reconnect.backoff.max.ms`` is Java's 1000 unless given (kafka-python's default is 30000).

    Raises
    ------
    ConfigurationError
        For unknown parameters (with the closest known names), badly typed values, refused
        settings (``interceptor.classes``, Java keystores) or unusable deserializers. Secret
        values are never quoted.
    """
    return _translate(kafkaParams, _consumer_defaults(), "consumer")


def _translate(kafkaParams: Mapping[str, Any], defaults: Mapping[str, Any],
               client: str) -> dict[str, Any]:
    """:func:`consumer_config`'s translation for a ``client`` ("consumer" or "producer")
    whose kafka-python settings are ``defaults``."""
    if not isinstance(kafkaParams, Mapping):
        raise ConfigurationError(
            f"kafkaParams must be a dict of Kafka {client} settings, got "
            f"{type(kafkaParams).__name__}; "
            'e.g. {"bootstrap.servers": "localhost:9092", "group.id": "app"}'
        )
    out: dict[str, Any] = {}
    refused = _REFUSED if client == "consumer" else _PRODUCER_REFUSED
    for raw_key, value in kafkaParams.items():
        if not isinstance(raw_key, str):
            raise ConfigurationError(f"Kafka parameter names must be strings, got {raw_key!r}")
        key = raw_key.strip()
        if key in SECURITY_KEYS:
            continue  # translated together below: stores, passwords and JAAS belong together
        if key in refused:
            raise ConfigurationError(f"Kafka parameter {key} is not supported: {refused[key]}")
        if key == API_TIMEOUT_KEY and client == "consumer":
            log.warning("Kafka parameter %s has no kafka-python equivalent: the clients ignore it; "
                        "a direct stream's driver bounds its group-coordinator look-ups with it", key)
            continue
        if key in _JAVA_ONLY:
            log.warning("Ignoring Kafka parameter %s: it has no kafka-python equivalent", key)
            continue
        name = RENAMED.get(key, key.replace(".", "_"))
        if name not in defaults:
            hint = _did_you_mean(key, name, defaults)
            if client == "producer" and name in _consumer_defaults():
                hint = ("; it is a consumer setting: give the output producer settings only "
                        "(bootstrap.servers, security, acks, linger.ms, ...)")
            raise ConfigurationError(f"Unknown Kafka {client} parameter {key!r}{hint}")
        if name in ("key_deserializer", "value_deserializer"):
            out[name] = validate_deserializer(key, value)
        elif name in ("key_serializer", "value_serializer"):
            out[name] = validate_serializer(key, value)
        elif name in out and out[name] != value:
            raise ConfigurationError(
                f"Kafka parameter {key} is given twice with different values (Java and Python "
                "spelling); keep one"
            )
        elif name == "acks":
            out[name] = _acks(key, value)
        else:
            out[name] = _coerce(name, key, value, defaults)
    for name, value in security_config(kafkaParams).items():
        out.setdefault(name, value)  # an explicit kafka-python spelling wins
    out.setdefault("reconnect_backoff_max_ms", JAVA_RECONNECT_BACKOFF_MAX_MS)
    return out


def producer_config(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    """Translate producer ``kafkaParams`` into ``kafka.KafkaProducer`` keyword arguments.

    The same translation as :func:`consumer_config` (Java or kafka-python names, typed
    values, security settings, secrets never quoted), against the producer's settings:
    ``acks`` takes ``all``, ``-1``, ``0`` or ``1``; ``compression.type`` ``none``, ``gzip``,
    ``snappy``, ``lz4`` or ``zstd``; ``key.serializer`` and ``value.serializer`` take a
    name from :data:`SERIALIZER_CLASSES` or a picklable callable ``object -> bytes``
    (:func:`validate_serializer`). Consumer settings (``group.id``, deserializers) are
    unknown here: producer parameters are a mapping of their own.

    Raises
    ------
    ConfigurationError
        As :func:`consumer_config`, and for ``transactional.id`` or a partitioner (the Kafka
        output decides them).
    """
    from kafka import KafkaProducer

    if isinstance(kafkaParams, Mapping) and str(
            kafkaParams.get("compression.type", kafkaParams.get("compression_type"))) == "none":
        kafkaParams = {k: v for k, v in kafkaParams.items()
                       if k not in ("compression.type", "compression_type")}
    return _translate(kafkaParams, KafkaProducer.DEFAULT_CONFIG, "producer")


def validate_serializer(name: str, value: Any) -> Any:
    """Return producer serializer ``value`` of parameter ``name``, checked.

    ``None`` (records carry ``bytes`` or ``str``, the latter encoded as UTF-8), a Java class
    name from :data:`SERIALIZER_CLASSES` (returned as ``"str"`` or ``"bytes"``: records must
    then carry that type), or a callable ``object -> bytes`` that pickles for executors.

    Raises
    ------
    ConfigurationError
        Naming the parameter and what it accepts.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value in SERIALIZER_CLASSES:
            return SERIALIZER_CLASSES[value]
        raise ConfigurationError(
            f"{name} {value!r} is not a serializer dstream_kafka knows; use "
            "org.apache.kafka.common.serialization.StringSerializer or ByteArraySerializer, "
            "or pass a Python callable object -> bytes")
    if not callable(value):
        raise ConfigurationError(
            f"{name} must be a callable object -> bytes or a Java class name, got "
            f"{type(value).__name__}")
    return check_picklable(name, value)


def _acks(key: str, value: Any) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1", "0", "1"):
        return -1 if text == "all" else int(text)
    raise ConfigurationError(f"Kafka parameter {key} must be all, -1, 0 or 1, got {value!r}")


def fix_kafka_params(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    """Return executor consumer settings: Spark's ``fixKafkaParams``, as kafka-python kwargs.

    Executors only read what the driver planned, so, as in Spark:

    * ``enable.auto.commit`` is forced to false;
    * ``auto.offset.reset`` is forced to ``none`` (an out-of-range offset is an error, never
      a silent jump);
    * ``group.id`` becomes ``spark-executor-<group.id>``, so executors never share the
      driver's group (an error is logged when no group id is set);
    * ``receive.buffer.bytes`` is raised to at least 65536 (KAFKA-3135);
    * ``group.instance.id`` is dropped: it is the driver's static membership, and executors
      join no group.

    A user value that contradicts a forced one is overridden with a warning naming the
    parameter; values are never logged for secret keys. The input is not modified. The
    function is idempotent: fixing fixed parameters changes nothing and warns about nothing
    (so a group id that already starts with ``spark-executor-`` is not prefixed again).

    Raises
    ------
    ConfigurationError
        As :func:`consumer_config`.
    """
    return executor_fixes(consumer_config(kafkaParams))


# (group, value) pairs whose auto.offset.reset override was logged: once per stream, not per run
_reset_noted: set[tuple[str, str]] = set()
_reset_noted_lock = threading.Lock()


def executor_fixes(params: dict[str, Any]) -> dict[str, Any]:
    """Apply :func:`fix_kafka_params`' executor fixes to translated ``params``, in place; return them."""
    if params.get("enable_auto_commit", False) is not False:
        log.warning(
            "overriding enable.auto.commit to false for executor (was %s)",
            params["enable_auto_commit"],
        )
    params["enable_auto_commit"] = False
    if params.get("auto_offset_reset", "none") != "none":
        # Expected, not a mistake: the driver starts new partitions at it, executors read
        # exact ranges. Told once per group and value, at INFO.
        noted = (str(params.get("group_id")), str(params["auto_offset_reset"]))
        with _reset_noted_lock:
            first = noted not in _reset_noted
            _reset_noted.add(noted)
        if first:
            log.info(
                "overriding auto.offset.reset to none for executor (was %s; the driver starts "
                "partitions without a stored offset there)",
                params["auto_offset_reset"],
            )
    params["auto_offset_reset"] = "none"
    original = params.get("group_id")
    if original is None:
        # Spark logs this as an error; a plain read (createRDD, 0-8 programs) works without one.
        log.warning("group.id is null, you should probably set it (it names this application's "
                    "executor consumers and is where commitAsync commits)")
    if original is not None and str(original).startswith(EXECUTOR_GROUP_PREFIX):
        # Already fixed (parameters fixed again for every batch): idempotent, no prefix twice.
        params["group_id"] = str(original)
    else:
        params["group_id"] = executor_group_id(original)
        log.info("overriding executor group.id to %s", params["group_id"])
    # The driver's static membership (group.instance.id) is the driver's alone: executors
    # read assigned partitions and join no group, and every executor sharing one instance id
    # would fence the others (kafka-python refuses the id without a group).
    params.pop("group_instance_id", None)
    receive_buffer = params.get("receive_buffer_bytes")
    if receive_buffer is None or receive_buffer < _MIN_RECEIVE_BUFFER:
        if receive_buffer is not None:
            log.warning(
                "overriding receive.buffer.bytes to %d (was %d), see KAFKA-3135",
                _MIN_RECEIVE_BUFFER,
                receive_buffer,
            )
        params["receive_buffer_bytes"] = _MIN_RECEIVE_BUFFER
    return params


#: Kafka's setting for how long a client call that needs the group coordinator may wait.
API_TIMEOUT_KEY = "default.api.timeout.ms"
#: Its Kafka default (kafka-python has none: without a bound it waits for ever).
DEFAULT_API_TIMEOUT_MS = 60_000

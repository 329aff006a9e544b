"""What each Kafka client this package opens is given, from one translation of ``kafkaParams``.

:class:`ClientConfigs` holds one ``kafkaParams`` mapping translated once
(:func:`~dstream_kafka.client.kafka_params.consumer_config`), and derives from that translation
every consumer's and admin client's settings: the executor consumer's (in kafka-python's names
and, for the confluent-kafka backend, librdkafka's), the offset look-up consumer's
(:func:`driver_consumer_config`), the stream's driver consumer's (:func:`stream_driver_config`)
and the Kafka group store's clients' (:func:`store_client_config`). The Kafka output's producer
params are a mapping of their own, translated by the same client/ functions
(:func:`~dstream_kafka.client.kafka_params.producer_config`,
:func:`~dstream_kafka.client.librdkafka.librdkafka_producer_config`).
:func:`bootstrap_errors` explains a client's failure to reach its brokers
(:func:`bootstrapped_client` opens a store's client the same way), and
:func:`params_fingerprint` identifies settings without showing them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

# Through the module, not its names: the translation is one function that tests may watch.
from dstream_kafka.client import kafka_params
from dstream_kafka.client.deserializers import qualified_name
from dstream_kafka.client.librdkafka import librdkafka_config
from dstream_kafka.client.param_checks import bootstrap_failure, redact
from dstream_kafka.client.security import check_credentials
from dstream_kafka.errors import ConfigurationError

__all__ = [
    "ClientConfigs",
    "bootstrap_errors",
    "bootstrapped_client",
    "driver_consumer_config",
    "params_fingerprint",
    "store_client_config",
    "store_configs",
    "stream_driver_config",
]

# The parameters' logger: their warnings have always been logged under this name.
log = logging.getLogger("dstream_kafka.client.kafka_params")


@dataclass(frozen=True)
class ClientConfigs:
    """What one ``kafkaParams`` mapping gives each Kafka client, translated once.

    Build it with :meth:`of` where the user's parameters come in (``createRDD``, a consumer
    strategy, the Kafka group store) and pass it on: the look-ups, the read settings, the
    backend check, the stream's driver consumer and the store's clients take their settings
    from it. Every mapping below is derived from :attr:`consumer` on first use and kept (so a
    store, which runs no executor, logs no executor fixes); treat them as read-only.

    Attributes
    ----------
    consumer : dict
        The user's params as ``kafka.KafkaConsumer`` keyword arguments
        (:func:`~dstream_kafka.client.kafka_params.consumer_config`): the one translation.
    executor : dict
        The executor consumer's settings (:func:`~dstream_kafka.client.kafka_params.fix_kafka_params`).
    driver : dict
        The group-less look-up consumer's settings (:func:`driver_consumer_config`).
    librdkafka : dict
        ``executor`` in librdkafka's names
        (:func:`~dstream_kafka.client.librdkafka.librdkafka_config`), for the confluent-kafka
        backend (:func:`~dstream_kafka.read.backends.check_backend` reads it); its first read
        raises :class:`~dstream_kafka.errors.ConfigurationError` for settings librdkafka cannot
        honour.
    fingerprint : str
        :func:`params_fingerprint` of ``executor``: a cached executor consumer built from
        other settings is replaced.
    """

    consumer: dict[str, Any]

    @classmethod
    def of(cls, kafkaParams: Mapping[str, Any] | ClientConfigs) -> ClientConfigs:
        """Translate ``kafkaParams`` once (given ClientConfigs, return them).

        Raises
        ------
        ConfigurationError
            As :func:`~dstream_kafka.client.kafka_params.consumer_config`.
        """
        if isinstance(kafkaParams, ClientConfigs):
            return kafkaParams
        return cls(kafka_params.consumer_config(kafkaParams))

    # Derived views: a frozen dataclass keeps them in its __dict__ (functools.cached_property
    # writes there directly), so each is made at most once; they are not fields, so equality
    # and repr are the translation's alone.
    @cached_property
    def executor(self) -> dict[str, Any]:
        return kafka_params.executor_fixes(dict(self.consumer))

    @cached_property
    def driver(self) -> dict[str, Any]:
        return _lookup_only(dict(self.consumer))

    @cached_property
    def librdkafka(self) -> dict[str, Any]:
        return librdkafka_config(self.executor)

    @cached_property
    def fingerprint(self) -> str:
        return params_fingerprint(self.executor)

    def __repr__(self) -> str:
        return f"ClientConfigs(consumer={redact(self.consumer)!r})"


def driver_consumer_config(kafkaParams: Mapping[str, Any] | ClientConfigs) -> dict[str, Any]:
    """Return settings for a short-lived driver consumer that only looks up offsets.

    The user's parameters are kept (so ``isolation.level`` decides whether "latest" is the
    high watermark or the last stable offset), but the consumer joins no group, commits
    nothing, creates no topics and decodes nothing: :attr:`ClientConfigs.driver`.
    """
    return dict(ClientConfigs.of(kafkaParams).driver)


def _lookup_only(params: dict[str, Any]) -> dict[str, Any]:
    for key in ("key_deserializer", "value_deserializer", "group_instance_id"):
        params.pop(key, None)
    params.update(group_id=None, enable_auto_commit=False, allow_auto_create_topics=False)
    return params


def stream_driver_config(kafkaParams: Mapping[str, Any] | ClientConfigs) -> dict[str, Any]:
    """Return settings for a stream's driver consumer: the user's params, in its group.

    The driver never reads records (its partitions are paused), so deserializers are dropped;
    offsets are committed only explicitly (``commitAsync`` or an offset store), so auto commit
    is off. Given :class:`ClientConfigs`, derived from their translation.
    """
    config = dict(ClientConfigs.of(kafkaParams).consumer)
    if config.get("enable_auto_commit"):
        log.warning("enable.auto.commit=true is ignored by the driver: offsets are committed "
                    "after each batch's output (commitAsync or an offset store)")
    for key in ("key_deserializer", "value_deserializer"):
        config.pop(key, None)
    config["enable_auto_commit"] = False
    return config


def store_configs(kafkaParams: Mapping[str, Any] | ClientConfigs) -> ClientConfigs:
    """Return ``kafkaParams`` translated once for the Kafka group store's clients
    (:func:`store_client_config` derives each client's settings from them).

    Raises
    ------
    ConfigurationError
        For params that are not a mapping, lack ``bootstrap.servers``, or that
        :func:`~dstream_kafka.client.kafka_params.consumer_config` refuses.
    """
    if not isinstance(kafkaParams, (Mapping, ClientConfigs)):
        raise ConfigurationError(
            "Kafka params must be a dict such as {'bootstrap.servers': 'host:9092', 'group.id': 'g'}, "
            f"got {type(kafkaParams).__name__}")
    configs = ClientConfigs.of(kafkaParams)
    if not configs.consumer.get("bootstrap_servers"):
        raise ConfigurationError("Kafka params need 'bootstrap.servers', e.g. {'bootstrap.servers': '127.0.0.1:9092'}")
    return configs


def store_client_config(kafkaParams: Mapping[str, Any] | ClientConfigs, client: str = "consumer", *,
                        defaults: Mapping[str, Any] | None = None,
                        required: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return settings for the Kafka group offset store's ``client``: consumer, producer or admin.

    Derived from :func:`store_configs`' translation (JAAS configs, typed values, unknown
    names refused): (de)serializers are dropped (the store handles bytes), and so are the
    settings the kafka-python ``client`` does not take; ``bootstrap.servers`` is required.

    Parameters
    ----------
    kafkaParams : Mapping or ClientConfigs
        The user's Kafka params (Java names), or their translation.
    client : str
        ``"consumer"``, ``"producer"`` or ``"admin"``.
    defaults : Mapping, optional
        kafka-python settings the store uses unless the user's params set them
        (``client_id``, ``request_timeout_ms``).
    required : Mapping, optional
        kafka-python settings the store depends on (``acks``, ``group_id``); they replace the
        user's. Every setting of a store client comes from this one mapping, so a user
        parameter never collides with a store keyword.

    Raises
    ------
    ConfigurationError
        As :func:`store_configs`.
    """
    import kafka

    configs = store_configs(kafkaParams)
    known = {"consumer": kafka.KafkaConsumer, "producer": kafka.KafkaProducer,
             "admin": kafka.KafkaAdminClient}[client].DEFAULT_CONFIG
    config = {name: value for name, value in configs.consumer.items()
              if name in known and not name.endswith(("_deserializer", "_serializer"))}
    return {**(defaults or {}), **config, **(required or {})}


@contextmanager
def bootstrap_errors(kafkaParams: Mapping[str, Any] | ClientConfigs) -> Iterator[None]:
    """Turn a client's failure to reach its bootstrap servers into :func:`bootstrap_failure`'s
    error; any other exception passes unchanged. SASL credentials the brokers refuse raise
    :class:`~dstream_kafka.errors.KafkaAuthenticationError` on entry
    (:func:`~dstream_kafka.client.security.check_credentials`)."""
    config = driver_consumer_config(kafkaParams)
    check_credentials(config)
    try:
        yield
    except Exception as exc:
        error = bootstrap_failure(config, exc)
        if error is None:
            raise
        raise error from None


_Client = TypeVar("_Client")


def bootstrapped_client(factory: Callable[..., _Client], config: Mapping[str, Any]) -> _Client:
    """Return ``factory(**config)``, a kafka-python client, opened as :func:`bootstrap_errors`
    opens createRDD's, all within ``config``'s ``bootstrap_timeout_ms`` (default 30000).

    SASL credentials the brokers refuse raise
    :class:`~dstream_kafka.errors.KafkaAuthenticationError` first
    (:func:`~dstream_kafka.client.security.check_credentials`); the client then gets the time that
    check left, so a listener that never completes the handshake (SASL against PLAINTEXT) costs
    ``bootstrap_timeout_ms`` once, not twice. No bootstrap server reached in time raises
    :func:`~dstream_kafka.client.param_checks.bootstrap_failure`'s
    :class:`~dstream_kafka.errors.BrokerTimeoutError`, naming the configured bound; any other
    exception passes unchanged.
    """
    import kafka

    timeout_ms = int(config.get("bootstrap_timeout_ms") or 30000)
    started = time.monotonic()
    # The check logs in with a consumer: it takes only a consumer's settings.
    check_credentials({k: v for k, v in config.items() if k in kafka.KafkaConsumer.DEFAULT_CONFIG})
    left_ms = max(1, timeout_ms - int((time.monotonic() - started) * 1000))
    try:
        return factory(**{**config, "bootstrap_timeout_ms": left_ms})
    except Exception as exc:
        error = bootstrap_failure(config, exc)
        if error is None:
            raise
        raise error from exc


def _callable_identity(value: Any) -> str:
    name = qualified_name(value)
    code = getattr(value, "__code__", None)
    if code is not None:
        # Two lambdas share a qualname; their bytecode and plain constants tell them apart.
        consts = tuple(
            c for c in code.co_consts if isinstance(c, (str, bytes, int, float, type(None)))
        )
        digest = hashlib.sha1(repr((code.co_code, code.co_names, consts)).encode()).hexdigest()
        name += f"#{digest[:16]}"
    return name


def params_fingerprint(params: Mapping[str, Any]) -> str:
    """Return a SHA-256 hex digest identifying ``params``.

    Executors compare it with the cached consumer's, so a consumer built for other settings
    (another broker list, isolation level, credentials or deserializer) is replaced, not
    reused. A digest, so that printing it reveals no secret.
    """
    parts = []
    for key in sorted(params):
        value = params[key]
        if callable(value) or hasattr(value, "deserialize"):
            value = _callable_identity(value)
        parts.append(f"{key}={value!r}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "backslashreplace")).hexdigest()

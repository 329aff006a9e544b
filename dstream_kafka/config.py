"""Every Spark configuration key dstream_kafka honours, with its default, and a typed reader.

Key names and defaults are Spark's (``package.scala`` of kafka-0-10, ``StreamingConf``,
``RateEstimator``), except :data:`CONSUMER_BACKEND`, which is ours. Values are parsed
strictly: a bad value raises :class:`~dstream_kafka.errors.ConfigurationError` naming the
key, the value and a valid example, before any data moves.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError

__all__ = [
    "METRICS_PROMETHEUS_PORT",
    "PROGRESS_JSON_PATH",
    "LAG_INTERVAL",
    "UI_HOST",
    "UI_PORT",
    "UI_RETAINED_BATCHES",
    "ALLOW_NON_CONSECUTIVE_OFFSETS",
    "ASSIGNMENT_TIMEOUT",
    "BACKPRESSURE_ENABLED",
    "BACKPRESSURE_INITIAL_RATE",
    "CONCURRENT_JOBS",
    "POLLING_DELAY",
    "CONSUMER_BACKEND",
    "CONSUMER_BACKENDS",
    "CONSUMER_CACHE_ENABLED",
    "CONSUMER_CACHE_PRE_POSITION",
    "CONSUMER_CACHE_INITIAL_CAPACITY",
    "CONSUMER_CACHE_LOAD_FACTOR",
    "CONSUMER_CACHE_MAX_CAPACITY",
    "CONSUMER_POLL_MS",
    "PRODUCER_CACHE_ENABLED",
    "PRODUCER_TOPIC_WAIT",
    "DEFAULTS",
    "FILE_STREAM_MIN_REMEMBER",
    "GRACEFUL_STOP_TIMEOUT",
    "LOOKUP_TIMEOUT",
    "MAX_RATE_PER_PARTITION",
    "MAX_RETRIES",
    "MIN_RATE_PER_PARTITION",
    "NETWORK_TIMEOUT",
    "PID_DERIVED",
    "PID_INTEGRAL",
    "PID_MIN_RATE",
    "PID_PROPORTIONAL",
    "RATE_ESTIMATOR",
    "RETRY_BACKOFF",
    "STOP_GRACEFULLY_ON_SHUTDOWN",
    "SparkConfReader",
    "parse_time_string",
    "true_or_false",
]

# kafka-0-10 package.scala
CONSUMER_CACHE_ENABLED = "spark.streaming.kafka.consumer.cache.enabled"
CONSUMER_POLL_MS = "spark.streaming.kafka.consumer.poll.ms"
CONSUMER_CACHE_INITIAL_CAPACITY = "spark.streaming.kafka.consumer.cache.initialCapacity"
CONSUMER_CACHE_MAX_CAPACITY = "spark.streaming.kafka.consumer.cache.maxCapacity"
CONSUMER_CACHE_LOAD_FACTOR = "spark.streaming.kafka.consumer.cache.loadFactor"
#: Ours: after each task of a direct stream, move this Python worker's idle cached consumers
#: of the batch's other partitions to where the next batch starts (see consumer_cache).
CONSUMER_CACHE_PRE_POSITION = "spark.streaming.kafka.consumer.cache.prePosition"
MAX_RATE_PER_PARTITION = "spark.streaming.kafka.maxRatePerPartition"
MIN_RATE_PER_PARTITION = "spark.streaming.kafka.minRatePerPartition"
ALLOW_NON_CONSECUTIVE_OFFSETS = "spark.streaming.kafka.allowNonConsecutiveOffsets"
#: Retries of the driver's latest-offset look-up per batch (2 attempts in all by default),
#: as Spark's 0-8 direct stream; honoured by every direct stream here.
MAX_RETRIES = "spark.streaming.kafka.maxRetries"
#: Pause between those tries (Kafka 0-8's ``refresh.leader.backoff.ms``, which Spark's 0-8
#: stream sleeps; here a Spark key, since kafka-python has no such consumer setting).
RETRY_BACKOFF = "spark.streaming.kafka.retryBackoff"
#: Longest wait of one driver offset look-up of a batch (ours: kafka-python's default is its
#: request.timeout.ms, 30 s).
LOOKUP_TIMEOUT = "spark.streaming.kafka.lookupTimeout"
#: How long a Subscribe/SubscribePattern stream's start waits for its group to assign it
#: partitions before failing (ours: Spark's stream waits without a bound and runs empty).
ASSIGNMENT_TIMEOUT = "spark.streaming.kafka.assignmentTimeout"
# Streaming core (StreamingConf, RateController, RateEstimator)
BACKPRESSURE_ENABLED = "spark.streaming.backpressure.enabled"
BACKPRESSURE_INITIAL_RATE = "spark.streaming.backpressure.initialRate"
RATE_ESTIMATOR = "spark.streaming.backpressure.rateEstimator"
#: The estimators ``RATE_ESTIMATOR`` may name (Spark's only one).
_RATE_ESTIMATORS = ("pid",)
PID_PROPORTIONAL = "spark.streaming.backpressure.pid.proportional"
PID_INTEGRAL = "spark.streaming.backpressure.pid.integral"
PID_DERIVED = "spark.streaming.backpressure.pid.derived"
PID_MIN_RATE = "spark.streaming.backpressure.pid.minRate"
# Streaming engine (streaming/context.py): SIGTERM, graceful stop and job concurrency.
STOP_GRACEFULLY_ON_SHUTDOWN = "spark.streaming.stopGracefullyOnShutdown"
GRACEFUL_STOP_TIMEOUT = "spark.streaming.gracefulStopTimeout"
CONCURRENT_JOBS = "spark.streaming.concurrentJobs"
#: With ``batchDuration=0``: the pause between two checks for new data while none arrives
#: (Structured Streaming's ``spark.sql.streaming.pollingDelay``, 10 ms).
POLLING_DELAY = "spark.streaming.pollingDelay"
#: How long a file stream remembers the files it read (Spark reads it in seconds).
FILE_STREAM_MIN_REMEMBER = "spark.streaming.fileStream.minRememberDuration"
# Spark core
NETWORK_TIMEOUT = "spark.network.timeout"
# dstream_kafka's own: which Python Kafka client executors and the driver use.
CONSUMER_BACKEND = "spark.streaming.kafka.consumer.backend"
CONSUMER_BACKENDS = ("kafka-python", "confluent-kafka")
#: Ours: the Kafka output keeps one producer per Python worker (and input partition, for
#: exactly-once) across tasks and batches, instead of one per task (dstream_kafka.write).
PRODUCER_CACHE_ENABLED = "spark.streaming.kafka.producer.cache.enabled"
#: Ours: how long a Kafka output's write task waits for a record's topic to appear in the
#: metadata before it fails naming the topic (the clients would wait 60 s, or longer).
PRODUCER_TOPIC_WAIT = "spark.streaming.kafka.producer.topicWait.ms"

# Progress and metrics (dstream_kafka.plan.progress, dstream_kafka.ui.metrics).
#: File each completed batch's progress is appended to as one JSON line (unset: none).
PROGRESS_JSON_PATH = "spark.streaming.kafka.progress.jsonPath"
#: Port of the Prometheus /metrics endpoint on 127.0.0.1 (unset: off; 0: a free port).
METRICS_PROMETHEUS_PORT = "spark.streaming.kafka.metrics.prometheus.port"
# The Streaming page (dstream_kafka.ui): port (unset: off; 0: a free port), bind address, and
# completed batches kept (Spark's spark.streaming.ui.retainedBatches).
UI_PORT = "spark.streaming.kafka.ui.port"
UI_HOST = "spark.streaming.kafka.ui.host"
UI_RETAINED_BATCHES = "spark.streaming.kafka.ui.retainedBatches"
#: Time between two samples of a stream's lag timer (dstream_kafka.monitor.lag); 0: no timer.
LAG_INTERVAL = "spark.streaming.kafka.lag.interval"

#: Default of every key, in Spark's string form. ``CONSUMER_POLL_MS`` has none: when it is
#: unset the poll timeout is ``spark.network.timeout`` in whole seconds times 1000.
DEFAULTS: Mapping[str, str | None] = {
    CONSUMER_CACHE_ENABLED: "true",
    CONSUMER_POLL_MS: None,
    CONSUMER_CACHE_INITIAL_CAPACITY: "16",
    CONSUMER_CACHE_MAX_CAPACITY: "64",
    CONSUMER_CACHE_LOAD_FACTOR: "0.75",
    CONSUMER_CACHE_PRE_POSITION: "true",
    MAX_RATE_PER_PARTITION: "0",
    MIN_RATE_PER_PARTITION: "1",
    ALLOW_NON_CONSECUTIVE_OFFSETS: "false",
    MAX_RETRIES: "1",
    RETRY_BACKOFF: "200ms",
    LOOKUP_TIMEOUT: "30s",
    ASSIGNMENT_TIMEOUT: "60s",
    BACKPRESSURE_ENABLED: "false",
    BACKPRESSURE_INITIAL_RATE: "0",
    RATE_ESTIMATOR: "pid",
    PID_PROPORTIONAL: "1.0",
    PID_INTEGRAL: "0.2",
    PID_DERIVED: "0.0",
    PID_MIN_RATE: "100",
    STOP_GRACEFULLY_ON_SHUTDOWN: "false",
    GRACEFUL_STOP_TIMEOUT: None,  # unset: 10 batch intervals
    CONCURRENT_JOBS: "1",
    POLLING_DELAY: "10ms",
    FILE_STREAM_MIN_REMEMBER: "60s",
    NETWORK_TIMEOUT: "120s",
    CONSUMER_BACKEND: "kafka-python",
    PRODUCER_CACHE_ENABLED: "true",
    PRODUCER_TOPIC_WAIT: "10s",
    PROGRESS_JSON_PATH: None,  # unset: no progress file
    METRICS_PROMETHEUS_PORT: None,  # unset: no metrics endpoint
    UI_PORT: None,  # unset: no Streaming page
    UI_HOST: "127.0.0.1",
    UI_RETAINED_BATCHES: "1000",
    LAG_INTERVAL: "5s",
}

# Spark's JavaUtils.timeSuffixes, as multiples of one microsecond.
_TIME_UNITS_US = {
    "us": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "min": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
}
_TIME_RE = re.compile(r"(-?[0-9]+)([a-z]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_STREAM_PREFIX = "spark.streaming.kafka."
log = logging.getLogger(__name__)


def _bad(key: str, value: Any, expected: str, example: str) -> ConfigurationError:
    return ConfigurationError(
        f"Invalid value {value!r} for {key}: expected {expected}, e.g. {key}={example}"
    )


def parse_time_string(value: str, unit: str = "ms", *, key: str = "time") -> int:
    """Parse a Spark time string such as ``"120s"``, ``"500ms"`` or ``"2min"``.

    Follows Spark's ``JavaUtils.timeStringAs``: case-insensitive, surrounding whitespace
    ignored, suffixes ``us ms s m min h d``, a bare number is in ``unit``, and the result is
    truncated to whole ``unit`` s (``"1500ms"`` is 1 second).

    Raises
    ------
    ConfigurationError
        If ``value`` is not a time string, naming ``key``.
    """
    lowered = value.strip().lower() if isinstance(value, str) else None
    match = _TIME_RE.fullmatch(lowered) if lowered is not None else None
    if match is None or (match.group(2) is not None and match.group(2) not in _TIME_UNITS_US):
        raise _bad(
            key,
            value,
            "a time such as 120s, 500ms or 2min (suffixes us, ms, s, m, min, h, d)",
            "120s",
        )
    number = int(match.group(1))
    suffix = match.group(2) or unit
    micros = number * _TIME_UNITS_US[suffix]
    # Java TimeUnit.convert truncates toward zero.
    result = abs(micros) // _TIME_UNITS_US[unit]
    return -result if micros < 0 else result


def true_or_false(value: Any) -> bool | None:
    """Return ``value`` as a bool when it is one, or the text ``true`` or ``false`` (any case,
    surrounding whitespace ignored); else ``None``.

    The one reading of a true/false value in the package: Spark settings, Kafka parameters and
    the Kafka source options. Each caller words its own error for ``None``, naming its field.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


class SparkConfReader:
    """Typed, strict access to the keys above.

    Parameters
    ----------
    conf : SparkConf, SparkContext, Mapping, SparkConfReader or None
        Anything with ``get(key, default)`` (a pyspark ``SparkConf`` or a dict), a
        ``SparkContext`` (its ``getConf()`` is used), another reader (its configuration is
        shared), or ``None`` for all defaults. Values may be strings, as Spark stores them,
        or Python values of the right type.

    Notes
    -----
    Values are read on every access, so a reader over a live ``SparkConf`` sees later
    changes. The reader never imports pyspark.
    """

    def __init__(self, conf: Any = None) -> None:
        if isinstance(conf, SparkConfReader):
            conf = conf.conf
        if (
            conf is not None
            and not hasattr(conf, "get")
            and callable(getattr(conf, "getConf", None))
        ):
            conf = conf.getConf()
        if conf is not None and not callable(getattr(conf, "get", None)):
            raise ConfigurationError(
                f"Expected a SparkConf, a SparkContext, a dict or None, got {type(conf).__name__}"
            )
        self._conf: Any = conf

    @property
    def conf(self) -> Any:
        """The configuration read (``None`` when every key takes its default)."""
        return self._conf

    def get_raw(self, key: str) -> Any:
        """Return the value set for ``key``, or ``None`` when it is unset."""
        if self._conf is None:
            return None
        if isinstance(self._conf, Mapping):
            return self._conf.get(key)
        return self._conf.get(key, None)

    def _value(self, key: str, default: Any) -> Any:
        raw = self.get_raw(key)
        return default if raw is None else raw

    def get_bool(self, key: str, default: bool | str | None = None) -> bool:
        """Read ``key`` as a boolean: ``true``/``false`` in any case, or a Python bool."""
        value = self._value(key, DEFAULTS.get(key) if default is None else default)
        flag = true_or_false(value)
        if flag is None:
            raise _bad(key, value, "true or false", "true")
        return flag

    def get_int(
        self, key: str, default: int | str | None = None, *, minimum: int | None = None
    ) -> int:
        """Read ``key`` as a whole number (Java ``long`` range); floats are rejected."""
        value = self._value(key, DEFAULTS.get(key) if default is None else default)
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            raise _bad(key, value, "a whole number", str(DEFAULTS.get(key) or 1))
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise _bad(
                key, value, "a whole number within the 64-bit range", str(DEFAULTS.get(key) or 1)
            )
        if minimum is not None and number < minimum:
            raise _bad(
                key, value, f"a whole number >= {minimum}", str(DEFAULTS.get(key) or minimum)
            )
        return number

    def get_float(
        self, key: str, default: float | str | None = None, *, minimum: float | None = None
    ) -> float:
        """Read ``key`` as a finite number; NaN and infinities are rejected."""
        value = self._value(key, DEFAULTS.get(key) if default is None else default)
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise _bad(key, value, "a finite number", str(DEFAULTS.get(key) or "1.0"))
        if minimum is not None and number < minimum:
            raise _bad(key, value, f"a number >= {minimum}", str(DEFAULTS.get(key) or minimum))
        return number

    def get_time_ms(self, key: str, default: str | None = None) -> int:
        """Read ``key`` as a time string; a bare number is milliseconds."""
        value = self._value(key, DEFAULTS.get(key) if default is None else default)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        return parse_time_string(value, "ms", key=key)

    def get_str(self, key: str, default: str | None = None) -> str:
        """Read ``key`` as a string."""
        value = self._value(key, DEFAULTS.get(key) if default is None else default)
        if not isinstance(value, str):
            raise _bad(key, value, "a string", str(DEFAULTS.get(key)))
        return value

    # -- the keys ---------------------------------------------------------------------------

    @property
    def consumer_cache_enabled(self) -> bool:
        """``spark.streaming.kafka.consumer.cache.enabled`` (default true)."""
        return self.get_bool(CONSUMER_CACHE_ENABLED)

    @property
    def producer_cache_enabled(self) -> bool:
        """``spark.streaming.kafka.producer.cache.enabled`` (default true)."""
        return self.get_bool(PRODUCER_CACHE_ENABLED)

    @property
    def producer_topic_wait_ms(self) -> int:
        """``spark.streaming.kafka.producer.topicWait.ms`` (default 10s)."""
        return self.get_time_ms(PRODUCER_TOPIC_WAIT)

    @property
    def consumer_cache_pre_position(self) -> bool:
        """``spark.streaming.kafka.consumer.cache.prePosition`` (default true)."""
        return self.get_bool(CONSUMER_CACHE_PRE_POSITION)

    @property
    def poll_timeout_ms(self) -> int:
        """Executor poll timeout in ms.

        ``spark.streaming.kafka.consumer.poll.ms`` when set, else ``spark.network.timeout``
        truncated to whole seconds times 1000 (120000 by default), as Spark computes it.
        A bare number in ``poll.ms`` is milliseconds; a suffixed time string is also accepted.
        """
        if self.get_raw(CONSUMER_POLL_MS) is not None:
            timeout = self.get_time_ms(CONSUMER_POLL_MS, "0")
            key = CONSUMER_POLL_MS
        else:
            value = self._value(NETWORK_TIMEOUT, DEFAULTS[NETWORK_TIMEOUT])
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            timeout = parse_time_string(value, "s", key=NETWORK_TIMEOUT) * 1000
            key = NETWORK_TIMEOUT
        if timeout < 0:
            raise _bad(
                key,
                self.get_raw(key),
                "a non-negative time",
                "10000" if key == CONSUMER_POLL_MS else "120s",
            )
        return timeout

    @property
    def cache_initial_capacity(self) -> int:
        """``spark.streaming.kafka.consumer.cache.initialCapacity`` (default 16)."""
        return self.get_int(CONSUMER_CACHE_INITIAL_CAPACITY, minimum=0)

    @property
    def cache_max_capacity(self) -> int:
        """``spark.streaming.kafka.consumer.cache.maxCapacity`` (default 64, a soft cap)."""
        return self.get_int(CONSUMER_CACHE_MAX_CAPACITY, minimum=0)

    @property
    def cache_load_factor(self) -> float:
        """``spark.streaming.kafka.consumer.cache.loadFactor`` (default 0.75)."""
        factor = self.get_float(CONSUMER_CACHE_LOAD_FACTOR)
        if factor <= 0:
            raise _bad(
                CONSUMER_CACHE_LOAD_FACTOR,
                self.get_raw(CONSUMER_CACHE_LOAD_FACTOR),
                "a number > 0",
                "0.75",
            )
        return factor

    @property
    def max_rate_per_partition(self) -> int:
        """``spark.streaming.kafka.maxRatePerPartition`` in records/s; 0 means unlimited.

        A negative value is refused (Spark reads it as unlimited, which hides a typo).
        """
        return self.get_int(MAX_RATE_PER_PARTITION, minimum=0)

    @property
    def min_rate_per_partition(self) -> int:
        """``spark.streaming.kafka.minRatePerPartition`` in records/s (default 1, at least 0)."""
        return self.get_int(MIN_RATE_PER_PARTITION, minimum=0)

    @property
    def allow_non_consecutive_offsets(self) -> bool:
        """``spark.streaming.kafka.allowNonConsecutiveOffsets`` (default false)."""
        return self.get_bool(ALLOW_NON_CONSECUTIVE_OFFSETS)

    @property
    def max_retries(self) -> int:
        """``spark.streaming.kafka.maxRetries`` (default 1): how many more times a direct
        stream's driver tries its latest-offset look-up of a batch after a failure."""
        return self.get_int(MAX_RETRIES, minimum=0)

    @property
    def retry_backoff_ms(self) -> int:
        """``spark.streaming.kafka.retryBackoff`` in ms (default 200ms): the pause between two
        tries of a direct stream's driver offset look-up."""
        return self._time_at_least(RETRY_BACKOFF, 0)

    @property
    def lookup_timeout_ms(self) -> int:
        """``spark.streaming.kafka.lookupTimeout`` in ms (default 30s): the longest one try of
        a direct stream's driver offset look-up waits for the broker's answer."""
        return self._time_at_least(LOOKUP_TIMEOUT, 1)

    @property
    def assignment_timeout_ms(self) -> int:
        """``spark.streaming.kafka.assignmentTimeout`` in ms (default 60s): how long a
        subscribing direct stream's start waits for its group to assign it partitions."""
        return self._time_at_least(ASSIGNMENT_TIMEOUT, 1)

    def _time_at_least(self, key: str, minimum_ms: int) -> int:
        value = self.get_time_ms(key)
        if value < minimum_ms:
            raise _bad(key, self.get_raw(key), f"a time of at least {minimum_ms} ms", "30s")
        return value

    @property
    def lag_interval_ms(self) -> int:
        """``spark.streaming.kafka.lag.interval`` in ms (default 5s): how often a direct
        stream's lag timer looks up the log end of its partitions; 0 turns the timer off."""
        return self._time_at_least(LAG_INTERVAL, 0)

    @property
    def backpressure_enabled(self) -> bool:
        """``spark.streaming.backpressure.enabled`` (default false)."""
        return self.get_bool(BACKPRESSURE_ENABLED)

    @property
    def backpressure_initial_rate(self) -> int:
        """``spark.streaming.backpressure.initialRate``, read as Spark's ``getLong(key, 0)``;
        0 means no initial limit and a negative value is refused."""
        return self.get_int(BACKPRESSURE_INITIAL_RATE, minimum=0)

    @property
    def rate_estimator(self) -> str:
        """``spark.streaming.backpressure.rateEstimator`` (default ``"pid"``)."""
        return self.get_str(RATE_ESTIMATOR)

    @property
    def pid_proportional(self) -> float:
        """``spark.streaming.backpressure.pid.proportional`` (default 1.0)."""
        return self.get_float(PID_PROPORTIONAL)

    @property
    def pid_integral(self) -> float:
        """``spark.streaming.backpressure.pid.integral`` (default 0.2)."""
        return self.get_float(PID_INTEGRAL)

    @property
    def pid_derived(self) -> float:
        """``spark.streaming.backpressure.pid.derived`` (default 0.0)."""
        return self.get_float(PID_DERIVED)

    @property
    def pid_min_rate(self) -> float:
        """``spark.streaming.backpressure.pid.minRate`` (default 100)."""
        return self.get_float(PID_MIN_RATE)

    @property
    def stop_gracefully_on_shutdown(self) -> bool:
        """``spark.streaming.stopGracefullyOnShutdown`` (default false)."""
        return self.get_bool(STOP_GRACEFULLY_ON_SHUTDOWN)

    @property
    def graceful_stop_timeout_ms(self) -> int | None:
        """``spark.streaming.gracefulStopTimeout`` in ms, or None when unset (a graceful stop
        then waits 10 batch intervals)."""
        if self.get_raw(GRACEFUL_STOP_TIMEOUT) is None:
            return None
        return self.get_time_ms(GRACEFUL_STOP_TIMEOUT)

    @property
    def concurrent_jobs(self) -> int:
        """``spark.streaming.concurrentJobs`` (default 1)."""
        return self.get_int(CONCURRENT_JOBS, minimum=1)

    @property
    def polling_delay_ms(self) -> int:
        """``spark.streaming.pollingDelay`` in ms (default 10ms; at least 1 ms, so an idle
        stream of ``batchDuration=0`` never spins)."""
        value = self.get_time_ms(POLLING_DELAY)
        if value < 1:
            raise _bad(POLLING_DELAY, self.get_raw(POLLING_DELAY), "a time of at least 1 ms",
                       "10ms")
        return value

    @property
    def file_stream_min_remember_ms(self) -> int:
        """``spark.streaming.fileStream.minRememberDuration`` in ms (default 60s; a bare
        number is seconds and the value is truncated to whole seconds, as Spark reads it)."""
        value = self._value(FILE_STREAM_MIN_REMEMBER, DEFAULTS[FILE_STREAM_MIN_REMEMBER])
        seconds = parse_time_string(str(value), "s", key=FILE_STREAM_MIN_REMEMBER)
        if seconds < 0:
            raise _bad(FILE_STREAM_MIN_REMEMBER, value, "a time >= 0", "60s")
        return seconds * 1000

    @property
    def consumer_backend(self) -> str:
        """``spark.streaming.kafka.consumer.backend``: ``kafka-python`` (default) or
        ``confluent-kafka``, case-insensitive, returned in lower case."""
        value = self.get_str(CONSUMER_BACKEND)
        normalized = value.strip().lower()
        if normalized not in CONSUMER_BACKENDS:
            raise _bad(
                CONSUMER_BACKEND, value, "one of " + ", ".join(CONSUMER_BACKENDS), "confluent-kafka"
            )
        return normalized

    # -- one check of every stream key ------------------------------------------------------

    def get_port(self, key: str, example: str) -> int | None:
        """Read ``key`` as a TCP port (0 to 65535; 0: a free port), or None when it is unset."""
        raw = self.get_raw(key)
        if raw is None or str(raw).strip() == "":
            return None
        port = self.get_int(key)
        if not 0 <= port <= 65535:
            raise _bad(key, raw, "a TCP port from 0 to 65535 (0: a free port)", example)
        return port

    def check_stream_settings(self) -> None:
        """Check every key a direct stream reads, at once, when the stream is created.

        Several keys are otherwise read only when the first batch runs (on the executors, or
        when backpressure starts); this reads each with its type, range or allowed values, so
        a bad value fails before any data moves. An unknown ``spark.streaming.kafka.*`` key
        (a typo, which Spark would ignore silently) is logged at WARNING with the closest
        known key.

        Raises
        ------
        ConfigurationError
            Naming the first bad key, its value and what it accepts.
        """
        for name in _STREAM_PROPERTIES:
            getattr(self, name)
        if self.rate_estimator.strip() not in _RATE_ESTIMATORS:
            raise _bad(RATE_ESTIMATOR, self.rate_estimator, "one of " + ", ".join(_RATE_ESTIMATORS),
                       "pid")
        if self.get_raw(GRACEFUL_STOP_TIMEOUT) is not None:
            self._time_at_least(GRACEFUL_STOP_TIMEOUT, 0)
        self.get_port(METRICS_PROMETHEUS_PORT, "9464")
        self.get_port(UI_PORT, "4050")
        self.get_int(UI_RETAINED_BATCHES, minimum=1)
        known = [key for key in DEFAULTS if key.startswith(_STREAM_PREFIX)]
        for key in self._set_keys():
            if key.startswith(_STREAM_PREFIX) and key not in DEFAULTS:
                close = difflib.get_close_matches(key, known, n=1)
                log.warning("%s is not a key dstream_kafka knows; it has no effect%s", key,
                            f" (did you mean {close[0]}?)" if close else "")

    def _set_keys(self) -> list[str]:
        conf = self._conf
        if conf is None:
            return []
        if isinstance(conf, Mapping):
            return [str(key) for key in conf]
        get_all = getattr(conf, "getAll", None)
        return [str(key) for key, _ in get_all()] if callable(get_all) else []


#: The reader's properties a direct stream uses, each strict about its value.
_STREAM_PROPERTIES = (
    "consumer_cache_enabled", "consumer_cache_pre_position", "poll_timeout_ms",
    "cache_initial_capacity", "cache_max_capacity", "cache_load_factor",
    "max_rate_per_partition", "min_rate_per_partition", "allow_non_consecutive_offsets",
    "max_retries", "retry_backoff_ms", "lookup_timeout_ms", "assignment_timeout_ms",
    "backpressure_enabled", "backpressure_initial_rate", "pid_proportional", "pid_integral",
    "pid_derived", "pid_min_rate", "stop_gracefully_on_shutdown", "concurrent_jobs",
    "polling_delay_ms",
    "consumer_backend", "lag_interval_ms",
    # Read by the Kafka output on the executors, so a bad value would fail only when a batch
    # writes: the configuration page promises every key fails at createDirectStream.
    "producer_cache_enabled",
)

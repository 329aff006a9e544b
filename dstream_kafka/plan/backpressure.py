"""Backpressure, as Spark's: a PID rate estimator and the controller that feeds it.

After each batch, :class:`RateController` hands the batch's size and delays to its
:class:`RateEstimator` on a background thread (Spark's ``RateController.scala``), and the next
batches are clamped to the resulting rate (:func:`estimated_rate`). :class:`PIDRateEstimator`
is ``PIDRateEstimator.scala``, configured by ``spark.streaming.backpressure.*``.
"""

from __future__ import annotations

import logging
import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as _wait_futures
from typing import Any, Protocol, runtime_checkable

from dstream_kafka.config import RATE_ESTIMATOR, SparkConfReader
from dstream_kafka.errors import ConfigurationError

__all__ = [
    "LONG_MAX",
    "LONG_MIN",
    "PIDRateEstimator",
    "RateController",
    "RateEstimator",
    "create_rate_estimator",
    "double_to_long",
    "estimated_rate",
]

log = logging.getLogger(__name__)

#: The range of a Java ``long``.
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def double_to_long(x: float) -> int:
    """Java's ``(long) x``: truncate toward zero, NaN to 0, saturate at the long range."""
    if math.isnan(x):
        return 0
    if x >= 9.223372036854775807e18:
        return LONG_MAX
    if x <= -9.223372036854775808e18:
        return LONG_MIN
    return int(x)


@runtime_checkable
class RateEstimator(Protocol):
    """**Protocol**: estimates how many records per second a stream should ingest."""

    def compute(
        self, time: int, numElements: int, processingDelay: int, schedulingDelay: int
    ) -> float | None:
        """Return a new rate after a batch, or ``None`` to keep the current one.

        ``time`` is the batch's processing end time in ms; the delays are in ms.
        """
        ...


class PIDRateEstimator:
    """Spark's proportional-integral-derivative rate estimator.

    The error is the difference between the previous rate and the measured processing rate;
    the integral term uses the scheduling delay as accumulated error. The first valid batch
    only records the processing rate and returns ``None``. Thread-safe.

    Parameters
    ----------
    batchIntervalMillis : int
        Batch interval in ms, ``> 0``.
    proportional, integral, derivative : float
        Gains, each ``>= 0`` (defaults 1.0, 0.2, 0.0).
    minRate : float
        Lowest rate ever returned, ``> 0`` (default 100).

    Raises
    ------
    ConfigurationError
        With Spark's message for an out-of-range parameter and the key that sets it.
    """

    def __init__(
        self,
        batchIntervalMillis: int,
        proportional: float = 1.0,
        integral: float = 0.2,
        derivative: float = 0.0,
        minRate: float = 100.0,
    ) -> None:
        checks = [
            (
                batchIntervalMillis > 0,
                f"Specified batch interval {batchIntervalMillis} in PIDRateEstimator is invalid. "
                "Use a batch duration of at least 1 ms",
            ),
            (
                proportional >= 0,
                f"Proportional term {proportional} in PIDRateEstimator should be >= 0. "
                "Set spark.streaming.backpressure.pid.proportional to a number >= 0 (default 1.0)",
            ),
            (
                integral >= 0,
                f"Integral term {integral} in PIDRateEstimator should be >= 0. "
                "Set spark.streaming.backpressure.pid.integral to a number >= 0 (default 0.2)",
            ),
            (
                derivative >= 0,
                f"Derivative term {derivative} in PIDRateEstimator should be >= 0. "
                "Set spark.streaming.backpressure.pid.derived to a number >= 0 (default 0.0)",
            ),
            (
                minRate > 0,
                "Minimum rate in PIDRateEstimator should be > 0. "
                "Set spark.streaming.backpressure.pid.minRate to a number > 0 (default 100)",
            ),
        ]
        for ok, message in checks:
            if not ok:  # also rejects NaN
                raise ConfigurationError(message)
        self.batchIntervalMillis = batchIntervalMillis
        self.proportional = float(proportional)
        self.integral = float(integral)
        self.derivative = float(derivative)
        self.minRate = float(minRate)
        self._lock = threading.Lock()
        self._first_run = True
        self._latest_time = -1
        self._latest_rate = -1.0
        self._latest_error = -1.0

    def compute(
        self, time: int, numElements: int, processingDelay: int, schedulingDelay: int
    ) -> float | None:
        """Update the estimate after a batch; see :class:`RateEstimator`.

        Skipped (``None``) unless ``time`` is later than the last update and the batch had
        records and a positive processing delay.
        """
        with self._lock:
            if not (time > self._latest_time and numElements > 0 and processingDelay > 0):
                return None
            delay_since_update = float(time - self._latest_time) / 1000
            processing_rate = float(numElements) / processingDelay * 1000
            error = self._latest_rate - processing_rate
            historical_error = float(schedulingDelay) * processing_rate / self.batchIntervalMillis
            d_error = (error - self._latest_error) / delay_since_update
            new_rate = max(
                self._latest_rate
                - self.proportional * error
                - self.integral * historical_error
                - self.derivative * d_error,
                self.minRate,
            )
            self._latest_time = time
            if self._first_run:
                self._latest_rate = processing_rate
                self._latest_error = 0.0
                self._first_run = False
                return None
            self._latest_rate = new_rate
            self._latest_error = error
            return new_rate

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def create_rate_estimator(conf: Any, batch_interval_ms: int) -> PIDRateEstimator:
    """Build the estimator named by ``spark.streaming.backpressure.rateEstimator``.

    Raises
    ------
    ConfigurationError
        ``Unknown rate estimator: X`` for any name but ``pid``.
    """
    reader = SparkConfReader(conf)
    name = reader.rate_estimator
    if name != "pid":
        raise ConfigurationError(
            f"Unknown rate estimator: {name}. Set {RATE_ESTIMATOR} to pid (the only estimator)"
        )
    return PIDRateEstimator(
        batch_interval_ms,
        reader.pid_proportional,
        reader.pid_integral,
        reader.pid_derived,
        reader.pid_min_rate,
    )


class RateController:
    """Keeps a stream's latest estimated rate, updated asynchronously after each batch.

    :meth:`on_batch_completed` hands the batch statistics to the estimator on a single
    worker thread (``stream-rate-update``), so updates run in order and never block the
    caller. The latest rate starts at ``-1`` (no estimate) and is stored truncated to an
    int. Thread-safe. Pickling keeps the estimator and resets the rate to ``-1``, as Spark's
    ``readObject`` does.

    Parameters
    ----------
    streamUID : int
        Id of the input stream whose record counts drive the estimate.
    rateEstimator : RateEstimator
    """

    def __init__(self, streamUID: int, rateEstimator: RateEstimator) -> None:
        self.streamUID = streamUID
        self.rateEstimator = rateEstimator
        self._init()

    def _init(self) -> None:
        self._lock = threading.Lock()
        self._rate_limit = -1
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None

    def publish(self, rate: int) -> None:
        """Hook called with each new rate; does nothing, as ``DirectKafkaRateController``."""

    def getLatestRate(self) -> int:
        """Return the latest estimated rate in records/s, or ``-1`` before the first one."""
        with self._lock:
            return self._rate_limit

    def _compute_and_publish(self, time: int, elements: int, work: int, wait: int) -> None:
        try:
            new_rate = self.rateEstimator.compute(time, elements, work, wait)
            if new_rate is not None:
                with self._lock:
                    self._rate_limit = double_to_long(float(new_rate))
                self.publish(self.getLatestRate())
        except Exception:  # an estimator bug must not kill the update thread
            log.exception(
                "Rate estimation failed for stream %s; keeping the previous rate", self.streamUID
            )

    def on_batch_completed(
        self,
        processingEndTime: int | None,
        numRecords: int | None,
        processingDelay: int | None,
        schedulingDelay: int | None,
    ) -> None:
        """Schedule an estimate for a completed batch; does nothing if any value is ``None``."""
        if (
            processingEndTime is None
            or numRecords is None
            or processingDelay is None
            or schedulingDelay is None
        ):
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="stream-rate-update"
                )
            self._last = self._executor.submit(
                self._compute_and_publish,
                processingEndTime,
                numRecords,
                processingDelay,
                schedulingDelay,
            )

    def await_pending(self, timeout: float | None = None) -> bool:
        """Wait until every scheduled update has run; return ``False`` on timeout."""
        with self._lock:
            last = self._last
        if last is None:
            return True
        done, _ = _wait_futures([last], timeout=timeout)
        return bool(done)

    def stop(self, wait: bool = True) -> None:
        """Stop the worker thread; updates already scheduled still run when ``wait``."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait)

    def __getstate__(self) -> dict[str, Any]:
        return {"streamUID": self.streamUID, "rateEstimator": self.rateEstimator}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init()


def estimated_rate(controller: RateController | None, initialRate: int = 0) -> int | None:
    """Spark's ``estimatedRateLimit``: ``None`` without a controller, else its latest rate
    when positive, else ``initialRate`` (``spark.streaming.backpressure.initialRate``)."""
    if controller is None:
        return None
    latest = controller.getLatestRate()
    return latest if latest > 0 else initialRate

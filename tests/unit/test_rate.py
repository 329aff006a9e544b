"""Unit and property tests for rate limits, the PID estimator and the rate controller."""

from __future__ import annotations

import pickle
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.backpressure import (
    PIDRateEstimator,
    RateController,
    RateEstimator,
    create_rate_estimator,
    estimated_rate,
)
from dstream_kafka.plan.rate import (
    DefaultPerPartitionConfig,
    PerPartitionConfig,
    clamp,
    max_messages_per_partition,
    max_offsets_per_trigger_limit,
)

PROPERTY = settings(max_examples=200, deadline=None)

TOPIC = "maxMessagesPerPartition"
tp0 = TopicPartition(TOPIC, 0)
tp1 = TopicPartition(TOPIC, 1)


class ConstantEstimator:
    """The DirectKafkaStreamSuite test double: always returns the configured rate."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def updateRate(self, rate: float) -> None:
        self.rate = rate

    def compute(
        self, time: int, numElements: int, processingDelay: int, schedulingDelay: int
    ) -> float | None:
        return self.rate


class ConstantRateController(RateController):
    """The DirectKafkaStreamSuite test double: a controller whose rate never changes."""

    def __init__(self, rate: int) -> None:
        super().__init__(0, ConstantEstimator(rate))
        self.rate = rate

    def getLatestRate(self) -> int:
        return self.rate


class TopicZeroAt50(PerPartitionConfig):
    def maxRatePerPartition(self, tp: TopicPartition) -> int:
        return 50 if tp == tp0 else 100


class ZeroForPartitionOne(PerPartitionConfig):
    def maxRatePerPartition(self, tp: TopicPartition) -> int:
        return 0 if tp == tp1 else 100


def suite_stream_limits(
    latest: dict, rate_controller: RateController | None, ppc: PerPartitionConfig | None = None
):
    """maxMessagesPerPartition as in DirectKafkaStreamSuite.getDirectKafkaStream: 100 ms
    batches, maxRatePerPartition 100, both partitions currently at offset 0."""
    ppc = ppc or DefaultPerPartitionConfig({"spark.streaming.kafka.maxRatePerPartition": "100"})
    current = {tp0: 0, tp1: 0}
    return max_messages_per_partition(latest, current, 0.1, ppc, estimated_rate(rate_controller, 0))


# -- DirectKafkaStreamSuite tests 8-14 -------------------------------------------------------


def test_max_messages_per_partition_with_backpressure_disabled() -> None:
    assert suite_stream_limits({tp0: 50, tp1: 50}, None) == {tp0: 10, tp1: 10}


def test_max_messages_per_partition_with_no_lag_is_none() -> None:
    assert suite_stream_limits({tp0: 0, tp1: 0}, ConstantRateController(100)) is None


def test_max_messages_per_partition_respects_max_rate() -> None:
    limits = suite_stream_limits(
        {tp0: 1000, tp1: 1000}, ConstantRateController(1000), TopicZeroAt50()
    )
    assert limits == {tp0: 5, tp1: 10}


def test_using_rate_controller_limits_batches_to_the_estimated_rate() -> None:
    # 1 partition, 5000 records, maxRate 100, 500 ms batches; estimator rates 100, 50, 20.
    tp = TopicPartition("backpressure", 0)
    ppc = DefaultPerPartitionConfig({"spark.streaming.kafka.maxRatePerPartition": "100"})
    estimator = ConstantEstimator(100)
    controller = RateController(0, estimator)
    state = {"current": {tp: 0}, "time": 0}
    latest = {tp: 5000}

    def run_batch() -> int:
        current = state["current"]
        until = clamp(latest, current, 0.5, ppc, estimated_rate(controller, 0))
        size = until[tp] - current[tp]
        state["current"], state["time"] = until, state["time"] + 500
        controller.on_batch_completed(state["time"], size, 100, 0)
        assert controller.await_pending(5)
        return size

    try:
        assert run_batch() == 50  # no estimate yet: maxRate 100 * 0.5 s
        for rate in (100, 50, 20):
            estimator.updateRate(rate)
            run_batch()  # completes with the new estimate
            assert run_batch() == round(rate * 500 * 0.001)
    finally:
        controller.stop()


def test_backpressure_initial_rate_honors_max_rate_per_partition() -> None:
    conf = {
        "spark.streaming.backpressure.enabled": "true",
        "spark.streaming.backpressure.initialRate": "500",
        "spark.streaming.kafka.maxRatePerPartition": "1000",
    }
    tp = TopicPartition("t", 0)
    controller = RateController(0, ConstantEstimator(0))  # no estimate yet: rate -1
    rate = estimated_rate(controller, 500)
    limits = max_messages_per_partition(
        {tp: 1000}, {tp: 0}, 0.5, DefaultPerPartitionConfig(conf), rate
    )
    assert limits == {tp: 250}


def test_backpressure_initial_rate_is_capped_by_max_rate() -> None:
    conf = {"spark.streaming.kafka.maxRatePerPartition": "300"}
    tp = TopicPartition("t", 0)
    rate = estimated_rate(RateController(0, ConstantEstimator(0)), 1000)
    limits = max_messages_per_partition(
        {tp: 1000}, {tp: 0}, 0.5, DefaultPerPartitionConfig(conf), rate
    )
    assert limits == {tp: 150}


def test_max_messages_with_zero_offset_and_rate_equal_to_the_minimum() -> None:
    conf = {
        "spark.streaming.kafka.maxRatePerPartition": "100",
        "spark.streaming.kafka.minRatePerPartition": "5",
    }
    parts = [TopicPartition("backpressure", p) for p in range(4)]
    current = {tp: 0 for tp in parts}
    latest = dict(zip(parts, [0, 100, 200, 300]))
    limits = max_messages_per_partition(
        latest,
        current,
        60.0,
        DefaultPerPartitionConfig(conf),
        estimated_rate(ConstantRateController(1), 0),
    )
    assert limits == dict(zip(parts, [5, 10, 20, 30]))


def test_partition_without_max_rate_next_to_limited_ones_gets_min_rate() -> None:
    # Spark quirk: no backpressure, maxRate 0 for tp1 -> max(long(0.1 * 0), minRate 1) == 1.
    limits = suite_stream_limits({tp0: 1000, tp1: 1000}, None, ZeroForPartitionOne())
    assert limits == {tp0: 10, tp1: 1}


# -- other rate arithmetic -------------------------------------------------------------------


def test_no_max_rate_and_no_backpressure_means_no_limit() -> None:
    ppc = DefaultPerPartitionConfig(None)
    assert max_messages_per_partition({tp0: 10**9}, {tp0: 0}, 1.0, ppc) is None
    assert clamp({tp0: 10**9}, {tp0: 0}, 1.0, ppc) == {tp0: 10**9}


def test_a_non_positive_estimated_rate_falls_back_to_max_rate() -> None:
    ppc = DefaultPerPartitionConfig({"spark.streaming.kafka.maxRatePerPartition": "100"})
    assert max_messages_per_partition({tp0: 500}, {tp0: 0}, 1.0, ppc, rate=0) == {tp0: 100}


def test_backpressure_share_is_truncated_toward_zero() -> None:
    ppc = DefaultPerPartitionConfig(None)
    # 1/3 and 2/3 of rate 10 over 1 s: 3.33 -> 3, 6.67 -> 6.
    assert max_messages_per_partition({tp0: 1, tp1: 2}, {tp0: 0, tp1: 0}, 1.0, ppc, rate=10) == {
        tp0: 3,
        tp1: 6,
    }


def test_lag_is_never_negative_when_latest_is_behind_current() -> None:
    ppc = DefaultPerPartitionConfig(None)
    assert max_messages_per_partition({tp0: 5, tp1: 100}, {tp0: 10, tp1: 0}, 1.0, ppc, rate=50) == {
        tp0: 1,
        tp1: 50,
    }


def test_clamp_caps_until_offsets_at_latest() -> None:
    ppc = DefaultPerPartitionConfig({"spark.streaming.kafka.maxRatePerPartition": "100"})
    assert clamp({tp0: 30, tp1: 500}, {tp0: 0, tp1: 0}, 1.0, ppc) == {tp0: 30, tp1: 100}


def test_max_messages_requires_a_current_offset_for_every_partition() -> None:
    with pytest.raises(KeyError, match="No current offset"):
        max_messages_per_partition({tp0: 5}, {}, 1.0, DefaultPerPartitionConfig(None))


def test_per_partition_config_default_min_rate_is_one() -> None:
    assert TopicZeroAt50().minRatePerPartition(tp0) == 1


def test_per_partition_config_requires_max_rate() -> None:
    with pytest.raises(TypeError):
        PerPartitionConfig()  # type: ignore[abstract]


def test_default_per_partition_config_reads_spark_defaults() -> None:
    ppc = DefaultPerPartitionConfig(None)
    assert (ppc.maxRatePerPartition(tp0), ppc.minRatePerPartition(tp0)) == (0, 1)


def test_default_per_partition_config_pickles() -> None:
    ppc = pickle.loads(
        pickle.dumps(DefaultPerPartitionConfig({"spark.streaming.kafka.maxRatePerPartition": "7"}))
    )
    assert ppc.maxRatePerPartition(tp0) == 7


def test_estimated_rate_is_none_without_a_controller() -> None:
    assert estimated_rate(None, 500) is None


def test_estimated_rate_prefers_the_controllers_positive_rate() -> None:
    assert estimated_rate(ConstantRateController(42), 500) == 42
    assert estimated_rate(ConstantRateController(0), 500) == 500


latest_current = st.dictionaries(
    st.integers(0, 5),
    st.tuples(st.integers(0, 10**9), st.integers(0, 10**6)),
    min_size=1,
    max_size=6,
)


@PROPERTY
@given(
    latest_current,
    st.sampled_from([0.001, 0.1, 0.5, 1.0, 60.0]),
    st.integers(0, 10**4),
    st.integers(0, 10),
    st.one_of(st.none(), st.integers(-5, 10**6), st.floats(0, 1e6)),
)
def test_rate_limits_never_exceed_latest_and_never_go_below_current(
    data: dict[int, tuple[int, int]], secs: float, max_rate: int, min_rate: int, rate: float | None
) -> None:
    current = {tp: c for tp, (c, _) in data.items()}
    latest = {tp: c + lag for tp, (c, lag) in data.items()}
    conf = {
        "spark.streaming.kafka.maxRatePerPartition": max_rate,
        "spark.streaming.kafka.minRatePerPartition": min_rate,
    }
    until = clamp(latest, current, secs, DefaultPerPartitionConfig(conf), rate)
    assert until.keys() == latest.keys()
    assert all(current[tp] <= until[tp] <= latest[tp] for tp in latest)


# -- maxOffsetsPerTrigger --------------------------------------------------------------------


def test_max_offsets_per_trigger_prorates_backlogs_and_does_not_starve_small_ones() -> None:
    start = {"big": 0, "middle": 0, "small": 0}
    latest = {"big": 101, "middle": 11, "small": 1}
    first = max_offsets_per_trigger_limit(10, start, latest)
    assert first == {"big": 8, "middle": 1, "small": 1}
    second = max_offsets_per_trigger_limit(10, first, latest)
    assert {tp: second[tp] - first[tp] for tp in latest} == {"big": 9, "middle": 1, "small": 0}


def test_max_offsets_per_trigger_without_backlog_returns_latest() -> None:
    assert max_offsets_per_trigger_limit(10, {"a": 5}, {"a": 5}) == {"a": 5}


def test_max_offsets_per_trigger_uses_new_partition_starts() -> None:
    result = max_offsets_per_trigger_limit(10, {"a": 0}, {"a": 10, "b": 10}, {"b": 0})
    assert result == {"a": 5, "b": 5}


def test_max_offsets_per_trigger_leaves_unknown_partitions_at_latest() -> None:
    assert max_offsets_per_trigger_limit(10, {"a": 0}, {"a": 100, "b": 7}) == {"a": 10, "b": 7}


def test_max_offsets_per_trigger_saturates_instead_of_overflowing() -> None:
    big = 2**63 - 1
    result = max_offsets_per_trigger_limit(big, {"a": big - 10}, {"a": big})
    assert result == {"a": big}


@PROPERTY
@given(latest_current, st.integers(1, 10**7))
def test_max_offsets_per_trigger_stays_between_start_and_latest(
    data: dict[int, tuple[int, int]], limit: int
) -> None:
    start = {tp: c for tp, (c, _) in data.items()}
    latest = {tp: c + lag for tp, (c, lag) in data.items()}
    until = max_offsets_per_trigger_limit(limit, start, latest)
    assert all(start[tp] <= until[tp] <= latest[tp] for tp in latest)
    backlog = sum(latest[tp] - start[tp] for tp in latest)
    # Each partition with backlog may round up by at most one offset.
    assert sum(until[tp] - start[tp] for tp in latest) <= min(backlog, limit + len(latest))


# -- PIDRateEstimator ------------------------------------------------------------------------


def test_pid_estimator_skips_the_first_batch() -> None:
    assert PIDRateEstimator(1000).compute(1000, 1000, 500, 0) is None


def test_pid_estimator_second_batch_follows_sparks_formula() -> None:
    pid = PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100)
    pid.compute(1000, 1000, 500, 0)  # records processingRate 2000
    # processingRate = 1500/1000*1000 = 1500; error = 2000 - 1500 = 500;
    # historicalError = 200 * 1500 / 1000 = 300; newRate = 2000 - 500 - 0.2 * 300 = 1440.
    assert pid.compute(2000, 1500, 1000, 200) == pytest.approx(1440.0)


def test_pid_estimator_derivative_term_uses_error_change_per_second() -> None:
    pid = PIDRateEstimator(1000, 0.0, 0.0, 1.0, 1)
    pid.compute(1000, 1000, 1000, 0)  # latestRate 1000, latestError 0
    # error = 1000 - 500 = 500 over 2 s: dError 250; newRate = 1000 - 250 = 750.
    assert pid.compute(3000, 500, 1000, 0) == pytest.approx(750.0)


def test_pid_estimator_never_goes_below_min_rate() -> None:
    pid = PIDRateEstimator(1000, minRate=100)
    pid.compute(1000, 1000, 1000, 0)
    assert pid.compute(2000, 1, 10000, 100000) == 100.0


@pytest.mark.parametrize(
    ("time", "elements", "processing"),
    [(500, 10, 10), (1000, 10, 10), (2000, 0, 10), (2000, 10, 0)],
)
def test_pid_estimator_skips_stale_empty_or_instant_batches(
    time: int, elements: int, processing: int
) -> None:
    pid = PIDRateEstimator(1000)
    pid.compute(1000, 1000, 1000, 0)
    assert pid.compute(time, elements, processing, 0) is None


def test_pid_estimator_is_a_rate_estimator_and_pickles() -> None:
    pid = PIDRateEstimator(1000)
    pid.compute(1000, 1000, 500, 0)
    clone = pickle.loads(pickle.dumps(pid))
    assert isinstance(clone, RateEstimator)
    assert clone.compute(2000, 1500, 1000, 200) == pid.compute(2000, 1500, 1000, 200)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batchIntervalMillis": 0}, "Specified batch interval 0 in PIDRateEstimator is invalid."),
        ({"proportional": -1.0}, "Proportional term -1.0 in PIDRateEstimator should be >= 0."),
        ({"integral": -0.5}, "Integral term -0.5 in PIDRateEstimator should be >= 0."),
        ({"derivative": -2.0}, "Derivative term -2.0 in PIDRateEstimator should be >= 0."),
        ({"minRate": 0}, "Minimum rate in PIDRateEstimator should be > 0"),
        ({"proportional": float("nan")}, "Proportional term nan"),
    ],
)
def test_pid_estimator_validates_parameters_with_sparks_messages(
    kwargs: dict, message: str
) -> None:
    args = {"batchIntervalMillis": 1000, **kwargs}
    with pytest.raises(ConfigurationError) as info:
        PIDRateEstimator(**args)
    assert str(info.value).startswith(message)


def test_create_rate_estimator_reads_the_pid_keys() -> None:
    conf = {
        "spark.streaming.backpressure.pid.proportional": "0.5",
        "spark.streaming.backpressure.pid.integral": "0.1",
        "spark.streaming.backpressure.pid.derived": "0.3",
        "spark.streaming.backpressure.pid.minRate": "7",
    }
    pid = create_rate_estimator(conf, 250)
    assert (
        pid.batchIntervalMillis,
        pid.proportional,
        pid.integral,
        pid.derivative,
        pid.minRate,
    ) == (250, 0.5, 0.1, 0.3, 7.0)


def test_create_rate_estimator_uses_sparks_defaults() -> None:
    pid = create_rate_estimator(None, 1000)
    assert (pid.proportional, pid.integral, pid.derivative, pid.minRate) == (1.0, 0.2, 0.0, 100.0)


def test_create_rate_estimator_rejects_an_unknown_estimator() -> None:
    with pytest.raises(ConfigurationError, match="^Unknown rate estimator: linear"):
        create_rate_estimator({"spark.streaming.backpressure.rateEstimator": "linear"}, 1000)


# -- RateController --------------------------------------------------------------------------


def test_rate_controller_starts_without_a_rate() -> None:
    assert RateController(0, ConstantEstimator(5)).getLatestRate() == -1


def test_rate_controller_stores_the_truncated_estimate_after_a_batch() -> None:
    controller = RateController(0, ConstantEstimator(123.9))
    controller.on_batch_completed(1000, 10, 5, 0)
    assert controller.await_pending(5)
    assert controller.getLatestRate() == 123
    controller.stop()


def test_rate_controller_keeps_its_rate_when_the_estimator_returns_none() -> None:
    controller = RateController(0, PIDRateEstimator(1000))
    controller.on_batch_completed(1000, 10, 5, 0)  # first PID run: None
    assert controller.await_pending(5)
    assert controller.getLatestRate() == -1
    controller.stop()


def test_rate_controller_ignores_batches_with_missing_information() -> None:
    estimator = ConstantEstimator(10)
    controller = RateController(0, estimator)
    controller.on_batch_completed(1000, None, 5, 0)
    assert controller.await_pending(5)
    assert controller.getLatestRate() == -1


def test_rate_controller_runs_estimates_off_the_calling_thread() -> None:
    release = threading.Event()
    threads: list[str] = []

    class Blocking:
        def compute(self, *args: int) -> float:
            threads.append(threading.current_thread().name)
            release.wait(5)
            return 7.0

    controller = RateController(0, Blocking())
    controller.on_batch_completed(1000, 10, 5, 0)  # returns while the estimate is blocked
    assert not controller.await_pending(0.05)
    release.set()
    assert controller.await_pending(5)
    assert controller.getLatestRate() == 7
    assert threads[0].startswith("stream-rate-update")
    controller.stop()


def test_rate_controller_applies_updates_in_order() -> None:
    estimator = ConstantEstimator(0)
    controller = RateController(0, estimator)
    seen: list[int] = []

    class Recording:
        def compute(self, time: int, *rest: int) -> float:
            seen.append(time)
            return float(time)

    controller.rateEstimator = Recording()
    for t in range(1, 21):
        controller.on_batch_completed(t, 1, 1, 0)
    assert controller.await_pending(5)
    assert seen == list(range(1, 21)) and controller.getLatestRate() == 20
    controller.stop()


def test_rate_controller_survives_an_estimator_error() -> None:
    class Failing:
        def compute(self, *args: int) -> float:
            raise RuntimeError("boom")

    controller = RateController(0, Failing())
    controller.on_batch_completed(1000, 10, 5, 0)
    assert controller.await_pending(5)
    assert controller.getLatestRate() == -1
    controller.rateEstimator = ConstantEstimator(3)
    controller.on_batch_completed(2000, 10, 5, 0)
    assert controller.await_pending(5)
    assert controller.getLatestRate() == 3
    controller.stop()


def test_rate_controller_calls_publish_with_the_new_rate() -> None:
    published: list[int] = []

    class Publishing(RateController):
        def publish(self, rate: int) -> None:
            published.append(rate)

    controller = Publishing(0, ConstantEstimator(42.5))
    controller.on_batch_completed(1000, 10, 5, 0)
    assert controller.await_pending(5)
    assert published == [42]
    controller.stop()


def test_rate_controller_pickles_with_a_fresh_rate() -> None:
    controller = RateController(3, ConstantEstimator(9))
    controller.on_batch_completed(1000, 10, 5, 0)
    assert controller.await_pending(5)
    clone = pickle.loads(pickle.dumps(controller))
    assert (clone.streamUID, clone.getLatestRate()) == (3, -1)
    controller.stop()

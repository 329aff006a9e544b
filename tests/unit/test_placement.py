"""Unit and property tests for location strategies and executor placement."""

from __future__ import annotations

import copy
import itertools
import pickle
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3.x uses importlib.resources APIs that warn on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.read.placement import (
    ExecutorLocation,
    LocationStrategies,
    LocationStrategy,
    PreferBrokers,
    PreferConsistent,
    PreferFixed,
    executor_location_string,
    locations_for,
    preferred_hosts_for,
    preferred_location,
    sort_executors,
)

PROPERTY = settings(max_examples=200, deadline=None)

executors = st.lists(
    st.tuples(st.sampled_from(["a", "b", "host-1", "host-2"]), st.integers(0, 20).map(str)),
    min_size=1,
    max_size=12,
    unique=True,
)
tps = st.builds(TopicPartition, st.text(min_size=1, max_size=12), st.integers(0, 2**31 - 1))


# -- strategies ------------------------------------------------------------------------------


def test_prefer_consistent_and_prefer_brokers_are_distinct_singletons() -> None:
    assert LocationStrategies.PreferConsistent is PreferConsistent
    assert LocationStrategies.PreferBrokers is PreferBrokers
    assert PreferConsistent is not PreferBrokers
    assert PreferConsistent != PreferBrokers
    assert type(PreferConsistent)() is PreferConsistent


def test_singletons_keep_identity_through_pickle_and_copy() -> None:
    for strategy in (PreferConsistent, PreferBrokers):
        assert pickle.loads(pickle.dumps(strategy)) is strategy
        assert copy.deepcopy(strategy) is strategy


def test_strategies_are_location_strategies() -> None:
    fixed = LocationStrategies.PreferFixed({("t", 0): "h"})
    assert all(isinstance(s, LocationStrategy) for s in (PreferConsistent, PreferBrokers, fixed))


def test_strategy_reprs_name_the_strategy() -> None:
    assert repr(PreferConsistent) == "PreferConsistent"
    assert repr(PreferBrokers) == "PreferBrokers"
    assert (
        repr(PreferFixed({("t", 0): "h"}))
        == "PreferFixed({TopicPartition(topic='t', partition=0): 'h'})"
    )


def test_prefer_fixed_compares_by_value_across_key_types() -> None:
    a = LocationStrategies.PreferFixed({kafka.TopicPartition("t", 0): "h1"})
    b = LocationStrategies.PreferFixed({("t", 0): "h1"})
    assert a == b and hash(a) == hash(b)
    assert a != PreferFixed({("t", 0): "h2"})
    assert a != PreferConsistent


def test_prefer_fixed_is_immutable_and_copies_its_map() -> None:
    source = {("t", 0): "h1"}
    fixed = PreferFixed(source)
    source[("t", 1)] = "h2"
    assert dict(fixed.hostMap) == {TopicPartition("t", 0): "h1"}
    with pytest.raises(TypeError):
        fixed.hostMap[TopicPartition("t", 2)] = "h3"  # type: ignore[index]
    with pytest.raises(AttributeError):
        fixed.hostMap = {}  # type: ignore[misc]


def test_prefer_fixed_pickles_to_an_equal_value() -> None:
    fixed = PreferFixed({("t", 0): "h1", ("u", 3): "h2"})
    assert pickle.loads(pickle.dumps(fixed)) == fixed


def test_prefer_fixed_supports_structural_matching() -> None:
    match PreferFixed({("t", 0): "h1"}):
        case PreferFixed(hostMap=hosts):
            assert hosts[TopicPartition("t", 0)] == "h1"
        case _:
            pytest.fail("PreferFixed did not match")


@pytest.mark.parametrize(
    ("host_map", "fragment"),
    [
        ([("t", 0)], "needs a mapping"),
        ({"t": "h"}, "PreferFixed key"),
        ({("t", -1): "h"}, "partition must be an int >= 0"),
        ({("t", 0): ""}, "non-empty host name"),
        ({("t", 0): None}, "non-empty host name"),
    ],
)
def test_prefer_fixed_validates_its_map(host_map: object, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        PreferFixed(host_map)  # type: ignore[arg-type]


def test_location_strategies_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError):
        LocationStrategies()


# -- executors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "perm", list(itertools.permutations([("a", "3"), ("a", "4"), ("b", "1"), ("b", "2")]))
)
def test_sort_executors_orders_host_then_executor_id_descending(
    perm: tuple[tuple[str, str], ...],
) -> None:
    assert sort_executors(perm) == [
        ExecutorLocation("b", "2"),
        ExecutorLocation("b", "1"),
        ExecutorLocation("a", "4"),
        ExecutorLocation("a", "3"),
    ]


def test_sort_executors_compares_executor_ids_as_strings() -> None:
    assert [e.executorId for e in sort_executors([("h", "10"), ("h", "9")])] == ["9", "10"]


def test_sort_executors_orders_by_utf16_code_units_like_java() -> None:
    # U+FF21 is one code unit 0xFF21; U+1F600 starts with surrogate 0xD83D, so Java sorts it
    # lower although its code point is higher.
    hosts = [e.host for e in sort_executors([("\U0001f600", "1"), ("\uff21", "1")])]
    assert hosts == ["\uff21", "\U0001f600"]


def test_sort_executors_rejects_non_string_ids() -> None:
    with pytest.raises(ConfigurationError, match="string executorId"):
        sort_executors([("h", 1)])  # type: ignore[list-item]


def test_executor_location_string_is_sparks_format() -> None:
    assert executor_location_string(ExecutorLocation("host1", "7")) == "executor_host1_7"
    assert str(ExecutorLocation("host1", "7")) == "executor_host1_7"
    assert executor_location_string(("h", "0")) == "executor_h_0"


# -- preferred_location ----------------------------------------------------------------------


def test_preferred_location_indexes_sorted_executors_by_partition_hash() -> None:
    execs = [("h", "1"), ("h", "2"), ("h", "3")]  # sorted: h3, h2, h1
    # javaHash: t1/1 -> 4637 % 3 == 2, t2/1 -> 4638 % 3 == 0, t3/1 -> 4639 % 3 == 1
    assert preferred_location(TopicPartition("t1", 1), execs) == "executor_h_1"
    assert preferred_location(TopicPartition("t2", 1), execs) == "executor_h_3"
    assert preferred_location(("t3", 1), execs) == "executor_h_2"


def test_preferred_location_uses_floor_mod_for_negative_hashes() -> None:
    tp = TopicPartition("polygenelubricants", 0)  # javaHash = 961 - 2**31, negative
    execs = [("h", str(i)) for i in range(7)]
    index = (961 - 2**31) % 7  # Java Math.floorMod
    expected = sort_executors(execs)[index]
    assert preferred_location(tp, execs) == str(expected)


def test_preferred_location_filters_to_the_preferred_hosts_executors() -> None:
    execs = [("a", "1"), ("b", "2"), ("b", "3")]
    assert preferred_location(("t", 0), execs, "a") == "executor_a_1"


def test_preferred_location_falls_back_to_all_executors_when_the_host_has_none() -> None:
    execs = [("a", "1"), ("b", "2")]
    assert preferred_location(("t", 0), execs, "elsewhere") == preferred_location(("t", 0), execs)


def test_preferred_location_without_executors_is_none() -> None:
    assert preferred_location(("t", 0), [], "a") is None


def test_preferred_location_can_skip_sorting_presorted_executors() -> None:
    execs = sort_executors([("a", "1"), ("b", "2"), ("c", "3")])
    assert preferred_location(("t", 5), execs, presorted=True) == preferred_location(
        ("t", 5), reversed(execs)
    )


@PROPERTY
@given(tps, executors)
def test_placement_is_stable_and_within_the_executor_list(
    tp: TopicPartition, execs: list[tuple[str, str]]
) -> None:
    chosen = preferred_location(tp, execs)
    assert chosen in {executor_location_string(e) for e in execs}
    assert preferred_location(tp, list(reversed(execs))) == chosen


@PROPERTY
@given(tps, executors, st.sampled_from(["a", "b", "host-1", "host-2"]))
def test_placement_with_a_preferred_host_stays_on_that_host_when_possible(
    tp: TopicPartition, execs: list[tuple[str, str]], host: str
) -> None:
    chosen = preferred_location(tp, execs, host)
    if any(h == host for h, _ in execs):
        assert chosen is not None and chosen.startswith(f"executor_{host}_")
    else:
        assert chosen == preferred_location(tp, execs)


# -- preferred_hosts_for ---------------------------------------------------------------------


def test_prefer_consistent_prefers_no_host() -> None:
    assert preferred_hosts_for(PreferConsistent, [("t", 0), ("t", 1)]) == {
        TopicPartition("t", 0): None,
        TopicPartition("t", 1): None,
    }


def test_prefer_fixed_prefers_mapped_hosts_and_nothing_for_the_rest() -> None:
    fixed = PreferFixed({("t", 0): "h1"})
    assert preferred_hosts_for(fixed, [kafka.TopicPartition("t", 0), ("t", 1)]) == {
        TopicPartition("t", 0): "h1",
        TopicPartition("t", 1): None,
    }


def test_prefer_brokers_asks_the_leader_lookup() -> None:
    leaders = {TopicPartition("t", 0): "broker1"}
    assert preferred_hosts_for(PreferBrokers, [("t", 0), ("t", 1)], leaders.get) == {
        TopicPartition("t", 0): "broker1",
        TopicPartition("t", 1): None,
    }


def test_prefer_brokers_without_a_lookup_raises_sparks_create_rdd_message() -> None:
    with pytest.raises(ConfigurationError, match="you must provide a mapping using PreferFixed"):
        preferred_hosts_for(PreferBrokers, [("t", 0)])


def test_an_unknown_strategy_is_rejected_with_the_valid_choices() -> None:
    with pytest.raises(ConfigurationError, match="LocationStrategies.PreferConsistent"):
        preferred_hosts_for("consistent", [("t", 0)])  # type: ignore[arg-type]


# -- locations_for ---------------------------------------------------------------------------


def test_locations_for_places_each_range_on_an_executor_of_its_preferred_host() -> None:
    execs = [ExecutorLocation("h1", "1"), ExecutorLocation("h2", "2"), ExecutorLocation("h2", "3")]
    ranges = [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 5)]
    fixed = PreferFixed({("t", 0): "h1", ("t", 1): "h2"})
    locations = locations_for(None, fixed, ranges, executors=execs)
    assert locations[0] == executor_location_string(ExecutorLocation("h1", "1"))
    assert locations[1] in {executor_location_string(e) for e in execs[1:]}


def test_locations_for_asks_the_leader_lookup_under_prefer_brokers() -> None:
    execs = [ExecutorLocation("h1", "1"), ExecutorLocation("h2", "2")]
    leaders = {TopicPartition("t", 0): "h2"}
    locations = locations_for(None, PreferBrokers, [OffsetRange("t", 0, 0, 5)], leaders.get,
                              executors=execs)
    assert locations == [executor_location_string(ExecutorLocation("h2", "2"))]

"""Consumer strategies validate their input before any consumer is created."""

from __future__ import annotations

import pickle

import pytest

from dstream_kafka import ConsumerStrategies, TopicPartition
from dstream_kafka.errors import ConfigurationError

PARAMS = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g"}


def test_subscribe_rejects_a_bare_string_and_shows_the_list_to_write():
    with pytest.raises(ConfigurationError, match=r"write \['events'\]"):
        ConsumerStrategies.Subscribe("events", PARAMS)


def test_subscribe_needs_a_group_id_and_points_to_assign():
    with pytest.raises(ConfigurationError, match="group.id.*Assign"):
        ConsumerStrategies.Subscribe(["events"], {"bootstrap.servers": "127.0.0.1:9"})


def test_every_strategy_needs_bootstrap_servers():
    with pytest.raises(ConfigurationError, match="bootstrap.servers"):
        ConsumerStrategies.Assign([TopicPartition("t", 0)], {"group.id": "g"})


def test_subscribe_pattern_rejects_an_invalid_regular_expression():
    with pytest.raises(ConfigurationError, match="not a valid regular expression"):
        ConsumerStrategies.SubscribePattern("events-(", PARAMS)


def test_starting_offsets_must_be_non_negative_ints_naming_the_partition():
    with pytest.raises(ConfigurationError, match="t-0 must be an int >= 0"):
        ConsumerStrategies.Subscribe(["t"], PARAMS, {TopicPartition("t", 0): -1})


def test_assign_needs_at_least_one_partition():
    with pytest.raises(ConfigurationError, match="at least one topic partition"):
        ConsumerStrategies.Assign([], PARAMS)


def test_strategies_are_immutable_values_with_equality():
    a = ConsumerStrategies.Subscribe(["t"], PARAMS, {("t", 0): 5})
    b = ConsumerStrategies.Subscribe(["t"], dict(PARAMS), {TopicPartition("t", 0): 5})
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.topics = ("other",)


def test_executor_params_are_a_copy_of_the_users_params():
    strategy = ConsumerStrategies.Assign([("t", 1)], PARAMS)
    params = strategy.executorKafkaParams
    params["group.id"] = "changed"
    assert strategy.executorKafkaParams["group.id"] == "g"


def test_strategies_declare_their_topics_and_starting_offsets():
    assert ConsumerStrategies.Subscribe(["b", "a"], PARAMS).topic_names() == ["b", "a"]
    assert ConsumerStrategies.Assign([("t", 1), ("s", 0), ("t", 0)], PARAMS).topic_names() == ["s", "t"]
    assert ConsumerStrategies.SubscribePattern("t.*", PARAMS).topic_names() is None
    offsets = ConsumerStrategies.Subscribe(["t"], PARAMS, {("t", 0): 5}).starting_offsets()
    assert offsets == {TopicPartition("t", 0): 5}


def test_strategies_pickle_as_equal_values_and_hide_their_params_from_repr():
    secret = {**PARAMS, "sasl.plain.password": "s3cret"}
    for strategy in (ConsumerStrategies.Subscribe(["t"], secret, {("t", 0): 5}),
                     ConsumerStrategies.SubscribePattern("t.*", secret),
                     ConsumerStrategies.Assign([("t", 1)], secret)):
        copy = pickle.loads(pickle.dumps(strategy))
        assert copy == strategy and hash(copy) == hash(strategy)
        assert "s3cret" not in repr(strategy)

"""stores/zookeeper.py bounded by its timeout: a store, and a stream, whose ZooKeeper server stops
(a private server, which the test stops), and a timeout that bounds nothing refused."""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import ConfigurationError, OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

from support import G, bounded, r


@pytest.fixture
def private_zookeeper() -> Iterator[Any]:
    """A ZooKeeper server of this test alone, so that the test may stop it."""
    from tests.support.zookeeper import ZooKeeperServer

    server = ZooKeeperServer().start()
    yield server
    server.stop()


ZK_TIMEOUT = 5.0


@pytest.fixture
def zk_store_without_server(private_zookeeper: Any, unique: Callable[[str], str]) -> Iterator[Any]:
    """A ZooKeeper store (timeout 5 s) that committed one batch, then lost its server."""
    from kazoo.client import KazooClient

    # A fresh server's first session can take longer than 5 s on two busy cores (class
    # loading in its JVM): open and close one under a generous bound first.
    warm = KazooClient(hosts=private_zookeeper.hosts)
    warm.start(timeout=60)
    warm.stop()
    warm.close()
    store = OffsetStores.zookeeper(private_zookeeper.hosts, timeout=ZK_TIMEOUT)
    store.commit(G, 1000, [r(0, 5)])
    private_zookeeper.stop()
    yield store
    bounded(store.close, 3 * ZK_TIMEOUT)


@pytest.mark.parametrize("call", ["load", "commit", "history", "record_data_loss", "data_losses"])
def test_a_zookeeper_store_call_fails_within_its_timeout_when_the_server_stops(zk_store_without_server, call):
    store = zk_store_without_server
    calls = {
        "load": lambda: store.load(G),
        "commit": lambda: store.commit(G, 2000, [r(5, 9)]),
        "history": lambda: store.history(G),
        "record_data_loss": lambda: store.record_data_loss(G, TopicPartition("events", 0), 5, 9, 2000),
        "data_losses": lambda: store.data_losses(G),
    }
    took, error, _ = bounded(calls[call], 6 * ZK_TIMEOUT)
    assert isinstance(error, OffsetStoreError), error
    assert "ZooKeeper" in str(error) and "timeout" in str(error)
    assert took < 2 * ZK_TIMEOUT + 2


def test_a_zookeeper_store_closes_within_its_timeout_when_the_server_is_gone(zk_store_without_server):
    took, error, _ = bounded(zk_store_without_server.close, 6 * ZK_TIMEOUT)
    assert error is None and took < ZK_TIMEOUT + 2


def _zookeeper_stream(kafka: Any, zookeeper: Any, make_ssc: Callable[..., Any],
                      unique: Callable[[str], str]) -> tuple[Any, Any]:
    """A context of 0.5 s batches and a stream over a new topic of 5 records, offsets in
    ``zookeeper`` (timeout 5 s)."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    topic = unique("t")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {"a": 5})
    ssc = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest"}
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params),
        offsetStore=OffsetStores.zookeeper(zookeeper.hosts, timeout=ZK_TIMEOUT))
    return ssc, stream


def test_a_stream_whose_zookeeper_stops_fails_its_batch_clearly_and_stops_in_bounded_time(
        kafka, private_zookeeper, make_ssc, unique):
    from support import wait_until

    ssc, stream = _zookeeper_stream(kafka, private_zookeeper, make_ssc, unique)
    seen: list[Any] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.collect()))
    ssc.start()
    wait_until(lambda: len(seen) >= 5, "the first records")
    private_zookeeper.stop()
    with pytest.raises(OffsetStoreError, match=r"ZooKeeper.*(timeout|connection to ZooKeeper was lost)"):
        ssc.awaitTerminationOrTimeout(10 * ZK_TIMEOUT)
    took, error, _ = bounded(lambda: ssc.stop(stopSparkContext=False), 6 * ZK_TIMEOUT)
    assert error is None and took < 2 * ZK_TIMEOUT + 5


def test_a_stream_committing_after_its_zookeeper_is_gone_fails_within_the_timeout_and_stops(
        kafka, private_zookeeper, make_ssc, unique):
    ssc, stream = _zookeeper_stream(kafka, private_zookeeper, make_ssc, unique)
    gone = threading.Event()

    def output(rdd: Any) -> None:
        # The batch's commit comes after its output: stop ZooKeeper in the output and let the
        # client notice, so the commit is queued by a reconnecting client (the hang of #18).
        if rdd.count() and not gone.is_set():
            private_zookeeper.stop()
            time.sleep(3)
            gone.set()

    stream.foreachRDD(output)
    ssc.start()
    with pytest.raises(OffsetStoreError, match=r"ZooKeeper.*(timeout|connection to ZooKeeper was lost)"):
        ssc.awaitTerminationOrTimeout(60 + 6 * ZK_TIMEOUT)
    assert gone.is_set()
    took, error, _ = bounded(lambda: ssc.stop(stopSparkContext=False), 6 * ZK_TIMEOUT)
    assert error is None and took < 2 * ZK_TIMEOUT + 5


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "5", None], ids=["zero", "negative", "inf", "str", "none"])
def test_a_zookeeper_store_refuses_a_timeout_that_bounds_nothing(zookeeper, timeout):
    with pytest.raises(ConfigurationError, match=rf"timeout.*{re.escape(repr(timeout))}.*timeout=15.0"):
        OffsetStores.zookeeper(zookeeper.hosts, timeout=timeout)

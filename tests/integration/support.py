"""Helpers the integration tests share: waiting for a condition, collecting batches, processes,
the store tests' group and ranges, and bounding a call that could hang.

Pytest puts this folder on ``sys.path`` (it has no ``__init__.py``), so test modules import it
as ``from support import wait_until``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from dstream_kafka.offsets import OffsetRange
    from dstream_kafka.streaming import DStream, StreamingContext

STRING_DESERIALIZER = "org.apache.kafka.common.serialization.StringDeserializer"
TIMEOUT = 90.0  # seconds; generous because two cores are shared with Kafka and Spark's JVMs


def wait_until(predicate: Callable[[], object], what: str = "the condition",
               timeout: float = TIMEOUT, interval: float = 0.01) -> None:
    """Return once ``predicate()`` is true, polling every ``interval`` seconds.

    Raises
    ------
    AssertionError
        Naming ``what``, when ``timeout`` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def poll_as_member(consumer: Any, timeout_ms: int = 100) -> Any:
    """Poll ``consumer`` once as a live group member: a rejoin kafka-python left stranded first.

    kafka-python 3.0.12 can leave a member REBALANCING with no rejoin wanted (see
    ``_kafka_internals.keep_rejoin_wanted``); polling alone then never brings its assignment.
    """
    from dstream_kafka import _kafka_internals

    _kafka_internals.keep_rejoin_wanted(consumer)
    return consumer.poll(timeout_ms=timeout_ms)


def collect(ssc: StreamingContext, stream: DStream[Any], n: int,
            sort_each: bool = False) -> list[list[Any]]:
    """Start ``ssc``, stop it after ``n`` batches of ``stream`` and return their records.

    ``sort_each`` sorts the records of each batch (for outputs whose order Spark leaves open).
    """
    batches: list[list[Any]] = []
    stream.foreachRDD(
        lambda rdd: batches.append(sorted(rdd.collect()) if sort_each else rdd.collect()))
    ssc.start()
    wait_until(lambda: len(batches) >= n, f"{n} batches of streaming output")
    ssc.stop(stopSparkContext=False)
    return batches[:n]


def string_params(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    """kafkaParams for the session's broker and ``group``: values arrive as str, then ``extra``."""
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
            "value.deserializer": STRING_DESERIALIZER, **extra}


def process_alive(pid: int) -> bool:
    """Return True while process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def check_loss_and_reset_continue_history(store: Any, group: str, tp: Any, t0: int) -> None:
    """Commit after ``store``'s newest batch (``group`` at offset 20 of ``tp``, batches before
    ``t0 + 2000``) across a data loss and a reset, checking each load: history checks must
    take both for links of the chain."""
    from dstream_kafka.offsets import OffsetRange

    store.record_data_loss(group, tp, 20, 25, None)
    assert store.load(group) == {tp: 25}
    store.commit(group, t0 + 2000, [OffsetRange(tp.topic, tp.partition, 25, 30)])
    store.reset(group, {tp: 4}, expected={tp: 30}, user="u", host="h", batch_time_ms=t0 + 3000)
    assert store.load(group) == {tp: 4}
    store.commit(group, t0 + 4000, [OffsetRange(tp.topic, tp.partition, 4, 9)])
    assert store.load(group) == {tp: 9}


G = "group-1"  # the store tests' group


def r(start: int, end: int, partition: int = 0, topic: str = "events") -> OffsetRange:
    """The store tests' offset range: ``[start, end)`` of partition 0 of topic events by default."""
    from dstream_kafka.offsets import OffsetRange

    return OffsetRange(topic, partition, start, end)


def bounded(call: Callable[[], Any], seconds: float) -> tuple[float, BaseException | None, Any]:
    """Run ``call`` in a thread; return (seconds taken, exception, result). Fails the test when
    the call is still running after ``seconds`` (the hang the bound must prevent)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - started
    assert not thread.is_alive(), f"the call was still running after {seconds} s"
    return took, box.get("error"), box.get("result")


def outage_after_first_commit(kafka: Any, ssc: StreamingContext, seen: list[Any], db: str,
                              group: str, topic: str, records: int = 10) -> None:
    """Kill ``kafka``'s single broker once ``ssc``'s stream saw ``records`` records and stored
    their offsets in the SQLite store ``db``, wait for the stream to fail with
    ``BrokerTimeoutError``, and start the broker again.

    The wait for the commit is the point: a stop abandons a batch whose commit has not happened
    yet (start-and-stop.rst), and the next stream would rightly read those records again.
    """
    import pytest

    from dstream_kafka.errors import BrokerTimeoutError
    from dstream_kafka.stores import OffsetStores

    wait_until(lambda: len(seen) == records, f"the first {records} records")
    wait_until(lambda: sum(OffsetStores.sqlite(db).load(group, [topic]).values()) == records,
               "the first batch's commit")
    (node,) = kafka.node_ids
    kafka.stop_broker(node, kill=True)
    with pytest.raises(BrokerTimeoutError):
        ssc.awaitTermination(timeout=60)
    kafka.start_broker(node)

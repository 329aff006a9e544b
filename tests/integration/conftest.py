"""Everything under tests/integration talks to real services.

Shared fixtures: ``contexts`` (StreamingContexts stopped after the test), ``make_ssc`` (a
factory for them), ``ssc`` (one context of 0.1 s batches; with a checkpoint folder when the
test carries the ``checkpointed`` mark), ``spark_conf`` (sets SparkConf keys for one test),
``own_kafka`` (a one-broker cluster a test may kill), ``topic`` (a new one-partition topic),
``text_topic`` (that topic holding five text records), ``read_only`` (a folder on a read-only
bind mount) and ``tiny_fs`` (a folder on a 64 KiB tmpfs). Shared helpers live in ``support.py``.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark import SparkContext

    from dstream_kafka.operate.services.kafka import KafkaCluster
    from dstream_kafka.streaming import StreamingContext

BATCH = 0.1  # seconds, the ssc fixture's batch interval


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "checkpointed: the ssc fixture's context checkpoints into the test's tmp_path")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _no_streaming_context_outlives_its_test() -> Iterator[None]:
    """Stop a StreamingContext a failed test left active, so one failure cannot cascade."""
    yield
    import sys

    streaming = sys.modules.get("dstream_kafka.streaming.context")
    if streaming is None:
        return
    active = streaming.StreamingContext.getActive()
    if active is not None:
        active.stop(stopSparkContext=False, stopGraceFully=False)


@pytest.fixture
def contexts() -> Iterator[list[StreamingContext]]:
    """StreamingContexts a test created; each is stopped (keeping the SparkContext) afterwards."""
    created: list[StreamingContext] = []
    yield created
    for context in created:
        context.stop(stopSparkContext=False, stopGraceFully=False)


@pytest.fixture
def make_ssc(sc: SparkContext,
             contexts: list[StreamingContext]) -> Callable[..., StreamingContext]:
    """Return ``make(batch=0.1)`` creating StreamingContexts that are stopped after the test."""
    from dstream_kafka.streaming import StreamingContext

    def make(batch: float = BATCH) -> StreamingContext:
        context = StreamingContext(sc, batch)
        contexts.append(context)
        return context

    return make


@pytest.fixture
def ssc(make_ssc: Callable[..., StreamingContext], request: pytest.FixtureRequest,
        tmp_path: Path) -> StreamingContext:
    """A fresh StreamingContext of 0.1 s batches, stopped (keeping the SparkContext) afterwards.

    A test marked ``checkpointed`` (``pytestmark = pytest.mark.checkpointed`` for a module) gets
    a context that checkpoints into ``tmp_path / "checkpoint"``.
    """
    context = make_ssc()
    if request.node.get_closest_marker("checkpointed") is not None:
        context.checkpoint(str(tmp_path / "checkpoint"))
    return context


@pytest.fixture(params=["kafka-python", "confluent-kafka"])
def backend(request, sc):
    """Run the test once per executor consumer backend (spark.streaming.kafka.consumer.backend).

    Opt in per module with ``pytestmark = pytest.mark.usefixtures("backend")``.
    """
    sc._conf.set("spark.streaming.kafka.consumer.backend", request.param)
    yield request.param
    sc._conf.set("spark.streaming.kafka.consumer.backend", "kafka-python")


@pytest.fixture
def spark_conf(sc: SparkContext) -> Iterator[Callable[[str, str], None]]:
    """Return ``set(key, value)`` for the session's SparkConf; every key set is restored after
    (removed when it was unset)."""
    conf = sc._conf
    touched: dict[str, str | None] = {}

    def set_(key: str, value: str) -> None:
        touched.setdefault(key, conf.get(key, None))
        conf.set(key, value)

    yield set_
    for key, old in touched.items():
        if old is None:
            conf._jconf.remove(key)
        else:
            conf.set(key, old)


@pytest.fixture
def own_kafka(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A one-broker cluster of this test's own, so killing it disturbs no other test."""
    from dstream_kafka.operate.services.kafka import KafkaCluster

    cluster = KafkaCluster(brokers=1, data_dir=tmp_path / "kafka", heap="256m",
                           quick_jvm=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    """A new topic of one partition, without records."""
    name = unique("hin")
    kafka.create_topic(name)
    return name


@pytest.fixture
def text_topic(kafka: Any, topic: str) -> str:
    """A topic holding five text records (keys and values are plain words)."""
    kafka.produce(topic, [(f"k{i}".encode(), f"word-{i}".encode()) for i in range(5)])
    return topic


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only bind mount (root ignores chmod 0555, not a read-only mount)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "existing").mkdir()
    if not (_mount("--bind", str(folder), str(folder)) and _mount("-o", "remount,bind,ro", str(folder))):
        subprocess.run(["umount", str(folder)], capture_output=True)
        pytest.skip("a read-only bind mount needs root with CAP_SYS_ADMIN")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 64 KiB tmpfs, to fill up."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)):
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)

"""Every Python example of README.rst and docs/ runs as written against the real services.

Each ``.. code-block:: python`` block is one test. It runs in this process (so it shares the
session's SparkContext, which ``SparkContext.getOrCreate`` returns) in an empty namespace, with
the working directory in a temporary folder and these environment variables, which the examples
read as a user's program would:

``KAFKA_BOOTSTRAP_SERVERS``
    the session's broker, with the topic ``events`` (two partitions, ``RECORDS`` records each);
``POSTGRES_DSN``
    the session's PostgreSQL server (started only for a block that reads it);
``HBASE_THRIFT``
    ``host:port`` of the session's HBase Thrift1 gateway (started only for a block that reads it);
``SCHEMA_REGISTRY_URL``
    the session's Schema Registry (Apicurio's Confluent API; started only for a block that reads it).

A streaming example ends with ``ssc.awaitTermination()``, which waits for a stop as a program
does; the test stops the example's ``ssc`` gracefully once its ``stream`` has read every record
of ``events``, and then checks that it read each exactly once. The literal blocks (``::``) are
shell commands and file trees, not Python, and are not run.
"""

from __future__ import annotations

import re
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:(?: {4}.*)?\n)+)", re.M)
TOPIC = "events"
PARTITIONS = 2
RECORDS = 150  # per partition; the batch example reads offsets 0-100 and 50-150
STREAM_TIMEOUT = 120.0  # seconds for a streaming example to read every record


def python_blocks() -> list[Any]:
    """One pytest parameter per Python code block, named ``<file>:<line>``."""
    params = []
    for path in [ROOT / "README.rst", *sorted((ROOT / "docs").glob("**/*.rst"))]:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            name = f"{path.relative_to(ROOT)}:{line}"
            params.append(pytest.param(textwrap.dedent(match.group(1)), id=name))
    return params


def test_the_documents_have_python_examples() -> None:
    names = [p.id for p in python_blocks()]
    assert any(n.startswith("README.rst") for n in names)
    assert any(n.startswith("docs/") for n in names)
    assert any(n.count("/") >= 2 for n in names), "no example found in a docs/ subfolder"


@pytest.fixture(scope="module")
def events(kafka: Any) -> str:
    """The topic ``events`` the examples read: keys ``k0``..``k9``, values ``v<n>``."""
    if not kafka.partitions_for(TOPIC):
        kafka.create_topic(TOPIC, partitions=PARTITIONS)
        for partition in range(PARTITIONS):
            kafka.produce(TOPIC, [(f"k{n % 10}", f"v{n}") for n in range(RECORDS)],
                          partition=partition)
    return TOPIC


@pytest.fixture
def example_env(request: pytest.FixtureRequest, kafka: Any, events: str, sc: Any,
                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The working directory and environment variables the examples expect."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka.bootstrap_servers)
    if "POSTGRES_DSN" in request.node.callspec.params["code"]:
        postgres = request.getfixturevalue("postgres")
        monkeypatch.setenv("POSTGRES_DSN", " ".join(
            f"{key}={value}" for key, value in postgres.dsn_params().items()))
    if "HBASE_THRIFT" in request.node.callspec.params["code"]:
        hbase = request.getfixturevalue("hbase")
        monkeypatch.setenv("HBASE_THRIFT", hbase.thrift_url)
    if "SCHEMA_REGISTRY_URL" in request.node.callspec.params["code"]:
        monkeypatch.setenv("SCHEMA_REGISTRY_URL", request.getfixturevalue("schema_registry").url)
    yield


class GracefulStopper(threading.Thread):
    """Stops the example's ``ssc`` gracefully once its ``stream`` read every record of ``events``."""

    def __init__(self, namespace: dict[str, Any], wanted: int) -> None:
        super().__init__(name="docs-example-stopper", daemon=True)
        self.namespace = namespace
        self.wanted = wanted
        self.finished = threading.Event()
        self.timed_out = False

    def records_read(self) -> int:
        stream = self.namespace.get("stream")
        progress = list(getattr(stream, "recentProgress", ()))
        return sum(p.numRecords for p in progress)

    def run(self) -> None:
        deadline = time.monotonic() + STREAM_TIMEOUT
        while not self.finished.wait(0.2):
            ssc = self.namespace.get("ssc")
            if ssc is None or ssc.getState() != "ACTIVE":
                continue
            done = self.records_read() >= self.wanted
            self.timed_out = not done and time.monotonic() > deadline
            if done or self.timed_out:
                ssc.stop(stopSparkContext=False, stopGraceFully=True)
                return


@pytest.mark.usefixtures("example_env")
@pytest.mark.parametrize("code", python_blocks())
def test_example_runs_as_written(code: str, request: pytest.FixtureRequest) -> None:
    before_root = set(ROOT.iterdir())
    namespace: dict[str, Any] = {"__name__": "__main__"}
    stopper = GracefulStopper(namespace, wanted=PARTITIONS * RECORDS)
    stopper.start()
    try:
        exec(compile(code, request.node.callspec.id, "exec"), namespace)
    finally:
        stopper.finished.set()
        stopper.join()
    # Spark's JVM resolves relative paths against the folder it started in (the checkout),
    # not against the example's working directory
    assert not set(ROOT.iterdir()) - before_root, "the example wrote into the checkout"
    assert not stopper.timed_out, f"the stream read {stopper.records_read()} records in {STREAM_TIMEOUT}s"
    if "ssc" in namespace and "stream" in namespace:
        assert stopper.records_read() == PARTITIONS * RECORDS

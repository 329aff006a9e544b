"""Session-scoped fixtures for the real local services, and unique names per test.

Services start on first use and stop at the end of the session; a test that never asks for
PostgreSQL never starts it. Names (topics, groups, tables) are unique per test so tests never
see each other's data.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

# The test services live in tests/support and are imported as tests.support. .ci/compat runs the
# tests from outside the checkout against the installed wheel: the repository root then goes on
# sys.path last, so that tests.support imports while dstream_kafka still comes from the wheel.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from dstream_kafka.spark_settings import prepare_environment  # noqa: E402

if TYPE_CHECKING:
    from pyspark import SparkContext

    from dstream_kafka.operate.services.hbase import HBaseServer
    from dstream_kafka.operate.services.kafka import KafkaCluster
    from tests.support.connect import ConnectServer
    from tests.support.postgres import PostgresServer
    from tests.support.registry import ApicurioRegistry, GatedRegistry
    from tests.support.spark_cluster import SparkStandaloneCluster
    from tests.support.zookeeper import ZooKeeperServer

prepare_environment()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--max-file-share", type=float, default=None, metavar="FRACTION",
                     help="fail the run when one test file takes more than this share of the "
                          "summed test time (tests/support/file_share.py)")


def pytest_configure(config: pytest.Config) -> None:
    max_share = config.getoption("--max-file-share")
    if max_share is not None:
        from tests.support.file_share import FileSharePlugin

        config.pluginmanager.register(FileSharePlugin(max_share), "file-share")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once when the package under test is not the installed one .ci/compat asks for."""
    import os

    import dstream_kafka

    expected = os.environ.get("DSTREAM_KAFKA_TEST_INSTALLED_IN")
    where = Path(dstream_kafka.__file__).resolve()
    if expected and not where.is_relative_to(Path(expected).resolve()):
        pytest.exit(f"dstream_kafka was imported from {where}, not from {expected}", returncode=3)

# Hypothesis's timing checks (deadline, too_slow) measure the machine, not the code: with two
# test workers and JVMs sharing two cores, a draw or an example can take seconds.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    """One real Kafka broker (KRaft) on 127.0.0.1 for the whole session."""
    from dstream_kafka.operate.services.kafka import KafkaCluster

    cluster = KafkaCluster(brokers=1, quick_jvm=True)
    cluster.start()
    yield cluster
    from dstream_kafka.client.offset_reader import close_offset_readers

    close_offset_readers()  # pooled driver clients would log connection errors after the stop
    cluster.stop()


@pytest.fixture(scope="session")
def kafka3() -> Iterator[KafkaCluster]:
    """Three brokers (replication 3, min.insync.replicas 2) for failure tests, started on demand."""
    from dstream_kafka.operate.services.kafka import KafkaCluster

    # A killed broker is fenced (its partitions get new leaders) after the controller misses
    # its heartbeats for broker.session.timeout.ms: 9 s by default, which the executors' poll
    # timeout (120 s by default, 10 s in this suite) rides out; 3 s keeps the tests short.
    # Each broker on its own loopback address (127.0.0.1-3), as hosts of a real cluster, so
    # PreferBrokers has leader hosts to tell apart.
    cluster = KafkaCluster(brokers=3, heap="384m", own_hosts=True, quick_jvm=True, broker_config={
        "min.insync.replicas": 2, "broker.session.timeout.ms": 3000,
        "broker.heartbeat.interval.ms": 500})
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One broker with PLAINTEXT, SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL listeners.

    PLAIN and SCRAM-SHA-512 users ``admin`` and ``alice`` with random passwords; certificates
    and keystores are generated for the session (``secured_kafka.security``).
    """
    from dstream_kafka.operate.services.kafka import KafkaCluster
    from tests.support.tls import BrokerSecurity

    security = BrokerSecurity.generate(tmp_path_factory.mktemp("pki"))
    cluster = KafkaCluster(brokers=1, heap="384m", security=security, quick_jvm=True)
    cluster.start()
    yield cluster
    from dstream_kafka.client.offset_reader import close_offset_readers

    close_offset_readers()
    cluster.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    """A Spark standalone master with two one-core workers on loopback (started on demand)."""
    from tests.support.spark_cluster import SparkStandaloneCluster

    # two executors on two loopback hosts (127.0.0.2 and .3, as kafka3's brokers 2 and 3)
    cluster = SparkStandaloneCluster(workers=2, cores=1, worker_hosts=("127.0.0.2", "127.0.0.3"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def connect_server() -> Iterator[ConnectServer]:
    """A Spark Connect server on local[2] with Spark's Kafka connector (started on demand)."""
    from benchmarks.jars import sql_kafka_jars
    from tests.support.connect import ConnectServer

    _, jars = sql_kafka_jars()
    server = ConnectServer(jars=jars)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL server with a password (to prove it never leaks)."""
    from tests.support.postgres import PostgresServer

    server = PostgresServer(password="pg-" + uuid.uuid4().hex)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    """A private ZooKeeper server."""
    from tests.support.zookeeper import ZooKeeperServer

    server = ZooKeeperServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[ApicurioRegistry]:
    """Apicurio Registry (Confluent-compatible API at ``.url``) on 127.0.0.1, in memory."""
    from tests.support.registry import ApicurioRegistry

    server = ApicurioRegistry()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def secured_schema_registry(schema_registry: ApicurioRegistry,
                            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedRegistry]:
    """The registry behind HTTPS (``.pki.ca_pem``) and basic auth (``.user``, ``.password``)."""
    from tests.support.registry import GatedRegistry
    from tests.support.tls import make_pki

    gate = GatedRegistry(schema_registry, make_pki(tmp_path_factory.mktemp("registry-pki")),
                         "registry-user", "sr-" + uuid.uuid4().hex)
    gate.start()
    yield gate
    gate.stop()


@pytest.fixture(scope="session")
def hbase() -> Iterator[HBaseServer]:
    """A standalone HBase 2.6 with its Thrift1 gateway on 127.0.0.1 (started on demand)."""
    from dstream_kafka.operate.services.hbase import HBaseServer

    server = HBaseServer()
    server.start(timeout=180.0)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sc() -> Iterator[SparkContext]:
    """One SparkContext on local[2] with the project's interpreter on the workers."""
    from pyspark import SparkContext

    from dstream_kafka.spark_settings import local_spark_conf

    conf = local_spark_conf(
        "local[2]", "dstream_kafka-tests",
        extra={"spark.streaming.kafka.consumer.poll.ms": "10000"},
    )
    context = SparkContext.getOrCreate(conf)
    context.setLogLevel("ERROR")
    yield context
    context.stop()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Return ``make(prefix)`` giving names unique to this test (topics, groups, tables)."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40].strip("-").lower()

    def make(prefix: str) -> str:
        return f"{prefix}-{base}-{uuid.uuid4().hex[:8]}"

    return make

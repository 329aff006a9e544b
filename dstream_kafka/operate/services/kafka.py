"""A real Apache Kafka cluster in KRaft mode on 127.0.0.1, from the jars on Maven Central.

Each node is one JVM that is both broker and controller (``process.roles=broker,controller``),
with free ports and its data under one folder. One node by default; three for failure tests.
This module holds the nodes' life cycle: their layout, ``server.properties``, storage format,
launch, readiness, and stopping and starting one broker. The cluster's clients and the test
helpers Spark's ``KafkaTestUtils`` had (create topics, produce keyed records, delete records)
come from its base class, :class:`~dstream_kafka.operate.services.kafka_clients.KafkaClusterClients`.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Mapping, Protocol, cast

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import (
    ManagedProcess,
    free_port,
    port_open,
    require_java,
    wait_until,
)
from dstream_kafka.operate.services.kafka_clients import KafkaClusterClients
from dstream_kafka.operate.services.lifeline import lock_holder
from dstream_kafka.operate.services.maven import KAFKA_VERSION, kafka_artifacts, resolve_classpath

__all__ = ["SECURE_PROTOCOLS", "BrokerSecurity", "KafkaCluster", "kafka_classpath",
           "listener_properties"]

#: Listener protocols a secured broker opens next to PLAINTEXT.
SECURE_PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


class BrokerSecurity(Protocol):
    """What a secured cluster needs: listener settings, SCRAM users and client settings.

    The repository's tests build one with throw-away TLS material (``tests/support/tls.py``);
    the package itself ships no certificate authority.
    """

    def server_properties(self) -> dict[str, Any]: ...

    def scram_arguments(self) -> list[str]: ...

    def client_params(self, protocol: str, **options: Any) -> dict[str, str]: ...


def listener_properties(port: int, controller_port: int, secure_ports: Mapping[str, int],
                        host: str = "127.0.0.1") -> dict[str, str]:
    """Return a node's listener settings on ``host``: PLAINTEXT on ``port``, one listener per
    entry of ``secure_ports`` (protocol -> port, named after its protocol) and the controller's."""
    ports = {"PLAINTEXT": port, **secure_ports}
    advertised = ",".join(f"{name}://{host}:{p}" for name, p in ports.items())
    return {
        "listeners": f"{advertised},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": advertised,
        "listener.security.protocol.map": ",".join(f"{name}:{name}" for name in ports)
        + ",CONTROLLER:PLAINTEXT",
    }


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.controller.name = org.apache.kafka.controller
logger.controller.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """Return the Java classpath of the Kafka broker and tools, resolving it on first use."""
    jars = resolve_classpath(f"kafka-{version}", kafka_artifacts(version))
    return os.pathsep.join(str(j) for j in jars)


def _kafka_uuid() -> str:
    # Kafka cluster ids are 16 random bytes in URL-safe base64 without padding; Kafka's own
    # generator avoids ids that start with '-', which its command-line parsing would misread.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# JVM flags of a node: G1 with short pauses for brokers that serve benchmarks and the demo; C1
# and the serial collector for short-lived processes and test brokers, where start-up CPU is
# most of the work (on 2 cores, 23% less CPU over the Kafka-heavy test files).
_SERVER_JVM = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
_QUICK_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class _Node:
    def __init__(self, node_id: int, root: Path, port: int, controller_port: int,
                 secure_ports: Mapping[str, int] | None = None, host: str = "127.0.0.1") -> None:
        self.node_id = node_id
        self.host = host
        self.dir = root / f"node-{node_id}"
        self.port = port
        self.controller_port = controller_port
        # protocol (SSL, SASL_PLAINTEXT, SASL_SSL) -> port of that listener
        self.secure_ports = dict(secure_ports or {})
        self.process: ManagedProcess | None = None

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"


class KafkaCluster(KafkaClusterClients):
    """A local Kafka cluster (KRaft, no ZooKeeper) for tests, demos and benchmarks.

    Parameters
    ----------
    brokers : int
        Number of nodes, each broker and controller. 1 by default; 3 for failure tests.
    data_dir : str or Path, optional
        Where logs and metadata live. A given folder is kept after :meth:`stop` and reused by a
        later start (same cluster id, same ports when free); by default a temporary folder is
        used and removed on stop.
    heap : str
        JVM heap of each node.
    broker_config : mapping, optional
        Extra ``server.properties`` entries for every node.
    security : BrokerSecurity, optional
        TLS material and SASL users (for instance ``tests/support/tls.py`` of this repository): every node then also
        opens ``SSL`` (mutual TLS), ``SASL_PLAINTEXT`` and ``SASL_SSL`` listeners with PLAIN
        and SCRAM-SHA-512; brokers and the harness clients keep talking PLAINTEXT.
    own_hosts : bool
        Node ``i`` listens on (and advertises) ``127.0.0.<i>`` instead of ``127.0.0.1``; every
        ``127.x.x.x`` address is this machine's loopback on Linux. Brokers then have distinct
        hosts, as on a real cluster, so ``PreferBrokers`` can be seen choosing executors by
        their leader's host.
    quick_jvm : bool
        Start each node with the C1 compiler only and the serial collector
        (``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``) instead of G1 and full tiered
        compilation: about 40% less CPU to start a node and serve a short test, at the cost of
        peak throughput. For test suites on small machines; benchmarks and the demo keep the
        defaults.

    Examples
    --------
    >>> with KafkaCluster() as kafka:                        # doctest: +SKIP
    ...     kafka.create_topic("t", partitions=4)
    ...     kafka.produce("t", [(b"k", b"v")])
    """

    def __init__(self, brokers: int = 1, data_dir: str | Path | None = None, heap: str = "512m",
                 broker_config: Mapping[str, Any] | None = None,
                 version: str = KAFKA_VERSION, security: BrokerSecurity | None = None,
                 own_hosts: bool = False, quick_jvm: bool = False) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        super().__init__()  # the cached admin client and producer
        self.brokers = brokers
        self.heap = heap
        self.version = version
        self.extra_config = dict(broker_config or {})
        self.security = security
        self.own_hosts = own_hosts
        self.quick_jvm = quick_jvm
        self._keep_data = data_dir is not None
        self._data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self._nodes: list[_Node] = []
        self._classpath: str | None = None
        self._java: str | None = None
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise ServiceError("the cluster has no data folder before start()")
        return self._data_dir

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` of every node, running or not."""
        return ",".join(f"{n.host}:{n.port}" for n in self._nodes)

    def bootstrap_servers_for(self, protocol: str) -> str:
        """Comma-separated ``host:port`` of every node's listener for ``protocol``."""
        if protocol == "PLAINTEXT":
            return self.bootstrap_servers
        if self.security is None or protocol not in SECURE_PROTOCOLS:
            raise ValueError(f"this cluster has no {protocol} listener; start it with security= "
                             f"for {', '.join(SECURE_PROTOCOLS)}")
        return ",".join(f"{n.host}:{n.secure_ports[protocol]}" for n in self._nodes)

    def client_params(self, protocol: str, **options: Any) -> dict[str, str]:
        """Return Java-spelled ``kafkaParams`` reaching the ``protocol`` listener.

        ``options`` go to :meth:`BrokerSecurity.client_params` (mechanism, user, password,
        store types); PLAINTEXT needs none.
        """
        params = {"bootstrap.servers": self.bootstrap_servers_for(protocol)}
        if protocol != "PLAINTEXT":
            assert self.security is not None
            params.update(self.security.client_params(protocol, **options))
        return params

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self._nodes]

    def host_of(self, node_id: int) -> str:
        """The address node ``node_id`` listens on and advertises (see ``own_hosts``)."""
        return self._node(node_id).host

    def broker_pids(self) -> dict[int, int | None]:
        return {n.node_id: (n.process.pid if n.process else None) for n in self._nodes}

    def __enter__(self) -> "KafkaCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> "KafkaCluster":
        """Resolve the jars if needed, format storage once, start every node and wait for them."""
        if self._started:
            return self
        self._java = require_java()
        self._classpath = kafka_classpath(self.version)
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="dstream-kafka-broker-"))
        self._data_dir.mkdir(parents=True, exist_ok=True)
        layout = self._load_or_create_layout()
        self._nodes = [
            _Node(n["node_id"], self._data_dir, n["port"], n["controller_port"],
                  n.get("secure_ports"),
                  f"127.0.0.{n['node_id']}" if self.own_hosts else "127.0.0.1")
            for n in layout["nodes"]
        ]
        for node in self._nodes:
            self._refuse_locked(node)  # before its files are touched
        for node in self._nodes:
            self._write_config(node)
        self._format(layout["cluster_id"])
        self._started = True
        atexit.register(self.stop)
        for node in self._nodes:
            self._launch(node)
        self._wait_ready(timeout, every_node=True)
        return self

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL) and remove a temporary data folder."""
        if not self._started:
            return
        self._started = False
        self._close_clients()
        # All nodes at once: stopped one by one, the last ones wait out their controlled
        # shutdown (30 s each) for a controller quorum that the first ones took away.
        stopping = [threading.Thread(target=node.process.stop, kwargs={"timeout": 30})
                    for node in self._nodes if node.process]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        if not self._keep_data and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass

    def stop_broker(self, node_id: int, kill: bool = False) -> None:
        """Stop one node; ``kill=True`` sends SIGKILL, as a crash would."""
        node = self._node(node_id)
        if node.process:
            if kill:
                node.process.kill()
            else:
                node.process.stop(timeout=30)
        self._close_clients()

    def start_broker(self, node_id: int, timeout: float = 90.0) -> None:
        """Start one stopped node again and wait until it serves requests."""
        node = self._node(node_id)
        if node.process and node.process.running():
            return
        self._launch(node)
        wait_until(lambda: port_open(node.port, node.host), timeout, f"Kafka node {node_id} to listen",
                   alive=node.process.death_note if node.process else None)
        self._wait_ready(timeout)
        # The cached admin client may still hold the cluster view (and controller) from before
        # the node came back, and name a broker its metadata no longer lists.
        self._close_clients()

    def _node(self, node_id: int) -> _Node:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        raise ValueError(f"no Kafka node {node_id}; nodes are {self.node_ids}")

    def _load_or_create_layout(self) -> dict[str, Any]:
        layout_path = self.data_dir / "cluster.json"
        if layout_path.is_file():
            layout = json.loads(layout_path.read_text())
            if len(layout["nodes"]) != self.brokers:
                raise ServiceError(
                    f"{self.data_dir} holds a {len(layout['nodes'])}-node cluster; start it with "
                    f"--brokers {len(layout['nodes'])} or choose another --data-dir"
                )
            for node in layout["nodes"]:
                # Reuse the recorded ports so clients and committed state stay valid; pick new
                # ones only if something else took them meanwhile.
                for key in ("port", "controller_port"):
                    if port_open(node[key]):
                        node[key] = free_port()
                self._add_secure_ports(node)
        else:
            layout = {
                "cluster_id": _kafka_uuid(),
                "version": self.version,
                "nodes": [
                    {"node_id": i + 1, "port": free_port(), "controller_port": free_port()}
                    for i in range(self.brokers)
                ],
            }
            for node in layout["nodes"]:
                self._add_secure_ports(node)
        layout_path.write_text(json.dumps(layout, indent=2))
        return cast("dict[str, Any]", layout)

    def _add_secure_ports(self, node: dict[str, Any]) -> None:
        ports = node.setdefault("secure_ports", {})
        for protocol in SECURE_PROTOCOLS if self.security else ():
            if protocol not in ports or port_open(ports[protocol]):
                ports[protocol] = free_port()

    def _write_config(self, node: _Node) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        n = len(self._nodes)
        rf = min(3, n)
        voters = ",".join(f"{m.node_id}@{m.host}:{m.controller_port}" for m in self._nodes)
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            **listener_properties(node.port, node.controller_port,
                                  node.secure_ports if self.security else {}, node.host),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.dir / "logs"),
            "num.partitions": 1,
            "default.replication.factor": rf,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": rf,
            # Few partitions for the internal topics: their creation dominates the first group
            # commit on a 2-core machine, and tests never need 50.
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.cleaner.backoff.ms": 500,
            "log.retention.check.interval.ms": 1000,
            "controlled.shutdown.enable": "true",
        }
        if self.security is not None:
            props.update(self.security.server_properties())
        props.update(self.extra_config)
        # Holds the SASL users' and keystores' passwords when secured: owner-only.
        node.config_path.touch(mode=0o600)
        node.config_path.chmod(0o600)
        node.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (node.dir / "log4j2.properties").write_text(_LOG4J2.format(log=node.dir / "server.log"))

    def _java_argv(self, main: str, *args: str, heap: str = "256m", node: _Node | None = None) -> list[str]:
        assert self._java and self._classpath
        # The storage tool runs for a second or two: C2 and G1 only cost it start-up CPU.
        quick = self.quick_jvm or node is None
        argv = [self._java, f"-Xmx{heap}", *(_QUICK_JVM if quick else _SERVER_JVM),
                "-Djava.awt.headless=true", "-cp", self._classpath]
        if node is not None:
            argv.insert(1, f"-Dlog4j2.configurationFile={node.dir / 'log4j2.properties'}")
            argv.insert(1, f"-Xms{self.heap}")
        return [*argv, main, *args]

    def _format(self, cluster_id: str) -> None:
        procs = []
        for node in self._nodes:
            if (node.dir / "logs" / "meta.properties").is_file():
                continue  # formatted by an earlier run: keep its data
            scram = self.security.scram_arguments() if self.security else []
            proc = ManagedProcess(
                f"kafka-storage format (node {node.node_id})",
                self._java_argv("kafka.tools.StorageTool", "format", "-t", cluster_id,
                                "-c", str(node.config_path), "--ignore-formatted", *scram),
                node.dir / "format.log",
            )
            proc.start()
            procs.append(proc)
        for proc in procs:
            assert proc.proc is not None
            if proc.proc.wait(timeout=120) != 0:
                raise ServiceError(f"{proc.name} failed:\n{proc.log_tail()}")

    def _refuse_locked(self, node: _Node) -> None:
        """Fail at once, naming the folder, the process and the fix, when another broker
        (typically one an earlier, killed run left behind) holds ``node``'s log folder."""
        logs = node.dir / "logs"
        holder = lock_holder(logs / ".lock")
        if holder is None:
            return
        who = f"process {holder}" if holder > 0 else "another process"
        stop = f"stop it (kill {holder})" if holder > 0 else "stop that broker"
        raise ServiceError(
            f"Failed to acquire lock on the Kafka log folder {logs}: {who} holds it, most likely a "
            f"broker left running by an earlier run that was killed; {stop} and start again, "
            "or use another data folder")

    def _launch(self, node: _Node) -> None:
        node.process = ManagedProcess(
            f"Kafka node {node.node_id}",
            self._java_argv("kafka.Kafka", str(node.config_path), heap=self.heap, node=node),
            node.dir / "stdout.log",
        )
        node.process.start()

    def _wait_ready(self, timeout: float, every_node: bool = False) -> None:
        # every_node: a fresh start, where a node that exited is a failure (not a node a test
        # stopped on purpose) and must not make the wait succeed with nothing listening.
        def all_listening() -> bool:
            return all(port_open(n.port, n.host) for n in self._nodes
                       if every_node or (n.process and n.process.running()))

        def died() -> str | None:
            for n in self._nodes:
                if n.process and not n.process.running():
                    note = n.process.death_note()
                    server_log = n.dir / "server.log"
                    if server_log.is_file():
                        text = server_log.read_text(errors="replace")
                        if "Failed to acquire lock" in text:
                            self._refuse_locked(n)  # raises naming the holder, while it lives
                        tail = text.splitlines()[-15:]
                        note = f"{note}\nserver.log:\n" + "\n".join(tail)
                    return note
            return None

        wait_until(all_listening, timeout, "Kafka to listen", alive=died)
        running = [n for n in self._nodes if n.process and n.process.running()]
        wait_until(lambda: self._brokers_registered() >= len(running), timeout,
                   f"{len(running)} Kafka broker(s) to register", interval=0.5, alive=died)

    def _brokers_registered(self) -> int:
        try:
            admin = self.admin()
            return len(admin.describe_cluster().get("brokers", []))
        except Exception:
            self._close_clients()
            return 0

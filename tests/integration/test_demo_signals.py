"""SIGTERM, as `timeout`, systemd and Kubernetes send it, to ``dstream-kafka demo`` and to a
streaming program; no server JVM (Kafka broker, Spark standalone master and worker, HBase)
outliving the process that started it; a broker left holding a data folder reported at once."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from dstream_kafka.operate.services.kafka import KafkaCluster

CLI = Path(sys.executable).with_name("dstream-kafka")
BOUND = 180.0  # seconds: a demo start (broker + Spark) on the loaded 2-core machine


def _broker_jvms(root: psutil.Process) -> list[psutil.Process]:
    found = []
    for proc in root.children(recursive=True):
        try:
            if "kafka.Kafka" in proc.cmdline():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _wait_for(check: Callable[[], Any], what: str, timeout: float = BOUND) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _records(line: str) -> int:
    """The record count of one of the demo's plain batch lines (0 for other lines)."""
    match = re.match(r"batch \S+ +records +(\d+)", line)
    return int(match.group(1)) if match else 0


def _all_gone(processes: list[psutil.Process]) -> bool:
    def gone(proc: psutil.Process) -> bool:
        try:
            return proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    return all(gone(p) for p in processes)


class Demo:
    """``dstream-kafka demo`` with its own broker in ``folder``, as the leader of its own
    process group, so a signal can go to the whole group as `timeout` sends it."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(CLI), "demo", "--data-dir", str(folder), "--rate", "50", "--batch-seconds", "1",
             *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []

    def read_until(self, check: Callable[[str], bool], what: str) -> str:
        """Read lines until ``check`` accepts one; a demo silent for :data:`BOUND` seconds is
        killed, which ends the read."""
        assert self.process.stdout is not None
        watchdog = threading.Timer(BOUND, self.kill)
        watchdog.start()
        try:
            while True:
                line = self.process.stdout.readline()
                assert line, f"the demo ended before {what}:\n{''.join(self.lines)}"
                self.lines.append(line)
                if check(line):
                    return line
        finally:
            watchdog.cancel()

    def terminate_group(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)  # what `timeout` and systemd send

    def finish(self) -> tuple[list[str], str]:
        """Wait for the exit; return the lines printed since the last read, and stderr."""
        rest, err = self.process.communicate(timeout=BOUND)
        return rest.splitlines(), err

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def run_demo(tmp_path: Path) -> Iterator[Callable[..., Demo]]:
    started: list[Demo] = []

    def start(*args: str) -> Demo:
        demo = Demo(tmp_path / "demo", *args)
        started.append(demo)
        return demo

    yield start
    for demo in started:
        demo.kill()


def _without_daemon_broken_pipe(err: str) -> str:
    """``err`` without PySpark's own daemon traceback of a worker that the group's SIGTERM
    caught mid-flush (``pyspark/daemon.py`` ... ``BrokenPipeError``): PySpark prints it, not
    the demo, when the JVM closes the worker's socket first."""
    return re.sub(r"Traceback \(most recent call last\):\n(?:  .*\n)*?  File \"[^\"]*pyspark/daemon\.py\""
                  r"(?:.*\n)*?BrokenPipeError: \[Errno 32\] Broken pipe\n?", "", err)


@pytest.mark.slow
def test_a_sigtermed_demo_commits_its_batch_exits_0_with_one_line_and_stops_its_broker(
        run_demo: Callable[..., Demo], tmp_path: Path) -> None:
    demo = run_demo()
    demo.read_until(lambda line: _records(line) > 0, "a batch with records")
    brokers = _broker_jvms(psutil.Process(demo.process.pid))
    assert brokers, "the demo started no broker JVM"
    demo.terminate_group()
    rest, err = demo.finish()
    assert demo.process.returncode == 0, err
    assert not any(word in _without_daemon_broken_pipe(err)
                   for word in ("Traceback", "Error", "ERROR", "refused")), err
    stops = [line for line in rest if "stopping" in line.lower()]
    assert stops == ["SIGTERM received: stopping gracefully (finishing the running batch) ..."]
    others = [line for line in rest if not line.startswith("batch ") and line not in stops]
    assert [line.split(" ")[0] for line in others] == ["Processed", "Totals:"], rest
    processed = int(others[0].split()[1])
    with sqlite3.connect(tmp_path / "demo" / "demo.db") as db:
        (counted,) = db.execute("SELECT SUM(total) FROM word_counts").fetchone()
    assert counted == 4 * processed > 0  # the last batch committed its counts and offsets
    assert _all_gone(brokers)


@pytest.mark.slow
def test_sigterm_during_the_demos_start_up_exits_0_with_one_line_and_leaves_no_broker(
        run_demo: Callable[..., Demo]) -> None:
    demo = run_demo()
    root = psutil.Process(demo.process.pid)
    brokers = _wait_for(lambda: _broker_jvms(root), "the demo's broker JVM")
    demo.terminate_group()
    rest, err = demo.finish()
    assert demo.process.returncode == 0, err
    assert "Traceback" not in err, err
    assert demo.lines + rest == [
        "Starting a local Kafka broker ...",
        "SIGTERM received during start-up: stopped before reading anything."]
    _wait_for(lambda: _all_gone(brokers), "the broker JVM to end", timeout=60)


@pytest.mark.slow
def test_a_broker_left_holding_the_demos_folder_is_reported_at_once_with_its_pid_and_fix(
        tmp_path: Path) -> None:
    with KafkaCluster(data_dir=tmp_path / "demo" / "broker") as stray:
        (pid,) = [p for p in stray.broker_pids().values() if p]
        started = time.monotonic()
        done = subprocess.run([str(CLI), "demo", "--data-dir", str(tmp_path / "demo")],
                              capture_output=True, text=True, timeout=BOUND)
        took = time.monotonic() - started
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Failed to acquire lock" in line
    assert str(tmp_path / "demo" / "broker" / "node-1" / "logs") in line
    assert f"process {pid} holds it" in line and f"kill {pid}" in line
    assert took < 30  # not the 60 s a KafkaTimeoutError took


_BROKER_PARENT = textwrap.dedent('''
    import sys, time
    from dstream_kafka.operate.services.kafka import KafkaCluster
    cluster = KafkaCluster(data_dir=sys.argv[1]).start()
    print(*[p for p in cluster.broker_pids().values() if p], flush=True)
    time.sleep(600)
''')
_SPARK_PARENT = textwrap.dedent('''
    import time
    from tests.support.spark_cluster import SparkStandaloneCluster
    cluster = SparkStandaloneCluster(workers=1).start()
    print(cluster.master_pid, *cluster.worker_pids, flush=True)
    time.sleep(600)
''')


_HBASE_PARENT = textwrap.dedent('''
    import time
    from dstream_kafka.operate.services.hbase import HBaseServer
    server = HBaseServer().start()
    print(*server.pids(), flush=True)
    time.sleep(600)
''')


@pytest.mark.parametrize("program_text", [_BROKER_PARENT, _SPARK_PARENT,
                                          pytest.param(_HBASE_PARENT, marks=pytest.mark.slow)],
                         ids=["kafka-broker", "spark-standalone-master-and-worker", "hbase"])
def test_a_sigkilled_program_takes_its_server_jvms_with_it(program_text: str,
                                                           tmp_path: Path) -> None:
    program = subprocess.Popen([sys.executable, "-c", program_text, str(tmp_path / "data")],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert program.stdout is not None
        watchdog = threading.Timer(BOUND, program.kill)  # a silent program ends the read
        watchdog.start()
        jvms = [psutil.Process(int(pid)) for pid in program.stdout.readline().split()]
        watchdog.cancel()
        assert jvms, "the program started no server"
        program.kill()
        program.wait()
        # SIGTERM: a clean stop, 6-12 s for HBase on two busy cores, longer under load.
        _wait_for(lambda: _all_gone(jvms), "the orphaned server JVMs to end")
    finally:
        if program.poll() is None:
            program.kill()


_STREAM_PROGRAM = textwrap.dedent('''
    import sys, time
    from pyspark import SparkContext
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
    from dstream_kafka.spark_settings import local_spark_conf
    from dstream_kafka.streaming import StreamingContext

    bootstrap, topic, group, db, graceful = sys.argv[1:]
    settings = {"spark.streaming.gracefulStopTimeout": "120s"}
    if graceful != "default":
        settings["spark.streaming.stopGracefullyOnShutdown"] = graceful
    sc = SparkContext(conf=local_spark_conf("local[2]", "sigterm-stream", extra=settings))
    sc.setLogLevel("ERROR")
    ssc = StreamingContext(sc, 0.5)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], {"bootstrap.servers": bootstrap, "group.id": group,
                                               "auto.offset.reset": "earliest"}),
        offsetStore=OffsetStores.sqlite(db), maxOffsetsPerTrigger=10)

    def slow(rdd):
        count = rdd.count()
        if count:
            print("BATCH", count, flush=True)
            time.sleep(1.0)  # SIGTERM lands while a batch runs and others queue

    stream.foreachRDD(slow)
    ssc.start()
    ssc.awaitTermination()
    sc.stop()
''')


@pytest.mark.parametrize("graceful", ["true", "default"])
def test_a_sigtermed_streaming_program_stops_commits_what_it_processed_and_exits_0_with_one_line(
        kafka: KafkaCluster, unique: Callable[[str], str], tmp_path: Path, graceful: str) -> None:
    """With spark.streaming.stopGracefullyOnShutdown=true the running and queued batches
    finish and commit; by default (Spark's: false) the stop completes no batch once it began
    (start-and-stop.rst): what committed are the batches that finished before the signal."""
    from dstream_kafka import OffsetStores

    topic, group, db = unique("sigterm"), unique("sigterm-g"), tmp_path / "offsets.db"
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [(str(i).encode(), b"x") for i in range(40)])
    program = subprocess.Popen(
        [sys.executable, "-c", _STREAM_PROGRAM, kafka.bootstrap_servers, topic, group, str(db),
         graceful],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert program.stdout is not None
        watchdog = threading.Timer(BOUND, program.kill)  # a silent program ends the read
        watchdog.start()
        first = program.stdout.readline()
        watchdog.cancel()
        assert first.startswith("BATCH "), first
        program.send_signal(signal.SIGTERM)  # as Kubernetes sends it: to the process only
        out, err = program.communicate(timeout=BOUND)
    finally:
        if program.poll() is None:
            program.kill()
    assert program.returncode == 0, err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if "SIGTERM" in line] == [
        "SIGTERM received: stopping the StreamingContext"]
    counts = [int(line.split()[1]) for line in [first, *out.splitlines()]]
    stored = sum(OffsetStores.sqlite(db).load(group, [topic]).values())
    if graceful == "true":
        assert stored == sum(counts)  # the running and queued batches committed
    else:
        # The batch running at the signal never commits (it is read again at the next
        # start); each batch before it did. Batches run one at a time, in order.
        assert stored in {sum(counts[:done]) for done in range(len(counts))}, (stored, counts)

"""CPU and memory of a contender's process tree, and the facts about the machine.

Peak memory is sampled (every 100 ms) over the whole tree of the contender's process and split
into the *driver* side (the root process and any JVM it starts: Spark's driver and, in local
mode, its executors) and the *workers* (every other Python process: PySpark's daemon and
workers, or a raw loop's reader processes); a load generator the contender starts (the steady
workload's producer) is left out. CPU seconds come from the contender itself for its
timed region when it can tell them (:func:`tree_cpu_seconds`), otherwise from ``wait4`` over the
whole process lifetime, which the report marks.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TreeSampler", "tree_cpu_seconds", "machine_facts", "Usage", "LOAD_GENERATOR_MARK",
           "tree_roles", "role_usage"]

#: A process whose command line holds this is a load generator (the steady workload's producer,
#: see :data:`benchmarks.steady.PRODUCER_MARK`): left out of the contender's peak memory.
LOAD_GENERATOR_MARK = "org.apache.kafka.tools.ProducerPerformance"


@dataclass
class Usage:
    """What :class:`TreeSampler` saw: peak resident memory per side, in MiB."""

    peak_rss_driver_mb: float = 0.0
    peak_rss_workers_mb: float = 0.0
    peak_rss_total_mb: float = 0.0
    max_processes: int = 0
    samples: int = 0
    names: set[str] = field(default_factory=set)


def _tree(root: Any) -> list[Any]:
    import psutil

    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _is_driver(proc: Any, root_pid: int) -> bool:
    import psutil

    if proc.pid == root_pid:
        return True
    try:
        return proc.name().startswith("java")
    except psutil.Error:
        return False


class TreeSampler:
    """Sample the RSS of ``pid`` and all its descendants on a background thread.

    Parameters
    ----------
    pid : int
        Root of the tree (the contender's process).
    interval : float
        Seconds between samples.
    """

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.usage = Usage()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sampler-{pid}", daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        load_generators: dict[int, bool] = {}
        while not self._stop.is_set():
            driver = workers = 0
            procs = _tree(root)
            if not procs:
                break
            for proc in procs:
                if _is_load_generator(proc, load_generators):
                    continue
                try:
                    rss = proc.memory_info().rss
                    self.usage.names.add(proc.name())
                except psutil.Error:
                    continue
                if _is_driver(proc, self.pid):
                    driver += rss
                else:
                    workers += rss
            u = self.usage
            u.samples += 1
            u.max_processes = max(u.max_processes, len(procs))
            u.peak_rss_driver_mb = max(u.peak_rss_driver_mb, driver / 2**20)
            u.peak_rss_workers_mb = max(u.peak_rss_workers_mb, workers / 2**20)
            u.peak_rss_total_mb = max(u.peak_rss_total_mb, (driver + workers) / 2**20)
            self._stop.wait(self.interval)


def tree_roles(root: Any, seen: dict[int, bool] | None = None) -> dict[str, list[Any]]:
    """The live processes of ``root``'s tree (a ``psutil.Process``) by role.

    ``driver_py``: the root (the contender's Python driver); ``driver_jvm``: its JVMs (Spark's
    driver and, in local mode, its executors); ``workers``: every other Python process
    (PySpark's daemon and workers). Load generators (:data:`LOAD_GENERATOR_MARK`) and other
    programs are left out. ``seen`` caches the load-generator test per pid across calls.
    """
    import psutil

    seen = {} if seen is None else seen
    roles: dict[str, list[Any]] = {"driver_py": [], "driver_jvm": [], "workers": []}
    for proc in _tree(root):
        if proc.pid == root.pid:
            roles["driver_py"].append(proc)
            continue
        if _is_load_generator(proc, seen):
            continue
        try:
            name = proc.name()
        except psutil.Error:
            continue
        if _is_driver(proc, root.pid):
            roles["driver_jvm"].append(proc)
        elif name.startswith("python"):
            roles["workers"].append(proc)
    return roles


def role_usage(procs: list[Any], counts: bool = False) -> dict[str, float]:
    """Summed resident memory (``rss_mb``, MiB) of ``procs`` and, with ``counts``, their open
    file descriptors (``fds``) and threads (``threads``); ``processes`` is how many answered. A
    process that exits meanwhile counts for nothing."""
    import psutil

    out = {"rss_mb": 0.0, "processes": 0.0, **({"fds": 0.0, "threads": 0.0} if counts else {})}
    for proc in procs:
        try:
            rss = proc.memory_info().rss / 2**20
            fds, threads = (proc.num_fds(), proc.num_threads()) if counts else (0, 0)
        except psutil.Error:
            continue
        out["rss_mb"] += rss
        out["processes"] += 1
        if counts:
            out["fds"] += fds
            out["threads"] += threads
    return out


def _is_load_generator(proc: Any, seen: dict[int, bool]) -> bool:
    """True for the steady workload's producer JVM (a child of the contender, not part of it)."""
    import psutil

    if proc.pid not in seen:
        try:
            seen[proc.pid] = any(LOAD_GENERATOR_MARK in part for part in proc.cmdline())
        except psutil.Error:
            return False
    return seen[proc.pid]


def tree_cpu_seconds(pid: int | None = None) -> float:
    """Return user+system CPU seconds of ``pid`` (default: this process) and its live descendants.

    Includes the CPU of children that were already reaped (``children_user``), so calling it at
    the start and end of a timed region and subtracting gives the tree's CPU for that region as
    long as no descendant exits unreaped inside it.
    """
    import psutil

    root = psutil.Process(pid or os.getpid())
    total = 0.0
    for proc in _tree(root):
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def machine_facts() -> dict[str, Any]:
    """Return the machine and versions the run was measured on."""
    import psutil

    facts: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": os.getloadavg(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "python": sys.version.split()[0],
    }
    for module in ("pyspark", "kafka", "confluent_kafka", "psutil", "psycopg2", "crc32c"):
        try:
            mod = __import__(module)
            version = getattr(mod, "__version__", None)
            if module == "confluent_kafka":
                client = mod.version()  # a string in some releases, (string, int) in others
                client = client if isinstance(client, str) else client[0]
                version = f"{client} (librdkafka {mod.libversion()[0]})"
            facts[f"{module}_version"] = version
        except Exception:
            facts[f"{module}_version"] = None
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        facts["java"] = (out.stderr or out.stdout).splitlines()[0]
    except Exception:
        facts["java"] = None
    return facts


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def wall() -> float:
    """A monotonic clock in seconds (one place to change it)."""
    return time.perf_counter()

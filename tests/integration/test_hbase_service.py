"""The real standalone HBase 2.6.1 + Thrift1 gateway that the HBase offset store stands on.

One server is shared by the session (the ``hbase`` fixture of ``tests/conftest.py``); the
lifecycle and failure tests start their own.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from support import process_alive

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.hbase import HBaseServer

pytestmark = pytest.mark.integration


def _start(server: HBaseServer, timeout: float = 180.0) -> HBaseServer:
    return server.start(timeout=timeout)


def _listening_addresses(pid: int) -> set[tuple[str, int]]:
    """Return the (IPv4 address, port) pairs that process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = local.split(":")
            if table == "tcp":
                addr = ".".join(str(b) for b in reversed(bytes.fromhex(addr_hex)))
            else:
                addr = "v6:" + addr_hex
            found.add((addr, int(port_hex, 16)))
    return found


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_listens_only_on_loopback_with_one_small_jvm(hbase):
    assert hbase.host == "127.0.0.1"
    assert hbase.running()
    assert len(hbase.pids()) == (1 if hbase.single_jvm else 2)
    ports = {hbase.thrift_port, hbase.zookeeper_port, hbase.master_port, hbase.regionserver_port}
    assert len(ports) == 4 and 0 not in ports
    listening = set().union(*(_listening_addresses(pid) for pid in hbase.pids()))
    assert listening == {("127.0.0.1", port) for port in ports}
    rss = hbase.rss_bytes()
    assert 0 < rss < 768 * 2**20, f"HBase uses {rss / 2**20:.0f} MiB resident"
    site = (hbase.conf_dir / "hbase-site.xml").read_text()
    assert "0.0.0.0" not in site
    assert hbase.data_dir.as_uri() in site  # the root folder is this server's own temporary folder


def test_table_with_ttl_put_get_and_reversed_prefix_scan(hbase):
    table_name = _name("offsets")
    conn = hbase.connection()
    try:
        conn.create_table(table_name, {"offsets": dict(time_to_live=2592000, max_versions=1,
                                                       block_cache_enabled=True)})
        families = conn.table(table_name).families()
        assert families[b"offsets"]["time_to_live"] == 2592000
        assert families[b"offsets"]["max_versions"] == 1
        assert families[b"offsets"]["block_cache_enabled"] is True

        table = conn.table(table_name)
        # The offset-management layout: <topic>:<group>:<13-digit batch time ms>, one column per
        # partition; a neighbouring group and topic share the table.
        for batch_ms, offsets in [(1700000000000, (10, 20)), (1700000005000, (15, 27)),
                                  (1700000010000, (30, 41))]:
            table.put(f"t1:g1:{batch_ms}".encode(),
                      {f"offsets:{p}".encode(): str(o).encode() for p, o in enumerate(offsets)})
        table.put(b"t1:g1;", {b"offsets:0": b"999"})  # the row happybase's row_prefix+reverse hits
        table.put(b"t1:g2:1800000000000", {b"offsets:0": b"5"})
        table.put(b"t2:g1:1800000000000", {b"offsets:0": b"6"})

        assert table.row(b"t1:g1:1700000005000") == {b"offsets:0": b"15", b"offsets:1": b"27"}
        prefix = b"t1:g1:"
        newest = list(table.scan(row_start=prefix + b"\xff", row_stop=prefix, reverse=True, limit=1))
        assert newest == [(b"t1:g1:1700000010000", {b"offsets:0": b"30", b"offsets:1": b"41"})]
        history = [key for key, _ in table.scan(row_start=prefix + b"\xff", row_stop=prefix,
                                                reverse=True)]
        assert history == [b"t1:g1:1700000010000", b"t1:g1:1700000005000", b"t1:g1:1700000000000"]
    finally:
        try:
            conn.delete_table(table_name, disable=True)
        finally:
            conn.close()


def test_cells_older_than_the_family_ttl_are_not_returned(hbase):
    table_name = _name("ttl")
    conn = hbase.connection()
    try:
        conn.create_table(table_name, {"offsets": dict(time_to_live=1, max_versions=1)})
        table = conn.table(table_name)
        table.put(b"k", {b"offsets:0": b"1"})
        old_ms = int(time.time() * 1000) - 60_000
        table.put(b"old", {b"offsets:0": b"1"}, timestamp=old_ms)
        assert table.row(b"old") == {}
        time.sleep(2.5)
        assert table.row(b"k") == {}
    finally:
        try:
            conn.delete_table(table_name, disable=True)
        finally:
            conn.close()


def test_stop_leaves_no_process_and_no_folder():
    server = HBaseServer()
    began = time.monotonic()
    _start(server)
    ready_after = time.monotonic() - began
    pids = server.pids()
    root = server.data_dir
    assert pids and all(process_alive(p) for p in pids)
    assert root.is_dir()
    conn = server.connection()
    try:
        assert isinstance(conn.tables(), list)
    finally:
        conn.close()
    rss = server.rss_bytes()
    server.stop()
    assert server.stop_seconds is not None and server.stop_seconds < 20
    assert not any(process_alive(p) for p in pids)
    assert not root.exists()
    assert server.pids() == [] and server.rss_bytes() == 0 and not server.running()
    server.stop()  # a second stop is a no-op
    print(f"\nHBase ready after {ready_after:.1f}s, {rss / 2**20:.0f} MiB resident, "
          f"stopped in {server.stop_seconds:.1f}s")


def test_a_deadline_ends_a_start_that_is_not_ready_and_cleans_up():
    server = HBaseServer()
    with pytest.raises(ServiceError, match=r"did not answer on 127\.0\.0\.1:\d+ within 1s") as info:
        _start(server, timeout=1.0)
    assert "java.class.path" not in str(info.value)
    assert server.pids() == []
    assert server._root is not None and not server._root.exists()


def test_a_jvm_that_dies_at_start_raises_with_its_log_tail():
    server = HBaseServer(heap="1x")  # the JVM refuses the heap size and exits at once
    with pytest.raises(ServiceError, match="exited with code") as info:
        _start(server, timeout=60.0)
    message = str(info.value)
    assert "Invalid maximum heap size" in message
    assert "java.class.path" not in message and "CLASSPATH" not in message
    assert server.pids() == []
    assert server._root is not None and not server._root.exists()


@pytest.mark.slow  # two HBase starts: 40-85 s on two shared cores (load average 6-16)
def test_a_given_data_folder_is_kept_and_its_tables_survive_a_clean_restart(tmp_path):
    data = tmp_path / "hbase-data"
    server = HBaseServer(data_dir=data)
    _start(server)
    try:
        conn = server.connection()
        try:
            conn.create_table("kept", {"offsets": dict(max_versions=1)})
            conn.table("kept").put(b"t:g:1700000000000", {b"offsets:0": b"42"})
        finally:
            conn.close()
        pids, thrift_port = server.pids(), server.thrift_port
        server.stop()  # SIGTERM, and a clean shutdown well within the 60 s grace
        assert server.stop_seconds is not None and server.stop_seconds < 60
        assert not any(process_alive(p) for p in pids)
        assert (data / "hbase").is_dir()

        _start(server)
        assert server.thrift_port == thrift_port  # the same address when the port is still free
        assert server.single_jvm == (len(server.pids()) == 1)
        conn = server.connection()
        try:
            assert b"kept" in conn.tables()
            assert conn.table("kept").row(b"t:g:1700000000000") == {b"offsets:0": b"42"}
        finally:
            conn.close()
    finally:
        # The clean shutdown was shown above; this folder is thrown away with tmp_path, so the
        # last stop need not wait for another one (it took up to 40 s on two busy cores).
        server.stop_grace = 2.0
        server.stop()
    assert data.is_dir()

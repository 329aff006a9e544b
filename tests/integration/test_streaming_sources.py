"""Spark's basic sources on the real local Spark: textFileStream and binaryRecordsStream
against real files, socketTextStream against a real loopback TCP server."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from pyspark import SparkContext

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.streaming.sources import _hadoop_files, _local_files

from support import wait_until

BATCH = 0.1


def move_in(folder: Path, name: str, data: bytes) -> Path:
    """Write a file beside ``folder`` and move it in complete, as Spark asks."""
    staging = folder.parent / f"staging-{name}"
    staging.write_bytes(data)
    target = folder / name
    os.replace(staging, target)
    return target


def record_batches(stream: Any) -> list[tuple[int, list[Any]]]:
    """Collect ``(batch time ms, records)`` of every non-empty batch of ``stream``."""
    batches: list[tuple[int, list[Any]]] = []

    def keep(time: Any, rdd: Any) -> None:
        records = rdd.collect()
        if records:
            batches.append((int(time.timestamp() * 1000), records))

    stream.foreachRDD(keep)
    return batches


def all_records(batches: list[tuple[int, list[Any]]]) -> list[Any]:
    return [record for _, records in batches for record in records]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "incoming"
    path.mkdir()
    return path


class TestTextFileStream:
    def test_each_new_file_is_read_once(self, ssc: StreamingContext, folder: Path) -> None:
        """Every file moved into the directory after the start is read by exactly one batch."""
        batches = record_batches(ssc.textFileStream(str(folder)))
        ssc.start()
        move_in(folder, "a.txt", b"1\n2\n")
        wait_until(lambda: len(all_records(batches)) >= 2, "the first file")
        move_in(folder, "b.txt", b"3\n")
        wait_until(lambda: len(all_records(batches)) >= 3, "the second file")
        time.sleep(10 * BATCH)  # later batches must not read either file again
        assert sorted(all_records(batches)) == ["1", "2", "3"]

    def test_files_present_at_the_start_and_hidden_files_are_not_read(
            self, ssc: StreamingContext, folder: Path) -> None:
        """Only new files count, and names starting with a dot are skipped."""
        (folder / "old.txt").write_text("old\n")
        past = time.time() - 5
        os.utime(folder / "old.txt", (past, past))
        batches = record_batches(ssc.textFileStream(str(folder)))
        ssc.start()
        move_in(folder, ".hidden.txt", b"hidden\n")
        move_in(folder, "new.txt", b"new\n")
        wait_until(lambda: all_records(batches), "the new file")
        time.sleep(5 * BATCH)
        assert all_records(batches) == ["new"]

    def test_a_file_modified_after_a_batch_time_is_read_by_a_later_batch(
            self, ssc: StreamingContext, folder: Path) -> None:
        """A file whose modification time is after a batch's time waits for a batch at or
        after that time."""
        batches = record_batches(ssc.textFileStream(str(folder)))
        ssc.start()
        target = move_in(folder, "future.txt", b"later\n")
        future = time.time() + 1.5
        os.utime(target, (future, future))
        wait_until(lambda: batches, "the file with a future modification time")
        batch_time, records = batches[0]
        assert records == ["later"]
        assert batch_time >= int(future * 1000)

    def test_files_of_every_directory_a_glob_pattern_matches_are_read(
            self, ssc: StreamingContext, tmp_path: Path) -> None:
        """A glob pattern as the directory watches every matching directory."""
        day1, day2 = tmp_path / "day-1", tmp_path / "day-2"
        day1.mkdir()
        day2.mkdir()
        batches = record_batches(ssc.textFileStream(str(tmp_path / "day-*")))
        ssc.start()
        move_in(day1, "a.txt", b"a\n")
        move_in(day2, "b.txt", b"b\n")
        wait_until(lambda: len(all_records(batches)) >= 2, "both files")
        assert sorted(all_records(batches)) == ["a", "b"]

    def test_a_restart_from_the_checkpoint_continues_the_selection_of_files(
            self, sc: SparkContext, folder: Path, tmp_path: Path) -> None:
        """After a restart from the checkpoint, a file moved in while the program was down
        is read, and a file read before the stop is not read again."""
        checkpoint = str(tmp_path / "checkpoint")
        batches: list[tuple[int, list[Any]]] = []

        def setup() -> StreamingContext:
            ssc = StreamingContext(sc, BATCH)  # both runs collect into ``batches``
            stream = ssc.textFileStream(str(folder))
            stream.foreachRDD(lambda rdd: batches.append((0, rdd.collect())))
            return ssc

        first = StreamingContext.getOrCreate(checkpoint, setup)
        first.start()
        move_in(folder, "a.txt", b"a\n")
        wait_until(lambda: all_records(batches), "the first file")
        first.stop(stopSparkContext=False, stopGraceFully=True)
        move_in(folder, "b.txt", b"b\n")
        time.sleep(0.05)  # the restarted stream is created after b's modification time
        second = StreamingContext.getOrCreate(checkpoint, setup)
        second.start()
        try:
            wait_until(lambda: len(all_records(batches)) >= 2, "the file moved in while down")
            time.sleep(5 * BATCH)
        finally:
            second.stop(stopSparkContext=False)
        assert sorted(all_records(batches)) == ["a", "b"]

    def test_a_directory_that_does_not_exist_yet_is_reported_once_and_read_once_it_exists(
            self, ssc: StreamingContext, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A missing directory logs one warning naming it, not one per batch; files moved
        in after it was created are read."""
        folder = tmp_path / "later"
        caplog.set_level(logging.INFO, logger="dstream_kafka.streaming.sources")
        batches = record_batches(ssc.textFileStream(str(folder)))
        ssc.start()
        wait_until(lambda: "does not exist" in caplog.text, "the warning")
        time.sleep(5 * BATCH)
        folder.mkdir()
        move_in(folder, "a.txt", b"a\n")
        wait_until(lambda: batches, "the file in the created directory")
        warnings = [r for r in caplog.records if "does not exist" in r.getMessage()]
        assert len(warnings) == 1 and str(folder) in warnings[0].getMessage()
        assert all_records(batches) == ["a"]

    def test_hadoop_listing_finds_the_files_and_times_the_local_listing_finds(
            self, sc: SparkContext, folder: Path) -> None:
        """Directories given as Hadoop URIs are listed through Hadoop's FileSystem with the
        same files and modification times (Hadoop's in whole milliseconds)."""
        move_in(folder, "a.txt", b"abc")
        local, local_exists = _local_files(str(folder))
        hadoop, hadoop_exists = _hadoop_files(sc, "file://" + str(folder))
        assert local_exists and hadoop_exists
        assert [(Path(p.removeprefix("file:")).name, m, n) for p, m, n in hadoop] == [
            (Path(p).name, m // 1_000_000 * 1_000_000, n) for p, m, n in local]
        assert local[0][2] == 3


class TestBinaryRecordsStream:
    def test_each_record_is_one_fixed_length_bytes_value(
            self, ssc: StreamingContext, folder: Path) -> None:
        """A file of 3 records of 4 bytes gives 3 bytes values of 4 bytes."""
        batches = record_batches(ssc.binaryRecordsStream(str(folder), 4))
        ssc.start()
        move_in(folder, "data.bin", bytes(range(12)))
        wait_until(lambda: batches, "the records")
        assert all_records(batches) == [bytes([0, 1, 2, 3]), bytes([4, 5, 6, 7]),
                                        bytes([8, 9, 10, 11])]

    def test_a_file_of_a_torn_record_fails_its_batch_naming_the_file(
            self, ssc: StreamingContext, folder: Path) -> None:
        """A file whose size is not a multiple of the record length fails its batch with an
        error naming it; later files are read (a file stream goes on after failures)."""
        batches = record_batches(ssc.binaryRecordsStream(str(folder), 4))
        ssc.start()
        torn = move_in(folder, "torn.bin", bytes(13))
        with pytest.raises(ConfigurationError, match=f"{torn} has 13 bytes, not a multiple "
                                                     f"of recordLength 4"):
            ssc.awaitTerminationOrTimeout(90)
        move_in(folder, "whole.bin", bytes(range(4)))
        wait_until(lambda: batches, "the whole file")
        assert all_records(batches) == [bytes(range(4))]

    @pytest.mark.parametrize("length", [0, -4, 2.5, "4"])
    def test_a_record_length_that_is_not_a_positive_whole_number_is_refused(
            self, ssc: StreamingContext, folder: Path, length: Any) -> None:
        with pytest.raises(ConfigurationError, match="recordLength"):
            ssc.binaryRecordsStream(str(folder), length)


class LineServer:
    """A loopback TCP server: each accepted connection gets the next list of chunks, then
    is closed (or kept open while ``hold`` is set)."""

    def __init__(self, connections: list[list[bytes]]) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._connections = connections
        self.accepted = 0
        self.hold = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        for chunks in self._connections:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                for chunk in chunks:
                    conn.sendall(chunk)
                    time.sleep(0.05)
                while self.hold.is_set():
                    time.sleep(0.05)

    def close(self) -> None:
        self.hold.clear()
        self._server.close()


@pytest.fixture
def line_server() -> Iterator[Any]:
    servers: list[LineServer] = []

    def make(connections: list[list[bytes]]) -> LineServer:
        servers.append(LineServer(connections))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


class TestSocketTextStream:
    def test_each_line_the_server_sends_reaches_one_batch_in_order(
            self, ssc: StreamingContext, line_server: Any) -> None:
        """Lines split across TCP chunks, CRLF endings and a last line without a newline
        all arrive once, in order."""
        server = line_server([[b"one\ntw", b"o\r\nthree\n", "vier ü\nlast".encode()]])
        batches = record_batches(ssc.socketTextStream("127.0.0.1", server.port))
        ssc.start()
        wait_until(lambda: len(all_records(batches)) >= 5, "five lines")
        assert all_records(batches) == ["one", "two", "three", "vier ü", "last"]

    def test_the_receiver_reconnects_after_the_server_closes_the_connection(
            self, ssc: StreamingContext, line_server: Any) -> None:
        """A closed connection is retried; lines of the next connection arrive too."""
        server = line_server([[b"first\n"], [b"second\n"]])
        batches = record_batches(ssc.socketTextStream("127.0.0.1", server.port))
        ssc.start()
        wait_until(lambda: len(all_records(batches)) >= 2, "lines of both connections")
        assert all_records(batches) == ["first", "second"]
        assert server.accepted == 2

    def test_stop_ends_the_receiver_while_the_connection_is_open(
            self, ssc: StreamingContext, line_server: Any) -> None:
        """Stopping the context closes an open connection and ends the receiver thread."""
        server = line_server([[b"x\n"]])
        server.hold.set()
        stream = ssc.socketTextStream("127.0.0.1", server.port)
        batches = record_batches(stream)
        ssc.start()
        wait_until(lambda: batches, "the line")
        ssc.stop(stopSparkContext=False)
        assert not any(t.name == f"dstream-socket-receiver-{stream.id}" and t.is_alive()
                       for t in threading.enumerate())

    def test_a_port_that_is_not_a_tcp_port_is_refused(self, ssc: StreamingContext) -> None:
        with pytest.raises(ConfigurationError, match="port"):
            ssc.socketTextStream("127.0.0.1", 70000)

"""Spark's basic sources: ``textFileStream``, ``binaryRecordsStream``, ``socketTextStream``.

File streams follow Spark's ``FileInputDStream``: the batch at time ``T`` takes every file
directly in the directory (or in the directories a glob pattern matches) whose name does
not start with ``.``, whose modification time ``m`` satisfies ``threshold < m <= T`` and
that no batch of the remembered window took before. ``threshold`` is the later of the
time the stream was created (only new files are read) and ``T - remember``, where
``remember`` is the batch duration times ``ceil(minRememberDuration / batch duration)``
(``spark.streaming.fileStream.minRememberDuration``, default 60 s). A file must appear
complete (written elsewhere, then moved into the directory): a file still being written
may be read partly and is not read again. A checkpoint keeps the files taken by the
remembered batches, so a restart neither re-reads them nor reads files older than the
window. A directory that does not exist is logged once at WARNING and read once it exists.

The socket stream is a driver-side receiver, as Spark's without a write-ahead log: one
thread connects to ``host:port``, reads UTF-8 lines and each batch gets the lines
received since the previous one. Lines received but not yet in a batch are lost when the
driver stops or fails. A closed or refused connection is retried every 2 s (Spark's
receiver restart delay).
"""

from __future__ import annotations

import glob
import logging
import math
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping
from urllib.parse import urlparse

from pyspark import RDD

from dstream_kafka._spark_internals import hadoop_filesystem
from dstream_kafka.checkpoint_fs import LocalFileSystem
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming.checkpoint_state import checkpoint_files
from dstream_kafka.streaming.input import InputDStream

if TYPE_CHECKING:
    from dstream_kafka.streaming.context import StreamingContext

__all__ = ["FileInputDStream", "SocketInputDStream", "list_files", "select_new_files"]

log = logging.getLogger(__name__)

#: Seconds between two connection attempts of the socket receiver (Spark's
#: ``spark.streaming.receiverRestartDelay`` default).
RECONNECT_DELAY_SECONDS = 2.0

#: ``(path, modification time in epoch ns, size)`` of one file. Local files keep the
#: file system's full precision; Hadoop's ``FileSystem`` gives whole milliseconds.
FileInfo = tuple[str, int, int]

_NS_PER_MS = 1_000_000


def _end_of_ms(ms: int) -> int:
    """Return the last epoch ns of millisecond ``ms``."""
    return ms * _NS_PER_MS + _NS_PER_MS - 1


def _local_files(directory: str) -> tuple[list[FileInfo], bool]:
    found: list[FileInfo] = []
    folders = glob.glob(directory) if any(c in directory for c in "*?[") else [directory]
    exists = False
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        exists = True
        for entry in entries:
            try:
                if entry.is_file():
                    stat = entry.stat()
                    found.append((entry.path, stat.st_mtime_ns, stat.st_size))
            except FileNotFoundError:  # deleted while listed
                continue
    return found, exists


def _hadoop_files(sc: Any, directory: str) -> tuple[list[FileInfo], bool]:
    pattern, fs = hadoop_filesystem(sc, directory)
    found: list[FileInfo] = []
    exists = False
    for folder in fs.globStatus(pattern) or []:
        if not folder.isDirectory():
            continue
        exists = True
        for status in fs.listStatus(folder.getPath()):
            if status.isFile():
                found.append((str(status.getPath().toString()),
                              int(status.getModificationTime()) * _NS_PER_MS,
                              int(status.getLen())))
    return found, exists


def select_new_files(files: list[FileInfo], threshold_ns: int, batch_time: int,
                     recent: set[str]) -> list[FileInfo]:
    """Return, sorted by path, the files a file stream's batch at ``batch_time`` takes.

    A file is taken when its name does not start with ``.``, its modification time is
    after ``threshold_ns`` (epoch ns) and in or before the millisecond ``batch_time`` (a
    newer file waits for a later batch), and it is not in ``recent`` (taken by a
    remembered batch).
    """
    last = _end_of_ms(batch_time)
    return sorted(info for info in files
                  if not os.path.basename(info[0].rstrip("/")).startswith(".")
                  and threshold_ns < info[1] <= last and info[0] not in recent)


def list_files(sc: Any, directory: str
               ) -> tuple[list[FileInfo], bool, Callable[[str], str]]:
    """Return the files directly in ``directory`` (a glob pattern matches several),
    whether any such directory exists, and a function giving the path Spark reads each
    file by.

    Local paths (no scheme with a local ``fs.defaultFS``, or ``file:``) are listed with
    ``os``; other URIs (``hdfs://``, ``s3a://``, ...) through Hadoop's ``FileSystem``.
    A directory that does not exist (yet) has no files.
    """
    if isinstance(checkpoint_files(sc, directory), LocalFileSystem):
        parsed = urlparse(directory)
        local = parsed.path if parsed.scheme == "file" else directory
        return *_local_files(local), lambda path: "file://" + os.path.abspath(path)
    return *_hadoop_files(sc, directory), lambda path: path


class FileInputDStream(InputDStream[Any]):
    """New files of a directory, one RDD per batch (see the module docstring).

    Parameters
    ----------
    ssc : StreamingContext
        The context.
    directory : str
        The directory (or glob pattern of directories) to watch.
    read : callable
        ``read(sc, path)`` returns the RDD of one file.
    remember_ms : int
        ``spark.streaming.fileStream.minRememberDuration`` in ms.
    record_length : int, optional
        For fixed-length records: a batch taking a file whose size is not a multiple of
        it fails with an error naming the file (Spark's reader fails with an
        ``EOFException`` instead).
    """

    failure_stops_context = False

    def __init__(self, ssc: StreamingContext, directory: str,
                 read: Callable[[Any, str], RDD[Any]], remember_ms: int,
                 record_length: int | None = None) -> None:
        if not isinstance(directory, str) or not directory:
            raise ConfigurationError(
                f"directory must be a non-empty path string, got {directory!r}")
        super().__init__(ssc)
        self.directory = directory
        self._read = read
        self._record_length = record_length
        batch = ssc._batch_ms
        #: How long taken files are remembered and how old a new file may be.
        self.remember_ms = batch * max(1, math.ceil(remember_ms / batch))
        #: Files modified at or before this epoch ns are never read (new files only).
        #: Nanoseconds, not Spark's milliseconds: a file moved in within the millisecond
        #: the stream was created in is new and must not be dated "at" the threshold.
        self.initial_threshold_ns = time.time_ns()
        self._selected: dict[int, list[str]] = {}  # batch time -> files it took (if any)
        self._recent: set[str] = set()
        self._missing_reported = False

    def compute(self, batch_time: int) -> RDD[Any] | None:
        for old in [t for t in self._selected if t < batch_time - self.remember_ms]:
            self._recent.difference_update(self._selected.pop(old))
        threshold = max(self.initial_threshold_ns, _end_of_ms(batch_time - self.remember_ms))
        files, exists, read_path = list_files(self._sc, self.directory)
        if exists == self._missing_reported:  # a typo must not read nothing silently
            self._missing_reported = not exists
            if exists:
                log.info("File stream: directory %s exists now", self.directory)
            else:
                log.warning("File stream: directory %s does not exist (yet); no file is read "
                            "until it does", self.directory)
        new = select_new_files(files, threshold, batch_time, self._recent)
        names = [path for path, _, _ in new]
        if names:
            self._selected[batch_time] = names
            self._recent.update(names)
        for path, _, size in new:
            if size == 0:
                log.warning("File %s has no data in it. A file stream only reads files that "
                            "are moved into the directory complete; one written in place "
                            "may be read empty or partly and is not read again.", path)
        self.report_input_info(batch_time, 0, {"files": names, "Description": "\n".join(names)})
        n = self._record_length
        torn = [(path, size) for path, _, size in new if n is not None and size % n]
        if torn:
            raise ConfigurationError(
                "binaryRecordsStream: " + ", ".join(f"{p} has {size} bytes" for p, size in torn)
                + f", not a multiple of recordLength {n}; the batch of {batch_time} ms fails "
                "and these files are not read again. Move only files of whole records into "
                "the directory")
        rdds = [self._read(self._sc, read_path(path)) for path in names]
        if not rdds:
            return self._sc.emptyRDD()
        return rdds[0] if len(rdds) == 1 else self._sc.union(rdds)

    def checkpoint_data(self, batch_time: int) -> Mapping[str, Any] | None:
        selected = {str(t): files for t, files in self._selected.items() if t <= batch_time}
        return {"initial_threshold_ns": self.initial_threshold_ns, "selected": selected}

    def restore_checkpoint_data(self, data: Mapping[str, Any]) -> None:
        self.initial_threshold_ns = int(data["initial_threshold_ns"])
        self._selected = {int(t): list(files) for t, files in data["selected"].items()}
        self._recent = {path for files in self._selected.values() for path in files}


class SocketInputDStream(InputDStream[str]):
    """Lines read from a TCP server by a driver thread (see the module docstring)."""

    failure_stops_context = False

    def __init__(self, ssc: StreamingContext, hostname: str, port: int) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ConfigurationError(f"port must be a TCP port number (1-65535), got {port!r}")
        super().__init__(ssc)
        self.address = (hostname, port)
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._receive, daemon=True,
                                        name=f"dstream-socket-receiver-{self.id}")
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            sock = self._socket
        if sock is not None:
            try:  # wakes a recv() blocked in the receiver thread
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(10)

    def compute(self, batch_time: int) -> RDD[str] | None:
        with self._lock:
            lines, self._lines = self._lines, []
        self.report_input_info(batch_time, len(lines))
        return self._sc.parallelize(lines) if lines else self._sc.emptyRDD()

    def _receive(self) -> None:
        where = "%s:%d" % self.address
        while not self._stopped.is_set():
            try:
                sock = socket.create_connection(self.address, timeout=30)
            except OSError as error:
                log.warning("Socket stream: cannot connect to %s (%s); retrying in %.0f s",
                            where, error, RECONNECT_DELAY_SECONDS)
                self._stopped.wait(RECONNECT_DELAY_SECONDS)
                continue
            sock.settimeout(None)
            with self._lock:  # stop() sets the flag first, then looks for the socket
                if self._stopped.is_set():
                    sock.close()
                    return
                self._socket = sock
            log.info("Socket stream: connected to %s", where)
            try:
                self._read_lines(sock)
            except OSError as error:
                if not self._stopped.is_set():
                    log.warning("Socket stream: reading from %s failed: %s", where, error)
            finally:
                with self._lock:
                    self._socket = None
                sock.close()
            if not self._stopped.is_set():
                log.warning("Socket stream: %s closed the connection; reconnecting in %.0f s",
                            where, RECONNECT_DELAY_SECONDS)
                self._stopped.wait(RECONNECT_DELAY_SECONDS)

    def _read_lines(self, sock: socket.socket) -> None:
        pending = b""
        while not self._stopped.is_set():
            chunk = sock.recv(65536)
            if not chunk:
                break
            *complete, pending = (pending + chunk).split(b"\n")
            self._add(complete)
        if pending and not self._stopped.is_set():
            self._add([pending])  # the last line may end without a newline

    def _add(self, raw: list[bytes]) -> None:
        if not raw:
            return
        lines = [line.decode("utf-8", errors="replace").removesuffix("\r") for line in raw]
        with self._lock:
            self._lines.extend(lines)

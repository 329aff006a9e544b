"""The two file systems of the checkpoint store: local paths through ``os``, and any Hadoop file
system URI (``hdfs://``, ``file://``, ``s3a://``, ...) through Spark's JVM.

Both offer the one write the checkpoint store needs, :meth:`write_new`: the content goes to a
temporary file in the same folder which is then renamed to its final name only if that name
does not exist yet. Readers therefore see a complete file or none. On local paths the
no-overwrite step is a hard link (atomic); on Hadoop it is ``exists`` then ``rename``, which
is atomic on HDFS (its rename refuses an existing target) and check-then-act elsewhere, as in
Spark's own ``CheckpointFileManager``. Object stores without atomic rename (S3) give weaker
guarantees; Spark documents the same limit for its metadata logs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetStoreError

__all__ = ["CheckpointFileSystem", "ChecksumMismatch", "HadoopFileSystem", "LocalFileSystem", "open_file_system"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


class ChecksumMismatch(OSError):
    """A file whose content does not match its Hadoop checksum (``.<name>.crc``)."""


def _tmp_name(name: str) -> str:
    # A leading dot keeps temporary files out of every listing the store parses.
    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


class CheckpointFileSystem:
    """Minimal file API over ``/``-separated paths below one root."""

    root: str

    def join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def list(self, path: str) -> list[str]:
        """Return the names in folder ``path`` (``[]`` when it does not exist)."""
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """Return the file's bytes, or None when it does not exist."""
        raise NotImplementedError

    def write_new(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` with ``data``; False (and nothing written) if it exists."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        """Delete a file; a missing file is fine."""
        raise NotImplementedError


class LocalFileSystem(CheckpointFileSystem):
    """Local paths via ``os``, with fsync of file and folder for durability."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def list(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_new(self, path: str, data: bytes) -> bool:
        folder, name = os.path.split(path)
        tmp = os.path.join(folder, _tmp_name(name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic, and refuses an existing target
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                if os.path.exists(path):  # no hard links here: check, then rename
                    return False
                os.rename(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the new name durable
        finally:
            os.close(dir_fd)
        return True

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def __repr__(self) -> str:
        return f"LocalFileSystem({self.root!r})"


class HadoopFileSystem(CheckpointFileSystem):
    """A Hadoop ``FileSystem`` reached through the py4j gateway of a SparkContext."""

    def __init__(self, root: str, spark_context: Any = None) -> None:
        self.root = root
        if spark_context is None:
            from pyspark import SparkContext

            spark_context = SparkContext._active_spark_context
        if spark_context is None:
            raise ConfigurationError(
                f"The checkpoint directory {root!r} is a Hadoop URI, which needs an active "
                "SparkContext; create the SparkContext first (or use a local path)")
        jvm = spark_context._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._IOUtils = jvm.org.apache.commons.io.IOUtils
        try:
            self._fs = self._Path(root).getFileSystem(spark_context._jsc.hadoopConfiguration())
        except Exception as exc:
            raise ConfigurationError(f"No Hadoop file system for checkpoint directory {root!r}: "
                                     f"{_java_message(exc)}") from None

    def _call(self, what: str, path: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            if "java.io.FileNotFoundException" in str(exc):
                raise FileNotFoundError(path) from None
            if "org.apache.hadoop.fs.ChecksumException" in str(exc):
                raise ChecksumMismatch(path) from None
            raise OffsetStoreError(f"Checkpoint file system: {what} {path} failed: "
                                   f"{_java_message(exc)}") from None

    def mkdirs(self, path: str) -> None:
        self._call("mkdirs", path, self._fs.mkdirs, self._Path(path))

    def list(self, path: str) -> list[str]:
        try:
            statuses = self._call("list", path, self._fs.listStatus, self._Path(path))
        except FileNotFoundError:
            return []
        return [s.getPath().getName() for s in statuses]

    def read(self, path: str) -> bytes | None:
        def read_all() -> bytes:
            stream = self._fs.open(self._Path(path))
            try:
                return bytes(self._IOUtils.toByteArray(stream))
            finally:
                stream.close()

        try:
            return self._call("read", path, read_all)
        except FileNotFoundError:
            return None

    def write_new(self, path: str, data: bytes) -> bool:
        folder, _, name = path.rpartition("/")
        tmp = self._Path(f"{folder}/{_tmp_name(name)}")
        target = self._Path(path)

        def write() -> bool:
            out = self._fs.create(tmp, True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()
            if not self._fs.exists(target) and self._fs.rename(tmp, target):
                return True
            self._fs.delete(tmp, False)
            if self._fs.exists(target):
                return False
            raise OffsetStoreError(f"renaming a temporary file to {path} failed")

        return bool(self._call("write", path, write))

    def delete(self, path: str) -> None:
        self._call("delete", path, self._fs.delete, self._Path(path), False)

    def __repr__(self) -> str:
        return f"HadoopFileSystem({self.root!r})"


def _java_message(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return f"{java.getClass().getName()}: {java.getMessage()}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def open_file_system(location: str | os.PathLike[str], spark_context: Any = None) -> CheckpointFileSystem:
    """Return the file system of a checkpoint location: local paths via ``os``, URIs via Hadoop."""
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise ConfigurationError(f"checkpoint directory must be a non-empty path or URI, got {location!r}")
    if _URI.match(text):
        return HadoopFileSystem(text, spark_context)
    return LocalFileSystem(text)

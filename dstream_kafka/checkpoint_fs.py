"""The one file layer under both checkpoints: local paths through ``os``, and any Hadoop file
system URI (``hdfs://``, ``file://``, ``s3a://``, ...) through Spark's JVM.

The streaming checkpoint (:mod:`dstream_kafka.streaming.checkpoint_state`) and the checkpoint
offset store (:mod:`dstream_kafka.stores.checkpoint`) both write through it. Two writes are
offered:

- :meth:`CheckpointFileSystem.write_new` creates a file only if its name does not exist yet
  (the store's offset and commit logs). The content goes to a temporary file in the same
  folder which is then given its final name, so readers see a complete file or none. On
  local paths the no-overwrite step is a hard link (atomic); on Hadoop it is ``exists`` then
  ``rename``, which is atomic on HDFS (its rename refuses an existing target) and
  check-then-act elsewhere, as in Spark's own ``CheckpointFileManager``.
- :meth:`CheckpointFileSystem.replace` replaces a file so readers see the old or the new
  content (the streaming checkpoint's ``metadata``). Hadoop cannot rename over a file, so
  there the old file is deleted just before the rename.

Object stores without atomic rename (S3) give weaker guarantees; Spark documents the same
limit for its metadata logs. Temporary names start with a dot, which keeps them out of every
listing the checkpoints parse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import uuid
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlparse

from dstream_kafka.errors import ConfigurationError, OffsetStoreError

__all__ = [
    "CheckpointFileSystem",
    "ChecksumMismatch",
    "HadoopFileSystem",
    "LocalFileSystem",
    "open_file_system",
]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")

_T = TypeVar("_T")
_Names = list[str]  # the classes' own ``list`` method hides the builtin in their bodies


class ChecksumMismatch(OSError):
    """A file whose content does not match its Hadoop checksum (``.<name>.crc``)."""


def _tmp_name(name: str) -> str:
    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


def _split(path: str) -> tuple[str, str]:
    folder, _, name = path.rstrip("/").rpartition("/")
    return folder, name


class CheckpointFileSystem:
    """File operations on ``/``-separated paths below one root.

    Attributes
    ----------
    root : str
        The folder (path or URI) the file system was opened for.
    """

    root: str

    def join(self, *parts: str) -> str:
        """Return ``root/part/...``."""
        return "/".join([self.root.rstrip("/"), *parts])

    def uri(self, path: str) -> str:
        """Return ``path`` in the form Spark's Hadoop readers and writers should get."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        """Return whether a file or folder ``path`` exists."""
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        """Create folder ``path`` and its parents."""
        raise NotImplementedError

    def list(self, path: str) -> _Names:
        """Return the names in folder ``path`` (``[]`` when it does not exist)."""
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """Return the file's bytes, or None when it does not exist."""
        raise NotImplementedError

    def write_new(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` with ``data``; False (and nothing written) if it exists."""
        raise NotImplementedError

    def replace(self, path: str, data: bytes) -> None:
        """Replace (or create) ``path`` with ``data``; readers see the old or the new bytes."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        """Delete a file or a folder with its content; a missing path is fine."""
        raise NotImplementedError

    def list_dir(self, path: str) -> _Names:
        """Return the names in folder ``path`` sorted (``[]`` when it does not exist)."""
        return sorted(self.list(path))

    def read_text(self, path: str) -> str | None:
        """Return the UTF-8 text of the file, or None when it does not exist."""
        data = self.read(path)
        return None if data is None else data.decode("utf-8")

    def write_text_atomic(self, path: str, text: str) -> None:
        """:meth:`replace` the file with UTF-8 ``text``."""
        self.replace(path, text.encode("utf-8"))


def _os_hint(exc: OSError) -> str:
    """Return what to do about a local file system error."""
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ("the folder is read-only or not writable by this user: give the stream a writable "
                "checkpoint directory")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return ("a part of the path is a regular file where a directory is expected (not a directory): "
                "choose another checkpoint directory or move that file away")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the file system is full: free space or use another checkpoint directory"
    return "check the checkpoint directory"


@contextlib.contextmanager
def _local(what: str, path: str) -> Iterator[None]:
    """Turn a local file system error into OffsetStoreError naming the path and the fix."""
    try:
        yield
    except ChecksumMismatch:
        raise
    except OSError as exc:
        raise OffsetStoreError(
            f"Checkpoint file system: {what} {path} failed: {exc.strerror or exc} "
            f"[errno {exc.errno}]; {_os_hint(exc)}. Files already stored were not changed.") from None


def _os_path(path: str) -> str:
    # file: URIs given to the local layer (the streaming checkpoint accepts them) name the
    # same file as their path.
    return urlparse(path).path if path.startswith("file:") else path


class LocalFileSystem(CheckpointFileSystem):
    """Local paths (or ``file:`` URIs) via ``os``, with fsync for durability."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(_os_path(os.fspath(root)))

    def uri(self, path: str) -> str:
        return "file://" + os.path.abspath(_os_path(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(_os_path(path))

    def mkdirs(self, path: str) -> None:
        with _local("creating folder", path):
            os.makedirs(_os_path(path), exist_ok=True)

    def list(self, path: str) -> _Names:
        with _local("listing", path):
            try:
                return os.listdir(_os_path(path))
            except FileNotFoundError:
                return []

    def read(self, path: str) -> bytes | None:
        with _local("reading", path):
            try:
                with open(_os_path(path), "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None

    @staticmethod
    def _write_temp(path: str, data: bytes) -> str:
        folder, name = os.path.split(path)
        tmp = os.path.join(folder, _tmp_name(name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk leaves no partial temporary file behind
            raise
        return tmp

    def write_new(self, path: str, data: bytes) -> bool:
        with _local("writing", path):
            return self._write_new(_os_path(path), data)

    def _write_new(self, path: str, data: bytes) -> bool:
        tmp = self._write_temp(path, data)
        try:
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
        dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the new name durable
        finally:
            os.close(dir_fd)
        return True

    def replace(self, path: str, data: bytes) -> None:
        with _local("writing", path):
            path = os.path.abspath(_os_path(path))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = self._write_temp(path, data)
            try:
                os.replace(tmp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)  # a failed replace leaves no temporary file behind
                raise

    def delete(self, path: str) -> None:
        path = _os_path(path)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            return
        with _local("deleting", path), contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def __repr__(self) -> str:
        return f"LocalFileSystem({self.root!r})"


class HadoopFileSystem(CheckpointFileSystem):
    """A Hadoop ``FileSystem`` reached through the py4j gateway of a SparkContext.

    Parameters
    ----------
    root : str
        A Hadoop path or URI; a path without a scheme is on Hadoop's ``fs.defaultFS``.
    spark_context : SparkContext, optional
        Defaults to the active SparkContext.

    Raises
    ------
    ConfigurationError
        When there is no SparkContext or Hadoop has no file system for ``root``.
    """

    def __init__(self, root: str, spark_context: Any = None) -> None:
        from dstream_kafka import _spark_internals as spark

        self.root = root
        if spark_context is None:
            spark_context = spark.active_context()
        if spark_context is None:
            raise ConfigurationError(
                f"The checkpoint directory {root!r} is a Hadoop URI, which needs an active "
                "SparkContext; create the SparkContext first (or use a local path)")
        self._sc = spark_context
        try:
            _, self._fs = spark.hadoop_filesystem(spark_context, root)
        except Exception as exc:  # py4j errors of any kind: the URI has no file system
            raise ConfigurationError(f"No Hadoop file system for checkpoint directory {root!r}: "
                                     f"{_java_message(exc)}") from None
        self._Path = spark.hadoop_path_class(spark_context)
        self._read_all = spark.read_stream_bytes

    def _call(self, what: str, path: str, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except Exception as exc:  # py4j errors carry the Java class only in their text
            if "java.io.FileNotFoundException" in str(exc):
                raise FileNotFoundError(path) from None
            if "org.apache.hadoop.fs.ChecksumException" in str(exc):
                raise ChecksumMismatch(path) from None
            raise OffsetStoreError(f"Checkpoint file system: {what} {path} failed: "
                                   f"{_java_message(exc)}") from None

    def uri(self, path: str) -> str:
        return path

    def exists(self, path: str) -> bool:
        return bool(self._call("exists", path, self._fs.exists, self._Path(path)))

    def mkdirs(self, path: str) -> None:
        self._call("mkdirs", path, self._fs.mkdirs, self._Path(path))

    def list(self, path: str) -> _Names:
        try:
            statuses = self._call("list", path, self._fs.listStatus, self._Path(path))
        except FileNotFoundError:
            return []
        return [str(s.getPath().getName()) for s in statuses]

    def read(self, path: str) -> bytes | None:
        def read_all() -> bytes:
            stream = self._fs.open(self._Path(path))
            try:
                return self._read_all(self._sc, stream)
            finally:
                stream.close()

        try:
            return self._call("read", path, read_all)
        except FileNotFoundError:
            return None

    def _write_temp(self, path: str, data: bytes) -> Any:
        folder, name = _split(path)
        tmp = self._Path(f"{folder}/{_tmp_name(name)}")
        out = self._fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return tmp

    def write_new(self, path: str, data: bytes) -> bool:
        target = self._Path(path)

        def write() -> bool:
            tmp = self._write_temp(path, data)
            if not self._fs.exists(target) and self._fs.rename(tmp, target):
                return True
            self._fs.delete(tmp, False)
            if self._fs.exists(target):
                return False
            raise OffsetStoreError(f"renaming a temporary file to {path} failed")

        return bool(self._call("write", path, write))

    def replace(self, path: str, data: bytes) -> None:
        target = self._Path(path)

        def write() -> None:
            tmp = self._write_temp(path, data)
            if self._fs.exists(target):
                self._fs.delete(target, False)
            if not self._fs.rename(tmp, target):
                raise OffsetStoreError(f"renaming a temporary file to {path} failed")

        self._call("replace", path, write)

    def delete(self, path: str) -> None:
        self._call("delete", path, self._fs.delete, self._Path(path), True)

    def __repr__(self) -> str:
        return f"HadoopFileSystem({self.root!r})"


def _java_message(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return f"{java.getClass().getName()}: {java.getMessage()}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def open_file_system(location: str | os.PathLike[str], spark_context: Any = None) -> CheckpointFileSystem:
    """Return the file system of a checkpoint store location: local paths via ``os``, URIs
    (``file://`` included) via Hadoop.

    Raises
    ------
    ConfigurationError
        When ``location`` is empty, or is a URI and no SparkContext is active.
    """
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise ConfigurationError(f"checkpoint directory must be a non-empty path or URI, got {location!r}")
    if _URI.match(text):
        return HadoopFileSystem(text, spark_context)
    return LocalFileSystem(text)

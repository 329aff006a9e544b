"""The state and metadata part of a streaming checkpoint folder.

Unlike Spark's DStream checkpoints, which pickle the DStream graph (code), this checkpoint
holds only data: the application rebuilds its graph from code on every start
(``StreamingContext.getOrCreate`` calls the setup function), and the saved data is put back
into the streams with the same ids. Changed functions therefore recover fine; a changed
graph shape is detected and refused.

Layout inside the checkpoint folder::

    metadata                          JSON, replaced atomically after every completed batch
    state/<stream-id>/<time-ms>/      RDDs of one stream needed by the checkpoint of
                                      <time-ms>, as (batch time, record) pairs
                                      (RDD.saveAsPickleFile, complete when _SUCCESS exists)
    offsets/                          reserved: written by input streams (Kafka offset log)
    commits/                          reserved: written by input streams (commit log)

The engine writes ``metadata`` and ``state/`` only and never touches ``offsets/`` or
``commits/``; input streams find those paths through ``InputDStream.checkpoint_layout``
and may use :meth:`~dstream_kafka.checkpoint_fs.CheckpointFileSystem.replace` of
:func:`checkpoint_files` for their own files.

``metadata`` fields: ``version``; ``batch_duration_ms``; ``zero_time_ms`` (the time grid);
``checkpoint_time_ms`` (the completed batch the checkpoint describes: state after it, input
positions after it); ``next_batch_time_ms``; ``streams`` (``{id: {"kind", "slide_ms"}}`` for
every stream, used to detect a changed graph); ``rdds`` (``{id: [batch time, ...]}``: the
times saved in ``state/<id>/<checkpoint_time_ms>/``); ``inputs``
(``{id: InputDStream.checkpoint_data(checkpoint_time_ms)}``); ``written_at_ms``.

When to checkpoint
------------------
Without stateful streams (``updateStateByKey``, windows) a checkpoint is written after
every batch: it only holds the input positions. With them, state is written every
checkpoint interval, as Spark does: by default the first multiple of the slide duration
that is at least 10 seconds; ``DStream.checkpoint(interval)`` on a stateful stream makes it
shorter. The input positions in ``metadata`` are those of the same batch, so a restart
resumes the inputs right after the checkpointed state and re-processes the batches that
completed since (at-least-once, as Spark). A graceful stop writes a final checkpoint of the
last completed batch.

State folders of the newest and the previous checkpoint are kept; older ones are deleted
after each write, so a crash while writing never leaves the folder without a complete
checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlparse

from dstream_kafka._spark_internals import default_filesystem
from dstream_kafka.checkpoint_fs import CheckpointFileSystem, HadoopFileSystem, LocalFileSystem
from dstream_kafka.errors import CorruptCheckpointError

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

__all__ = [
    "FORMAT_VERSION",
    "CheckpointLayout",
    "CheckpointMetadata",
    "StateCheckpointer",
    "checkpoint_files",
]

FORMAT_VERSION = 1
_SUCCESS = "_SUCCESS"


@dataclass(frozen=True)
class CheckpointLayout:
    """Paths inside one checkpoint folder (``root`` as given by the user)."""

    root: str

    def _join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    @property
    def metadata_path(self) -> str:
        """The metadata JSON file."""
        return self._join("metadata")

    @property
    def state_root(self) -> str:
        """Folder of the saved stream RDDs."""
        return self._join("state")

    @property
    def offsets_dir(self) -> str:
        """Reserved for input streams' offset logs (the engine never writes here)."""
        return self._join("offsets")

    @property
    def commits_dir(self) -> str:
        """Reserved for input streams' commit logs (the engine never writes here)."""
        return self._join("commits")

    def state_path(self, stream_id: int, time_ms: int) -> str:
        """Folder holding the RDD of stream ``stream_id`` at ``time_ms``."""
        return self._join("state", str(stream_id), str(time_ms))


@dataclass(frozen=True)
class CheckpointMetadata:
    """The content of ``metadata`` (see the module docstring)."""

    batch_duration_ms: int
    zero_time_ms: int
    checkpoint_time_ms: int
    next_batch_time_ms: int
    streams: Mapping[int, Mapping[str, Any]]
    rdds: Mapping[int, list[int]] = field(default_factory=dict)
    inputs: Mapping[int, Any] = field(default_factory=dict)
    written_at_ms: int = 0
    version: int = FORMAT_VERSION

    def to_json(self) -> str:
        """Serialise; stream ids become JSON object keys (strings)."""
        return json.dumps({
            "version": self.version,
            "batch_duration_ms": self.batch_duration_ms,
            "zero_time_ms": self.zero_time_ms,
            "checkpoint_time_ms": self.checkpoint_time_ms,
            "next_batch_time_ms": self.next_batch_time_ms,
            "streams": {str(k): dict(v) for k, v in self.streams.items()},
            "rdds": {str(k): sorted(v) for k, v in self.rdds.items()},
            "inputs": {str(k): v for k, v in self.inputs.items()},
            "written_at_ms": self.written_at_ms,
        }, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str) -> CheckpointMetadata:
        """Parse ``text`` read from ``where``.

        Raises
        ------
        CorruptCheckpointError
            When the text is not a complete metadata document of a known version.
        """
        try:
            doc = json.loads(text)
            version = doc["version"]
            if version != FORMAT_VERSION:
                raise CorruptCheckpointError(
                    f"{where}: unknown checkpoint format version {version!r} "
                    f"(this version reads {FORMAT_VERSION})")
            return cls(
                batch_duration_ms=int(doc["batch_duration_ms"]),
                zero_time_ms=int(doc["zero_time_ms"]),
                checkpoint_time_ms=int(doc["checkpoint_time_ms"]),
                next_batch_time_ms=int(doc["next_batch_time_ms"]),
                streams={int(k): dict(v) for k, v in doc["streams"].items()},
                rdds={int(k): [int(t) for t in v] for k, v in doc.get("rdds", {}).items()},
                inputs={int(k): v for k, v in doc.get("inputs", {}).items()},
                written_at_ms=int(doc.get("written_at_ms", 0)),
                version=version,
            )
        except CorruptCheckpointError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptCheckpointError(
                f"{where} is not a valid streaming checkpoint ({error}); delete the folder "
                f"to start without recovery") from error


def checkpoint_files(sc: SparkContext | None, root: str) -> CheckpointFileSystem:
    """Return the file layer of a streaming checkpoint folder.

    ``file:`` URIs are local; other URIs go through Hadoop. A path without a scheme is local
    when Hadoop's ``fs.defaultFS`` is the local file system (as in local mode).
    """
    scheme = urlparse(root).scheme
    if scheme == "file" or (
        not scheme and (sc is None or default_filesystem(sc).startswith("file:"))
    ):
        return LocalFileSystem(root)
    return HadoopFileSystem(root, sc)


def _tagged(time: int, record: Any) -> tuple[int, Any]:
    return time, record


def _saved_at(time: int, pair: tuple[int, Any]) -> bool:
    return pair[0] == time


class StateCheckpointer:
    """Reads and writes the metadata and saved RDDs of one checkpoint folder.

    All RDDs a stream needs at one checkpoint (one time for a state, the batches still
    inside the window for a window's parent) go into one folder,
    ``state/<stream-id>/<checkpoint-time>/``, as ``(time, record)`` pairs: one Spark job per
    stream and checkpoint.
    """

    def __init__(self, sc: SparkContext, root: str) -> None:
        self._sc = sc
        self.layout = CheckpointLayout(root)
        self.files = checkpoint_files(sc, root)
        self._previous_time: int | None = None

    def read_metadata(self) -> CheckpointMetadata | None:
        """Return the metadata, or ``None`` when the folder holds no checkpoint.

        Raises
        ------
        CorruptCheckpointError
            When the metadata file exists but cannot be parsed.
        """
        text = self.files.read_text(self.layout.metadata_path)
        if text is None:
            return None
        return CheckpointMetadata.from_json(text, self.layout.metadata_path)

    def write_metadata(self, metadata: CheckpointMetadata) -> None:
        """Replace the metadata atomically."""
        self.files.write_text_atomic(self.layout.metadata_path, metadata.to_json())

    def save_stream(self, stream_id: int, checkpoint_time: int,
                    rdds: Mapping[int, RDD[Any]]) -> None:
        """Save ``{time: rdd}`` of one stream into its folder for ``checkpoint_time``."""
        path = self.layout.state_path(stream_id, checkpoint_time)
        self.files.delete(path)  # an incomplete copy from a crash, or an earlier run's
        tagged = [rdd.map(partial(_tagged, t)) for t, rdd in sorted(rdds.items())]
        union = tagged[0] if len(tagged) == 1 else self._sc.union(tagged)
        union.saveAsPickleFile(self.files.uri(path))

    def load_stream(self, stream_id: int, checkpoint_time: int,
                    times: list[int]) -> dict[int, RDD[Any]]:
        """Return ``{time: rdd}`` saved by :meth:`save_stream` (read lazily by later jobs).

        Raises
        ------
        CorruptCheckpointError
            When the metadata references a folder that is missing or incomplete.
        """
        path = self.layout.state_path(stream_id, checkpoint_time)
        if not self.files.exists(path + "/" + _SUCCESS):
            raise CorruptCheckpointError(
                f"{self.layout.metadata_path} references {path}, which is missing or "
                f"incomplete; delete the checkpoint folder to start without recovery")
        loaded = self._sc.pickleFile(self.files.uri(path))
        if len(times) == 1:
            return {times[0]: loaded.map(lambda pair: pair[1])}
        return {t: loaded.filter(partial(_saved_at, t)).map(lambda pair: pair[1]) for t in times}

    def remember_restored(self, metadata: CheckpointMetadata) -> None:
        """Keep the recovered checkpoint's folders until a newer checkpoint replaces them."""
        self._previous_time = metadata.checkpoint_time_ms

    def prune(self, checkpoint_time: int) -> None:
        """Delete state folders of checkpoints older than the newest two.

        The folders of ``checkpoint_time`` (just written) and of the previous checkpoint
        stay, so a crash while writing the next one leaves a complete checkpoint.
        """
        keep = {str(checkpoint_time)}
        if self._previous_time is not None:
            keep.add(str(self._previous_time))
        for sid_name in self.files.list_dir(self.layout.state_root):
            folder = f"{self.layout.state_root}/{sid_name}"
            for time_name in self.files.list_dir(folder):
                if time_name not in keep:
                    self.files.delete(f"{folder}/{time_name}")
        self._previous_time = checkpoint_time

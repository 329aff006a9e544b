"""A bounded run (Structured Streaming's Trigger.AvailableNow) of a direct stream.

The end offsets are fixed when the stream starts (:meth:`StartOptions.ends
<dstream_kafka.plan.stream_options.StartOptions.ends>`). Every batch's until offsets are capped at
them after the rate limits, so the run still takes as many batches as the limits say. Once a
batch has planned every offset up to the ends, and that batch has completed (its outputs ran
and its offsets are committed), the run is done; when every bounded stream of the context is
done, the context stops gracefully on a thread of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.offsets_json import partition_offsets_to_json

__all__ = ["BoundedRun", "stop_when_all_done"]

log = logging.getLogger(__name__)


class BoundedRun:
    """Where a bounded run ends, and how far it got.

    Parameters
    ----------
    ends : mapping of TopicPartition to int
        The end offset (exclusive) of every partition read at the start. A partition found
        later has none: it reads nothing in this run.
    """

    def __init__(self, ends: Mapping[TopicPartition, int]) -> None:
        self.ends = dict(ends)
        self.last_batch: int | None = None
        self.done = False

    def limit(self, until: Mapping[TopicPartition, int],
              current: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Cap ``until`` (already rate-limited) at the ends, never below ``current``."""
        return {tp: min(off, max(self.ends.get(tp, current[tp]), current[tp]))
                for tp, off in until.items()}

    def planned(self, batch_time: int, current: Mapping[TopicPartition, int],
                replay_pending: bool) -> None:
        """Note that ``batch_time`` was planned, leaving the positions at ``current``."""
        if self.last_batch is None and not replay_pending and all(
                off >= self.ends.get(tp, off) for tp, off in current.items()):
            self.last_batch = batch_time

    def completed(self, batch_time: int) -> bool:
        """Note that ``batch_time`` completed; return True once, when that ends the run."""
        if self.done or self.last_batch is None or batch_time < self.last_batch:
            return False
        self.done = True
        return True

    def describe(self) -> str:
        return partition_offsets_to_json(self.ends)


def stop_when_all_done(ssc: Any, name: str, run: BoundedRun) -> None:
    """Stop ``ssc`` gracefully if every input stream lets it (``finished``, default true)."""
    if not all(getattr(s, "finished", True) for s in ssc.graph.input_streams):
        return  # another bounded stream is still reading; it stops the context when done
    log.info("Bounded run of %s done: every offset up to %s is committed; stopping the "
                "StreamingContext", name, run.describe())
    # Not on the engine's thread that completed the batch: a graceful stop waits for it.
    threading.Thread(target=ssc.stop, name="dstream-bounded-stop",
                     kwargs={"stopSparkContext": False, "stopGraceFully": True},
                     daemon=True).start()

"""The Streaming page a StreamingContext serves while it runs (opt in with
``spark.streaming.kafka.ui.port``): Spark's old Streaming tab for this engine, drawn as SVG
on the server, with Prometheus ``/metrics`` on the same port.

:mod:`.state` keeps what the page shows, :mod:`.svg` draws the charts, :mod:`.pages` writes
the HTML and :mod:`.server` serves it.
"""

from __future__ import annotations

from dstream_kafka.ui.server import StreamingPage, active_page, page_settings

__all__ = ["StreamingPage", "active_page", "page_settings"]

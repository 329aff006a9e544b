"""The driver's HTTP server of the Streaming page and of Prometheus ``/metrics``.

Opt in with ``spark.streaming.kafka.ui.port`` (0 picks a free port); it binds
``spark.streaming.kafka.ui.host`` (default ``127.0.0.1``: only this machine can read it).
Routes: ``/`` the Streaming page, ``/batch?id=<batch time ms>`` one batch, ``/api/batches``
the batches as JSON (Spark's REST field names), ``/metrics`` the Prometheus exposition of
:data:`dstream_kafka.ui.metrics.REGISTRY`. The standard library's threading HTTP server runs in
a daemon thread; each request renders from a copy of the state, so a slow client never holds
up a batch.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dstream_kafka import config as _config
from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming.outputs import ContextOutput
from dstream_kafka.ui import pages
from dstream_kafka.ui.state import PageListener, PageState, job_group, job_group_setter

__all__ = ["StreamingPage", "active_page", "page_settings"]

log = logging.getLogger(__name__)

_active: StreamingPage | None = None
_active_lock = threading.Lock()


def page_settings(conf: Any) -> tuple[int, str, int] | None:
    """``(port, host, retained batches)`` from ``conf``, or None when the page is off.

    Raises
    ------
    ConfigurationError
        A port outside 0-65535, an empty host or fewer than 1 retained batch, naming the key.
    """
    reader = SparkConfReader(conf)
    raw = reader.get_raw(_config.UI_PORT)
    if raw is None or str(raw).strip() == "":
        return None
    port = reader.get_int(_config.UI_PORT)
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"{_config.UI_PORT}={raw!r} is not a TCP port; use 0 to 65535 "
                                 "(0: a free port), e.g. 4050")
    host = reader.get_str(_config.UI_HOST).strip()
    if not host:
        raise ConfigurationError(f"{_config.UI_HOST} is empty; use an address to bind, e.g. "
                                 "127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")
    retained = reader.get_int(_config.UI_RETAINED_BATCHES, minimum=1)
    return port, host, retained


def active_page() -> StreamingPage | None:
    """The page of the running context, or None when no context serves one."""
    return _active


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urllib.parse.urlsplit(self.path)
        state = self.server.state
        path = url.path.rstrip("/") or "/"
        if path == "/":
            self._reply(200, "text/html; charset=utf-8", pages.streaming_page(state))
        elif path == "/batch":
            query = urllib.parse.parse_qs(url.query)
            ids = query.get("id", [""])
            row = state.batch(int(ids[0])) if ids[0].isdigit() else None
            if row is None:
                self._reply(404, "text/html; charset=utf-8", pages.not_found_page(
                    f"no active or retained batch with id {ids[0]!r} (the batch time in ms)"))
            else:
                self._reply(200, "text/html; charset=utf-8", pages.batch_page(state, row))
        elif path == "/api/batches":
            active, completed, _ = state.snapshot()
            body = json.dumps([r.jsonValue() for r in [*reversed(active), *reversed(completed)]])
            self._reply(200, "application/json", body)
        elif path == "/metrics":
            from dstream_kafka.ui import metrics

            content_type, body_bytes = metrics.exposition()
            self._reply_bytes(200, content_type, body_bytes)
        else:
            self._reply(404, "text/html; charset=utf-8", pages.not_found_page(
                f"{url.path}: the page has /, /batch?id=<ms>, /api/batches and /metrics"))

    def _reply(self, status: int, content_type: str, text: str) -> None:
        self._reply_bytes(status, content_type, text.encode("utf-8"))

    def _reply_bytes(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("streaming page: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: PageState) -> None:
        self.state = state
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser that went away mid-reply is routine; anything else is a bug worth a trace.
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            return
        log.exception("Streaming page request from %s failed", client_address[0])


class StreamingPage(ContextOutput):
    """The Streaming page of one StreamingContext, served while it runs (a context output of
    :mod:`dstream_kafka.streaming.outputs`, registered by :mod:`dstream_kafka.ui.outputs`).

    Attributes
    ----------
    state : PageState
        What the page shows.
    listener : PageListener
        Add it to the context's listener bus.
    url : str
        ``http://<host>:<port>/`` once started.
    """

    def __init__(self, sc: Any, batch_ms: int, port: int, host: str, retained: int) -> None:
        from dstream_kafka.ui import metrics

        self._sc = sc
        self.state = PageState(batch_ms, retained, sc.uiWebUrl, sc.appName,
                               cache_counters=metrics.executor_cache_counters)
        self.listener = PageListener(self.state, self._job_ids)
        self._port, self._host = port, host
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    @classmethod
    def create(cls, sc: Any, batch_ms: int, conf: Any) -> StreamingPage | None:
        """The page ``conf`` asks for (not started yet), or None when it is off."""
        settings = page_settings(conf)
        if settings is None:
            return None
        port, host, retained = settings
        return cls(sc, batch_ms, port, host, retained)

    def job_description_setter(self) -> Any:
        """The scheduler's ``set_job_description``: each job joins its batch's job group."""
        return job_group_setter(self._sc)

    def _job_ids(self, batch_time: int) -> tuple[int, ...]:
        try:
            return tuple(sorted(self._sc.statusTracker().getJobIdsForGroup(job_group(batch_time))))
        except Exception:  # the SparkContext stopped under us: show no links
            log.debug("Job ids of batch %d ms unavailable", batch_time, exc_info=True)
            return ()

    def start(self) -> str:
        """Bind and serve in a daemon thread; return the page's URL.

        Raises
        ------
        ConfigurationError
            When the port cannot be bound (in use, or a privileged port), naming the key.
        """
        global _active
        try:
            self._server = _Server((self._host, self._port), self.state)
        except OSError as exc:
            raise ConfigurationError(
                f"{_config.UI_PORT}={self._port}: cannot serve the Streaming page on "
                f"{self._host}:{self._port} ({exc.strerror or exc}); choose a free port, or 0 "
                "for any free port") from exc
        port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="dstream-streaming-page", daemon=True)
        self._thread.start()
        self.url = f"http://{self._host}:{port}/"
        with _active_lock:
            _active = self
        log.info("Streaming page on %s (Prometheus metrics on %smetrics)", self.url, self.url)
        return self.url

    def stream_feed(self, stream: int, description: str, store: Any, group: str) -> Any:
        """The progress output that feeds stream ``stream``'s charts (see :class:`PageState`)."""
        return self.state.stream_feed(stream, description, store, group)

    def stop(self) -> None:
        """Stop serving and free the port."""
        global _active
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        with _active_lock:
            if _active is self:
                _active = None

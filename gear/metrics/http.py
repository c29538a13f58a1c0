"""The operator's port: ``/metrics``, ``/livez`` and ``/readyz`` served from a thread.

The HTTP server runs in its own daemon thread (the standard library's WSGI server, one thread per
request), so a stuck event loop cannot keep it from answering: every endpoint reads the service on
the loop (:func:`gear.eventloop.call_in_loop`) with a deadline, and a loop that does not answer makes
``/livez`` (and the others) say 503 instead of hanging the probe.

* ``GET /livez``: 200 ``ok`` when the event loop runs a no-op within 2 s, else 503;
* ``GET /readyz``: 200 when ready, else 503; the body is ``{"ready": ..., "reasons": [...], **svc.health()}``;
* ``GET /metrics``: the Prometheus exposition (text, or OpenMetrics when asked), written by
  prometheus-client; without it installed, 503 and how to install it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from gear.eventloop import call_in_loop
from gear.metrics.health import LIVENESS_TIMEOUT, Probe

__all__ = ("SCRAPE_TIMEOUT", "OperatorServer")

log = logging.getLogger("gear.metrics")

SCRAPE_TIMEOUT = 5.0
"""Seconds the event loop has to take a reading for ``/metrics`` or ``/readyz``."""

_StartResponse = Callable[[str, list[tuple[str, str]]], object]
_NO_CLIENT = (
    b"prometheus-client is not installed: pip install 'gear-rpc[metrics]' to serve /metrics "
    b"(/livez and /readyz work without it)\n"
)


class _Server(ThreadingMixIn, WSGIServer):
    """The standard library's threading WSGI server that also counts the requests it is answering,
    so closing can wait for them (its threads are daemons: a stuck one never keeps a process alive,
    but a process that exits mid-answer would cut that answer short)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._answering = 0
        self._idle = threading.Condition()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Count the request before its thread starts (so :meth:`wait_idle` cannot miss it)."""
        with self._idle:
            self._answering += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._answered()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Answer in this thread, then uncount the request."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._answered()

    def _answered(self) -> None:
        with self._idle:
            self._answering -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every request being answered; how many are left."""
        with self._idle:
            self._idle.wait_for(lambda: self._answering == 0, timeout)
            return self._answering


class _QuietHandler(WSGIRequestHandler):
    wbufsize = -1
    """Buffered: wsgiref writes the status line, the headers and the body separately, and one flush
    sends them together, so a reader never sees a status line whose headers and body never came."""

    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds: no access log."""


class OperatorServer:
    """Serves one service's ``/metrics``, ``/livez`` and ``/readyz`` on ``bind:port``.

    Args:
        probe: the service.
        loop: the loop the service runs on.
        registry: the prometheus-client registry to expose, or ``None`` when prometheus-client is
            missing (``/metrics`` then says how to install it).
        port: the TCP port (0: a free one, see :attr:`port`).
        bind: the interface (``0.0.0.0``: every one).

    Raises:
        OSError: the port cannot be bound.
    """

    def __init__(
        self, probe: Probe, loop: asyncio.AbstractEventLoop, registry: Any | None, port: int, bind: str
    ) -> None:
        self._probe = probe
        self._loop = loop
        self._registry = registry
        self._server = make_server(bind, port, self._app, server_class=_Server, handler_class=_QuietHandler)
        self.port: int = self._server.server_address[1]
        """The port it listens on (the one picked when 0 was asked)."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"gear-metrics-{self.port}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, release the port and wait up to :data:`SCRAPE_TIMEOUT` seconds for the
        requests being answered (a process that exits next would cut them short). Call it off the
        event loop: the answers may need the loop (see :meth:`gear.Service.stop`)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        left = self._server.wait_idle(SCRAPE_TIMEOUT)
        if left:
            log.warning(
                "port %d closed with %d request(s) still unanswered after %gs",
                self.port,
                left,
                SCRAPE_TIMEOUT,
            )

    # -- the WSGI application (in the server's threads) -----------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", b"GET only\n")
        try:
            if path == "/livez":
                call_in_loop(self._loop, _nothing, LIVENESS_TIMEOUT)
                return _answer(start_response, "200 OK", b"ok\n")
            if path == "/readyz":
                return self._readyz(start_response)
            if path == "/metrics":
                return self._metrics(environ, start_response)
        except TimeoutError as exc:
            return _answer(start_response, "503 Service Unavailable", f"{exc}\n".encode())
        return _answer(start_response, "404 Not Found", b"try /metrics, /livez or /readyz\n")

    def _readyz(self, start_response: _StartResponse) -> Iterable[bytes]:
        def read() -> dict[str, Any]:
            readiness = self._probe.readiness()
            return {"ready": readiness.ready, "reasons": list(readiness.reasons), **self._probe.health()}

        found = call_in_loop(self._loop, read, SCRAPE_TIMEOUT)
        status = "200 OK" if found["ready"] else "503 Service Unavailable"
        body = json.dumps(found, default=str).encode()
        return _answer(start_response, status, body, "application/json")

    def _metrics(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        if self._registry is None:
            return _answer(start_response, "503 Service Unavailable", _NO_CLIENT)
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        try:
            body = encode(self._registry)
        except TimeoutError:
            raise
        except Exception:
            log.exception("reading the metrics failed")
            return _answer(start_response, "500 Internal Server Error", b"reading the metrics failed\n")
        return _answer(start_response, "200 OK", body, content_type)


def _nothing() -> None:
    """What ``/livez`` asks the loop to run."""


def _answer(
    start_response: _StartResponse, status: str, body: bytes, content_type: str = "text/plain; charset=utf-8"
) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]

"""What the server says about its work: one log line per request and per session, and Prometheus metrics.

Log lines (format: :mod:`protocol.logs`; request text is never logged, PROTOCOL.md §13):

* ``request``: ``transport`` (``ws`` or ``http``), ``session`` (WebSocket only), ``request_id``,
  ``voice``, ``chars`` (characters of text), ``audio_s`` (seconds of audio sent), ``first_audio_ms``
  (acceptance to the first audio handed to the transport), ``xrt`` (seconds of audio per second of
  synthesis compute: above 1 is faster than real time), ``status`` (``completed``, ``cancelled``,
  ``failed``, or for HTTP ``disconnected`` when the client left first);
* ``session start`` / ``session end`` (``session``, ``client``; at the end ``close_code``, ``requests``,
  ``refused`` and ``duration_s``), and ``session refused`` when ``max_sessions`` are open;
* ``refused`` (DEBUG): one per refused message, with its ``code``.

Metrics (:class:`Metrics`, served on a side port only when ``--metrics-port`` is given): counters of
sessions (by close code), requests (by transport and status) and refusals (by code), histograms of
first-audio time and xRT, and gauges of open sessions, queue depth and readiness. Names and meanings are
in reference_server/README.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from protocol.logs import log_event
from protocol.messages import SynthesisRequest

__all__ = ["Metrics", "RequestRecord"]

logger = logging.getLogger("reference_server")

_FIRST_AUDIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
"""Seconds: from well under the 0.3 s agents notice to the long tail of a loaded 2-core machine."""
_XRT_BUCKETS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)
"""Times real time: below 1 a listener hears gaps; CPU runs 1-4, one GPU far above."""


class Metrics:
    """The reference server's Prometheus instruments, in a registry of their own (one per server).

    Args:
        queue_depth: returns the requests accepted and not yet completed, across every session and
            in-flight ``POST /invocations``; read at each scrape.
        ready: returns whether the model is loaded and warmed up; read at each scrape.
    """

    def __init__(self, queue_depth: Callable[[], int], ready: Callable[[], bool]) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.sessions = Counter(
            "kokoro_sessions", "WebSocket sessions ended, by close code", ["close_code"], registry=registry
        )
        self.sessions_open = Gauge("kokoro_sessions_open", "WebSocket sessions open now", registry=registry)
        self.requests = Counter(
            "kokoro_requests",
            "synthesis requests answered, by transport (ws, http) and status",
            ["transport", "status"],
            registry=registry,
        )
        self.refusals = Counter(
            "kokoro_refusals",
            "messages and requests refused, by error code (PROTOCOL.md §9.1)",
            ["code"],
            registry=registry,
        )
        self.first_audio = Histogram(
            "kokoro_first_audio_seconds",
            "request accepted to its first audio handed to the transport",
            ["transport"],
            buckets=_FIRST_AUDIO_BUCKETS,
            registry=registry,
        )
        self.xrt = Histogram(
            "kokoro_xrt",
            "seconds of audio per second of synthesis compute, per request (above 1: faster than real time)",
            buckets=_XRT_BUCKETS,
            registry=registry,
        )
        depth = Gauge(
            "kokoro_queue_depth", "requests accepted and not yet completed, all sessions", registry=registry
        )
        depth.set_function(lambda: float(queue_depth()))
        up = Gauge("kokoro_model_ready", "1 once the model is loaded and warmed up", registry=registry)
        up.set_function(lambda: 1.0 if ready() else 0.0)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def serve(self, host: str, port: int) -> int:
        """Serve ``GET /metrics`` (text exposition format) on ``host:port`` in a daemon thread.

        Returns the port (useful with 0). Raises OSError when the port cannot be bound.
        """
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


@dataclass
class RequestRecord:
    """The facts of one request as it is answered, for its log line and metrics.

    Times are :func:`time.monotonic` seconds. ``compute_s`` is the synthesis compute of the request (the
    time its backend segments took on a worker), not time spent waiting for a worker or for the client.
    ``chars`` overrides ``len(request.text)`` for an utterance, whose text arrives after it is accepted.
    """

    transport: str
    request: SynthesisRequest
    session: str | None = None
    accepted_at: float = field(default_factory=time.monotonic)
    first_audio_at: float | None = None
    audio_bytes: int = 0
    compute_s: float = 0.0
    chars: int | None = None

    def audio(self, nbytes: int) -> None:
        """``nbytes`` of PCM16 were handed to the transport."""
        if nbytes and self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        self.audio_bytes += nbytes

    def finish(self, status: str, metrics: Metrics | None, **extra: Any) -> None:
        """Log the ``request`` line and count the request (``extra``: more fields for the line)."""
        request = self.request
        audio_s = self.audio_bytes / 2 / request.sample_rate
        first_ms = None
        if self.first_audio_at is not None:
            first_ms = round((self.first_audio_at - self.accepted_at) * 1000.0, 1)
        xrt = round(audio_s / self.compute_s, 2) if self.compute_s > 0 and audio_s > 0 else None
        log_event(
            logger,
            "request",
            transport=self.transport,
            session=self.session,
            request_id=request.request_id,
            voice=request.voice,
            speed=request.speed,
            chars=len(request.text) if self.chars is None else self.chars,
            audio_s=round(audio_s, 3),
            first_audio_ms=first_ms,
            xrt=xrt,
            status=status,
            **extra,
        )
        if metrics is not None:
            metrics.requests.labels(self.transport, status).inc()
            if first_ms is not None:
                metrics.first_audio.labels(self.transport).observe(first_ms / 1000.0)
            if xrt is not None:
                metrics.xrt.observe(audio_s / self.compute_s)

"""The Starlette application of the reference server and the uvicorn server that runs it.

:func:`create_app` wires the three routes of PROTOCOL.md §2 to one :class:`~reference_server.runtime.Runtime`;
:func:`create_server` puts the app behind uvicorn with the WebSocket settings the protocol needs. Both
``python -m reference_server`` (and so the containers) and the tests start the server through
:func:`create_server`, so the tests exercise the deployed code path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route, WebSocketRoute
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from reference_server import http, openai_speech, playground, ws
from reference_server.edges import (
    HostOriginGuard,
    http_protocol,
    internal_error,
    is_loopback_host,
    json_rejections,
)
from reference_server.runtime import Readiness, Runtime
from reference_server.settings import Settings

__all__ = ["create_app", "create_server"]

logger = logging.getLogger("reference_server")


Endpoint = Callable[..., Any]
"""A route's handler: ``async (request) -> Response`` (HTTP) or ``async (websocket) -> None`` (WebSocket)."""


def create_app(
    settings: Settings, backend: Any = None, *, endpoints: Mapping[str, Endpoint] | None = None
) -> Starlette:
    """Build the ASGI app: ``GET /ping``, ``POST /invocations`` and the WebSocket route (§2).

    Args:
        settings: server settings; ``settings.backend`` and ``settings.model_dir`` choose the backend
            when ``backend`` is not given.
        backend: an object with the backend interface of :mod:`reference_server.backends` (``name``,
            ``sample_rate``, ``voices``, ``load()``, ``warm_up()``, ``synthesize()``); tests pass a
            double here.
        endpoints: handlers to serve in place of the shipped ones, by path (``"/ping"``,
            ``"/invocations"``, :data:`reference_server.ws.PATH`): the hook through which the conformance
            suite's one-defect servers (:mod:`conformance.mutants.base`) inject a defect into this app;
            each may call the shipped handler. A path not served raises :class:`ValueError`.

    With ``settings.serves_playground`` the app also serves the playground page at ``/playground/``
    (:mod:`reference_server.playground`), and with ``settings.serves_openai`` OpenAI-compatible speech
    under ``/v1`` (:mod:`reference_server.openai_speech`); by default both only on a loopback address.

    The model is loaded and warmed up in the background when the app starts (its lifespan), on a
    worker thread, so ``GET /ping`` answers 503 until it is ready. ``app.state.runtime`` holds the
    shared :class:`~reference_server.runtime.Runtime`.

    Raises:
        reference_server.assets.AssetError: ``backend`` is not given and the settings' backend would not
            find verified assets (missing, or not the pinned bytes): checked here, before anything
            listens, so a server that cannot serve never starts (PROTOCOL.md §2.2).
    """
    if backend is None:
        from reference_server.assets import preflight
        from reference_server.backends import create_backend

        if settings.backend != "tone":  # the tone backend loads no weights
            preflight(settings.model_dir, backend=settings.backend)
        backend = create_backend(settings.backend, model_dir=settings.model_dir, onnx=settings.onnx_pass)
    runtime = Runtime(settings, backend)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        preparing = asyncio.create_task(runtime.prepare(), name="load-model")
        try:
            yield
        finally:
            await runtime.shutdown(timeout_s=settings.limits.close_timeout_s)
            preparing.cancel()

    handlers: dict[str, Endpoint] = {
        "/ping": http.ping,
        "/invocations": http.invocations,
        ws.PATH: ws.bidirectional_stream,
    }
    unknown = set(endpoints or {}) - set(handlers)
    if unknown:
        raise ValueError(f"no shipped route serves {sorted(unknown)}; choose among {sorted(handlers)}")
    handlers.update(endpoints or {})
    routes: list[BaseRoute] = [
        Route("/ping", handlers["/ping"], methods=["GET"]),
        Route("/invocations", handlers["/invocations"], methods=["POST"]),
        WebSocketRoute(ws.PATH, handlers[ws.PATH]),
    ]
    if settings.serves_playground:
        routes += playground.routes()
    http_error = http.http_error  # 404, 405: the §11.6 body too
    if settings.serves_openai:
        routes += openai_speech.routes()
        http_error = openai_speech.error_handler(http_error)  # OpenAI's error shape under /v1 only
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    app.state.runtime = runtime
    # Origin of WebSocket handshakes, Host on a loopback bind (PROTOCOL.md §13; reference_server.edges).
    app.add_middleware(
        HostOriginGuard,
        allowed_origins=settings.allowed_origins,
        check_host=is_loopback_host(settings.host),
        allowed_hosts=settings.allowed_hosts,
    )
    app.add_exception_handler(Exception, internal_error)  # a bug's 500 in the §11.6 shape too
    return app


class _Server(uvicorn.Server):
    """uvicorn, but live WebSocket sessions are closed with 1001 before uvicorn's own shutdown.

    uvicorn fails open WebSockets with 1012 the moment it shuts down; PROTOCOL.md §7.3 promises 1001
    (going away), so the sessions are told first. With ``settings.metrics_port`` set, the Prometheus
    endpoint starts before the server listens (a port that cannot be bound stops the start, ``started``
    stays false) and stops with it.
    """

    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self._runtime = runtime
        self.load_failed = False
        """The model failed to load: the server stopped itself (PROTOCOL.md §2.2)."""

    async def on_tick(self, counter: int) -> bool:
        # A server whose model failed to load cannot serve: it exits (non-zero, see __main__) rather than
        # answer 503 until SageMaker's health check gives up.
        if self._runtime.readiness is Readiness.FAILED and not self.load_failed:
            self.load_failed = True
            logger.error("cannot serve, stopping: %s", self._runtime.failure)
            self.should_exit = True
        return await super().on_tick(counter)

    async def startup(self, sockets: Any = None) -> None:
        settings = self._runtime.settings
        if settings.metrics_port is not None:
            try:
                port = self._runtime.metrics.serve(settings.host, settings.metrics_port)
            except OSError as exc:
                logger.error("cannot serve metrics on %s:%s: %s", settings.host, settings.metrics_port, exc)
                self.should_exit = True
                return
            logger.info("metrics at http://%s:%d/metrics", settings.host, port)
        await super().startup(sockets)
        if self.started and settings.serves_playground:
            logger.info(
                "playground at http://%s:%d%s", _url_host(settings.host), self._port(), playground.PREFIX
            )
        if self.started and settings.serves_openai:
            logger.info(
                "OpenAI-compatible speech at http://%s:%d%s", _url_host(settings.host), self._port(),
                openai_speech.PREFIX,
            )  # fmt: skip

    def _port(self) -> int:
        """The port actually bound (``settings.port`` may be 0)."""
        for server in self.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self._runtime.settings.port

    async def shutdown(self, sockets: Any = None) -> None:
        await self._runtime.shutdown(timeout_s=self._runtime.limits.close_timeout_s)
        await super().shutdown(sockets)
        self._runtime.metrics.stop()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


INPUT_SLICE_BYTES = 4096
"""Bytes of WebSocket input parsed per event-loop iteration (PROTOCOL.md §10.3): a few hundred small
frames at most, a millisecond or two of parsing, while a normal message fits whole."""


def _websocket_protocol(close_timeout_s: float) -> type[WebSocketsSansIOProtocol]:
    """uvicorn's websockets (sans-I/O) protocol with the close timeout of ``limits.close_timeout_s``."""

    class KokoroWebSocketProtocol(WebSocketsSansIOProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # uvicorn fixes this at 10 s with no setting; PROTOCOL.md §10 makes it a limit.
            self.close_timeout = close_timeout_s
            json_rejections(self.conn)  # a refused handshake answers in the §11.6 shape too

        def data_received(self, data: bytes) -> None:
            # One socket read can hold 256 KiB of tiny frames, which websockets would parse (and uvicorn
            # queue) in one go while the event loop waits: feed it in slices, one per loop iteration,
            # so GET /ping and the other sessions are served between them (PROTOCOL.md §10.3).
            pending: bytearray | None = getattr(self, "_pending_input", None)
            if pending is None:
                pending = self._pending_input = bytearray()
            scheduled = bool(pending)
            pending += data
            if len(pending) > 4 * INPUT_SLICE_BYTES and not self.read_paused:
                # Read no more until the slices are parsed (or the app has taken what was read).
                self.read_paused = True
                self.transport.pause_reading()
            if not scheduled:
                self._feed_slice()

        def _feed_slice(self) -> None:
            pending: bytearray = self._pending_input
            if self.transport.is_closing():
                pending.clear()
                return
            chunk = bytes(pending[:INPUT_SLICE_BYTES])
            del pending[:INPUT_SLICE_BYTES]
            super().data_received(chunk)
            if pending:
                asyncio.get_running_loop().call_soon(self._feed_slice)
            self._resume_if_drained()

        def _resume_if_drained(self) -> None:
            # Read on only once the app has taken every message and the slices are (nearly) parsed:
            # uvicorn resumed as soon as its queue was empty, and each read then added up to 256 KiB
            # here, faster than a throttled session takes messages (PROTOCOL.md §10.3).
            pending: bytearray = self._pending_input
            if (
                self.read_paused
                and self.queue.empty()
                and len(pending) <= 4 * INPUT_SLICE_BYTES
                and not self.transport.is_closing()
            ):
                self.read_paused = False
                self.transport.resume_reading()

        async def receive(self) -> Any:
            message = await self.queue.get()
            if getattr(self, "_pending_input", None) is None:
                self._pending_input = bytearray()
            self._resume_if_drained()
            return message

        def handle_connect(self, event: Any) -> None:
            super().handle_connect(event)
            scope = getattr(self, "scope", None)
            if scope is not None:
                # A session whose client reads nothing cannot even be sent its Close frame: the
                # session drops the connection with this (PROTOCOL.md §10.3, reference_server.ws).
                scope["kokoro.abort_transport"] = self._abort_transport

        def _abort_transport(self) -> None:
            self.transport.abort()  # connection_lost then tells the app (websocket.disconnect)

    return KokoroWebSocketProtocol


def create_server(settings: Settings, app: Starlette | None = None) -> uvicorn.Server:
    """A uvicorn server for ``app`` (default: :func:`create_app` of ``settings``) on ``settings.host:port``.

    WebSocket transport settings (python-websockets' sans-I/O core under uvicorn):

    * ``ws_max_size`` is ``settings.ws_max_size``, above ``max_message_bytes``, so an oversized message
      still reaches the session and gets ``message_too_large`` (§9) rather than a transport close;
    * uvicorn answers client pings itself, from the event loop, which synthesis never blocks (§8); it
      also pings idle clients every 20 s (its default) and drops ones that do not answer;
    * per-message compression is off: PCM hardly compresses and deflate costs CPU the model needs.

    HTTP/1.1 is uvicorn's httptools protocol with the request head bounded by
    ``settings.max_header_bytes`` (431) and malformed requests answered 400, both in the §11.6 shape
    (:func:`reference_server.edges.http_protocol`).

    ``server.run()`` serves until SIGINT/SIGTERM; on shutdown live sessions are closed with 1001 (§7.3).
    """
    if app is None:
        app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ws=_websocket_protocol(settings.limits.close_timeout_s),
        ws_max_size=settings.ws_max_size,
        ws_per_message_deflate=False,
        # A bounded request head; the HTTP layer's own refusals in the §11.6 shape (reference_server.edges).
        http=http_protocol(settings.max_header_bytes),
        lifespan="on",
        # Records go to the root logger in the project's one format (protocol.logs); each request and
        # session gets its own line from the server, so uvicorn's access log would only repeat them.
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=max(1, int(settings.limits.close_timeout_s)),
    )
    return _Server(config, app.state.runtime)

"""An in-process transport for the official bidi client: no socket, no TLS, same wire bytes.

``aws-sdk-sagemaker-runtime-http2`` lets the caller choose its HTTP transport (the ``transport``
config field). A transport that declares ``SUPPORTS_DUPLEX_STREAMING = True`` and whose
``send(request)`` returns a smithy ``HTTPResponse`` with an async byte-iterator body runs the client's
real serializer, SigV4 event signer and event-stream decoder (REFERENCE §1, verified). This one
hands each request to an ASGI app — the simulator's :class:`simulator.app.SimulatorApp` — as an
HTTP/2 request, so the bytes the app sees are the bytes the CRT transport would put on the wire.

HTTP/2 behaviour mirrored from the CRT transport: the response (status and headers) is returned as
soon as the app starts it, while the request body is still streaming; once the response has ended,
the rest of the request body is read and discarded, so a client that keeps sending does not block.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

from smithy_core.aio.types import AsyncBytesProvider
from smithy_core.aio.utils import read_streaming_blob_async
from smithy_http import tuples_to_fields
from smithy_http.aio import HTTPResponse

from simulator.app import Receive, Scope, Send

__all__ = ["InProcessTransport"]

_ASGI = {"version": "3.0", "spec_version": "2.4"}


class _End:
    """Sentinel: the response body ended; ``error`` is what the app raised, if anything."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class _Exchange:
    """One request/response pair running through the app."""

    def __init__(self, app: Any, scope: Scope, body: Any) -> None:
        self.app = app
        self.scope = scope
        self.body = body
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.response_chunks: asyncio.Queue[bytes | _End] = asyncio.Queue()
        self.request_events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.app_task: asyncio.Task[None] | None = None
        self.body_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.body_task = asyncio.create_task(self._read_request_body(), name="in-process request body")
        self.app_task = asyncio.create_task(self._run_app(), name=f"in-process {self.scope['path']}")

    async def _read_request_body(self) -> None:
        body = self.body
        if isinstance(body, bytes | bytearray):
            chunks: Any = [bytes(body)]
        elif hasattr(body, "__aiter__"):
            chunks = body
        else:
            chunks = [await read_streaming_blob_async(body)]
        if isinstance(chunks, list):
            for chunk in chunks:
                self.request_events.put_nowait({"type": "http.request", "body": chunk, "more_body": True})
        else:
            async for chunk in chunks:
                self.request_events.put_nowait(
                    {"type": "http.request", "body": bytes(chunk), "more_body": True}
                )
        # END_STREAM of the request.
        self.request_events.put_nowait({"type": "http.request", "body": b"", "more_body": False})

    async def _receive(self) -> dict[str, Any]:
        return await self.request_events.get()

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if not self.started.done():
                self.started.set_result(message)
        elif kind == "http.response.body":
            if message.get("body"):
                self.response_chunks.put_nowait(bytes(message["body"]))
            if not message.get("more_body", False):
                self.response_chunks.put_nowait(_End())

    async def _run_app(self) -> None:
        receive: Receive = self._receive
        send: Send = self._send
        try:
            await self.app(self.scope, receive, send)
        except Exception as exc:
            if not self.started.done():
                self.started.set_exception(exc)
            self.response_chunks.put_nowait(_End(exc))
        else:
            if not self.started.done():
                self.started.set_exception(RuntimeError("the app returned without a response"))
            self.response_chunks.put_nowait(_End())

    async def response_body(self) -> AsyncIterator[bytes]:
        while True:
            item = await self.response_chunks.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise OSError("in-process response broke off") from item.error
                return
            yield item

    async def abort(self, timeout: float) -> None:
        """The client went away: tell the app, give it ``timeout`` seconds, then cancel. The
        request body will never end, so its reader is cancelled at once."""
        self.request_events.put_nowait({"type": "http.disconnect"})
        if self.app_task is not None and not self.app_task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.app_task), timeout)
        for task in (self.app_task, self.body_task):
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if isinstance(self.body, AsyncBytesProvider):
            # Nobody will read the client's request body again: fail its later writes instead of
            # letting them (and a flushing close) wait forever.
            await self.body.close(flush=False)


class InProcessTransport:
    """A duplex smithy HTTP transport that serves requests with an in-process ASGI app.

    Pass it as ``transport=`` when resolving ``AsyncSageMakerRuntimeHTTP2Config``; any
    ``endpoint_uri`` works (``https://simulator.local`` for instance), as nothing is resolved or
    dialled. :meth:`close` (called by the client's ``close()``) disconnects any exchange still
    running.

    Args:
        app: the ASGI application, normally :attr:`simulator.server.Simulator.app`.
    """

    SUPPORTS_DUPLEX_STREAMING = True
    TIMEOUT_EXCEPTIONS: tuple[type[Exception], ...] = ()

    def __init__(self, app: Any) -> None:
        self.app = app
        self._exchanges: set[_Exchange] = set()

    async def send(self, request: Any, *, request_config: Any = None) -> HTTPResponse:
        """Run ``request`` through the app; return once the app has started its response.

        Raises whatever the app raised before starting a response.
        """
        destination = request.destination
        path = destination.path or "/"
        headers = [
            (field.name.lower().encode("latin-1"), value.encode("latin-1"))
            for field in request.fields.entries.values()
            if field.kind == "header"
            for value in field.values
        ]
        if not any(name == b"host" for name, _ in headers):
            headers.insert(0, (b"host", destination.netloc.encode("latin-1")))
        scope: Scope = {
            "type": "http",
            "asgi": dict(_ASGI),
            "http_version": "2",
            "method": request.method,
            "scheme": destination.scheme,
            "path": unquote(path),
            "raw_path": path.encode("latin-1"),
            "query_string": (destination.query or "").encode("latin-1"),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": (destination.host, destination.port or 443),
        }
        exchange = _Exchange(self.app, scope, request.body)
        self._exchanges.add(exchange)
        exchange.start()
        for task in (exchange.app_task, exchange.body_task):
            assert task is not None
            task.add_done_callback(lambda _: self._retire(exchange))
        start = await exchange.started
        fields = tuples_to_fields(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in start.get("headers", [])
        )
        return HTTPResponse(status=int(start["status"]), fields=fields, body=exchange.response_body())

    def _retire(self, exchange: _Exchange) -> None:
        # Kept until the app has returned *and* the request body has been read to END_STREAM.
        if all(task is not None and task.done() for task in (exchange.app_task, exchange.body_task)):
            self._exchanges.discard(exchange)

    async def close(self) -> None:
        """Disconnect every exchange still running (the client was closed mid-session) and stop
        reading request bodies the client never ended."""
        exchanges, self._exchanges = list(self._exchanges), set()
        for exchange in exchanges:
            await exchange.abort(timeout=5.0)

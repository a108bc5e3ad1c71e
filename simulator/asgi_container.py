"""An ASGI app as the model container, in this process and without a socket (fast tests).

The simulator speaks ASGI to the app directly (the ASGI 3 ``websocket``, ``http`` and ``lifespan``
scopes), playing the part of the app server (uvicorn) inside the container. What an app server
would do at the protocol level is mirrored where it matters to the bridge rules:

* a WebSocket handler that raises, or returns without closing, ends the connection without a
  closing handshake (uvicorn closes the transport; the peer sees 1006);
* a handler that closes before accepting refuses the handshake with HTTP 403;
* a TEXT message whose bytes are not UTF-8 cannot be delivered (ASGI carries text as ``str``); the
  app sees ``websocket.disconnect`` 1007, as a WebSocket stack would fail the connection;
* pings are answered by the app server below ASGI, so an in-process app always "answers" them:
  use a real-socket container to test ping handling;
* fragments of one message are delivered as one ASGI message (ASGI has no fragments).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

from simulator.container import (
    Container,
    ContainerClosed,
    ContainerMessage,
    ContainerResponse,
    ContainerSocket,
    ContainerStartError,
    ContainerUnavailable,
)

__all__ = ["AsgiContainer", "ClientDisconnected"]

logger = logging.getLogger("simulator.container")

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]

_ASGI = {"version": "3.0", "spec_version": "2.4"}
_SERVER = ("container", 8080)
_CLIENT = ("127.0.0.1", 0)


class ClientDisconnected(OSError):
    """Raised to the app when it sends on a WebSocket the simulator has closed (ASGI spec 2.4)."""


class _Ended:
    """Marks the end of the app's task in an outbox; ``error`` is what it raised, if anything."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _AsgiSocket(ContainerSocket):
    """A WebSocket session with an in-process ASGI app."""

    def __init__(self, app: ASGIApp, scope: dict[str, Any], close_timeout: float) -> None:
        self._app = app
        self._scope = scope
        self._close_timeout = close_timeout
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any] | _Ended] = asyncio.Queue()
        self._closed: ContainerClosed | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self, open_timeout: float) -> None:
        """Run the handshake: ``websocket.connect`` in, ``websocket.accept`` out in time."""
        self._task = asyncio.create_task(self._run(), name=f"asgi-ws {self._scope['path']}")
        self._inbox.put_nowait({"type": "websocket.connect"})
        try:
            message = await asyncio.wait_for(self._outbox.get(), open_timeout)
        except TimeoutError:
            # The connection is gone for good: no grace for the app, as a dropped TCP peer gets none.
            await self._finish(1006, "handshake timed out", grace_s=0.0)
            raise ContainerUnavailable(
                f"the container did not accept the WebSocket within {open_timeout * 1000:g} ms"
            ) from None
        if isinstance(message, _Ended):
            # uvicorn answers 500 when the app ends or raises before the handshake.
            raise ContainerUnavailable("the container failed before accepting the WebSocket", status=500)
        kind = message["type"]
        if kind == "websocket.accept":
            return
        status = message.get("status", 500) if kind == "websocket.http.response.start" else 403
        await self._finish(1006, "handshake refused")
        raise ContainerUnavailable(f"the container refused the WebSocket with HTTP {status}", status=status)

    async def _run(self) -> None:
        try:
            await self._app(self._scope, self._inbox.get, self._app_send)
        except Exception as exc:
            if self._closed is None:
                logger.exception("exception in the container's WebSocket handler")
            self._outbox.put_nowait(_Ended(exc))
        else:
            self._outbox.put_nowait(_Ended(None))

    async def _app_send(self, message: dict[str, Any]) -> None:
        if self._closed is not None:
            raise ClientDisconnected("the WebSocket is closed")
        self._outbox.put_nowait(message)

    async def send(self, data: bytes | AsyncIterable[bytes], *, text: bool) -> None:
        if self._closed is not None:
            raise self._closed
        if not isinstance(data, bytes | bytearray | memoryview):
            data = b"".join([bytes(chunk) async for chunk in data])
        if text:
            try:
                decoded = bytes(data).decode("utf-8")
            except UnicodeDecodeError:
                await self._finish(1007, "invalid UTF-8 in a TEXT message")
                raise self._closed or ContainerClosed(1007) from None
            self._inbox.put_nowait({"type": "websocket.receive", "text": decoded})
        else:
            self._inbox.put_nowait({"type": "websocket.receive", "bytes": bytes(data)})

    async def recv(self) -> ContainerMessage:
        if self._closed is not None:
            raise self._closed
        message = await self._outbox.get()
        if isinstance(message, _Ended):
            why = f"handler raised {message.error!r}" if message.error else "handler returned without closing"
            self._closed = ContainerClosed(None, why)
            raise self._closed
        kind = message["type"]
        if kind == "websocket.send":
            if message.get("bytes") is not None:
                return ContainerMessage(bytes(message["bytes"]), False)
            return ContainerMessage(message["text"].encode("utf-8"), True)
        if kind == "websocket.close":
            code, reason = message.get("code", 1000), message.get("reason") or ""
            await self._finish(code, reason)
            raise ContainerClosed(code, reason)
        raise ContainerClosed(None, f"unexpected ASGI message {kind!r}")

    async def ping(self) -> Awaitable[object]:
        if self._closed is not None:
            raise self._closed
        pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pong.set_result(None)  # the app server answers pings below ASGI
        return pong

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._finish(code, reason)

    async def _finish(self, code: int, reason: str, grace_s: float | None = None) -> None:
        """Deliver ``websocket.disconnect`` and let the app's task end; cancel it after ``grace_s``
        (default: the close timeout)."""
        if self._closed is None:
            self._closed = ContainerClosed(code, reason)
            self._inbox.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
        task = self._task
        if task is None or task.done():
            return
        grace = self._close_timeout if grace_s is None else grace_s
        if grace > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), grace)
                return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


class AsgiContainer(Container):
    """An ASGI application served in-process as the model container.

    Args:
        app: the ASGI 3 application (a Starlette app, for example).
        lifespan: run the app's ``lifespan`` startup in :meth:`start` and shutdown in :meth:`stop`
            (apps that do not support lifespan are tolerated, as uvicorn does in "auto" mode).
    """

    def __init__(self, app: ASGIApp, *, lifespan: bool = True) -> None:
        self.app = app
        self.lifespan = lifespan
        self.description = f"in-process ASGI app {getattr(app, '__qualname__', type(app).__qualname__)}"
        self._state: dict[str, Any] = {}
        self._lifespan_inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lifespan_outbox: asyncio.Queue[dict[str, Any] | _Ended] = asyncio.Queue()
        self._lifespan_task: asyncio.Task[None] | None = None

    def _base_scope(self, kind: str, path: str, headers: list[tuple[str, str]]) -> dict[str, Any]:
        path, _, query = path.partition("?")
        return {
            "type": kind,
            "asgi": dict(_ASGI),
            "http_version": "1.1",
            "scheme": "ws" if kind == "websocket" else "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"container:8080")]
            + [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            "client": _CLIENT,
            "server": _SERVER,
            # Lifespan state is shallow-copied into every scope (ASGI lifespan spec).
            "state": dict(self._state),
        }

    async def start(self) -> None:
        """Run the app's lifespan startup.

        Raises:
            ContainerStartError: the app reported ``lifespan.startup.failed``.
        """
        if not self.lifespan:
            return
        scope = {"type": "lifespan", "asgi": dict(_ASGI), "state": self._state}

        async def run() -> None:
            try:
                await self.app(scope, self._lifespan_inbox.get, self._lifespan_send)
            except Exception as exc:
                self._lifespan_outbox.put_nowait(_Ended(exc))
            else:
                self._lifespan_outbox.put_nowait(_Ended(None))

        self._lifespan_task = asyncio.create_task(run(), name="asgi-lifespan")
        self._lifespan_inbox.put_nowait({"type": "lifespan.startup"})
        reply = await self._lifespan_outbox.get()
        if isinstance(reply, _Ended):
            # The app does not speak lifespan; like uvicorn's "auto" mode, carry on without it.
            self._lifespan_task = None
            return
        if reply["type"] == "lifespan.startup.failed":
            raise ContainerStartError(f"container lifespan startup failed: {reply.get('message', '')}")

    async def _lifespan_send(self, message: dict[str, Any]) -> None:
        self._lifespan_outbox.put_nowait(message)

    async def stop(self) -> None:
        """Run the app's lifespan shutdown (if startup ran)."""
        task, self._lifespan_task = self._lifespan_task, None
        if task is None:
            return
        self._lifespan_inbox.put_nowait({"type": "lifespan.shutdown"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._lifespan_outbox.get(), 30.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(task, 5.0)
        if not task.done():
            task.cancel()

    async def ping(self) -> bool:
        async with self._http("GET", "/ping", b"", [], timeout=5.0) as response:
            async for _ in response.body:
                pass
            return response.status == 200

    async def connect(self, path: str, *, open_timeout: float, close_timeout: float) -> ContainerSocket:
        socket = _AsgiSocket(
            self.app, self._base_scope("websocket", path, []) | {"subprotocols": []}, close_timeout
        )
        await socket.open(open_timeout)
        return socket

    def invoke(
        self, body: bytes, headers: list[tuple[str, str]], *, timeout: float
    ) -> contextlib.AbstractAsyncContextManager[ContainerResponse]:
        return self._http("POST", "/invocations", body, headers, timeout=timeout)

    @contextlib.asynccontextmanager
    async def _http(
        self, method: str, path: str, body: bytes, headers: list[tuple[str, str]], *, timeout: float
    ) -> AsyncIterator[ContainerResponse]:
        """One HTTP exchange with the app; the response body streams as the app sends it."""
        headers = [*headers, ("content-length", str(len(body)))]
        scope = self._base_scope("http", path, headers) | {"method": method}
        loop = asyncio.get_running_loop()
        started: asyncio.Future[dict[str, Any]] = loop.create_future()
        chunks: asyncio.Queue[bytes | _Ended] = asyncio.Queue()
        done = asyncio.Event()
        request_sent = False

        async def receive() -> dict[str, Any]:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and not started.done():
                started.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    chunks.put_nowait(bytes(message["body"]))
                if not message.get("more_body", False):
                    chunks.put_nowait(_Ended(None))

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                logger.exception("exception in the container's HTTP handler")
                if not started.done():
                    # uvicorn answers 500 when the app fails before its response starts.
                    started.set_result({"status": 500, "headers": [(b"content-type", b"text/plain")]})
                    chunks.put_nowait(b"Internal Server Error")
                chunks.put_nowait(_Ended(exc))
            else:
                if not started.done():
                    started.set_result({"status": 500, "headers": []})
                chunks.put_nowait(_Ended(None))

        task = asyncio.create_task(run(), name=f"asgi-http {method} {path}")
        try:
            try:
                start = await asyncio.wait_for(asyncio.shield(started), timeout)
            except TimeoutError:
                raise ContainerUnavailable(f"the container did not answer within {timeout:g} s") from None

            async def body_chunks() -> AsyncIterator[bytes]:
                while True:
                    item = await chunks.get()
                    if isinstance(item, _Ended):
                        if item.error is not None:
                            raise ContainerClosed(None, f"handler raised {item.error!r}")
                        return
                    yield item

            response_headers = [
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])
            ]
            yield ContainerResponse(int(start["status"]), response_headers, body_chunks())
        finally:
            done.set()
            if not task.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), 1.0)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

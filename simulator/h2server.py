"""A small HTTP/2-over-TLS server (h2 + asyncio) that runs an ASGI app per stream: the HTTP/2 door.

Why not an off-the-shelf ASGI server: a bidirectional stream ends its *response* when the container
closes, while the client's *request* may still be open (the client closes its input only after it
has drained the output). RFC 9113 §8.1 allows a server to finish its response before the request;
the server must then keep accepting, acknowledging (flow control) and discarding request DATA until
the client's END_STREAM or RST_STREAM. hypercorn 0.18 drops the stream when the response ends and
fails the whole connection on the next DATA frame (``KeyError`` in its h2 protocol), which kills
every other stream on that connection. This module keeps that one rule right and stays small: the
HTTP/2 framing, HPACK and flow-control state are python-hyper's ``h2`` (sans-I/O), the TLS and ALPN
are the standard library's.

Flow control on input (RFC 9113 §5.2), as a real endpoint applies it: request DATA waits in its stream's
queue until the app takes it with ``receive()``, and only then is the stream's window reopened
(WINDOW_UPDATE). A client that sends faster than the app reads (the container side is slow or stuck)
therefore stops when its stream window is spent, and the simulator holds at most ``input_window_bytes``
per stream, never an unbounded queue. The connection window is reopened as DATA arrives, since each
stream's queue is bounded on its own, so one stalled stream never stalls the others on its connection.
DATA for a stream whose app has returned is acknowledged and dropped at once (RFC 9113 §8.1).

Scope: TLS only, ALPN ``h2`` only (the official bidi client offers ``h2`` first; REFERENCE §1), no
server push, no trailers, no HTTP/1.1 (the simulator's HTTP/1.1 door is a separate listener).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

__all__ = ["DEFAULT_INPUT_WINDOW_BYTES", "H2Server", "server_ssl_context"]

logger = logging.getLogger("simulator.h2")

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]

_ASGI = {"version": "3.0", "spec_version": "2.4"}
# Connection-specific header fields are forbidden in HTTP/2 (RFC 9113 §8.2.2).
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
_READ_SIZE = 65_536

DEFAULT_INPUT_WINDOW_BYTES = 65_535
"""Request bytes a stream may have in flight unread: HTTP/2's default initial window (RFC 9113 §6.9.2).
SageMaker does not publish its own; the official client never needs more than the default to stream."""
_CONNECTION_WINDOW = 65_535  # the connection window HTTP/2 starts with; reopened in halves as DATA arrives


def server_ssl_context(certfile: Path, keyfile: Path) -> ssl.SSLContext:
    """A TLS server context for the HTTP/2 door: TLS 1.2+, ALPN ``h2`` only."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(certfile), str(keyfile))
    context.set_alpn_protocols(["h2"])
    return context


class _StreamGone(OSError):
    """The client reset the stream or the connection closed; nothing more can be sent."""


class _Stream:
    """One HTTP/2 stream: the request as ASGI ``receive`` events, the response via ``send``."""

    def __init__(self, connection: _Connection, stream_id: int, scope: dict[str, Any]) -> None:
        self.connection = connection
        self.stream_id = stream_id
        self.scope = scope
        # Each request message with the flow-controlled bytes it carries, acknowledged when taken.
        self.inbox: asyncio.Queue[tuple[dict[str, Any], int]] = asyncio.Queue()
        self.queued_bytes = 0
        """Flow-controlled request bytes delivered and not yet taken by the app: at most the window."""
        self.unacknowledged = 0
        """Bytes the app took whose window has not been reopened yet (reopened in halves of the window)."""
        self.response_started = False
        self.response_ended = False
        self.app_done = False
        self.gone = False
        self.task: asyncio.Task[None] | None = None

    def deliver(self, message: dict[str, Any], flow_bytes: int = 0) -> bool:
        """Queue ``message`` for the app; False (nothing queued) once the app has returned."""
        if self.app_done:
            return False
        self.queued_bytes += flow_bytes
        self.inbox.put_nowait((message, flow_bytes))
        return True

    async def receive(self) -> dict[str, Any]:
        message, flow_bytes = await self.inbox.get()
        if flow_bytes:
            self.queued_bytes -= flow_bytes
            self.connection.consumed(self, flow_bytes)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if self.gone:
            raise _StreamGone("the HTTP/2 stream is closed")
        kind = message["type"]
        if kind == "http.response.start" and not self.response_started:
            self.response_started = True
            headers = [(b":status", str(int(message["status"])).encode())]
            headers += [
                (bytes(k).lower(), bytes(v))
                for k, v in message.get("headers", [])
                if bytes(k).lower() not in _HOP_BY_HOP
            ]
            self.connection.h2.send_headers(self.stream_id, headers)
            await self.connection.flush()
        elif kind == "http.response.body" and self.response_started and not self.response_ended:
            await self.connection.send_data(self, bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                self.response_ended = True
                self.connection.h2.end_stream(self.stream_id)
                await self.connection.flush()

    async def run(self, app: ASGIApp) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except Exception:
            if not self.gone:
                logger.exception("ASGI app failed on stream %d", self.stream_id)
            self._abandon(h2.errors.ErrorCodes.INTERNAL_ERROR)
        else:
            if not self.response_started:
                with contextlib.suppress(Exception):
                    await self.send({"type": "http.response.start", "status": 500, "headers": []})
            if not self.response_ended:
                with contextlib.suppress(Exception):
                    await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.app_done = True
            self.connection.retire(self)

    def _abandon(self, code: int) -> None:
        if self.gone or self.response_ended:
            return
        self.gone = True
        with contextlib.suppress(h2.exceptions.H2Error):
            self.connection.h2.reset_stream(self.stream_id, code)
        self.connection.flush_nowait()


class _Connection:
    """One client connection: reads frames, dispatches events, writes what h2 produces."""

    def __init__(
        self,
        app: ASGIApp,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        input_window_bytes: int = DEFAULT_INPUT_WINDOW_BYTES,
    ) -> None:
        self.app = app
        self.reader = reader
        self.writer = writer
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        self.input_window_bytes = input_window_bytes
        self._connection_unacknowledged = 0
        self.streams: dict[int, _Stream] = {}
        self._window_changed = asyncio.Event()
        self.closed = False

    def flush_nowait(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def flush(self) -> None:
        self.flush_nowait()
        if not self.writer.is_closing():
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()

    async def send_data(self, stream: _Stream, data: bytes) -> None:
        """Send ``data`` on ``stream`` within the peer's flow-control windows (RFC 9113 §5.2)."""
        while data:
            if stream.gone or self.closed:
                raise _StreamGone("the HTTP/2 stream is closed")
            try:
                window = self.h2.local_flow_control_window(stream.stream_id)
            except h2.exceptions.StreamClosedError:
                stream.gone = True
                raise _StreamGone("the HTTP/2 stream is closed") from None
            size = min(len(data), window, self.h2.max_outbound_frame_size)
            if size <= 0:
                self._window_changed.clear()
                await self._window_changed.wait()
                continue
            self.h2.send_data(stream.stream_id, data[:size])
            data = data[size:]
            await self.flush()

    def consumed(self, stream: _Stream, nbytes: int) -> None:
        """The app took ``nbytes`` of ``stream``'s request: reopen its window once half of it is taken."""
        stream.unacknowledged += nbytes
        if stream.unacknowledged >= self.input_window_bytes // 2 or stream.app_done:
            nbytes, stream.unacknowledged = stream.unacknowledged, 0
            self._reopen(nbytes, stream.stream_id)
            self.flush_nowait()

    def _reopen(self, nbytes: int, stream_id: int | None) -> None:
        if nbytes <= 0:
            return
        # The stream may have ended (closed, reset) meanwhile: there is no window left to reopen then.
        with contextlib.suppress(h2.exceptions.H2Error, KeyError):
            self.h2.increment_flow_control_window(nbytes, stream_id)

    def retire(self, stream: _Stream) -> None:
        # The app is done. What it left unread is dropped and its window reopened, and DATA the client
        # still sends on this stream is acknowledged and dropped by _dispatch (RFC 9113 §8.1: a response
        # may complete before its request does).
        self.streams.pop(stream.stream_id, None)
        left = stream.queued_bytes + stream.unacknowledged
        stream.queued_bytes = stream.unacknowledged = 0
        while not stream.inbox.empty():
            stream.inbox.get_nowait()
        self._reopen(left, stream.stream_id)
        self.flush_nowait()

    async def run(self) -> None:
        ssl_object = self.writer.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            # Only h2 is spoken here; a client that did not negotiate it gets the connection closed.
            self.writer.close()
            return
        self.h2.initiate_connection()
        if self.input_window_bytes != DEFAULT_INPUT_WINDOW_BYTES:
            # Announced as a settings change, which h2 applies when the client acknowledges it: until
            # then the client may use HTTP/2's default window (RFC 9113 §6.9.2), and h2 must allow it.
            self.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.input_window_bytes})
        await self.flush()
        try:
            while not self.closed:
                data = await self.reader.read(_READ_SIZE)
                if not data:
                    break
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    logger.debug("HTTP/2 protocol error from client", exc_info=True)
                    break
                for event in events:
                    self._dispatch(event)
                await self.flush()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            await self.close()

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._open_stream(event)
        elif isinstance(event, h2.events.DataReceived):
            size = event.flow_controlled_length
            # The connection window reopens as DATA arrives (each stream's queue is bounded by its own
            # window); the stream's only when its app takes the data (_Stream.receive → consumed).
            self._connection_unacknowledged += size
            if self._connection_unacknowledged >= _CONNECTION_WINDOW // 2:
                self._reopen(self._connection_unacknowledged, None)
                self._connection_unacknowledged = 0
            stream = self.streams.get(event.stream_id)
            message = {"type": "http.request", "body": event.data, "more_body": True}
            if stream is None or not stream.deliver(message, size):
                # Nobody reads this request any more: acknowledge and drop, so the client can finish it.
                self._reopen(size, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            if (stream := self.streams.get(event.stream_id)) is not None:
                stream.deliver({"type": "http.request", "body": b"", "more_body": False})
        elif isinstance(event, h2.events.StreamReset):
            if (stream := self.streams.pop(event.stream_id, None)) is not None:
                stream.gone = True
                stream.deliver({"type": "http.disconnect"})
            self._window_changed.set()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window_changed.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True

    def _open_stream(self, event: h2.events.RequestReceived) -> None:
        pseudo: dict[bytes, bytes] = {}
        headers: list[tuple[bytes, bytes]] = []
        for name, value in event.headers:
            if name.startswith(b":"):
                pseudo[name] = value
            else:
                headers.append((name, value))
        if b":authority" in pseudo and not any(name == b"host" for name, _ in headers):
            headers.insert(0, (b"host", pseudo[b":authority"]))
        raw_path, _, query = pseudo.get(b":path", b"/").partition(b"?")
        peer = self.writer.get_extra_info("peername")
        sock = self.writer.get_extra_info("sockname")
        scope = {
            "type": "http",
            "asgi": dict(_ASGI),
            "http_version": "2",
            "method": pseudo.get(b":method", b"GET").decode("latin-1"),
            "scheme": pseudo.get(b":scheme", b"https").decode("latin-1"),
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "client": tuple(peer[:2]) if peer else None,
            "server": tuple(sock[:2]) if sock else None,
        }
        stream = _Stream(self, event.stream_id, scope)
        self.streams[event.stream_id] = stream
        if event.stream_ended is not None:
            stream.deliver({"type": "http.request", "body": b"", "more_body": False})
        stream.task = asyncio.create_task(stream.run(self.app), name=f"h2 stream {event.stream_id}")

    async def close(self, grace_s: float = 2.0) -> None:
        """Close the connection: disconnect every stream, give apps ``grace_s``, then cancel them."""
        if not self.writer.is_closing():
            with contextlib.suppress(Exception):
                self.h2.close_connection()
                await self.flush()
        self.closed = True
        self._window_changed.set()
        streams = list(self.streams.values())
        self.streams.clear()
        for stream in streams:
            stream.gone = True
            stream.deliver({"type": "http.disconnect"})
        tasks = [s.task for s in streams if s.task is not None and not s.task.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


class H2Server:
    """Serves an ASGI app over HTTP/2 with TLS on an already bound, listening socket.

    Args:
        app: the ASGI 3 application (``http`` scopes only; no lifespan is run).
        ssl_context: from :func:`server_ssl_context`.
        input_window_bytes: each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE), the most request
            bytes the server holds for a stream whose app has not read them; 1 to 2**31-1.

    Raises:
        ValueError: ``input_window_bytes`` out of range.
    """

    def __init__(
        self,
        app: ASGIApp,
        ssl_context: ssl.SSLContext,
        input_window_bytes: int = DEFAULT_INPUT_WINDOW_BYTES,
    ) -> None:
        if not 1 <= input_window_bytes <= 2**31 - 1:
            raise ValueError(f"input_window_bytes must be from 1 to 2**31-1, not {input_window_bytes}")
        self.app = app
        self.ssl_context = ssl_context
        self.input_window_bytes = input_window_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, sock: Any) -> None:
        """Start accepting connections on ``sock``."""
        self._server = await asyncio.start_server(
            self._on_connection, sock=sock, ssl=self.ssl_context, ssl_handshake_timeout=10.0
        )

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Nagle's algorithm off: a small DATA frame must not wait for the client's delayed ACK of
            # the previous one (40 ms on Linux, REFERENCE.md §8). asyncio sets this itself only when
            # the listening socket was created with proto IPPROTO_TCP.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(self.app, reader, writer, self.input_window_bytes)
        self._connections.add(connection)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)
            if task is not None:
                self._tasks.discard(task)

    async def stop(self, grace_s: float = 2.0) -> None:
        """Stop accepting, send GOAWAY on every connection, close them (apps get ``grace_s``)."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            await connection.close(grace_s)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)
        if self._server is not None:
            # A client still in its TLS handshake (one that does not trust the CA may never finish
            # or close it) holds wait_closed(); do not let it hold the shutdown for long.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 0.5)
            self._server = None

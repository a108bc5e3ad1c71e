"""HTTP/2 flow control on the simulator's input (simulator.h2server; issue #25): request DATA is acknowledged
only as the app reads it, so a client that sends faster than the container side reads is stopped by its
stream window and the simulator never holds more than that window per stream.

A raw h2 client (python-hyper's ``h2`` over a real TLS socket) drives the door, so the test sees every
WINDOW_UPDATE and counts exactly what it was allowed to send.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest
from sim_support import run
from websockets.asyncio.server import serve

from sagemaker_transport.eventstream import encode_message, signed_envelope
from simulator import Simulator, SimulatorSettings, UrlContainer
from simulator.certs import make_tls_files
from simulator.h2server import DEFAULT_INPUT_WINDOW_BYTES, H2Server, server_ssl_context

TOTAL = 1_048_576  # what the client tries to send: sixteen default windows
CHUNK = 16_384  # HTTP/2's default largest frame


class _SlowReader:
    """An ASGI app that answers 200 at once and reads its request only after ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.received = 0
        self.done = asyncio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await self.release.wait()
        while True:
            message = await receive()
            self.received += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.body", "body": b"done", "more_body": False})
        self.done.set()


class _Client:
    """A minimal HTTP/2 client: one POST whose body is sent as fast as flow control lets it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.sent = 0
        self.window_opened = asyncio.Event()
        self.settings_received = asyncio.Event()
        self.ended = asyncio.Event()

    async def start(self, path: str = "/upload", *headers: tuple[str, str]) -> int:
        """Open the POST once the server's SETTINGS are in (its window then applies from the first byte)."""
        self.h2.initiate_connection()
        await self._flush()
        await asyncio.wait_for(self.settings_received.wait(), 10)
        stream_id = self.h2.get_next_available_stream_id()
        self.h2.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":path", path),
                (":scheme", "https"),
                (":authority", "localhost"),
                *headers,
            ],
        )
        await self._flush()
        return stream_id

    async def _flush(self) -> None:
        self.writer.write(self.h2.data_to_send())
        await self.writer.drain()

    async def pump(self) -> None:
        while data := await self.reader.read(65_536):
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
                    self.window_opened.set()
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    self.settings_received.set()
                elif isinstance(event, h2.events.StreamEnded):
                    self.ended.set()
                elif isinstance(event, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            await self._flush()

    async def send_fast(self, stream_id: int, total: int, body: bytes | None = None) -> None:
        """Send ``total`` bytes (of ``body``, else ``x``), as much as every window allows, waiting only when a
        window is spent."""
        while self.sent < total:
            room = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
            if room <= 0:
                self.window_opened.clear()
                await self.window_opened.wait()
                continue
            size = min(room, CHUNK, total - self.sent)
            data = b"x" * size if body is None else body[self.sent : self.sent + size]
            self.h2.send_data(stream_id, data, end_stream=self.sent + size == total)
            self.sent += size
            await self._flush()


async def _open(port: int, ca: Path) -> _Client:
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["h2"])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"
    )
    return _Client(reader, writer)


async def _serve(app: Any, tmp_path: Path, **kwargs: Any) -> tuple[H2Server, int, Path]:
    tls = make_tls_files(tmp_path)
    server = H2Server(app, server_ssl_context(tls.server_chain, tls.server_key), **kwargs)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    await server.start(sock)
    return server, sock.getsockname()[1], tls.ca_cert


async def _held(server: H2Server) -> int:
    """Request bytes the server holds unread, over all its streams."""
    return sum(stream.queued_bytes for conn in server._connections for stream in conn.streams.values())


@pytest.mark.parametrize("window", [DEFAULT_INPUT_WINDOW_BYTES, 20_000])
def test_a_client_faster_than_the_reader_is_held_to_the_stream_window(tmp_path, window):
    async def main() -> None:
        app = _SlowReader()
        kwargs = {} if window == DEFAULT_INPUT_WINDOW_BYTES else {"input_window_bytes": window}
        server, port, ca = await _serve(app, tmp_path, **kwargs)
        client = await _open(port, ca)
        pump = asyncio.create_task(client.pump())
        try:
            stream_id = await client.start()
            while client.h2.remote_settings.initial_window_size != window:  # the server's settings change
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # and the client's acknowledgement of it reaches the server
            sending = asyncio.create_task(client.send_fast(stream_id, TOTAL))
            # Give the client every chance to push more: it is stopped by flow control, not by time.
            previous = -1
            while client.sent != previous:
                previous = client.sent
                await asyncio.sleep(0.3)
            assert not sending.done()
            assert client.sent == window, "the client could send exactly one stream window, no more"
            assert await _held(server) == window
            # The reader catches up: the window reopens as it reads and the whole body gets through.
            app.release.set()
            await asyncio.wait_for(sending, 30)
            await asyncio.wait_for(app.done.wait(), 30)
            await asyncio.wait_for(client.ended.wait(), 30)
            assert app.received == TOTAL
            assert await _held(server) == 0
        finally:
            pump.cancel()
            client.writer.close()
            await server.stop()

    run(main())


def test_a_request_left_unread_when_the_app_returns_is_drained_so_the_client_can_finish(tmp_path):
    # RFC 9113 §8.1: the response may end before the request; the unread rest is acknowledged and dropped.
    async def main() -> None:
        async def answer_and_leave(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await asyncio.sleep(0.3)  # the client fills the window meanwhile
            await send({"type": "http.response.body", "body": b"bye", "more_body": False})

        server, port, ca = await _serve(answer_and_leave, tmp_path)
        client = await _open(port, ca)
        pump = asyncio.create_task(client.pump())
        try:
            stream_id = await client.start()
            await asyncio.wait_for(client.send_fast(stream_id, TOTAL), 30)
            assert client.sent == TOTAL
            assert await _held(server) == 0
        finally:
            pump.cancel()
            client.writer.close()
            await server.stop()

    run(main())


def _partial_parts(count: int, size: int) -> bytes:
    """``count`` PARTIAL PayloadParts of ``size`` bytes each, in signing envelopes: one endless message."""
    inner = encode_message(
        {
            ":message-type": "event",
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            "DataType": "BINARY",
            "CompletionState": "PARTIAL",
        },
        b"p" * size,
    )
    envelope = signed_envelope(inner, datetime.datetime.now(datetime.UTC), b"\0" * 32)
    return envelope * count


def test_a_container_that_does_not_read_stops_the_client_not_the_simulators_memory():
    """End to end: a client streams one message in PARTIAL parts as fast as it may, the container accepts
    the WebSocket and never reads. Once the socket to the container is full, the session stops taking
    input, the stream window closes and the client stalls; the simulator holds one window, not the rest."""

    async def main() -> None:
        stop = asyncio.Event()

        async def deaf(connection: Any) -> None:
            await stop.wait()  # accepted, never read: python-websockets then stops reading the socket

        async with serve(deaf, "127.0.0.1", 0, compression=None) as container:
            url = f"http://127.0.0.1:{container.sockets[0].getsockname()[1]}"
            settings = SimulatorSettings(ping_interval_s=None)
            async with Simulator(UrlContainer(url), settings=settings) as sim:
                body = _partial_parts(count=1536, size=16_000)  # about 25 MB
                client = await _open(sim.port, sim.ca_file)
                pump = asyncio.create_task(client.pump())
                try:
                    stream_id = await client.start(
                        "/endpoints/ep/invocations-bidirectional-stream",
                        ("content-type", "application/vnd.amazon.eventstream"),
                    )
                    sending = asyncio.create_task(client.send_fast(stream_id, len(body), body))
                    previous = -1
                    while client.sent != previous:
                        previous = client.sent
                        await asyncio.sleep(0.5)
                    assert not sending.done(), "the client sent everything: nothing held it back"
                    assert client.sent < len(body) // 2
                    assert 0 < await _held(sim._h2) <= DEFAULT_INPUT_WINDOW_BYTES  # type: ignore[arg-type]
                    sending.cancel()
                finally:
                    stop.set()
                    pump.cancel()
                    client.writer.close()

    run(main())


def test_the_window_is_a_setting_with_http2s_default():
    assert SimulatorSettings().input_window_bytes == DEFAULT_INPUT_WINDOW_BYTES == 65_535
    with pytest.raises(ValueError):
        SimulatorSettings(input_window_bytes=0)

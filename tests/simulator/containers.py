"""Small model containers for the simulator's tests (cheap, deterministic, no model weights).

* :func:`tone_app` speaks the bidirectional session of PROTOCOL.md through the team's sans-I/O
  :class:`protocol.server_session.ServerSession` on the project's session driver
  (:class:`reference_server.driver.SessionDriver`), with a sine tone for a synthesizer (length proportional
  to the text), and answers ``POST /invocations`` with a streamed WAV or raw PCM body (``break_after``
  makes that body fail part-way).
* :func:`inline_app` stops reading while it synthesizes, so under uvicorn it stops answering pings (a
  transport-level defect on purpose: it drives its session by hand, not with the driver, whose reader never
  stops; likewise :func:`text_only_app` and :func:`crash_app`, which run no session at all).
* :func:`text_only_app` reads with ``websocket.receive_text()`` only, like the handler that fails on
  SageMaker with ``KeyError('text')`` when a BINARY frame arrives.
* :func:`crash_app` accepts, starts answering, then raises mid-stream.
* :class:`FragmentEchoServer` is a bare python-websockets server (real socket) that reports the
  frames it saw (type and fragment sizes) and can stall its event loop to stop answering pings.

Run a Starlette container as a process (for :class:`simulator.CommandContainer`)::

    PYTHONPATH=<repo> python tests/simulator/containers.py --app tone --port 8080
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from protocol.pcm import float_to_pcm16, wav_header
from protocol.server_session import ServerSession
from reference_server.driver import AudioPiece, Job, SessionDriver, StarletteTransport

SAMPLE_RATE = 24_000
#: Seconds of tone per character of text: "Hello there." gives 0.24 s = 11,520 bytes at 24 kHz.
SECONDS_PER_CHAR = 0.02
#: Chunk size of the container's streamed HTTP body: odd on purpose, so the container's own chunk
#: boundaries do not line up with samples either.
HTTP_CHUNK_BYTES = 1_001


def tone_pcm(text: str, sample_rate: int = SAMPLE_RATE) -> bytes:
    """The "synthesized" audio for ``text``: a 440 Hz tone, PCM16LE mono, ``len(text)`` × 20 ms."""
    n = max(1, round(len(text) * SECONDS_PER_CHAR * sample_rate))
    t = np.arange(n) / sample_rate
    return float_to_pcm16(0.3 * np.sin(2 * math.pi * 440.0 * t))


def invocation_body(text: str, fmt: str = "wav", sample_rate: int = SAMPLE_RATE) -> bytes:
    """The exact bytes :func:`tone_app` streams for ``POST /invocations`` (for byte comparisons)."""
    pcm = tone_pcm(text, sample_rate)
    return (wav_header(sample_rate, data_bytes=None) if fmt == "wav" else b"") + pcm


async def _flush(session: ServerSession, websocket: WebSocket, delay_s: float) -> None:
    for frame in session.data_to_send():
        if delay_s:
            await asyncio.sleep(delay_s)
        if isinstance(frame, str):
            await websocket.send_text(frame)
        else:
            await websocket.send_bytes(frame)


def _audio_pieces(pcm: bytes) -> list[bytes]:
    # Three deliveries per request, as a real synthesizer yields several segments.
    third = (len(pcm) // 6) * 2
    return [p for p in (pcm[:third], pcm[third : 2 * third], pcm[2 * third :]) if p]


class _PacedTransport(StarletteTransport):
    """A Starlette WebSocket that sleeps ``delay_s`` before each frame it sends (a slow model)."""

    def __init__(self, websocket: WebSocket, delay_s: float) -> None:
        super().__init__(websocket)
        self.delay_s = delay_s

    async def send(self, frame: bytes | str) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        await super().send(frame)


class _ToneDriver(SessionDriver):
    """:func:`tone_app`'s sessions: the project's session driver speaking :func:`tone_pcm` in three pieces."""

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        return _tone_pieces(job.request.text, job.request.sample_rate)


async def _tone_pieces(text: str, sample_rate: int) -> AsyncIterator[AudioPiece]:
    for piece in _audio_pieces(tone_pcm(text, sample_rate)):
        yield AudioPiece(piece, None)


def tone_app(*, frame_delay_s: float = 0.0, accept_delay_s: float = 0.0) -> Starlette:
    """A well-behaved container (PROTOCOL.md §2–§7) with a sine-tone synthesizer.

    Args:
        frame_delay_s: sleep before each WebSocket frame it sends (a slow model).
        accept_delay_s: sleep before accepting the WebSocket (to break the 250 ms contract).
    """

    async def ping(request: Request) -> PlainTextResponse:
        return PlainTextResponse("")

    async def invocations(request: Request) -> Any:
        body = json.loads(await request.body())
        text = str(body.get("text") or "").strip()
        if not text:
            return JSONResponse({"error": {"code": "text_required", "message": "text required"}}, 400)
        fmt = body.get("format", "wav")
        data = invocation_body(text, fmt)

        async def chunks():
            for i in range(0, len(data), HTTP_CHUNK_BYTES):
                yield data[i : i + HTTP_CHUNK_BYTES]
                await asyncio.sleep(0)
                if body.get("break_after") is not None and i >= body["break_after"]:
                    raise RuntimeError("model failed while streaming")

        media = "audio/wav" if fmt == "wav" else f"audio/pcm;rate={SAMPLE_RATE};encoding=s16le;channels=1"
        return StreamingResponse(chunks(), media_type=media)

    async def session_endpoint(websocket: WebSocket) -> None:
        if accept_delay_s:
            await asyncio.sleep(accept_delay_s)
        await websocket.accept()
        # The project's session driver keeps reading during synthesis: uvicorn stops reading the socket
        # (and so answering pings) while the app leaves a received message unconsumed (PROTOCOL.md §8).
        await _ToneDriver(ServerSession(), _PacedTransport(websocket, frame_delay_s)).run()

    return Starlette(
        routes=[
            Route("/ping", ping),
            Route("/invocations", invocations, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", session_endpoint),
        ]
    )


def inline_app(*, frame_delay_s: float = 0.3) -> Starlette:
    """A container that stops reading while it synthesizes (no reader task).

    Under uvicorn this also stops it answering pings once a second message waits unread: uvicorn
    pauses reading the socket until the app consumes what it queued (PROTOCOL.md §8 forbids this).
    """

    async def ping(request: Request) -> PlainTextResponse:
        return PlainTextResponse("")

    async def session_endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        session = ServerSession()
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            session.receive_frame(message["bytes"] if message.get("bytes") is not None else message["text"])
            while (request := session.next_request()) is not None:
                rid = request.request_id
                assert rid is not None
                session.start(rid)
                for piece in _audio_pieces(tone_pcm(request.text, request.sample_rate)):
                    session.audio(rid, piece)
                session.complete(rid)
                await _flush(session, websocket, frame_delay_s)
            await _flush(session, websocket, 0.0)
            if session.finished:
                await websocket.close(session.close_code or 1000)
                return

    return Starlette(
        routes=[Route("/ping", ping), WebSocketRoute("/invocations-bidirectional-stream", session_endpoint)]
    )


def text_only_app() -> Starlette:
    """The AWS sample's mistake: a handler that only calls ``receive_text()``.

    It works while every frame is TEXT and dies with ``KeyError('text')`` on the first BINARY frame
    (Starlette reads ``message["text"]``), exactly the failure seen on SageMaker.
    """

    async def ping(request: Request) -> PlainTextResponse:
        return PlainTextResponse("")

    async def session_endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            while True:
                request = json.loads(await websocket.receive_text())
                if request.get("type") == "close":
                    await websocket.close(1000)
                    return
                rid = request.get("request_id", "r1")
                await websocket.send_text(json.dumps({"type": "synthesis_start", "request_id": rid}))
                await websocket.send_bytes(tone_pcm(request["text"]))
                await websocket.send_text(json.dumps({"type": "synthesis_complete", "request_id": rid}))
        except WebSocketDisconnect:
            return

    return Starlette(
        routes=[Route("/ping", ping), WebSocketRoute("/invocations-bidirectional-stream", session_endpoint)]
    )


def crash_app() -> Starlette:
    """A container whose handler raises after its first synthesis_start and some audio."""

    async def ping(request: Request) -> PlainTextResponse:
        return PlainTextResponse("")

    async def session_endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive()
        await websocket.send_text(json.dumps({"type": "synthesis_start", "request_id": "r1"}))
        await websocket.send_bytes(tone_pcm("half a sentence"))
        raise RuntimeError("model crashed mid-stream")

    return Starlette(
        routes=[Route("/ping", ping), WebSocketRoute("/invocations-bidirectional-stream", session_endpoint)]
    )


class FragmentEchoServer:
    """A python-websockets server on 127.0.0.1 in its own thread and event loop (a real socket).

    For every message it receives it sends back, as TEXT, a JSON report
    ``{"type": "seen", "text": bool, "fragments": [sizes...], "data": <hex>}``. A message whose
    payload is ``stall:<seconds>`` makes it block its event loop for that long (``time.sleep``), so
    it stops answering pings, as a container doing blocking work on its loop does.

    Use as a context manager; :attr:`url` is its ``http://`` base URL.
    """

    def __init__(self) -> None:
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="fragment-echo", daemon=True)

    def __enter__(self) -> FragmentEchoServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("echo server did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with serve(self._handler, "127.0.0.1", 0, compression=None) as server:
            port = server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            await self._stop.wait()

    @staticmethod
    async def _handler(connection: Any) -> None:
        try:
            while True:
                fragments = [f async for f in connection.recv_streaming()]
                text = isinstance(fragments[0], str) if fragments else False
                data = b"".join(f.encode() if isinstance(f, str) else f for f in fragments)
                if data.startswith(b"stall:"):
                    time.sleep(float(data[6:]))  # blocks this loop on purpose: no pongs meanwhile
                report = {
                    "type": "seen",
                    "text": text,
                    "fragments": [len(f) for f in fragments],
                    "data": data.hex(),
                }
                await connection.send(json.dumps(report))
        except ConnectionClosed:
            return


class UvicornThread:
    """Serves a Starlette container with uvicorn on 127.0.0.1 in a background thread (a real socket).

    Use as a context manager; :attr:`url` is its ``http://`` base URL. The container's own event loop
    runs in that thread, so it answers WebSocket pings independently of the test's loop.
    """

    def __init__(self, app: Starlette) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="uvicorn", daemon=True
        )

    def __enter__(self) -> UvicornThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()


def main() -> None:
    """Serve one of the Starlette containers with uvicorn (for CommandContainer tests)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", choices=["tone", "text-only", "crash"], default="tone")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    app = {"tone": tone_app, "text-only": text_only_app, "crash": crash_app}[args.app]()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

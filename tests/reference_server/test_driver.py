"""The one session driver (:mod:`reference_server.driver`) on its own: a small hook server on a real socket.

Each test serves a :class:`SessionDriver` subclass with uvicorn on a loopback port and talks to it with the
``websockets`` client, so the driver's reader, writer, synthesizer, feeder and hooks run as they do in every
server of the project (PROTOCOL.md §4, §5, §7).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect

from protocol.messages import Word
from protocol.server_session import ServerSession
from reference_server.driver import AudioPiece, Job, SessionDriver, StarletteTransport

GUARD_S = 30.0
"""Hang guard only; no test asserts on time."""

PIECE = b"\x01\x00" * 480


class HookDriver(SessionDriver):
    """Speaks each request as two pieces with one word each; records every hook call in ``calls``."""

    piece_delay_s = 0.0

    def __init__(self, websocket: WebSocket, calls: list[tuple[Any, ...]], **session: Any) -> None:
        super().__init__(ServerSession(**session), StarletteTransport(websocket))
        self.calls = calls

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        self.calls.append(("open", job.request_id))
        return self._speak(job)

    async def _speak(self, job: Job) -> AsyncIterator[AudioPiece]:
        if job.request.text == "fail.":
            raise RuntimeError("the synthesizer broke")
        for i in range(2):
            await asyncio.sleep(self.piece_delay_s)
            yield AudioPiece(
                PIECE, (Word(f"w{i}", i * 0.02, i * 0.02 + 0.02),), f"w{i}", i * 0.02, i * 0.02 + 0.02
            )

    def cancel_audio(self, job: Job) -> None:
        self.calls.append(("cancel", job.request_id))

    def on_done(self, job: Job, status: str) -> None:
        self.calls.append(("done", job.request_id, status))

    def on_closing(self) -> None:
        self.calls.append(("closing", self.closing_code()))


class RewritingDriver(HookDriver):
    """Frames in: a message ``{"drop": ...}`` is swallowed, a message ``{"say": T}`` becomes a request for T.
    Frames out: a TEXT ``{"type": "note"}`` frame is added before every ``synthesis_complete``."""

    async def receive(self) -> bytes | str | None:
        while (data := await super().receive()) is not None:
            obj = json.loads(data)
            if "drop" in obj:
                continue
            if "say" in obj:
                return json.dumps({"text": obj["say"], "request_id": "said"})
            return data
        return None

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        for frame in frames:
            if isinstance(frame, str) and '"synthesis_complete"' in frame:
                out.append(json.dumps({"type": "note"}))
            out.append(frame)
        return out


class SlowDriver(HookDriver):
    piece_delay_s = 0.5


class Served:
    """A Starlette app serving ``driver_class`` with uvicorn in a thread on a loopback port."""

    def __init__(self, driver_class: Callable[..., SessionDriver], **session: Any) -> None:
        self.calls: list[tuple[Any, ...]] = []

        async def endpoint(websocket: WebSocket) -> None:
            await websocket.accept()
            await driver_class(websocket, self.calls, **session).run()

        app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self._socket.getsockname()[1]}/ws"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> Served:
        self._thread.start()
        deadline = time.monotonic() + GUARD_S
        while not self._server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(GUARD_S)
        self._socket.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    servers: list[Served] = []

    def start(driver_class: Callable[..., SessionDriver], **session: Any) -> Served:
        server = Served(driver_class, **session).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


async def converse(
    url: str, messages: list[Any], *, until_close: bool = True
) -> tuple[list[Any], int | None]:
    """Send ``messages`` (dicts as TEXT), then read every frame until the server closes; returns the frames
    (control frames decoded, audio as bytes) and the close code."""
    frames: list[Any] = []
    async with connect(url) as ws:
        for message in messages:
            await ws.send(json.dumps(message))
        try:
            async with asyncio.timeout(GUARD_S):
                async for frame in ws:
                    frames.append(json.loads(frame) if isinstance(frame, str) else frame)
        except TimeoutError:
            pytest.fail(f"the session did not close; got {frames}")
        code = ws.close_code
    return frames, code


def kinds(frames: list[Any]) -> list[str]:
    return ["audio" if isinstance(f, bytes) else f["type"] for f in frames]


def test_a_request_is_answered_with_the_synthesis_hooks_audio_and_words(serve) -> None:
    """§5: start, the hook's two pieces as audio, complete with the pieces' words; close drains and ends 1000
    after ``on_closing``."""
    server = serve(HookDriver)
    frames, code = asyncio.run(
        converse(server.url, [{"text": "Hello.", "request_id": "a"}, {"type": "close"}])
    )
    assert kinds(frames) == ["synthesis_start", "audio", "audio", "synthesis_complete"]
    assert b"".join(f for f in frames if isinstance(f, bytes)) == PIECE * 2
    complete = frames[-1]
    assert complete["status"] == "completed" and complete["audio_bytes"] == 2 * len(PIECE)
    assert [w["word"] for w in complete["words"]] == ["w0", "w1"]
    assert code == 1000
    assert server.calls == [("open", "a"), ("done", "a", "completed"), ("closing", 1000)]


def test_marks_come_from_the_pieces_text_and_span_before_their_audio(serve) -> None:
    """§5.5: a request that asked for marks gets each piece's ``marks`` frame ahead of its audio."""
    server = serve(HookDriver, marks=True)
    message = {"text": "Hello.", "request_id": "m", "marks": True}
    frames, _ = asyncio.run(converse(server.url, [message, {"type": "close"}]))
    assert kinds(frames) == ["synthesis_start", "marks", "audio", "marks", "audio", "synthesis_complete"]
    assert [f["text"] for f in frames if not isinstance(f, bytes) and f["type"] == "marks"] == ["w0", "w1"]


def test_the_frames_hooks_may_drop_rewrite_and_add_frames(serve) -> None:
    """``receive`` swallows one message and rewrites another into a request; ``outgoing`` adds a frame."""
    server = serve(RewritingDriver)
    messages = [{"drop": True}, {"say": "Rewritten."}, {"type": "close"}]
    frames, code = asyncio.run(converse(server.url, messages))
    assert kinds(frames) == ["synthesis_start", "audio", "audio", "note", "synthesis_complete"]
    assert frames[0]["request_id"] == "said"
    assert code == 1000


def test_a_cancel_stops_the_job_through_the_cancel_hook(serve) -> None:
    """§4.2: cancelling the active request calls ``cancel_audio`` and completes it ``cancelled`` with the
    words of the audio sent; a queued request cancelled is answered by the session without synthesis."""
    server = serve(SlowDriver)

    async def scenario() -> tuple[list[Any], int | None]:
        frames: list[Any] = []
        async with connect(server.url) as ws:
            await ws.send(json.dumps({"text": "One.", "request_id": "a"}))
            await ws.send(json.dumps({"text": "Two.", "request_id": "b"}))
            async with asyncio.timeout(GUARD_S):
                while not frames or not isinstance(frames[-1], bytes):  # a's first piece is out
                    frame = await ws.recv()
                    frames.append(json.loads(frame) if isinstance(frame, str) else frame)
                await ws.send(json.dumps({"type": "cancel", "request_id": "b"}))
                await ws.send(json.dumps({"type": "cancel", "request_id": "a"}))
                await ws.send(json.dumps({"type": "close"}))
                async for frame in ws:
                    frames.append(json.loads(frame) if isinstance(frame, str) else frame)
            return frames, ws.close_code

    frames, code = asyncio.run(scenario())
    completes = {
        f["request_id"]: f for f in frames if not isinstance(f, bytes) and f["type"] == "synthesis_complete"
    }
    assert completes["a"]["status"] == "cancelled" and completes["b"]["status"] == "cancelled"
    assert [w["word"] for w in completes["a"]["words"]] == ["w0"]
    assert ("cancel", "a") in server.calls and ("open", "b") not in server.calls
    assert ("done", "b", "cancelled") in server.calls and ("done", "a", "cancelled") in server.calls
    assert code == 1000


def test_a_failing_synthesis_hook_fails_its_request_and_the_session_goes_on(serve) -> None:
    """§9: a synthesis error ends that request ``failed``; the next request is answered."""
    server = serve(HookDriver)
    messages = [{"text": "fail.", "request_id": "x"}, {"text": "Fine.", "request_id": "y"}, {"type": "close"}]
    frames, code = asyncio.run(converse(server.url, messages))
    completes = [f for f in frames if not isinstance(f, bytes) and f["type"] == "synthesis_complete"]
    assert [(c["request_id"], c["status"]) for c in completes] == [("x", "failed"), ("y", "completed")]
    assert ("done", "x", "failed") in server.calls
    assert code == 1000


class UtteranceDriver(HookDriver):
    """Records the utterance hooks; speaks nothing until the utterance ends (its synthesis must not end while
    the utterance is open: the session refuses to complete it)."""

    def on_accepted(self, job: Job) -> None:
        job.state = asyncio.Event()  # set by end

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        self.calls.append(("open", job.request_id))
        return self._after_end(job)

    async def _after_end(self, job: Job) -> AsyncIterator[AudioPiece]:
        await job.state.wait()
        async for piece in self._speak(job):
            yield piece

    def on_text(self, job: Job, text: str) -> None:
        self.calls.append(("text", text))

    def on_flush(self, job: Job) -> None:
        self.calls.append(("flush",))

    def on_utterance_end(self, job: Job, reason: str) -> None:
        self.calls.append(("end", reason))
        job.state.set()


def test_an_utterances_text_reaches_its_hooks_in_order(serve) -> None:
    """§15: ``utterance``, its text, ``flush`` and ``end`` reach the hooks in order; the audio hook is opened
    when the utterance is accepted, so it can take the text as it arrives."""
    server = serve(UtteranceDriver, utterances=True)
    messages = [
        {"type": "utterance", "request_id": "u"},
        {"type": "append", "request_id": "u", "text": "Hello "},
        {"type": "flush", "request_id": "u"},
        {"type": "append", "request_id": "u", "text": "there."},
        {"type": "end", "request_id": "u"},
        {"type": "close"},
    ]
    frames, code = asyncio.run(converse(server.url, messages))
    assert kinds(frames) == ["synthesis_start", "audio", "audio", "synthesis_complete"]
    assert frames[-1]["status"] == "completed"
    hooks = [c for c in server.calls if c[0] in ("open", "text", "flush", "end")]
    assert hooks == [("open", "u"), ("text", "Hello "), ("flush",), ("text", "there."), ("end", "end")]
    assert code == 1000

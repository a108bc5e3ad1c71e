"""Hostile servers: containers that answer nonsense in many ways, to prove the suite never crashes or hangs.

Not one-defect mutants (conformance/mutants/ has those): each of these breaks nearly everything, differently
on every message and on every run, so that whatever a server does, the suite must still end every case with
a verdict and a readable message within its deadline (issue 12, item 2). ``test_hostile.py`` runs the whole
suite against each of them at once.

Run one: ``python tests/conformance/hostile_servers.py NAME --port P``. Every server answers ``GET /ping``
with 200 (a server that never starts is another story: the suite's start-up timeout).

=================  ===================================================================================
``garbage``        random bytes, random text, JSON of every wrong type and shape, empty and 1 MiB+ frames;
                   HTTP bodies of any shape and status (lists, strings, HTML, random bytes, 1 MiB+)
``malformed``      brackets whose control frames are each broken differently (every member missing or of
                   the wrong type, unknown and null types, wrong and repeated ids, audio outside brackets
                   or of odd length or in TEXT frames, error frames with only ``message``), closes with odd
                   codes or not at all; HTTP refusals shaped ``{"error": "text is required"}``, lists,
                   strings, HTML
``silent``         accepts the WebSocket and never sends anything; ``POST /invocations`` never answers
``closer``         closes at once (various codes), refuses the handshake, closes after the first message or
                   halfway through an answer; HTTP responses cut short, empty or 204
``flaky``          a correct tone server whose answers vary between runs and messages: wrong error codes,
                   sessions dropped now and then (the ``FlakyFailure`` trap of property cases)
=================  ===================================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

# Answers vary between runs (the seed is the clock) and, within a run, between messages.
RNG = random.Random(int(time.time() * 1000) ^ os.getpid())

HUGE = (1 << 20) + 4096
"""A frame or body just over the 1 MiB ceiling of §3.3.1: huge for the protocol, without making a
byte-splitting simulator spend minutes on it."""

JUNK_JSON: list[Any] = [
    [],
    "synthesis_start",
    5,
    None,
    True,
    {"type": 5},
    {"type": None},
    {"type": "synthesis_start", "request_id": 7, "sample_rate": "24000", "voice": [], "speed": "fast"},
    {"type": "synthesis_complete", "request_id": None, "status": 3, "audio_bytes": -1},
    {"type": "error", "code": 5, "message": None, "fatal": "yes", "request_id": 5},
    {"type": "error", "message": "text is required"},
    {"type": "capabilities", "voices": "all"},
    {"a": {"b": {"c": [1, 2, {"d": None}]}}},
]


def _random_bytes(n: int) -> bytes:
    return RNG.randbytes(n)


def _json(obj: Any) -> str:
    return json.dumps(obj)


async def _ping(request: Request) -> Response:
    return JSONResponse({"status": "Healthy"})


async def _read_all(websocket: WebSocket) -> AsyncIterator[Any]:
    """Every client message until the client goes; any frame type, never raising on disconnect."""
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
        yield message


def _request_id(message: dict[str, Any]) -> str | None:
    data = message.get("text") or message.get("bytes") or b""
    try:
        obj = json.loads(data)
    except (ValueError, TypeError):
        return None
    value = obj.get("request_id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


# --- garbage ---------------------------------------------------------------------------------------------


async def _garbage_frame(websocket: WebSocket) -> None:
    kind = RNG.randrange(8)
    if kind == 0:
        await websocket.send_bytes(_random_bytes(RNG.randrange(1, 5000)))
    elif kind == 1:
        await websocket.send_text(
            "".join(chr(RNG.randrange(32, 0x2FFF)) for _ in range(RNG.randrange(1, 300)))
        )
    elif kind == 2:
        await websocket.send_text(_json(RNG.choice(JUNK_JSON)))
    elif kind == 3:
        await websocket.send_bytes(_json(RNG.choice(JUNK_JSON)).encode())
    elif kind == 4:
        await websocket.send_bytes(b"")
    elif kind == 5:
        await websocket.send_text("")
    elif kind == 6 and RNG.random() < 0.2:
        await websocket.send_bytes(_random_bytes(HUGE))
    else:
        await websocket.send_bytes(b"{}" * RNG.randrange(1, 8))


async def garbage_ws(websocket: WebSocket) -> None:
    await websocket.accept()
    async for _ in _read_all(websocket):
        for _ in range(RNG.randrange(0, 6)):
            try:
                await _garbage_frame(websocket)
            except Exception:
                return


def _garbage_body() -> Response:
    kind = RNG.randrange(10)
    if kind == 0:
        return Response(_random_bytes(RNG.randrange(0, 5000)), media_type="audio/wav")
    if kind == 1:
        return JSONResponse([1, "two", {"three": 3}])
    if kind == 2:
        return JSONResponse({"error": "text is required"}, status_code=400)
    if kind == 3:
        return JSONResponse([{"error": "x"}], status_code=400)
    if kind == 4:
        return Response("<html><body><h1>502 Bad Gateway</h1></body></html>", 500, media_type="text/html")
    if kind == 5:
        return Response("event: audio_chunk\ndata: {not json\n\n", media_type="text/event-stream")
    if kind == 6:
        return Response("text_too_long", status_code=413, media_type="text/plain")
    if kind == 7:
        return Response(
            _random_bytes(3 * 1024 * 1024), media_type="audio/pcm;rate=8000;encoding=s16le;channels=1"
        )
    if kind == 8:
        return JSONResponse("just a string", status_code=RNG.choice([200, 400, 408, 503]))
    return Response(status_code=404)


async def garbage_invocations(request: Request) -> Response:
    await request.body()
    return _garbage_body()


# --- malformed -------------------------------------------------------------------------------------------

_START = {"type": "synthesis_start", "sample_rate": 24000, "encoding": "pcm_s16le", "channels": 1}
_START.update(voice="af_heart", speed=1.0)


def _malformed_controls(request_id: str | None, n: int) -> list[str | bytes]:
    """The n-th way to answer a request: a bracket with something broken in it."""
    rid: Any = request_id or f"r{n}"
    start = {**_START, "request_id": rid}
    audio = (RNG.randbytes(1200) if n % 3 else b"{}  ") + b""
    complete = {
        "type": "synthesis_complete",
        "request_id": rid,
        "status": "completed",
        "audio_bytes": len(audio),
        "total_duration_s": len(audio) / 48000,
        "elapsed_s": 0.1,
    }
    member = list(start)[n % len(start)]
    variants: list[list[str | bytes]] = [
        [_json({k: v for k, v in start.items() if k != member}), audio, _json(complete)],
        [_json({**start, member: [member]}), audio, _json({**complete, "audio_bytes": "many"})],
        [_json({**start, "type": None}), audio, _json(complete)],
        [_json({**start, "request_id": "unknown"}), audio, _json({**complete, "request_id": "unknown"})],
        [_json(complete), audio, _json(start)],
        [audio, _json(start), _json(start), audio[:-1], _json(complete)],
        [_json(start), audio.decode("latin-1"), _json({**complete, "audio_bytes": 1})],
        [_json({"type": "error", "message": "text is required"}), _json(start)],
        [_json({"type": "error", "code": 5, "fatal": "yes", "request_id": 5, "message": 7})],
        [_json({**start, "request_id": None}), audio * 3, _json({**complete, "status": "done"})],
        [_json({"type": "synthesis_complete"}), _json({"type": "synthesis_start"})],
        [_json({**start, "sample_rate": 44100}), audio[:3], audio[3:], _json({**complete, "words": "hello"})],
    ]
    return variants[n % len(variants)]


async def malformed_ws(websocket: WebSocket) -> None:
    await websocket.accept()
    n = RNG.randrange(100)
    async for message in _read_all(websocket):
        n += 1
        try:
            for frame in _malformed_controls(_request_id(message), n):
                if isinstance(frame, bytes):
                    await websocket.send_bytes(frame)
                else:
                    await websocket.send_text(frame)
            if n % 7 == 0:
                await websocket.close(RNG.choice([1000, 1008, 1011, 4000, 1001]))
                return
            if n % 11 == 0:
                return  # no close frame: 1006
        except Exception:
            return


async def malformed_invocations(request: Request) -> Response:
    await request.body()
    shapes: list[Callable[[], Response]] = [
        lambda: JSONResponse({"error": "text is required"}, status_code=400),
        lambda: JSONResponse({"error": {"code": 5, "message": []}}, status_code=400),
        lambda: JSONResponse({"error": None}, status_code=413),
        lambda: JSONResponse([{"error": {"code": "invalid_json"}}], status_code=400),
        lambda: JSONResponse("invalid_voice", status_code=400),
        lambda: Response("<html>Bad request</html>", 400, media_type="text/html"),
        lambda: Response(b"RIFF\x00\x00\x00\x00WAVEfmt ", media_type="audio/wav"),
        lambda: Response("event: synthesis_start\ndata: []\n\nevent: x\n\n", media_type="text/event-stream"),
        lambda: Response(
            'event: audio_chunk\ndata: {"type":"audio_chunk","seq":0,"data":"!!"}\n\n',
            media_type="text/event-stream",
        ),
    ]
    return RNG.choice(shapes)()


# --- silent ----------------------------------------------------------------------------------------------


async def silent_ws(websocket: WebSocket) -> None:
    await websocket.accept()
    async for _ in _read_all(websocket):
        pass  # read everything, answer nothing, never close


async def silent_invocations(request: Request) -> Response:
    await request.body()
    await asyncio.sleep(3600)
    return Response()


# --- closer ----------------------------------------------------------------------------------------------


async def closer_ws(websocket: WebSocket) -> None:
    kind = RNG.randrange(5)
    if kind == 0:
        await websocket.close(1008)  # before accept: the handshake is refused (403)
        return
    await websocket.accept()
    if kind == 1:
        await websocket.close(RNG.choice([1000, 1001, 1011, 1013, 4999]))
        return
    if kind == 2:
        return  # no close frame at all
    async for message in _read_all(websocket):
        try:
            if kind == 3:
                await websocket.send_text(_json({**_START, "request_id": _request_id(message) or "r1"}))
                await websocket.send_bytes(RNG.randbytes(3000))
            await websocket.close(RNG.choice([1000, 1008, 1011]))
        except Exception:
            pass
        return


async def _cut_short() -> AsyncIterator[bytes]:
    yield b"RIFF\xff\xff\xff\xffWAVE"
    await asyncio.sleep(0.05)
    raise RuntimeError("dropped mid-body")


async def closer_invocations(request: Request) -> Response:
    await request.body()
    kind = RNG.randrange(3)
    if kind == 0:
        return StreamingResponse(_cut_short(), media_type="audio/wav")
    if kind == 1:
        return Response(b"", media_type="audio/wav")
    return Response(status_code=204)


# --- flaky -----------------------------------------------------------------------------------------------


def flaky_app() -> Starlette:
    """A correct tone server whose answers vary: error codes scrambled at random, sessions dropped."""
    from conformance.mutants.base import ToneConnection, ToneServer
    from protocol.errors import ErrorCode

    codes = [c.value for c in ErrorCode]

    class FlakyConnection(ToneConnection):
        def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
            out: list[bytes | str] = []
            for frame in frames:
                if isinstance(frame, str) and '"type":"error"' in frame and RNG.random() < 0.5:
                    obj = json.loads(frame)
                    obj["code"] = RNG.choice(codes)
                    frame = _json(obj)
                out.append(frame)
            return out

        def should_close(self) -> bool:
            return RNG.random() < 0.02 or super().should_close()

    class FlakyServer(ToneServer):
        connection_class = FlakyConnection

    return FlakyServer().app()


# --- wiring ----------------------------------------------------------------------------------------------

Handler = Callable[..., Awaitable[Any]]

SERVERS: dict[str, tuple[Handler, Handler]] = {
    "garbage": (garbage_ws, garbage_invocations),
    "malformed": (malformed_ws, malformed_invocations),
    "silent": (silent_ws, silent_invocations),
    "closer": (closer_ws, closer_invocations),
}
NAMES = (*SERVERS, "flaky")


def app(name: str) -> Starlette:
    """The ASGI app of hostile server ``name``."""
    if name == "flaky":
        return flaky_app()
    ws, invocations = SERVERS[name]
    return Starlette(
        routes=[
            Route("/ping", _ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", ws),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``hostile_servers.py NAME --port P``: serve one hostile server on 127.0.0.1 until killed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for ``flaky``
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(app(args.name), host="127.0.0.1", port=args.port, log_level="critical", ws_max_size=16 << 20)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The defect table's machinery: a row (:class:`Defect`), the server and connection that apply it, and the
small hook builders the rows share (refuse a message, rewrite control frames, stall after a refusal).

:class:`DefectServer` is the unbroken :class:`~conformance.mutants.base.ToneServer` with one row's hooks and
server attributes; :class:`DefectConnection` runs each accepted WebSocket connection of it (see the package
docstring for what each hook may do). No row is defined here: they are in
:mod:`conformance.mutants.defects.table`, their hooks in the concept modules beside it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.websockets import WebSocket

from conformance.mutants.base import ToneConnection, ToneServer, played
from protocol.sse import SSEDecoder, encode_event
from reference_server.http import busy_error
from reference_server.settings import Settings

__all__ = [
    "DROP",
    "Defect",
    "DefectConnection",
    "DefectServer",
    "Frame",
    "Http",
    "Incoming",
    "Outgoing",
    "dump",
    "error_frame",
    "fatal_too_many",
    "is_cancel",
    "is_request",
    "json_object",
    "map_controls",
    "refuse",
    "stall_after",
    "twice_if",
]

DROP = object()
"""Returned by an ``incoming`` hook: the message is swallowed (no answer at all)."""

Frame = bytes | str
Incoming = Callable[["DefectConnection", dict[str, Any]], Any]
Outgoing = Callable[["DefectConnection", list[Frame]], list[Frame]]
Http = Callable[["DefectServer", dict[str, Any], Response], Response]


@dataclass(frozen=True)
class Defect:
    """One row of the table (see the module docstring): its name, what it breaks in words, the requirement
    or condition ids it breaks (``"R4.2-2b"``; the cases that must report it ``FAILED`` are those citing
    them, :func:`conformance.mutants.catching.must_catch`) and its hooks."""

    name: str
    breaks: str
    requirements: tuple[str, ...]
    incoming: Incoming | None = None
    outgoing: Outgoing | None = None
    http: Http | None = None
    server: dict[str, Any] = field(default_factory=dict)
    observed_by: tuple[str, ...] = ()
    """For a defect on a path that no case of its clauses takes (no case must then report it): cases that
    take it, whose runs must fail on the clauses it breaks although none of them owns one (issue 30)."""
    raw: Callable[[bytes], bytes | object] | None = None
    """Sees each client message's bytes before anything else (TEXT as UTF-8): returns the bytes to hand on,
    or :data:`DROP` to swallow the message; for defects of §3.1's message checks, which ``incoming`` (JSON
    objects only) cannot reach."""
    where: tuple[str, ...] = ()
    """Condition ids that narrow the defect: it breaks ``requirements`` only where all of these apply too,
    so only the cases citing them all must catch it (:func:`conformance.mutants.catching.must_catch`)."""


def json_object(frame: Frame) -> dict[str, Any] | None:
    """The control frame ``frame`` as a dict (``None``: audio, or TEXT that is not a JSON object)."""
    if not isinstance(frame, str):
        return None
    try:
        value = json.loads(frame)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def dump(obj: dict[str, Any]) -> str:
    """``obj`` as compact JSON text (a TEXT frame)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def fatal_too_many(limit: int) -> dict[str, Any]:
    """The fatal ``too_many_sessions`` error frame of §9.4 for a server of ``limit`` sessions."""
    return {
        "type": "error",
        "code": "too_many_sessions",
        "message": f"{limit} sessions are open",
        "request_id": None,
        "fatal": True,
    }


def error_frame(code: str, request_id: Any) -> str:
    """A per-message error frame with ``code`` naming ``request_id`` when it is a valid id (§9.1)."""
    rid = request_id if isinstance(request_id, str) and 0 < len(request_id) <= 128 else None
    return dump(
        {"type": "error", "code": code, "message": f"{code}: refused", "request_id": rid, "fatal": False}
    )


def map_controls(change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Outgoing:
    """An ``outgoing`` hook that rewrites each control frame with ``change`` (``None`` drops the frame)."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = json_object(frame)
            if obj is None:
                out.append(frame)
                continue
            changed = change(obj)
            if changed is not None:
                out.append(dump(changed))
        return out

    return hook


def refuse(code: str, when: Callable[[dict[str, Any]], bool]) -> Incoming:
    """An ``incoming`` hook that refuses matching messages with ``code`` instead of handling them."""

    def hook(session: DefectConnection, obj: dict[str, Any]) -> Any:
        if not when(obj):
            return None
        session.send(error_frame(code, obj.get("request_id")))
        return DROP

    return hook


def twice_if(frame: Frame, kind: str) -> tuple[Frame, ...]:
    """``frame`` twice when it is a control frame of type ``kind``, else once."""
    return (frame, frame) if (json_object(frame) or {}).get("type") == kind else (frame,)


def stall_after(code: str) -> Outgoing:
    """An ``outgoing`` hook: after an error frame with ``code``, no request is answered any more (no audio,
    no bracket), as when the refusal killed the server's synthesis worker; error frames and ``capabilities``
    still go out (the reader lives on)."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = json_object(frame)
            if session.stalled and (
                obj is None or obj.get("type") in ("synthesis_start", "synthesis_complete", "marks")
            ):
                continue
            out.append(frame)
            if obj is not None and obj.get("type") == "error" and obj.get("code") == code:
                session.stalled = True
        return out

    return hook


def is_request(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is a synthesis request (``type`` absent or ``synthesize``, §4.1)."""
    return obj.get("type") in (None, "synthesize")


def is_cancel(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is a ``cancel`` (§4.2)."""
    return obj.get("type") == "cancel"


class DefectConnection(ToneConnection):
    """A :class:`ToneConnection` that applies its server's :class:`Defect`."""

    def __init__(self, server: ToneServer, websocket: WebSocket) -> None:
        super().__init__(server, websocket)
        self.defect: Defect = server.defect  # type: ignore[attr-defined]
        self.extra: list[Frame] = []
        self.after: list[str] = []
        self.rates: dict[str, int] = {}
        self.client_ids: set[str] = set()
        self.sticky_cancel = False
        self.close_seen = False
        self.held: list[dict[str, Any]] = []  # describes waiting for the queue to empty
        self.announced = False
        self.marked: set[str] = set()  # requests that asked for marks
        self.g711: str | None = None  # the encoding of the open bracket when it is G.711
        self.g711_first = False
        self.g711_added = 0
        self.blends: dict[Any, str] = {}  # request id → the blend as the client wrote it
        self.stalled = False  # see stall_after
        self.close_code_after: int | None = None  # see DefectServer.refused_close_code

    async def read(self) -> None:
        cost_s = getattr(self.server, "greedy_parse_s", 0.0)
        if not cost_s:
            await super().read()
            return
        # Every message costs cost_s of CPU and the reader never hands the event loop back while
        # messages are waiting: a flood holds GET /ping and every other session (§10.3).
        while (data := await self.receive()) is not None:
            until = time.perf_counter() + cost_s
            while time.perf_counter() < until:
                pass
            self.act(self.session.receive_frame(data))
            self.kick()

    def send(self, frame: Frame) -> None:
        """Queue a frame of the defect's own (sent before the session's next frames)."""
        self.extra.append(frame)
        self.kick()

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is None:
                return None
            server: DefectServer = self.server  # type: ignore[assignment]
            raw = data.encode() if isinstance(data, str) else data
            if self.defect.raw is not None:
                changed = self.defect.raw(raw)
                if changed is DROP:
                    continue
                data = raw = changed  # type: ignore[assignment]
            if server.strip_bom and raw.startswith(b"\xef\xbb\xbf"):
                data = raw[3:]
            if server.log_text:
                try:
                    print("request text:", json.loads(data).get("text"), flush=True)
                except (ValueError, AttributeError):
                    pass
            if self.defect.incoming is None:
                return data
            try:
                obj = json.loads(data)
            except (ValueError, UnicodeDecodeError):
                return data
            if not isinstance(obj, dict):
                return data
            verdict = self.defect.incoming(self, obj)
            if verdict is DROP:
                continue
            if isinstance(verdict, dict):
                return dump(verdict)
            return data

    async def synthesize(self, request: Any) -> Any:
        server: DefectServer = self.server  # type: ignore[assignment]
        server.busy += 1
        try:
            async for pcm in super().synthesize(request):
                yield pcm
        finally:
            server.busy -= 1

    def on_accepted(self, job: Any) -> None:
        super().on_accepted(job)
        for message in self.after:
            self.act(self.session.receive_frame(message))
        self.after.clear()

    def outgoing(self, frames: list[Frame]) -> list[Frame]:
        extra, self.extra = self.extra, []
        frames = extra + frames
        if self.defect.outgoing is not None:
            frames = self.defect.outgoing(self, frames)
        return frames

    def on_refused(self) -> None:
        super().on_refused()
        refused_code = getattr(self.server, "refused_close_code", None)
        if refused_code is not None:
            self.close_code_after = refused_code

    def closing_code(self) -> int:
        code = self.close_code_after or getattr(self.server, "close_code_override", None)
        return code or super().closing_code()


_UNITS = ("opus", "flac", "aac")
"""The formats whose SSE audio chunks hold whole container units (§11.4, §11.7)."""


async def _cut_units(response: Response, step: int) -> Response:
    """An SSE answer (§11.4) whose audio is cut every ``step`` bytes, whatever the container units: its
    ``audio_chunk`` events' data joined and cut again (``seq`` and ``chunks`` counted anew). The answer is
    read with the protocol's SSE decoder (:class:`protocol.sse.SSEDecoder`)."""
    assert isinstance(response, StreamingResponse)
    decoder = SSEDecoder()
    body = response.body_iterator
    events = [event async for chunk in body for event in decoder.feed(chunk)]  # type: ignore[misc]
    audio = b""
    out: list[bytes] = []
    for event in events:
        data = json.loads(event.data)
        if data.get("type") == "audio_chunk":
            audio += base64.b64decode(data["data"])
            continue
        if data.get("type") == "synthesis_complete":
            chunks = [audio[i : i + step] for i in range(0, len(audio), step)]
            out += [
                encode_event(
                    {"type": "audio_chunk", "seq": seq, "data": base64.b64encode(c).decode("ascii")},
                    event="audio_chunk",
                )
                for seq, c in enumerate(chunks)
            ]
            data["chunks"] = len(chunks)
        out.append(encode_event(data, event=data["type"]))
    return StreamingResponse(iter(out), status_code=response.status_code, headers=dict(response.headers))


class DefectServer(ToneServer):
    """:class:`ToneServer` with one :class:`Defect` (see the module docstring)."""

    connection_class = DefectConnection
    ping_delay_busy_s = 0.0
    accept_delay_s = 0.0
    close_code_override: int | None = None
    refuse_query = False
    strip_bom = False
    log_text = False
    require_json = False
    ping_ok_times: int | None = None
    """Answer ``GET /ping`` healthy this many times, then 503 for ever (None: always as the shipped route)."""
    require_subprotocol = False
    plain_http_errors = False
    refuse_busy_handshake = False
    too_many_frame = True
    too_many_serves = False
    too_many_close_code: int | None = None
    """The Close frame's code after the fatal too_many_sessions frame (None: 1013, as §9.1 has it)."""
    cut_units_bytes = 0
    """Cut the audio of an SSE answer in Ogg/Opus, FLAC or AAC every this many bytes, whatever the container
    units (0: not; :func:`_cut_units`)."""
    refused_close_code: int | None = None
    """The Close frame's code of a session that refused a message (None: 1000, as it should)."""
    greedy_parse_s = 0.0
    """CPU seconds each client message costs a reader that never yields while messages wait (0: the
    control's reader, one message per event-loop turn)."""
    invocations_at_once: int | None = None
    """Refuse a ``POST /invocations`` with ``queue_full`` while this many are being answered (counted from the
    request's arrival to the route's answer, so invocations sent at once overlap), whatever
    ``max_invocations`` says (None: the shipped route's admission, §11.6)."""

    def __init__(self, defect: Defect) -> None:
        super().__init__()
        self.defect = defect
        self.name = defect.name
        self.busy = 0
        self.answering = 0
        """``POST /invocations`` requests between their arrival and their route's answer."""
        for key, value in defect.server.items():
            setattr(self, "close_code_override" if key == "close_code" else key, value)

    async def ping(self, request: Request) -> Response:
        if self.ping_delay_busy_s and self.busy:
            await asyncio.sleep(self.ping_delay_busy_s)
        if self.ping_ok_times is not None and self.ping_ok_times <= 0:
            return Response(b'{"status":"Unhealthy"}', 503, media_type="application/json")
        response = await super().ping(request)
        if self.ping_ok_times is not None and response.status_code == 200:
            self.ping_ok_times -= 1  # only the healthy answers count (503 while the backend loads)
        return response

    def app(self, settings: Settings | None = None) -> Starlette:
        app = super().app(settings)
        if self.plain_http_errors:
            app.exception_handlers.pop(HTTPException, None)  # the framework's own plain-text 404 and 405
        return app

    async def refuse_session(self, websocket: WebSocket) -> None:
        if self.too_many_serves:
            # The fatal frame, and then the session is served like any other.
            await websocket.send_text(dump(fatal_too_many(self.limits.max_sessions)))
            self.sessions += 1
            try:
                await self.connection_class(self, websocket).run()
            finally:
                self.sessions -= 1
            return
        if not self.too_many_frame:
            await websocket.close(1013)
            return
        if self.too_many_close_code is not None:
            await websocket.send_text(dump(fatal_too_many(self.limits.max_sessions)))
            await websocket.close(self.too_many_close_code)
            return
        await super().refuse_session(websocket)

    async def websocket(self, websocket: WebSocket) -> None:
        if self.refuse_busy_handshake and self.sessions >= self.limits.max_sessions:
            await websocket.close(1013)  # before accept: the handshake is refused (HTTP 403)
            return
        if self.require_subprotocol and not websocket.headers.get("sec-websocket-protocol"):
            await websocket.close(1002)
            return
        if self.refuse_query and websocket.url.query:
            await websocket.close(1008)
            return
        if self.accept_delay_s:
            await asyncio.sleep(self.accept_delay_s)
        await super().websocket(websocket)

    async def invocations(self, request: Request) -> Response:
        if self.invocations_at_once is None:
            return await self._invocation(request)
        if self.answering >= self.invocations_at_once:
            refusal = busy_error()  # the shipped route's own queue_full
            return JSONResponse(refusal.http_body(), status_code=refusal.code.http_status or 503)
        self.answering += 1
        try:
            return await self._invocation(request)
        finally:
            self.answering -= 1

    async def _invocation(self, request: Request) -> Response:
        if self.require_json and request.headers.get("content-type", "").split(";")[0] != "application/json":
            return Response(b'{"error": {"code": "invalid_field", "message": "send application/json"}}', 415)
        body = await request.body()
        if self.log_text:
            try:
                print("request text:", json.loads(body).get("text"), flush=True)
            except (ValueError, AttributeError):
                pass
        response = await super().invocations(request)
        if self.defect.http is None and not self.cut_units_bytes:
            return response
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {}
        asked = parsed if isinstance(parsed, dict) else {}
        response = await played(response)  # its slot released: the hooks read and rebuild it
        if self.cut_units_bytes and asked.get("transport") == "sse" and asked.get("format") in _UNITS:
            response = await _cut_units(response, self.cut_units_bytes)
        if self.defect.http is None:
            return response
        return await self.defect.http(self, asked, response)  # type: ignore[misc]

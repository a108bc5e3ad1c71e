"""A test client for the WebSocket route: python-websockets and a strict
:class:`protocol.client_session.ClientSession`.

Every server message goes through ``ClientSession.receive_message``, which raises
:class:`~protocol.client_session.ProtocolViolation` on any broken ordering or framing rule, so every test that
talks to the server also checks §3, §5 and §6.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from protocol.client_session import ClientSession
from protocol.messages import Capabilities, ErrorFrame, Marks, SynthesisComplete, SynthesisStart
from protocol.server_output import (
    AudioReceived,
    CapabilitiesReceived,
    ClientEvent,
    ErrorReceived,
    MarksReceived,
    SynthesisCompleted,
    SynthesisStarted,
)

GUARD_S = 60.0


@dataclass
class Answer:
    """Everything one request got: its start, its audio (joined) and its complete; with marks (§5.5),
    each ``marks`` frame and how many audio bytes of the request had arrived before it."""

    start: SynthesisStart
    complete: SynthesisComplete
    pcm: bytes
    frames: int = 0
    marks: list[tuple[Marks, int]] = field(default_factory=list)


@dataclass
class Conversation:
    """One open session: send requests, read checked events."""

    ws: ClientConnection
    client: ClientSession = field(default_factory=ClientSession)
    errors: list[ErrorFrame] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    _events: list[ClientEvent] = field(default_factory=list)
    _starts: dict[str, SynthesisStart] = field(default_factory=dict)
    _audio: dict[str, list[bytes]] = field(default_factory=dict)
    _marks: dict[str, list[tuple[Marks, int]]] = field(default_factory=dict)

    async def request(self, text: str, *, as_text: bool = False, **fields: Any) -> str:
        """Send a synthesis request (BINARY frame unless ``as_text``); return its request_id."""
        request_id, frame = self.client.request(text, **fields)
        await self.ws.send(frame.decode() if as_text else frame)
        return request_id

    async def utterance(self, request_id: str, *, text: str | None = None, **fields: Any) -> str:
        """Open an utterance (PROTOCOL.md §15.1); its answer is expected like a request's."""
        _, frame = self.client.utterance(request_id, text=text, **fields)
        await self.ws.send(frame)
        return request_id

    async def fragment(self, kind: str, request_id: str, text: str | None = None) -> None:
        """Send ``append``, ``flush`` or ``end`` for an utterance (§15.1)."""
        if kind == "append":
            await self.ws.send(self.client.append(request_id, text or ""))
        else:
            await self.ws.send(getattr(self.client, kind)(request_id, text))

    async def send(self, message: dict[str, Any] | bytes | str, *, expect: bool = False) -> None:
        """Send a raw message; ``expect=True`` announces it as a request whose id the server assigns."""
        if expect:
            self.client.expect(None)
        await self.ws.send(json.dumps(message).encode() if isinstance(message, dict) else message)

    async def next_event(self, timeout: float = GUARD_S) -> ClientEvent:
        """The next checked event (audio, start, complete or error)."""
        while not self._events:
            message = await asyncio.wait_for(self.ws.recv(), timeout)
            self._events.extend(self.client.receive_message(message))
        event = self._events.pop(0)
        self._record(event)
        return event

    def _record(self, event: ClientEvent) -> None:
        if isinstance(event, SynthesisStarted):
            self._starts[event.frame.request_id] = event.frame
            self._audio[event.frame.request_id] = []
        elif isinstance(event, AudioReceived):
            self._audio[event.request_id].append(event.pcm)
        elif isinstance(event, MarksReceived):
            rid = event.frame.request_id
            received = sum(map(len, self._audio[rid]))
            self._marks.setdefault(rid, []).append((event.frame, received))
        elif isinstance(event, SynthesisCompleted):
            rid = event.frame.request_id
            pieces = self._audio.pop(rid)
            marks = self._marks.pop(rid, [])
            self.answers[rid] = Answer(
                self._starts.pop(rid), event.frame, b"".join(pieces), len(pieces), marks
            )
        elif isinstance(event, ErrorReceived):
            self.errors.append(event.frame)

    async def until_complete(self, request_id: str | None = None, timeout: float = GUARD_S) -> Answer:
        """Read events until ``synthesis_complete`` of ``request_id`` (default: the next complete)."""
        while True:
            event = await self.next_event(timeout)
            if isinstance(event, SynthesisCompleted) and request_id in (None, event.frame.request_id):
                return self.answers[event.frame.request_id]

    async def until_audio(self, request_id: str, timeout: float = GUARD_S) -> bytes:
        """Read events until the first audio of ``request_id``; return those whole samples."""
        while True:
            event = await self.next_event(timeout)
            if isinstance(event, AudioReceived) and event.request_id == request_id:
                return event.pcm

    async def describe(self, request_id: str | None = None, timeout: float = GUARD_S) -> Capabilities:
        """Send ``describe`` (§4.4) and read events until its ``capabilities`` arrives."""
        await self.ws.send(self.client.describe(request_id))
        while True:
            event = await self.next_event(timeout)
            if isinstance(event, CapabilitiesReceived):
                return event.frame

    async def until_error(self, timeout: float = GUARD_S) -> ErrorFrame:
        """Read events until the next error frame."""
        while True:
            event = await self.next_event(timeout)
            if isinstance(event, ErrorReceived):
                return event.frame

    async def until_closed(self, timeout: float = GUARD_S) -> int | None:
        """Read until the server closes; return the close code it sent."""
        try:
            while True:
                await self.next_event(timeout)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


def open_session(url: str, **kwargs: Any) -> Any:
    """``async with open_session(url) as conv:`` → a :class:`Conversation` on a fresh connection."""
    return _Session(url, kwargs)


class _Session:
    def __init__(self, url: str, kwargs: dict[str, Any]) -> None:
        self._connect = connect(url, open_timeout=GUARD_S, max_size=2**21, **kwargs)

    async def __aenter__(self) -> Conversation:
        return Conversation(await self._connect.__aenter__())

    async def __aexit__(self, *exc: object) -> None:
        await self._connect.__aexit__(*exc)

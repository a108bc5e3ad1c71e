"""Sessions through the official client: reassembled messages, strict checks, answers, a client-side log.

A :class:`Session` wraps one ``InvokeEndpointWithBidirectionalStream`` stream opened with
:func:`simulator.client.open_bidi_session`. It sends client messages as PayloadParts (``DataType`` BINARY,
UTF8 or absent; whole or in PARTIAL parts) and reads the output as whole server messages, joining
PayloadParts up to ``CompletionState=COMPLETE`` (PROTOCOL.md §3.4 step 1, §12.3).

Each message goes through a :class:`Checker`: the team's strict client,
:class:`protocol.session.ClientSession`, which raises :class:`~protocol.session.ProtocolViolation` (with
the section) on any broken rule of §3, §5 and §6, plus the frame-type rules only a faithful transport
can show (a BINARY message that is a JSON object, §3.3.2; audio in a TEXT message, §3.3.1). A session
opened with ``check=False`` only records: cases then judge the recorded messages with :func:`replay`,
so one recording serves many cases, each with its own verdict (Autobahn's way).

Every send and every received message is appended to :attr:`Session.log`, which the report keeps
beside the verdict.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.frames import Audio, classify, is_json_object
from protocol.messages import ErrorFrame, SynthesisComplete, SynthesisStart
from protocol.session import (
    AudioReceived,
    ClientEvent,
    ClientSession,
    ErrorReceived,
    ProtocolViolation,
    SynthesisCompleted,
    SynthesisStarted,
)
from simulator.client import BidiSession

__all__ = [
    "LOG_LIMIT",
    "Answer",
    "Checker",
    "Message",
    "Session",
    "SessionEnded",
    "describe_frame",
    "replay",
]

LOG_LIMIT = 4000
"""Client-log entries kept per session; later ones are counted, not stored (keeps reports small)."""


class SessionEnded(Exception):
    """The output stream ended before what the case waited for arrived."""


@dataclass(frozen=True)
class Message:
    """One whole server message (PROTOCOL.md §3.4 step 1).

    Attributes:
        data: the bytes of its PayloadParts joined.
        data_type: ``DataType`` of its first part (``UTF8`` or ``BINARY``).
        parts: how many PayloadParts carried it.
        t: seconds from the session's opening to its last part.
    """

    data: bytes
    data_type: str
    parts: int
    t: float

    @property
    def is_control(self) -> bool:
        """The §3.4 classification: the whole message is one JSON object."""
        return is_json_object(self.data)


@dataclass
class Answer:
    """What the server sent for one accepted request (its bracket, §6.1).

    Attributes:
        request_id: the id from ``synthesis_start``.
        start: the ``synthesis_start`` frame.
        audio: the request's PCM, joined into whole samples.
        frames: the length of each audio message, in order.
        complete: the ``synthesis_complete`` frame once it arrived.
    """

    request_id: str
    start: SynthesisStart
    audio: bytearray = field(default_factory=bytearray)
    frames: list[int] = field(default_factory=list)
    complete: SynthesisComplete | None = None

    @property
    def duration_s(self) -> float:
        """Seconds of audio received, at the declared sample rate."""
        return len(self.audio) / 2 / self.start.sample_rate


def describe_frame(data: bytes, limit: int = 160) -> dict[str, Any]:
    """A log-friendly view of a message: the JSON object if it is one, else a text or hex preview."""
    if is_json_object(data) and len(data) <= 4096:
        return {"json": json.loads(data.decode("utf-8"))}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"head": data[: limit // 2].hex()}
    return {"text": text[:limit]}


class Checker:
    """Judges server messages one at a time and assembles the answers (no I/O).

    Args:
        faithful_data_types: the transport keeps the container's frame type in ``DataType`` (true for
            the simulator; behind SageMaker it is only reported, so the frame-type checks are off).
        check_frames: enforce the per-frame audio rules of §3.3 on each whole message.

    Raises (from :meth:`feed`):
        ProtocolViolation: the message breaks a rule; ``section`` names it.
    """

    def __init__(self, *, faithful_data_types: bool, check_frames: bool = True) -> None:
        self.faithful_data_types = faithful_data_types
        self.client = ClientSession(check_frames=check_frames)
        self.answers: dict[str, Answer] = {}
        self.errors: list[tuple[int, ErrorFrame]] = []
        self.fed = 0
        self._open: Answer | None = None

    def feed(self, message: Message) -> list[ClientEvent]:
        """Check one message and update the answers; returns the client events it produced."""
        if self.faithful_data_types:
            control = message.is_control
            if control and message.data_type == "BINARY":
                raise ProtocolViolation(
                    f"a BINARY message of {len(message.data)} bytes is a JSON object "
                    f"({message.data[:40]!r}): an audio frame must never be one and a control frame is "
                    "a TEXT message",
                    "§3.3.2",
                )
            if not control and message.data_type == "UTF8":
                raise ProtocolViolation(
                    f"a TEXT message of {len(message.data)} bytes is not a JSON object "
                    f"({message.data[:40]!r}): audio frames are BINARY messages",
                    "§3.3.1",
                )
        events = self.client.receive_message(message.data)
        index = self.fed
        self.fed += 1
        if not events and isinstance(classify(message.data), Audio) and self._open is not None:
            self._open.frames.append(len(message.data))  # an audio message shorter than one sample
        for event in events:
            if isinstance(event, SynthesisStarted):
                self._open = Answer(event.frame.request_id, event.frame)
                self.answers[event.frame.request_id] = self._open
            elif isinstance(event, AudioReceived):
                assert self._open is not None  # ClientSession refuses audio outside a bracket
                self._open.audio += event.pcm
                self._open.frames.append(len(message.data))
            elif isinstance(event, SynthesisCompleted):
                assert self._open is not None
                self._open.complete = event.frame
                self._open = None
            elif isinstance(event, ErrorReceived):
                self.errors.append((index, event.frame))
        return events

    def errors_since(self, index: int) -> list[ErrorFrame]:
        """Error frames among the messages fed from position ``index`` on."""
        return [frame for i, frame in self.errors if i >= index]

    def completed(self, request_id: str) -> bool:
        """Whether the request's ``synthesis_complete`` arrived."""
        answer = self.answers.get(request_id)
        return answer is not None and answer.complete is not None


def replay(
    messages: Iterable[Message],
    *,
    faithful_data_types: bool,
    expect: Iterable[str | None] = (),
    check_frames: bool = True,
) -> Checker:
    """Judge recorded messages: a fresh :class:`Checker` fed every message, after announcing ``expect``.

    ``expect`` lists the request ids sent, in order (``None`` where the server assigns the id).

    Raises:
        ProtocolViolation: the first broken rule.
    """
    checker = Checker(faithful_data_types=faithful_data_types, check_frames=check_frames)
    for request_id in expect:
        checker.client.expect(request_id)
    for message in messages:
        checker.feed(message)
    return checker


class Session:
    """One open bidirectional session, checked message by message.

    Args:
        bidi: the stream, from :func:`simulator.client.open_bidi_session`.
        faithful_data_types: see :class:`Checker`.
        check: feed every message to the checker (``False``: only record them in :attr:`messages`).
        check_frames: see :class:`Checker`.
        name: a label for the log.

    Attributes:
        messages: every whole message received, in order.
        log: the client-side log (sends, receptions, the end of the stream).
        ended: the output stream has ended.
        checker: the :class:`Checker` (its ``answers`` and ``errors``).
    """

    def __init__(
        self,
        bidi: BidiSession,
        *,
        faithful_data_types: bool,
        check: bool = True,
        check_frames: bool = True,
        name: str = "session",
    ) -> None:
        self.bidi = bidi
        self.name = name
        self.check = check
        self.checker = Checker(faithful_data_types=faithful_data_types, check_frames=check_frames)
        self.messages: list[Message] = []
        self.log: list[dict[str, Any]] = []
        self.log_dropped = 0
        self.ended = False
        self.end_error: BaseException | None = None
        self._opened = time.monotonic()
        self._parts: list[bytes] = []
        self._part_type: str | None = None
        self._sent_requests = 0
        self._completes: set[str] = set()
        self._scanned = 0

    # -- log -------------------------------------------------------------------------------------------

    def _now(self) -> float:
        return round(time.monotonic() - self._opened, 6)

    def note(self, **entry: Any) -> None:
        """Append an entry to the client log (``t`` is added)."""
        if len(self.log) >= LOG_LIMIT:
            self.log_dropped += 1
            return
        self.log.append({"t": self._now(), **entry})

    # -- sending ---------------------------------------------------------------------------------------

    async def send(
        self, data: bytes, *, data_type: str | None = "BINARY", completion_state: str | None = None
    ) -> None:
        """Send one PayloadPart (``data_type`` None: no DataType header, which SageMaker reads as BINARY)."""
        self.note(
            dir="send",
            data_type=data_type,
            completion_state=completion_state,
            bytes=len(data),
            **describe_frame(data),
        )
        await self.bidi.send(data, data_type=data_type, completion_state=completion_state)

    async def send_in_parts(self, data: bytes, cuts: Iterable[int], *, data_type: str = "UTF8") -> None:
        """Send one message as several PayloadParts cut at ``cuts``: PARTIAL, ..., then COMPLETE (§12.3)."""
        bounds = [0, *sorted(cuts), len(data)]
        pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            await self.send(piece, data_type=data_type, completion_state="COMPLETE" if last else "PARTIAL")

    async def request(
        self, text: str, *, data_type: str | None = "BINARY", request_id: str | None = None, **fields: Any
    ) -> str:
        """Send a synthesis request (§4.1) and expect its answer; returns its request id.

        ``request_id`` defaults to ``<name>-<n>``; ``fields`` are ``voice``, ``speed``, ``sample_rate``,
        ``request_timestamp``.
        """
        if request_id is None:
            self._sent_requests += 1
            request_id = f"{self.name}-{self._sent_requests}"
        request_id, frame = self.checker.client.request(text, request_id=request_id, **fields)
        await self.send(frame, data_type=data_type)
        return request_id

    def expect(self, request_id: str | None) -> None:
        """Announce a request sent as raw bytes (``None``: the server assigns its id)."""
        self.checker.client.expect(request_id)

    async def close(self, *, data_type: str | None = "BINARY") -> None:
        """Send ``{"type": "close"}`` (§4.3)."""
        await self.send(ClientSession.close(), data_type=data_type)

    # -- receiving -------------------------------------------------------------------------------------

    async def receive(self) -> Message | None:
        """The next whole server message, checked (unless ``check=False``); ``None`` at the end of the stream.

        Raises:
            ProtocolViolation: the message breaks a rule.
            ModelStreamError, InternalStreamFailure, ...: the service's errors, as the client raises them.
        """
        while True:
            if self.ended:
                return None
            try:
                part = await self.bidi.receive()
            except Exception as exc:
                self.ended, self.end_error = True, exc
                self.note(dir="end", error=f"{type(exc).__name__}: {exc}")
                raise
            if part is None:
                self.ended = True
                self.note(dir="end", note="the output stream ended")
                if self._parts:
                    raise ProtocolViolation(
                        f"the stream ended inside a message ({sum(map(len, self._parts))} bytes without a "
                        "COMPLETE part)",
                        "§12.3",
                    )
                return None
            if self._part_type is None:
                self._part_type = part.data_type
            self._parts.append(part.data)
            if not part.is_complete:
                continue
            data = b"".join(self._parts)
            message = Message(data, self._part_type, len(self._parts), self._now())
            self._parts, self._part_type = [], None
            self.messages.append(message)
            self._log_message(message)
            if self.check:
                self.checker.feed(message)
            return message

    def _log_message(self, message: Message) -> None:
        if message.is_control:
            self.note(
                dir="recv",
                kind="control",
                data_type=message.data_type,
                parts=message.parts,
                bytes=len(message.data),
                **describe_frame(message.data),
            )
        else:
            self.note(
                dir="recv",
                kind="audio",
                data_type=message.data_type,
                parts=message.parts,
                bytes=len(message.data),
            )

    async def wait(self, done: Callable[[], bool], what: str) -> None:
        """Read messages until ``done()`` is true.

        Raises:
            SessionEnded: the stream ended first (``what`` says what was awaited).
        """
        while not done():
            if await self.receive() is None:
                raise SessionEnded(f"the server ended the session before {what}")

    async def answer(self, request_id: str) -> Answer:
        """Read until the request's ``synthesis_complete``; return its :class:`Answer`."""
        await self.wait(lambda: self.checker.completed(request_id), f"{request_id!r} was completed")
        return self.checker.answers[request_id]

    async def drain(self) -> None:
        """Read until the output stream ends."""
        while await self.receive() is not None:
            pass

    def completes_seen(self) -> set[str]:
        """Request ids of the ``synthesis_complete`` frames received so far (read from the raw messages,
        so it works for sessions that only record)."""
        for message in self.messages[self._scanned :]:
            if message.is_control:
                obj = json.loads(message.data.decode("utf-8"))
                if obj.get("type") == "synthesis_complete" and isinstance(obj.get("request_id"), str):
                    self._completes.add(obj["request_id"])
        self._scanned = len(self.messages)
        return set(self._completes)

    async def drain_after_close(self, request_ids: Iterable[str | None], grace_s: float = 10.0) -> None:
        """After ``close``: read until every request in ``request_ids`` is completed, then until the stream
        ends, allowing ``grace_s`` seconds for the end (§7.1: the server closes once drained).

        ``None`` ids (assigned by the server) count as any completion.

        Raises:
            SessionEnded: the stream ended before every request completed.
            TimeoutError: the stream did not end within ``grace_s`` after the last completion.
        """
        wanted = list(request_ids)
        named = {i for i in wanted if i is not None}

        def done() -> bool:
            seen = self.completes_seen()
            return named <= seen and len(seen) >= len(wanted)

        await self.wait(done, f"all of {wanted} were completed after close")
        try:
            await asyncio.wait_for(self.drain(), grace_s)
        except TimeoutError:
            self.note(dir="end", note=f"no end of stream within {grace_s:g} s after the last completion")
            raise TimeoutError(
                f"the server did not end the session within {grace_s:g} s after answering every request "
                "that preceded close (§7.1)"
            ) from None

    @property
    def answers(self) -> dict[str, Answer]:
        """Answers so far, by request id, in the order their brackets opened."""
        return self.checker.answers

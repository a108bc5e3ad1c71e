"""The suite's lenient client: observes a server's messages, records every deviation, never aborts (no I/O).

:class:`Observer` feeds each whole server message to the sans-I/O reader of the protocol
(:class:`protocol.reader.StreamReader`: the same rules the strict
:class:`protocol.client_session.ClientSession` raises on, and the same events,
:mod:`protocol.server_output`) and turns every rule broken into a :class:`Finding`: the clause
(:mod:`conformance.engine.clauses`), the session and frame index, a message, and a short wire excerpt. It
carries on wherever the wire still allows it, so
one defect shows once, on its own clause, and every other check of the session still runs:

* a ``synthesis_start`` missing members still opens its request's bracket; the values it lacks are taken
  from the request (:class:`StartView`);
* a ``synthesis_complete`` without ``status`` has status ``None``: the cases judge the request by its audio;
* an ``error`` frame without ``code`` reads with the registry code its ``message`` names (as the AWS
  sample's clients match codes by substring), without ``fatal`` as per-message (:class:`ErrorView`);
* brackets are matched to requests by position (§6.2), so a wrong ``request_id`` is one finding and the
  bracket still answers the request whose turn it was.

Answers are kept per request (:class:`Answer`) for the cases to judge.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.engine import clauses
from protocol.encodings import ENCODINGS
from protocol.frames import is_json_object
from protocol.messages import (
    DEFAULT_SAMPLE_RATE,
    DEFAULT_SPEED,
    DEFAULT_VOICE,
    SAMPLE_RATES,
    ControlReading,
    Word,
)
from protocol.reader import StreamReader
from protocol.server_output import (
    AudioReceived,
    ErrorReceived,
    MarksReceived,
    ReaderEvent,
    SynthesisCompleted,
    SynthesisStarted,
)

__all__ = [
    "Answer",
    "CompleteView",
    "ErrorView",
    "Finding",
    "MarkView",
    "Message",
    "Observer",
    "StartView",
    "describe_frame",
    "excerpt",
    "observe",
]

EXCERPT_CHARS = 240
"""Longest wire excerpt kept with a finding."""


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


def excerpt(data: bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable rendering of a message: the JSON text of a control frame, else length and hex."""
    if is_json_object(data):
        text = data.decode("utf-8")
        return text if len(text) <= limit else text[: limit - 1] + "…"
    head = data[:16].hex(" ")
    return f"<{len(data)} bytes: {head}{' …' if len(data) > 16 else ''}>"


def describe_frame(data: bytes, limit: int = 160) -> dict[str, Any]:
    """A log-friendly view of a message: the JSON object if it is one, else a text or hex preview."""
    if is_json_object(data) and len(data) <= 4096:
        return {"json": json.loads(data.decode("utf-8"))}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"head": data[: limit // 2].hex()}
    return {"text": text[:limit]}


@dataclass(frozen=True)
class Finding:
    """One deviation from a clause of the spec, as seen on the wire.

    Attributes:
        clause: the clause's key (:mod:`conformance.engine.clauses`).
        message: what was seen, for people.
        session: the name of the session it was seen in (empty when not tied to one).
        index: the message's index in that session (``None`` when not tied to one message).
        excerpt: a short rendering of the message concerned (:func:`excerpt`).
        level: the level it breaks, when it is not the clause's own (``None``: the sentence's level, from
            the traceability matrix). A case's own failed assertion is a finding at the case's level: a
            SHOULD case judging the SHOULD half of a sentence that also holds a MUST breaks a SHOULD.
    """

    clause: str
    message: str
    session: str = ""
    index: int | None = None
    excerpt: str = ""
    level: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``level`` only when the finding has its own)."""
        out: dict[str, Any] = {
            "clause": self.clause,
            "message": self.message,
            "session": self.session,
            "index": self.index,
            "excerpt": self.excerpt,
        }
        if self.level is not None:
            out["level"] = self.level
        return out

    def __str__(self) -> str:
        where = f" [{self.session} #{self.index}]" if self.index is not None else ""
        return f"{self.clause}: {self.message}{where}"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class StartView:
    """A ``synthesis_start`` as the observer reads it: what it says, or what the request asked for.

    Attributes:
        request_id: its ``request_id`` (``None`` when missing or malformed).
        sample_rate: the declared rate; the requested one when the frame lacks a valid rate.
        voice: the declared voice; the requested one when missing.
        speed: the declared speed; the requested one when missing.
        obj: the frame as received.
    """

    request_id: str | None
    sample_rate: int
    voice: str
    speed: float
    obj: dict[str, Any]

    @classmethod
    def read(cls, reading: ControlReading, request: Mapping[str, Any]) -> StartView:
        """Read ``reading``, falling back to ``request``'s values (and then the defaults of §4.1)."""

        def asked(name: str, default: Any) -> Any:
            value = request.get(name)
            return default if value is None else value

        rate = reading.integer("sample_rate")
        if rate not in SAMPLE_RATES:
            asked_rate = asked("sample_rate", DEFAULT_SAMPLE_RATE)
            rate = int(asked_rate) if _number(asked_rate) in SAMPLE_RATES else DEFAULT_SAMPLE_RATE
        speed = reading.number("speed")
        if speed is None:
            speed = _number(asked("speed", DEFAULT_SPEED)) or DEFAULT_SPEED
        voice = reading.string("voice") or asked("voice", DEFAULT_VOICE)
        return cls(reading.string("request_id"), rate, str(voice), speed, reading.obj)


@dataclass(frozen=True)
class CompleteView:
    """A ``synthesis_complete`` as the observer reads it.

    Attributes:
        request_id: its ``request_id`` (``None`` when missing or malformed).
        status: its ``status``; ``None`` when the member is missing (a finding on §5.3; cases then judge
            the request by its audio, the AWS sample's ``synthesis_complete`` has no status).
        audio_bytes: its ``audio_bytes`` (``None`` when missing or not an integer).
        total_duration_s: its ``total_duration_s`` (``None`` when missing or not a number).
        elapsed_s: its ``elapsed_s`` (``None`` when missing or not a number).
        words: its word timings when they are well formed, else ``None``.
        obj: the frame as received.
    """

    request_id: str | None
    status: str | None
    audio_bytes: int | None
    total_duration_s: float | None
    elapsed_s: float | None
    words: tuple[Word, ...] | None
    obj: dict[str, Any]

    @classmethod
    def read(cls, reading: ControlReading) -> CompleteView:
        """Read ``reading`` leniently."""
        status = reading.obj.get("status")
        words: tuple[Word, ...] | None = None
        raw = reading.obj.get("words")
        if isinstance(raw, list):
            try:
                words = tuple(
                    Word(
                        w["word"],
                        float(w["start_s"]),
                        float(w["end_s"]),
                        w.get("text_start"),
                        w.get("text_end"),
                    )
                    for w in raw
                )
            except (TypeError, KeyError, ValueError):
                words = None
        return cls(
            reading.string("request_id"),
            None if status is None else str(status),
            reading.integer("audio_bytes"),
            reading.number("total_duration_s"),
            reading.number("elapsed_s"),
            words,
            reading.obj,
        )


@dataclass(frozen=True)
class ErrorView:
    """An ``error`` frame as the observer reads it.

    Attributes:
        code: its ``code``, or the registry code its ``message`` names when ``code`` is missing (``None``
            when neither).
        message: its ``message`` (empty when missing).
        request_id: its ``request_id`` (``None`` when null, missing or malformed).
        fatal: its ``fatal``; ``False`` unless the member is ``true``.
        obj: the frame as received.
    """

    code: str | None
    message: str
    request_id: str | None
    fatal: bool
    obj: dict[str, Any]

    @classmethod
    def read(cls, event: ErrorReceived) -> ErrorView:
        """Read the reader's event leniently."""
        obj = event.reading.obj
        message = obj.get("message")
        return cls(
            event.code,
            message if isinstance(message, str) else "",
            event.reading.string("request_id"),
            obj.get("fatal") is True,
            obj,
        )


@dataclass(frozen=True)
class MarkView:
    """A ``marks`` frame inside a bracket (§5.5), read leniently, and when it came.

    Attributes:
        segment: its ``segment`` (``None`` when missing or not an integer).
        start_s: its ``start_s`` (``None`` when missing or not a number).
        end_s: its ``end_s`` (``None`` when missing or not a number).
        received: audio bytes of the bracket received before it.
        obj: the frame as received.
    """

    segment: int | None
    start_s: float | None
    end_s: float | None
    received: int
    obj: dict[str, Any]

    @classmethod
    def read(cls, reading: ControlReading, received: int) -> MarkView:
        """Read ``reading`` leniently; ``received`` bytes of the bracket's audio came before it."""
        return cls(
            reading.integer("segment"),
            reading.number("start_s"),
            reading.number("end_s"),
            received,
            reading.obj,
        )


@dataclass
class Answer:
    """What the server sent for one request: its bracket (§6.1).

    Attributes:
        request_id: the id the client knows the request by (its own, or the one the server assigned).
        start: the ``synthesis_start``.
        audio: the request's PCM, joined into whole samples.
        frames: the length of each audio message, in order.
        complete: the ``synthesis_complete`` once it arrived.
        index: the ``synthesis_start``'s message index in the session.
        marks: the ``marks`` frames inside the bracket, in order (§5.5).
    """

    request_id: str
    start: StartView
    audio: bytearray = field(default_factory=bytearray)
    frames: list[int] = field(default_factory=list)
    complete: CompleteView | None = None
    index: int = 0
    marks: list[MarkView] = field(default_factory=list)

    def seconds(self, received: int) -> float:
        """``received`` bytes of this bracket's audio in seconds (see :attr:`duration_s`)."""
        declared = self.start.obj.get("encoding")
        # Whatever a server put there: only a known encoding's name (a string) changes the width.
        width = ENCODINGS[declared].sample_width if isinstance(declared, str) and declared in ENCODINGS else 2
        return received / width / self.start.sample_rate

    @property
    def duration_s(self) -> float:
        """Seconds of audio received, at the declared (or requested) sample rate, in the declared
        encoding's samples (§3.3.1; 2 bytes each unless ``synthesis_start`` names a G.711 encoding)."""
        return self.seconds(len(self.audio))


class Observer:
    """Observes one session's server messages (see the module docstring).

    Args:
        faithful_data_types: the transport keeps the container's frame type in ``DataType`` (the simulator;
            behind SageMaker it is only reported, so the frame-type rules are off).
        check_frames: check the per-frame audio rules of §3.3.1 on each whole message.
        name: the session's name, carried by its findings.

    Attributes:
        answers: answers by request id, in the order their brackets opened (a reused id keeps the latest).
        history: every answer in order (reused ids included).
        errors: ``(message index, error)`` for every error frame.
        findings: every deviation seen, in order.
        fed: number of messages observed.
    """

    def __init__(
        self, *, faithful_data_types: bool, check_frames: bool = True, name: str = "session"
    ) -> None:
        self.faithful_data_types = faithful_data_types
        self.name = name
        self.reader = StreamReader(check_frames=check_frames)
        self.answers: dict[str, Answer] = {}
        self.history: list[Answer] = []
        self.errors: list[tuple[int, ErrorView]] = []
        self.findings: list[Finding] = []
        self.fed = 0
        self.orphans: dict[str | None, CompleteView] = {}
        """``synthesis_complete`` frames that closed no open bracket (§6.1), by the id they name."""
        self._requests: dict[str, deque[Mapping[str, Any]]] = {}
        self._assigned: deque[Mapping[str, Any]] = deque()

    def expect(
        self, request_id: str | None, request: Mapping[str, Any] | None = None, *, utterance: bool = False
    ) -> None:
        """Announce a request sent, in sending order (``None``: the server assigns its id).

        ``request`` is the request's members (its ``sample_rate``, ``voice``, ``speed`` stand in for a
        ``synthesis_start`` that lacks them; ``"marks": true`` asks for marks, §5.5); ``utterance``: it
        is an utterance (§15), whose fragments' refusals leave its bracket owed.
        """
        params = dict(request or {})
        self.reader.expect(request_id, utterance=utterance, marks=params.get("marks") is True)
        if request_id is None:
            self._assigned.append(params)
        else:
            self._requests.setdefault(request_id, deque()).append(params)

    def _request_of(self, key: str) -> Mapping[str, Any]:
        queue = self._requests.get(key)
        if queue:
            return queue.popleft()
        if self._assigned:
            return self._assigned.popleft()
        return {}

    def note(
        self, clause: str, message: str, *, index: int | None = None, data: bytes | None = None
    ) -> Finding:
        """Record a finding on ``clause`` (``data``: the message concerned, for the excerpt)."""
        finding = Finding(clause, message, self.name, index, excerpt(data) if data is not None else "")
        self.findings.append(finding)
        return finding

    def feed(self, message: Message) -> list[ReaderEvent]:
        """Observe one whole message; returns the reader's events (never raises on what a server sends)."""
        index = self.fed
        self.fed += 1
        data_type = message.data_type if self.faithful_data_types else None
        outcome = self.reader.receive_message(message.data, data_type)
        for violation in outcome.violations:
            self.note(clauses.RULES[violation.rule], violation.message, index=index, data=message.data)
        for event in outcome.events:
            if isinstance(event, SynthesisStarted):
                answer = Answer(
                    event.request_id,
                    StartView.read(event.reading, self._request_of(event.request_id)),
                    index=index,
                )
                self.answers.pop(event.request_id, None)  # a reused id moves to the end
                self.answers[event.request_id] = answer
                self.history.append(answer)
            elif isinstance(event, AudioReceived):
                answer = self.answers.get(event.request_id) if event.request_id is not None else None
                if answer is not None:
                    answer.audio += event.pcm
                    answer.frames.append(len(event.data))
            elif isinstance(event, SynthesisCompleted):
                answer = self.answers.get(event.request_id) if event.request_id is not None else None
                if answer is not None:
                    answer.complete = CompleteView.read(event.reading)
                elif event.request_id is None:
                    self.orphans[event.reading.string("request_id")] = CompleteView.read(event.reading)
            elif isinstance(event, MarksReceived):
                answer = self.answers.get(event.request_id) if event.request_id is not None else None
                if answer is not None:
                    answer.marks.append(MarkView.read(event.reading, sum(answer.frames)))
            elif isinstance(event, ErrorReceived):
                self.errors.append((index, ErrorView.read(event)))
        return outcome.events

    def errors_since(self, index: int) -> list[ErrorView]:
        """Error frames among the messages observed from position ``index`` on."""
        return [error for i, error in self.errors if i >= index]

    def completed(self, request_id: str) -> bool:
        """Whether the request's ``synthesis_complete`` arrived."""
        answer = self.answers.get(request_id)
        return answer is not None and answer.complete is not None

    def completions(self) -> int:
        """Number of brackets closed so far."""
        return sum(1 for answer in self.history if answer.complete is not None)

    @property
    def fatal(self) -> bool:
        """Whether a fatal error frame arrived (the server then ends the session, §9.4)."""
        return any(error.fatal for _, error in self.errors)


def observe(
    messages: Iterable[Message],
    *,
    faithful_data_types: bool,
    expect: Iterable[str | tuple[str | None, Mapping[str, Any]] | None] = (),
    check_frames: bool = True,
    name: str = "recording",
) -> Observer:
    """Observe recorded messages with a fresh :class:`Observer`, after announcing ``expect``.

    ``expect`` lists the requests sent, in order: ids (``None`` where the server assigns the id) or
    ``(id, request members)`` pairs.
    """
    observer = Observer(faithful_data_types=faithful_data_types, check_frames=check_frames, name=name)
    for item in expect:
        if isinstance(item, tuple):
            observer.expect(item[0], item[1])
        else:
            observer.expect(item)
    for message in messages:
        observer.feed(message)
    return observer

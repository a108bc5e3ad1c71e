"""What a server sends, as a client reads it: one event per thing a server message can mean (§5, §6).

One vocabulary for every client of the protocol: :class:`protocol.reader.StreamReader` (the lenient reader
of a session's server output) returns these events, :class:`protocol.client_session.ClientSession` (the
strict client, which raises on the first MUST broken) returns the same objects, and the conformance
suite's lenient observer (:class:`conformance.engine.observer.Observer`) builds its answers from them.

Each event keeps what was received: a control frame's :class:`protocol.messages.ControlReading` (the JSON
object as received, its typed frame when valid, and every problem). ``frame`` gives the typed frame; it
raises :class:`ValueError` for a frame that broke its schema, which only a lenient reader ever sees (the
strict client raises :class:`protocol.client_session.ProtocolViolation` first). A lenient reader reads
``reading`` instead.

A request's bracket is known by its ``request_id``: the client's own id, or, for a request sent without
one, the id the server assigned (made unique if a server assigns the same id twice; see
:mod:`protocol.reader`). ``None`` where the message belongs to no open bracket (a lenient reader's case).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages import (
    Capabilities,
    ControlReading,
    ErrorFrame,
    Marks,
    SynthesisComplete,
    SynthesisStart,
)

__all__ = [
    "AudioReceived",
    "CapabilitiesReceived",
    "ClientEvent",
    "ControlIgnored",
    "ErrorReceived",
    "MarksReceived",
    "ReaderEvent",
    "SynthesisCompleted",
    "SynthesisStarted",
]


def _typed[F](reading: ControlReading, kind: type[F]) -> F:
    """``reading``'s typed frame; :class:`ValueError` when the frame broke its schema (read ``reading``)."""
    frame = reading.frame
    if not isinstance(frame, kind):
        problems = "; ".join(reading.problems[:2]) or "no typed frame"
        raise ValueError(f"the {reading.kind} frame breaks its schema ({problems}): read the event's reading")
    return frame


@dataclass(frozen=True, slots=True)
class SynthesisStarted:
    """A ``synthesis_start`` opened the bracket of request ``request_id`` (§5.1, §6.1)."""

    request_id: str
    reading: ControlReading

    @property
    def frame(self) -> SynthesisStart:
        """The typed ``synthesis_start`` (:class:`ValueError` if it broke its schema)."""
        return _typed(self.reading, SynthesisStart)


@dataclass(frozen=True, slots=True)
class AudioReceived:
    """An audio message of request ``request_id`` (§3.3, §5.2); ``None`` when no bracket is open.

    ``data`` is the message as received; ``pcm`` its whole samples (an odd byte carries over to the next
    message, §3.4), empty outside a bracket.
    """

    request_id: str | None
    data: bytes
    pcm: bytes


@dataclass(frozen=True, slots=True)
class SynthesisCompleted:
    """A ``synthesis_complete`` closed the bracket of ``request_id`` (§5.3); ``None``: it matched no open
    bracket (§6.1). ``received`` is the number of audio bytes the bracket carried."""

    request_id: str | None
    reading: ControlReading
    received: int

    @property
    def frame(self) -> SynthesisComplete:
        """The typed ``synthesis_complete`` (:class:`ValueError` if it broke its schema)."""
        return _typed(self.reading, SynthesisComplete)


@dataclass(frozen=True, slots=True)
class ErrorReceived:
    """An ``error`` frame (§5.4). ``code`` is its ``code``, or the registry code its message names when the
    member is missing or malformed (``None`` if neither, :func:`protocol.reader.code_named_in`)."""

    reading: ControlReading
    code: str | None

    @property
    def frame(self) -> ErrorFrame:
        """The typed ``error`` frame (:class:`ValueError` if it broke its schema)."""
        return _typed(self.reading, ErrorFrame)


@dataclass(frozen=True, slots=True)
class CapabilitiesReceived:
    """A ``capabilities`` frame, the answer to a ``describe`` (§4.4)."""

    reading: ControlReading

    @property
    def frame(self) -> Capabilities:
        """The typed ``capabilities`` frame (:class:`ValueError` if it broke its schema)."""
        return _typed(self.reading, Capabilities)


@dataclass(frozen=True, slots=True)
class MarksReceived:
    """A ``marks`` frame inside the bracket of ``request_id`` (§5.5); ``None``: outside its bracket."""

    request_id: str | None
    reading: ControlReading

    @property
    def frame(self) -> Marks:
        """The typed ``marks`` frame (:class:`ValueError` if it broke its schema)."""
        return _typed(self.reading, Marks)


@dataclass(frozen=True, slots=True)
class ControlIgnored:
    """A control frame whose ``type`` names no server frame of this version: a client ignores it (§1.7)."""

    reading: ControlReading


ClientEvent = (
    SynthesisStarted
    | AudioReceived
    | SynthesisCompleted
    | ErrorReceived
    | CapabilitiesReceived
    | MarksReceived
)
"""What :class:`protocol.client_session.ClientSession` returns: every event but :class:`ControlIgnored`."""

ReaderEvent = ClientEvent | ControlIgnored
"""What :class:`protocol.reader.StreamReader` returns."""

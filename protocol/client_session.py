"""The client's half of a session, sans-I/O: builds request messages and checks every server message.

:class:`ClientSession` is the strict client of PROTOCOL.md (§3, §4, §5, §6, §15): it builds the client's
messages and checks each server message against the ordering and framing rules, raising
:class:`ProtocolViolation` on the first MUST broken. Its rules are those of the lenient
:class:`protocol.reader.StreamReader` (one home for a client's checks) and its events are those of
:mod:`protocol.server_output` (one vocabulary for what a server sends), which the conformance suite's
lenient observer reads too. The server's half is :class:`protocol.server_session.ServerSession`.
"""

from __future__ import annotations

import itertools

from protocol.messages import (
    Append,
    Cancel,
    Close,
    Describe,
    End,
    Flush,
    SessionLexicon,
    SynthesisRequest,
    Utterance,
)
from protocol.reader import StreamReader
from protocol.server_output import AudioReceived, ClientEvent, ControlIgnored

__all__ = ["ClientSession", "ProtocolViolation"]


class ProtocolViolation(Exception):
    """The server broke a rule of the protocol; seen by :class:`ClientSession`.

    Attributes:
        section: the PROTOCOL.md section of the broken rule, e.g. ``"§6.2"``.
        rule: the name of the broken :class:`protocol.reader.OutputRule` (``"AUDIO_IN_BRACKET"``; '' when
            unknown), which names the requirement it checks (``conformance.engine.clauses.RULES``).
    """

    def __init__(self, message: str, section: str, rule: str = "") -> None:
        super().__init__(f"{message} (PROTOCOL.md {section})")
        self.section = section
        self.rule = rule


class ClientSession:
    """The client's half of one bidirectional session: builds requests, checks every server message.

    Feed whole server messages to :meth:`receive_message` (one WebSocket message, or the PayloadParts
    of one message reassembled up to ``CompletionState=COMPLETE``), or raw PayloadParts to
    :meth:`receive_part`. Each call returns the events that message produced and raises
    :class:`ProtocolViolation` when the server broke a MUST.

    The rules are those of :class:`protocol.reader.StreamReader` (one home for the client's checks); this
    class is its strict face. Control frames of a type this version does not know are ignored (§1.7).

    Requests are expected in the order they were sent. Requests sent by other means (raw bytes, say)
    can be announced with :meth:`expect`.

    Utterances (§15): :meth:`utterance` opens one (it is expected like a request), :meth:`append`,
    :meth:`flush` and :meth:`end` build its other messages. An ``error`` frame that refuses a fragment
    (``message_type`` ``append``, ``flush`` or ``end``) leaves the utterance's bracket owed; one that
    refuses the ``utterance`` message itself means it gets none.

    Args:
        check_frames: enforce the per-frame audio rules of §3.3 (even length, size ceiling, not a JSON
            object). Leave on for whole WebSocket messages; turn off for transports that may re-split
            messages at arbitrary bytes, where only the reassembled stream is checked.
    """

    def __init__(self, *, check_frames: bool = True) -> None:
        self.check_frames = check_frames
        self._reader = StreamReader(check_frames=check_frames)
        self._parts = bytearray()
        self._ids = itertools.count(1)

    # -- building messages ---------------------------------------------------------------------------------

    def request(self, text: str, *, request_id: str | None = None, **fields: object) -> tuple[str, bytes]:
        """Build a synthesis request frame (§4.1) and expect its answer.

        Args:
            text: the text to speak.
            request_id: chosen by the caller, or ``c<N>`` when omitted.
            **fields: other request fields (``voice``, ``speed``, ``sample_rate``, ``encoding``,
                ``request_timestamp``, ``marks``).

        Returns:
            ``(request_id, frame)`` where ``frame`` is the UTF-8 JSON object to send (BINARY or TEXT).
        """
        request_id = request_id or f"c{next(self._ids)}"
        frame = SynthesisRequest(text=text, request_id=request_id, **fields).to_json().encode()  # type: ignore[arg-type]
        self._reader.expect(request_id, marks=bool(fields.get("marks")))
        return request_id, frame

    def utterance(
        self, request_id: str | None = None, *, text: str | None = None, **fields: object
    ) -> tuple[str, bytes]:
        """Build an ``utterance`` message (§15.1) and expect its answer, one bracket like a request's.

        Args:
            request_id: chosen by the caller, or ``c<N>`` when omitted (the protocol requires one).
            text: the first fragment, if any.
            **fields: ``voice``, ``speed``, ``sample_rate``, ``encoding``, ``request_timestamp``, ``marks``.

        Returns:
            ``(request_id, frame)``; send ``frame`` as one message.
        """
        request_id = request_id or f"c{next(self._ids)}"
        frame = Utterance(request_id=request_id, text=text, **fields).to_json().encode()  # type: ignore[arg-type]
        self._reader.expect(request_id, utterance=True, marks=bool(fields.get("marks")))
        return request_id, frame

    @staticmethod
    def append(request_id: str, text: str) -> bytes:
        """Build an ``append`` message: ``text`` joins the utterance (§15.1). Any split is allowed (§15.2)."""
        return Append(request_id=request_id, text=text).to_json().encode()

    @staticmethod
    def flush(request_id: str, text: str | None = None) -> bytes:
        """Build a ``flush`` message: ``text`` (if any) joins, then everything held is spoken (§15.3)."""
        return Flush(request_id=request_id, text=text).to_json().encode()

    @staticmethod
    def end(request_id: str, text: str | None = None) -> bytes:
        """Build an ``end`` message: ``text`` (if any) joins, then the utterance is closed (§15.4)."""
        return End(request_id=request_id, text=text).to_json().encode()

    def expect(self, request_id: str | None = None, *, marks: bool = False) -> None:
        """Announce a request sent by other means; ``None`` matches whatever id the server assigns.
        ``marks``: it asked for marks (§5.5)."""
        self._reader.expect(request_id, marks=marks)

    @staticmethod
    def cancel(request_id: str | None = None) -> bytes:
        """Build a ``cancel`` frame (§4.2); without an id it cancels every queued and active request."""
        return Cancel(request_id=request_id).to_json().encode()

    @staticmethod
    def lexicon(entries: dict[str, object], request_id: str | None = None) -> bytes:
        """A ``lexicon`` message (§4.5): the session's pronunciations from now on; ``{}`` clears them.

        ``entries`` map a word to phonemes (a string) or to ``{"phonemes": …}`` / ``{"respell": …}``
        (§14.3). No frame answers it; a bad lexicon is refused with ``invalid_lexicon``.
        """
        return SessionLexicon(entries, request_id).to_json().encode()  # type: ignore[arg-type]

    @staticmethod
    def close() -> bytes:
        """Build a ``close`` frame (§4.3)."""
        return Close().to_json().encode()

    def describe(self, request_id: str | None = None) -> bytes:
        """Build a ``describe`` frame (§4.4) and expect one ``capabilities`` frame in answer.

        A version 1 server refuses it with ``unknown_type`` instead (§1.7); that error also settles the
        expectation.
        """
        self._reader.expect_describe(request_id)
        return Describe(request_id=request_id).to_json().encode()

    @property
    def outstanding(self) -> list[str | None]:
        """Requests still awaiting ``synthesis_complete``, in answer order (``None``: id not yet known)."""
        return self._reader.outstanding

    @property
    def active(self) -> str | None:
        """The request whose bracket is open, if any."""
        return self._reader.active

    # -- receiving ------------------------------------------------------------------------------------------

    def receive_part(self, data: bytes, complete: bool = True) -> list[ClientEvent]:
        """Feed one PayloadPart (§12): parts are joined until ``CompletionState=COMPLETE``."""
        self._parts += data
        if not complete:
            return []
        message, self._parts = bytes(self._parts), bytearray()
        return self.receive_message(message)

    def receive_message(self, data: bytes | str) -> list[ClientEvent]:
        """Classify and check one whole server message (§3.4) and return its events.

        Raises:
            ProtocolViolation: the message breaks a MUST of §3, §5 or §6 (the first one seen).
        """
        state = self._reader.snapshot()
        outcome = self._reader.receive_message(data)
        for violation in outcome.violations:
            if violation.rule.level == "MUST":
                self._reader.restore(state)  # a refused message changes nothing
                raise ProtocolViolation(violation.message, violation.section, violation.rule.name)
        # The reader's events are the client's: only what a client ignores is left out (a control frame of
        # an unknown type, §1.7; audio that completes no whole sample yet, §3.4).
        return [
            event
            for event in outcome.events
            if not isinstance(event, ControlIgnored)
            and not (isinstance(event, AudioReceived) and not (event.pcm and event.request_id is not None))
        ]

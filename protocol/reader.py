"""What a client sees of a server's output, read leniently: brackets, audio, and every rule broken.

The client half's rules (PROTOCOL.md §3.2–§3.4, §5, §6) live in one sans-I/O object, :class:`StreamReader`.
Feed it each whole server message (one WebSocket message, or the PayloadParts of one message up to
``CompletionState=COMPLETE``); it returns what the message means (:class:`Outcome`: events) and the rules
it breaks (:class:`Violation`, each naming its :class:`OutputRule` and section). The events are those of
:mod:`protocol.server_output`, the one vocabulary for what a server sends. It never raises on anything a
server sends and carries on wherever the wire still allows it: a ``synthesis_start`` missing
``sample_rate`` still opens a bracket, an audio frame of odd length is still audio, an ``error`` frame
with only ``message`` is still an error (its code read from the message, as the AWS sample's clients do).

Two clients stand on it: :class:`protocol.client_session.ClientSession`, strict, raises the first MUST it
sees broken (for client authors); the conformance suite's observer records every violation and goes on.

Matching brackets to requests: requests are answered in the order they were sent (§6.2), so the n-th
``synthesis_start`` answers the n-th expected request. A bracket is known by its *key*: the client's own
id, or, for a request sent without one, the id the server assigned (made unique if a server assigns the
same id twice); the events carry it as ``request_id``. A ``synthesis_start`` naming an id the client did
not send at that position is a violation, and the bracket still answers the request whose turn it is.
A second ``synthesis_start`` of the open bracket's own request is a violation (§6.1: exactly one) and opens
nothing: the audio and the ``synthesis_complete`` that follow still answer that request.
"""

from __future__ import annotations

import copy
import enum
import re
from collections import deque
from dataclasses import dataclass, field, replace

from protocol.encodings import ENCODINGS
from protocol.errors import ErrorCode
from protocol.frames import Audio, classify
from protocol.limits import AUDIO_FRAME_HARD_LIMIT
from protocol.messages import ControlReading, read_server_control
from protocol.pcm import SampleAligner
from protocol.server_output import (
    AudioReceived,
    CapabilitiesReceived,
    ControlIgnored,
    ErrorReceived,
    MarksReceived,
    ReaderEvent,
    SynthesisCompleted,
    SynthesisStarted,
)

__all__ = [
    "BINARY",
    "TEXT",
    "Outcome",
    "OutputRule",
    "StreamReader",
    "Violation",
    "code_named_in",
]

BINARY = "BINARY"
"""Frame type of a BINARY WebSocket message (SageMaker ``DataType``)."""
TEXT = "UTF8"
"""Frame type of a TEXT WebSocket message (SageMaker ``DataType`` ``UTF8``)."""


class OutputRule(enum.Enum):
    """A MUST of a server's output that a client can check on the wire.

    Each value is ``(section, level, statement)``; :attr:`section` cites PROTOCOL.md.
    """

    CONTROL_IS_TEXT = ("§3.2", "MUST", "every server control frame is a TEXT message")
    CONTROL_HAS_TYPE = ("§3.2", "MUST", "every server control frame has a string member type")
    CONTROL_CEILING = ("§3.2", "MUST", "a control frame is at most 1 MiB")
    AUDIO_IS_BINARY = ("§3.3.1", "MUST", "an audio frame is a BINARY message")
    AUDIO_WHOLE_SAMPLES = (
        "§3.3.1",
        "MUST",
        "an audio frame is whole samples, at least one (an even length for pcm_s16le)",
    )
    AUDIO_CEILING = ("§3.3.1", "MUST", "an audio frame is never longer than 1 MiB")
    AUDIO_NOT_JSON = ("§3.3.2", "MUST", "no audio frame is a JSON object")
    START_VALID = ("§5.1", "MUST", "synthesis_start validates against its schema")
    START_NAMES_REQUEST = ("§5.1", "MUST", "synthesis_start carries the client's id, or the one assigned")
    COMPLETE_VALID = ("§5.3", "MUST", "synthesis_complete validates against its schema")
    COMPLETE_NAMES_REQUEST = ("§5.3", "MUST", "synthesis_complete carries the id of its synthesis_start")
    AUDIO_BYTES = ("§5.3", "MUST", "audio_bytes is the sum of the lengths of the request's audio frames")
    ERROR_VALID = ("§5.4", "MUST", "an error frame validates against its schema")
    CAPABILITIES_VALID = ("§4.4", "MUST", "a capabilities frame validates against its schema")
    CAPABILITIES_ANSWER_DESCRIBE = ("§4.4", "MUST", "a capabilities frame answers a describe")
    ONE_BRACKET = ("§6.1", "MUST", "one synthesis_start and one synthesis_complete per accepted request")
    AUDIO_IN_BRACKET = ("§6.1", "MUST", "audio frames appear only inside a bracket")
    IN_ORDER = ("§6.2", "MUST", "brackets follow the order of acceptance and never overlap")
    REFUSAL_NAMES_MESSAGE = (
        "§15.6",
        "MUST",
        "a refusal naming an utterance says which message it refuses (message_type)",
    )
    MARKS_VALID = ("§5.5", "MUST", "a marks frame validates against its schema")
    MARKS_ASKED = ("§5.5", "MUST", "marks only for a request that asked for them, inside its bracket")
    MARKS_IN_ORDER = (
        "§5.5",
        "MUST",
        "marks frames count segments from 0 and precede the audio of later segments",
    )
    MARKS_SPANS = ("§5.5", "MUST", "a segment's span starts no earlier than the previous segment's ends")
    MARKS_SENT = ("§5.5", "MUST", "a request that asked for marks gets one before its audio is all sent")

    @property
    def section(self) -> str:
        """The PROTOCOL.md section, e.g. ``"§6.2"``."""
        return self.value[0]

    @property
    def level(self) -> str:
        """``"MUST"`` or ``"SHOULD"``."""
        return self.value[1]

    @property
    def statement(self) -> str:
        """The rule in a few words."""
        return self.value[2]


@dataclass(frozen=True, slots=True)
class Violation:
    """A rule the message broke, with what was seen (for people)."""

    rule: OutputRule
    message: str

    @property
    def section(self) -> str:
        """The rule's PROTOCOL.md section."""
        return self.rule.section


@dataclass
class Outcome:
    """What one message meant (``events``, in order) and the rules it broke (``violations``)."""

    events: list[ReaderEvent] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    def broke(self, rule: OutputRule, message: str) -> None:
        """Record a violation of ``rule``."""
        self.violations.append(Violation(rule, message))


_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
_SERVER_TYPES = frozenset({"synthesis_start", "synthesis_complete", "error", "capabilities", "marks"})
_VALIDITY = {
    "synthesis_start": OutputRule.START_VALID,
    "synthesis_complete": OutputRule.COMPLETE_VALID,
    "error": OutputRule.ERROR_VALID,
    "capabilities": OutputRule.CAPABILITIES_VALID,
    "marks": OutputRule.MARKS_VALID,
}
MARKS_TOLERANCE_S = 0.01
"""Slack when a ``marks`` frame's end is compared with the audio already received: resampling the
request's audio shifts it by a few samples (§5.5)."""
# Error codes that reject the message they answer: the named request never gets a bracket (§6.3).
_REJECTING = frozenset(ErrorCode) - {
    ErrorCode.INTERNAL_ERROR,
    ErrorCode.UNKNOWN_REQUEST,
    ErrorCode.UTTERANCE_TIMEOUT,
}
_SAMPLE_WIDTHS = {name: kind.sample_width for name, kind in ENCODINGS.items()}

# A refusal of one of these leaves the utterance it names as it was (§15.6).
_FRAGMENT_MESSAGES = frozenset({"append", "flush", "end"})


def code_named_in(message: object) -> str | None:
    """The registry code (§9.1) that ``message`` names, as a client matching by substring reads it.

    The earliest occurrence wins (the convention is a ``"<code>: "`` prefix, §5.4); ``None`` when
    ``message`` is not a string or names no code.
    """
    if not isinstance(message, str):
        return None
    found = [(message.find(code.value), -len(code.value), code.value) for code in ErrorCode]
    hits = sorted(hit for hit in found if hit[0] >= 0)
    return hits[0][2] if hits else None


def _show(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class _Bracket:
    key: str
    wire_id: str | None
    received: int = 0
    aligner: SampleAligner = field(default_factory=SampleAligner)
    sample_width: int = 2
    """Bytes per sample of the bracket's encoding (§3.3.1); 2 when ``synthesis_start`` names none known."""
    ambiguous: bool = False
    """Another bracket overlapped this one: which audio belonged to it is unknown."""
    sample_rate: int | None = None
    asked_marks: bool = False
    marks: int = 0
    marked_to_s: float = 0.0


class StreamReader:
    """The lenient reader of one session's server output (see the module docstring).

    Args:
        check_frames: check the per-frame audio rules of §3.3.1 (even length, 1 MiB ceiling) on each
            message. Leave on for whole WebSocket messages; turn off behind transports that may re-split
            messages at arbitrary bytes, where only the reassembled audio is checked (§3.4).
    """

    def __init__(self, *, check_frames: bool = True) -> None:
        self.check_frames = check_frames
        self._expected: deque[str | None] = deque()
        self._open: dict[str, _Bracket] = {}
        self._active: str | None = None
        self._assigned: set[str] = set()
        self._utterances: set[str] = set()
        self._describes: list[str | None] = []  # the request_id of each describe not yet answered
        self._marked: set[str] = set()  # requests that asked for marks (§5.5), until answered

    # -- requests ------------------------------------------------------------------------------------------

    def expect(self, request_id: str | None = None, *, utterance: bool = False, marks: bool = False) -> None:
        """Announce a request sent, in sending order; ``None`` when the server assigns its id (§4.1).

        ``utterance``: it is an utterance (§15), answered by one bracket like a request. ``marks``: it
        asked for marks (§5.5).
        """
        self._expected.append(request_id)
        if utterance and request_id is not None:
            self._utterances.add(request_id)
        if request_id is not None:
            if marks:
                self._marked.add(request_id)
            else:
                self._marked.discard(request_id)  # an id used again, this time without marks

    def expect_describe(self, request_id: str | None = None) -> None:
        """Announce a ``describe`` sent with ``request_id``: a ``capabilities`` frame answers it (§4.4), or
        from a server without ``describe`` an ``unknown_type`` error naming the same id (§1.7, §9.2)."""
        self._describes.append(request_id)

    @property
    def outstanding(self) -> list[str | None]:
        """Requests still awaiting ``synthesis_complete``, in answer order (``None``: id not yet known)."""
        return [*self._open, *self._expected]

    @property
    def active(self) -> str | None:
        """The key of the request whose bracket is open (the latest one, if brackets overlap)."""
        return self._active

    def snapshot(self) -> object:
        """The reader's state, for :meth:`restore` (a strict client undoes a message it refuses)."""
        brackets = {key: replace(b, aligner=copy.copy(b.aligner)) for key, b in self._open.items()}
        utterances = set(self._utterances)
        marked = set(self._marked)
        return (
            deque(self._expected),
            brackets,
            self._active,
            set(self._assigned),
            utterances,
            list(self._describes),
            marked,
        )

    def restore(self, state: object) -> None:
        """Go back to a state :meth:`snapshot` returned."""
        expected, brackets, active, assigned, utterances, describes, marked = state  # type: ignore[misc]
        self._expected, self._open, self._active = deque(expected), dict(brackets), active
        self._assigned, self._utterances, self._describes = set(assigned), set(utterances), list(describes)
        self._marked = set(marked)

    # -- messages ------------------------------------------------------------------------------------------

    def receive_message(self, data: bytes | str, data_type: str | None = None) -> Outcome:
        """Read one whole server message (§3.4) and return its events and the rules it broke.

        Args:
            data: the message; a ``str`` is encoded as UTF-8.
            data_type: :data:`TEXT` or :data:`BINARY` when the transport shows the container's frame type
                faithfully (a WebSocket; the simulator); ``None`` when it does not (behind SageMaker), which
                turns the frame-type rules off.
        """
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        out = Outcome()
        kind = classify(data)
        if isinstance(kind, Audio):
            if data_type == TEXT:
                out.broke(
                    OutputRule.AUDIO_IS_BINARY,
                    f"a TEXT message of {len(data)} bytes is not a JSON object ({data[:40]!r}): audio frames "
                    "are BINARY messages",
                )
            self._audio(data, out)
            return out
        obj = kind.obj
        kind_name = obj.get("type")
        known = isinstance(kind_name, str) and kind_name in _SERVER_TYPES
        if not known and (
            data_type == BINARY or (data_type is None and self._active is not None and "type" not in obj)
        ):
            # A BINARY message (or, where frame types are not shown, a type-less object inside a bracket)
            # that is a JSON object: audio a client takes for a control frame.
            out.broke(
                OutputRule.AUDIO_NOT_JSON,
                f"an audio frame of {len(data)} bytes is the JSON object {data[:40]!r}: a client takes it "
                "for a control frame",
            )
            self._audio(data, out, checked=False)
            return out
        if data_type == BINARY:
            out.broke(
                OutputRule.CONTROL_IS_TEXT, f"the {kind_name} control frame arrived in a BINARY message"
            )
        if len(data) > AUDIO_FRAME_HARD_LIMIT:
            out.broke(OutputRule.CONTROL_CEILING, f"a control frame of {len(data)} bytes (over 1 MiB)")
        reading = read_server_control(obj)
        if not reading.known:
            if not isinstance(kind_name, str):
                out.broke(
                    OutputRule.CONTROL_HAS_TYPE, f"a control frame without a string type: {data[:80]!r}"
                )
            out.events.append(ControlIgnored(reading))
            return out
        if reading.problems:
            rule = _VALIDITY[reading.kind or ""]
            out.broke(rule, f"{reading.kind} breaks its schema: " + "; ".join(reading.problems[:4]))
        if reading.kind == "synthesis_start":
            self._start(reading, out)
        elif reading.kind == "synthesis_complete":
            self._complete(reading, out)
        elif reading.kind == "capabilities":
            if self._describes:
                named = reading.string("request_id")
                self._describes.remove(named if named in self._describes else self._describes[0])
            else:
                out.broke(
                    OutputRule.CAPABILITIES_ANSWER_DESCRIBE,
                    "a capabilities frame without a describe to answer",
                )
            out.events.append(CapabilitiesReceived(reading))
        elif reading.kind == "marks":
            self._marks(reading, out)
        else:
            self._error(reading, out)
        return out

    def _fresh(self, wire_id: str | None, fallback: str) -> str:
        base = wire_id or fallback
        key, n = base, 1
        while key in self._assigned or key in self._open:
            n += 1
            key = f"{base}#{n}"
        self._assigned.add(key)
        return key

    def _start(self, reading: ControlReading, out: Outcome) -> None:
        wire_id = reading.string("request_id")
        overlapped = self._open.get(self._active) if self._active is not None else None
        if overlapped is not None and wire_id is not None and wire_id in (overlapped.wire_id, overlapped.key):
            # The open bracket's own start again: a second start for one request, not a new bracket, so
            # its audio and synthesis_complete still answer the request that the client is waiting for.
            out.broke(
                OutputRule.ONE_BRACKET, f"a second synthesis_start of {wire_id!r} while its bracket is open"
            )
            return
        if overlapped is not None:
            out.broke(
                OutputRule.IN_ORDER,
                f"synthesis_start of {_show(wire_id)} while {overlapped.key!r} is still active",
            )
            overlapped.ambiguous = True
        if not self._expected:
            out.broke(
                OutputRule.ONE_BRACKET, f"synthesis_start of {_show(wire_id)}, which was never requested"
            )
            key = self._fresh(wire_id, "unrequested")
        else:
            head = self._expected[0]
            if head is None:
                key = self._fresh(wire_id, "assigned")
                self._expected.popleft()
            elif wire_id == head or wire_id is None:
                key = head  # a missing id is the schema's finding; the bracket is the next one's
                self._expected.popleft()
            elif wire_id in self._expected:
                out.broke(
                    OutputRule.IN_ORDER, f"synthesis_start of {wire_id!r} (out of order); {head!r} is next"
                )
                self._expected.remove(wire_id)
                key = wire_id
            else:
                out.broke(
                    OutputRule.START_NAMES_REQUEST,
                    f"synthesis_start names {_show(wire_id)}, which was never requested; {head!r} is next",
                )
                key = head
                self._expected.popleft()
        if key in self._open:  # the same id answered again while its first bracket is open
            key = self._fresh(key, key)
        width = _SAMPLE_WIDTHS.get(reading.string("encoding") or "", 2)
        bracket = _Bracket(
            key,
            wire_id,
            aligner=SampleAligner(width),
            sample_width=width,
            ambiguous=overlapped is not None,
            sample_rate=reading.integer("sample_rate"),
            asked_marks=key in self._marked,
        )
        self._open[key] = bracket
        self._active = key
        out.events.append(SynthesisStarted(key, reading))

    def _audio(self, data: bytes, out: Outcome, *, checked: bool = True) -> None:
        bracket = self._open.get(self._active) if self._active is not None else None
        if self.check_frames and checked:
            width = bracket.sample_width if bracket is not None else 2
            if not data or len(data) % width:
                out.broke(
                    OutputRule.AUDIO_WHOLE_SAMPLES,
                    f"an audio frame of {len(data)} bytes is not whole samples ({width} bytes each)",
                )
            if len(data) > AUDIO_FRAME_HARD_LIMIT:
                out.broke(OutputRule.AUDIO_CEILING, f"an audio frame of {len(data)} bytes exceeds 1 MiB")
        if bracket is None:
            out.broke(OutputRule.AUDIO_IN_BRACKET, f"{len(data)} audio bytes outside any synthesis bracket")
            out.events.append(AudioReceived(None, data, b""))
            return
        bracket.received += len(data)
        out.events.append(AudioReceived(bracket.key, data, bracket.aligner.feed(data)))

    def _complete(self, reading: ControlReading, out: Outcome) -> None:
        wire_id = reading.string("request_id")
        bracket = self._open.get(self._active) if self._active is not None else None
        if bracket is None or (wire_id is not None and wire_id not in (bracket.wire_id, bracket.key)):
            named = next((b for b in self._open.values() if wire_id in (b.wire_id, b.key)), None)
            if named is not None and (named.ambiguous or bracket is None):
                bracket = named  # brackets overlapped (reported at the overlap)
            elif bracket is None:
                out.broke(
                    OutputRule.ONE_BRACKET, f"synthesis_complete of {_show(wire_id)} but no bracket is open"
                )
                out.events.append(SynthesisCompleted(None, reading, 0))
                return
            else:
                out.broke(
                    OutputRule.COMPLETE_NAMES_REQUEST,
                    f"synthesis_complete of {_show(wire_id)} but the open bracket is "
                    f"{bracket.wire_id or bracket.key!r}",
                )
        if bracket.aligner.pending:
            out.broke(OutputRule.AUDIO_WHOLE_SAMPLES, f"request {bracket.key!r} ended on half a sample")
        declared = reading.integer("audio_bytes")
        if declared is not None and declared != bracket.received and not bracket.ambiguous:
            out.broke(
                OutputRule.AUDIO_BYTES,
                f"synthesis_complete of {bracket.key!r} says audio_bytes={declared} but {bracket.received} "
                "arrived",
            )
        if bracket.asked_marks and bracket.received and not bracket.marks:
            out.broke(
                OutputRule.MARKS_SENT,
                f"request {bracket.key!r} asked for marks and got {bracket.received} audio bytes without one",
            )
        del self._open[bracket.key]
        self._utterances.discard(bracket.key)
        self._marked.discard(bracket.key)
        if self._active == bracket.key:
            self._active = next(reversed(self._open), None)
        out.events.append(SynthesisCompleted(bracket.key, reading, bracket.received))

    def _marks(self, reading: ControlReading, out: Outcome) -> None:
        """A ``marks`` frame (§5.5): inside the bracket of a request that asked, in order, in time."""
        wire_id = reading.string("request_id")
        bracket = self._open.get(self._active) if self._active is not None else None
        if bracket is None or (wire_id is not None and wire_id not in (bracket.wire_id, bracket.key)):
            open_id = None if bracket is None else bracket.wire_id or bracket.key
            out.broke(
                OutputRule.MARKS_ASKED, f"marks for {_show(wire_id)} outside its bracket (open: {open_id!r})"
            )
            out.events.append(MarksReceived(None, reading))
            return
        if not bracket.asked_marks:
            out.broke(OutputRule.MARKS_ASKED, f"marks for {bracket.key!r}, which did not ask for them")
        segment = reading.integer("segment")
        start_s, end_s = reading.obj.get("start_s"), reading.obj.get("end_s")
        if segment is not None and segment != bracket.marks:
            out.broke(
                OutputRule.MARKS_IN_ORDER,
                f"marks of segment {segment} of {bracket.key!r}; segment {bracket.marks} is next",
            )
        if isinstance(start_s, int | float) and start_s < bracket.marked_to_s:
            out.broke(
                OutputRule.MARKS_SPANS,
                f"segment {segment} of {bracket.key!r} starts at {start_s} s, before the previous one ends "
                f"({bracket.marked_to_s} s)",
            )
        if isinstance(end_s, int | float) and not isinstance(end_s, bool):
            if bracket.sample_rate:
                received_s = bracket.received / bracket.sample_width / bracket.sample_rate
                if received_s > end_s + MARKS_TOLERANCE_S and not bracket.ambiguous:
                    out.broke(
                        OutputRule.MARKS_IN_ORDER,
                        f"marks of segment {segment} of {bracket.key!r} (ending at {end_s} s) came after "
                        f"{received_s:.3f} s of audio: after audio of a later segment",
                    )
            bracket.marked_to_s = max(bracket.marked_to_s, float(end_s))
        bracket.marks += 1
        out.events.append(MarksReceived(bracket.key, reading))

    def _error(self, reading: ControlReading, out: Outcome) -> None:
        code = reading.string("code")
        if code is None or not _CODE.fullmatch(code):
            code = code_named_in(reading.obj.get("message"))
        request_id = reading.string("request_id")
        if code == ErrorCode.UNKNOWN_TYPE and request_id in self._describes:
            self._describes.remove(request_id)  # describe is not offered (§1.7)
        # unknown_type is how a server without utterances refuses the opener (§15.1): no bracket.
        if request_id in self._utterances and code in _REJECTING and code != ErrorCode.UNKNOWN_TYPE:
            message_type = reading.obj.get("message_type")
            if message_type is None:
                out.broke(
                    OutputRule.REFUSAL_NAMES_MESSAGE,
                    f"{code} names utterance {request_id!r} without message_type: was the utterance or one "
                    "of its fragments refused?",
                )
            if message_type is None or message_type in _FRAGMENT_MESSAGES:
                out.events.append(ErrorReceived(reading, code))  # the utterance goes on (§15.6)
                return
        if code in _REJECTING and request_id is not None:
            # The named request was refused and gets no bracket (§6.3). For duplicate_request_id the
            # refused one is the later copy: the first is still owed its answer.
            matches = [i for i, expected in enumerate(self._expected) if expected == request_id]
            if code == ErrorCode.DUPLICATE_REQUEST_ID:
                if matches and len(matches) + (request_id in self._open) > 1:
                    del self._expected[matches[-1]]
            elif matches and request_id not in self._open:
                del self._expected[matches[0]]
                self._utterances.discard(request_id)
        out.events.append(ErrorReceived(reading, code))

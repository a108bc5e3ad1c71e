"""The client's messages of PROTOCOL.md §4 and §15, each with its parse beside its serialisation.

Every message is a frozen dataclass whose ``to_dict``/``to_json`` write it and whose ``parse`` classmethod
checks a decoded JSON object's members (:mod:`protocol.messages.fields`, the order of §9.2) and builds it.
:func:`parse_client_message` takes one whole WebSocket message: it applies the JSON-text rules of §3.1
(:mod:`protocol.messages.jsontext`), picks the message by its ``type`` and turns every refusal into a
:class:`~protocol.errors.ProtocolError` carrying the most specific registry code.

Session rules (queue_full, duplicate_request_id, unknown_request, the pairing of surrogate halves across
an utterance's fragments) are not checked here: they need the session's state and live in
:mod:`protocol.server_session`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from protocol.encodings import DEFAULT_ENCODING
from protocol.errors import ErrorCode, ProtocolError
from protocol.lexicon import LexiconEntry, lexicon_json
from protocol.limits import Limits
from protocol.messages.constants import DEFAULT_SAMPLE_RATE, DEFAULT_SPEED, DEFAULT_VOICE, UTTERANCE_TYPES
from protocol.messages.fields import (
    EXPECTED,
    FRAGMENT_ORDER,
    REQUEST_ORDER,
    ParseOptions,
    check_fields,
    check_lexicon,
    timestamp,
)
from protocol.messages.jsontext import compact_json, decode_json_object, show, valid_id

__all__ = [
    "Append",
    "Cancel",
    "ClientMessage",
    "Close",
    "Describe",
    "End",
    "Flush",
    "SessionLexicon",
    "SynthesisRequest",
    "Utterance",
    "UtteranceMessage",
    "parse_client_message",
]


@dataclass(frozen=True, slots=True)
class SynthesisRequest:
    """A synthesis request (PROTOCOL.md §4.1).

    The constructor does not validate: tests and conformance probes build invalid requests on purpose.
    :func:`parse_client_message` is the validator.

    Attributes:
        text: the text to speak.
        voice: voice name.
        speed: speaking-rate factor, 0.5–2.0.
        sample_rate: output rate in Hz, one of :data:`SAMPLE_RATES`.
        request_id: the client's id, or ``None`` for the server to assign one.
        request_timestamp: when the client issued the request, Unix epoch seconds (RFC 3339 strings
            are converted on parsing), or ``None``.
        marks: ask for a ``marks`` frame before each segment's audio (§5.5, version 1.1).
        encoding: the audio frame encoding (§3.3.1, :data:`protocol.encodings.ENCODINGS`).
        lexicon: the request's pronunciation lexicon, word → entry (§4.1, §14.3), or ``None``; once the
            session accepted the request, the session's lexicon (§4.5) under the request's entries.
    """

    text: str
    voice: str = DEFAULT_VOICE
    speed: float = DEFAULT_SPEED
    sample_rate: int = DEFAULT_SAMPLE_RATE
    request_id: str | None = None
    request_timestamp: float | None = None
    marks: bool = False
    encoding: str = DEFAULT_ENCODING
    lexicon: dict[str, LexiconEntry] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §4.1, without ``type`` (as the AWS sample's clients send it); ``encoding``
        only when it is not the default, so a default request is a version 1 request."""
        obj: dict[str, Any] = {
            "text": self.text,
            "voice": self.voice,
            "speed": self.speed,
            "sample_rate": self.sample_rate,
        }
        if self.encoding != DEFAULT_ENCODING:
            obj["encoding"] = self.encoding
        if self.request_id is not None:
            obj["request_id"] = self.request_id
        if self.request_timestamp is not None:
            obj["request_timestamp"] = self.request_timestamp
        if self.marks:
            obj["marks"] = True
        if self.lexicon is not None:
            obj["lexicon"] = lexicon_json(self.lexicon)
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`; send it UTF-8 encoded, as TEXT or BINARY (§3.1)."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> SynthesisRequest:
        """Check a decoded request's members in the order of §9.2 (§4.1) and build it.

        ``obj`` is changed in place (a blend's canonical form, the lexicon's entries).

        Raises:
            ProtocolError: the first member that fails.
        """
        check_fields(obj, schema="synthesis_request", order=REQUEST_ORDER, options=options)
        if options.lexicon:
            check_lexicon(obj, options.limits)
        return cls.from_checked(obj)

    @classmethod
    def from_checked(cls, obj: dict[str, Any]) -> SynthesisRequest:
        """The request of an object whose members passed the field rules; absent and null take defaults."""

        def given(name: str, default: Any) -> Any:
            value = obj.get(name)
            return default if value is None else value

        stamp = obj.get("request_timestamp")
        return cls(
            text=obj["text"],
            voice=given("voice", DEFAULT_VOICE),
            speed=float(given("speed", DEFAULT_SPEED)),
            sample_rate=int(given("sample_rate", DEFAULT_SAMPLE_RATE)),
            request_id=obj.get("request_id"),
            request_timestamp=None if stamp is None else timestamp(stamp),
            marks=obj.get("marks") is True,
            encoding=given("encoding", DEFAULT_ENCODING),
            lexicon=obj.get("lexicon"),
        )


@dataclass(frozen=True, slots=True)
class SessionLexicon:
    """Set the session's pronunciation lexicon, for every request accepted after it (PROTOCOL.md §4.5).

    Attributes:
        lexicon: word → entry; ``{}`` clears the session's lexicon.
        request_id: an id the error frame of a refusal names, or ``None``.
    """

    lexicon: dict[str, LexiconEntry]
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "lexicon", "lexicon": {...}}`` plus ``request_id`` when set."""
        obj: dict[str, Any] = {"type": "lexicon", "lexicon": lexicon_json(self.lexicon)}
        if self.request_id is not None:
            obj["request_id"] = self.request_id
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> SessionLexicon:
        """Check a decoded ``lexicon`` message (§4.5, §14.3) and build it.

        Raises:
            ProtocolError: ``invalid_field`` or ``invalid_lexicon``, naming the entry at fault.
        """
        check_fields(obj, schema="lexicon", order=("request_id", "lexicon"), options=options)
        check_lexicon(obj, options.limits, inline=False)
        return cls(lexicon=obj["lexicon"], request_id=obj.get("request_id"))


class _OptionalId:
    """The shared form of ``cancel`` and ``describe`` (§4.2, §4.4): a control message whose one member is an
    optional ``request_id``.

    A subclass is a frozen dataclass with ``request_id: str | None = None`` that sets :attr:`type`.
    """

    __slots__ = ()

    type: ClassVar[str]
    """The message's ``type`` member, also the name of its schema."""
    request_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ...}`` plus ``request_id`` when set."""
        obj: dict[str, Any] = {"type": self.type}
        if self.request_id is not None:
            obj["request_id"] = self.request_id
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`; a ``describe`` is also a valid ``POST /invocations`` body
        (§11.1)."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> Self:
        """Check a decoded message of this type against its schema and build it.

        Raises:
            ProtocolError: a bad ``request_id`` (§9.2), or a member the schema does not know.
        """
        check_fields(obj, schema=cls.type, order=("request_id",), options=options)
        return cls(request_id=obj.get("request_id"))  # type: ignore[call-arg]  # a dataclass's fields


@dataclass(frozen=True, slots=True)
class Cancel(_OptionalId):
    """Cancel one queued or active request, or all of them when ``request_id`` is ``None`` (§4.2)."""

    type: ClassVar[str] = "cancel"

    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Close:
    """Finish every accepted request, then close the WebSocket with 1000 (§4.3, §7.1)."""

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "close"}``."""
        return {"type": "close"}

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> Close:
        """Check a decoded ``close`` message (§4.3) against its schema and build it."""
        check_fields(obj, schema="close", order=(), options=options)
        return cls()


@dataclass(frozen=True, slots=True)
class Utterance:
    """Open an utterance: a request whose text follows in fragments (PROTOCOL.md §15.1).

    Like :class:`SynthesisRequest`, the constructor does not validate.

    Attributes:
        request_id: the utterance's id (required: every utterance message names it).
        text: the first fragment, or ``None``. May end with a high surrogate half (§15.2).
        voice, speed, sample_rate, request_timestamp, marks: as in :class:`SynthesisRequest`.
        voice, speed, sample_rate, request_timestamp, encoding: as in :class:`SynthesisRequest`.
    """

    request_id: str
    text: str | None = None
    voice: str = DEFAULT_VOICE
    speed: float = DEFAULT_SPEED
    sample_rate: int = DEFAULT_SAMPLE_RATE
    request_timestamp: float | None = None
    marks: bool = False
    encoding: str = DEFAULT_ENCODING
    lexicon: dict[str, LexiconEntry] | None = None

    def to_request(self) -> SynthesisRequest:
        """The request this utterance is answered as (§15.4), with the text sent so far."""
        return SynthesisRequest(
            text=self.text or "",
            voice=self.voice,
            speed=self.speed,
            sample_rate=self.sample_rate,
            request_id=self.request_id,
            request_timestamp=self.request_timestamp,
            marks=self.marks,
            encoding=self.encoding,
            lexicon=self.lexicon,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "utterance", "request_id", "voice", "speed", "sample_rate"}`` plus ``text``,
        ``request_timestamp`` and ``marks`` when set."""
        obj: dict[str, Any] = {
            "type": "utterance",
            "request_id": self.request_id,
            "voice": self.voice,
            "speed": self.speed,
            "sample_rate": self.sample_rate,
        }
        if self.text is not None:
            obj["text"] = self.text
        if self.request_timestamp is not None:
            obj["request_timestamp"] = self.request_timestamp
        if self.marks:
            obj["marks"] = True
        if self.encoding != DEFAULT_ENCODING:
            obj["encoding"] = self.encoding
        if self.lexicon is not None:
            obj["lexicon"] = lexicon_json(self.lexicon)
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict` (surrogate halves escaped, §15.2)."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> Utterance:
        """Check a decoded ``utterance`` message in the order of §9.2 (§15.1, §15.6) and build it.

        Its ``text`` is a fragment: it may be empty or whitespace, and carry a high surrogate half at its
        end (§15.2); it holds no inline pronunciations.

        Raises:
            ProtocolError: the first member that fails.
        """
        check_fields(obj, schema="utterance", order=REQUEST_ORDER, options=options, fragment=True)
        text = obj.get("text")
        if options.lexicon:
            check_lexicon(obj, options.limits, inline=False)  # text comes in fragments: no inline forms
        request = SynthesisRequest.from_checked({**obj, "text": text or ""})
        return cls(
            request_id=obj["request_id"],
            text=text,
            voice=request.voice,
            speed=request.speed,
            sample_rate=request.sample_rate,
            request_timestamp=request.request_timestamp,
            marks=request.marks,
            encoding=request.encoding,
            lexicon=request.lexicon,
        )


class _Fragment:
    """The shared form of ``append``, ``flush`` and ``end`` (§15.1): a fragment of an open utterance's text.

    A subclass is a frozen dataclass with ``request_id`` and ``text`` that sets :attr:`type`. Its ``text``
    may be empty or whitespace and carry the surrogate halves of §15.2 at its edges; the session pairs them.
    """

    __slots__ = ()

    type: ClassVar[str]
    """The message's ``type`` member, also the name of its schema."""
    request_id: str
    text: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "request_id"}`` plus ``text`` when set (always for ``append``)."""
        obj: dict[str, Any] = {"type": self.type, "request_id": self.request_id}
        if self.text is not None:
            obj["text"] = self.text
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict` (surrogate halves escaped, §15.2)."""
        return compact_json(self.to_dict())

    @classmethod
    def parse(cls, obj: dict[str, Any], options: ParseOptions) -> Self:
        """Check a decoded message of this type in the order of §15.6 and build it.

        Raises:
            ProtocolError: the first member that fails (``request_id``, then ``text``).
        """
        check_fields(obj, schema=cls.type, order=FRAGMENT_ORDER, options=options, fragment=True)
        return cls(obj["request_id"], obj.get("text"))  # type: ignore[call-arg]  # a dataclass's fields


@dataclass(frozen=True, slots=True)
class Append(_Fragment):
    """Append ``text`` to the open utterance ``request_id`` (§15.1). ``text`` may be ``""``."""

    type: ClassVar[str] = "append"

    request_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Flush(_Fragment):
    """Append ``text`` (if any), then speak everything the utterance holds now (§15.3)."""

    type: ClassVar[str] = "flush"

    request_id: str
    text: str | None = None


@dataclass(frozen=True, slots=True)
class End(_Fragment):
    """Append ``text`` (if any), then close the utterance to new text: the rest is spoken (§15.4)."""

    type: ClassVar[str] = "end"

    request_id: str
    text: str | None = None


UtteranceMessage = Utterance | Append | Flush | End


@dataclass(frozen=True, slots=True)
class Describe(_OptionalId):
    """Ask the server what it offers; it answers at once with one ``capabilities`` frame (§4.4).

    ``request_id`` is echoed in the answer; it names no synthesis request and is not checked for
    duplicates.
    """

    type: ClassVar[str] = "describe"

    request_id: str | None = None


ClientMessage = (
    SynthesisRequest | Cancel | Close | Describe | Utterance | Append | Flush | End | SessionLexicon
)


def parse_client_message(
    data: bytes | str,
    *,
    limits: Limits | None = None,
    now: float | None = None,
    known_voices: Collection[str] | None = None,
    utterances: bool = True,
    marks: bool = True,
    encodings: Collection[str] | None = None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> ClientMessage:
    """Parse and validate one client WebSocket message (PROTOCOL.md §3.1, §4, §9.2, §15).

    Args:
        data: the whole message, ``bytes`` from a BINARY frame or ``str`` from a TEXT frame; both are
            treated the same.
        limits: the server's limits (§10); defaults to :class:`~protocol.limits.Limits`'.
        now: the current time in Unix epoch seconds, for ``request_stale``; ``None`` reads the clock.
        known_voices: the voices the server has; ``None`` accepts any name of the §4.1 shape.
        utterances: read the utterance messages of §15. ``False`` parses exactly as a server without
            the feature must: their types are ``unknown_type`` (§15.1).
        marks: read the ``marks`` member of requests and utterances (§5.5). ``False`` ignores it, as a
            server without the feature does with every unknown member (§1.4).
        encodings: the audio frame encodings the server offers (§3.3.1, §4.1); a request or utterance
            naming another is refused with ``unsupported_encoding``. ``None``: all of
            :data:`protocol.encodings.ENCODINGS`.
        voice_blends: accept a ``voice`` that blends ``known_voices`` (§4.1, version 1.1); the
            request then carries the blend's canonical form. ``False`` refuses blends with
            ``invalid_voice``, as a server without the feature does (they name no voice).
        lexicon: read pronunciations (§4.1, §4.5, §14.3): a request's or utterance's ``lexicon`` member,
            the ``lexicon`` message and the inline forms of a request's ``text`` (bad ones:
            ``invalid_lexicon``). ``False`` parses as a server without the feature: the member is
            ignored, the message is ``unknown_type``.

    Returns:
        A :class:`SynthesisRequest` (``request_id`` ``None`` when the client sent none; the session
        assigns one), :class:`Cancel`, :class:`Close`, :class:`Describe`, or an utterance message:
        :class:`Utterance`, :class:`Append`, :class:`Flush`, :class:`End`. Their ``text`` may carry the
        surrogate halves of §15.2 at its edges; the session pairs them.

    Raises:
        ProtocolError: the message is refused. The code is the first failure in the order of §9.2;
            ``request_id`` is set whenever the message carried a valid one, and ``message_type``
            whenever its ``type`` could be read.
    """
    limits = limits or Limits()
    obj = decode_json_object(
        data, max_bytes=limits.max_message_bytes, max_depth=limits.max_json_depth, split_halves=utterances
    )
    if not marks:
        obj.pop("marks", None)
    if not lexicon:
        obj.pop("lexicon", None)
    kind = obj.get("type")
    known = kind is None or (
        isinstance(kind, str)
        and kind in _CLIENT_TYPES
        and (utterances or kind not in UTTERANCE_TYPES)
        and (lexicon or kind != "lexicon")
    )
    try:
        options = ParseOptions(limits, now, known_voices, encodings, voice_blends, lexicon)
        return _client_message(obj, kind, options, utterances)
    except ProtocolError as exc:
        if known:
            exc.message_type = "synthesize" if kind is None else kind
        raise


_CLIENT_TYPES = frozenset({"synthesize", "cancel", "close", "describe", "lexicon", *UTTERANCE_TYPES})


def _client_message(
    obj: dict[str, Any], kind: object, options: ParseOptions, utterances: bool
) -> ClientMessage:
    """The message ``kind`` names, parsed by its class; ``unknown_type`` or ``invalid_field`` for another."""
    if kind is None or kind == "synthesize":
        return SynthesisRequest.parse(obj, options)
    if options.lexicon and kind == "lexicon":
        return SessionLexicon.parse(obj, options)
    if kind == "cancel":
        return Cancel.parse(obj, options)
    if kind == "close":
        return Close.parse(obj, options)
    if kind == "describe":
        return Describe.parse(obj, options)
    if utterances and kind in UTTERANCE_TYPES:
        return _UTTERANCE_MESSAGES[kind].parse(obj, options)
    if isinstance(kind, str):
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {show(kind)}", valid_id(obj))
    raise ProtocolError(ErrorCode.INVALID_FIELD, f"type must be {EXPECTED['type']}", valid_id(obj))


_UTTERANCE_MESSAGES: dict[object, type[Utterance | Append | Flush | End]] = {
    "utterance": Utterance,
    "append": Append,
    "flush": Flush,
    "end": End,
}

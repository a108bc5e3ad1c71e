"""The message layer: typed client and server frames, and strict parsing of what a peer sent.

Client messages (PROTOCOL.md §4) are parsed by :func:`parse_client_message`, which applies the JSON-text
rules of §3.1, validates against the schema files of spec/schemas (:mod:`protocol.schemas`), adds the
rules a schema cannot express, and turns every refusal into a :class:`~protocol.errors.ProtocolError`
carrying the most specific registry code, in the order of §9.2. ``POST /invocations`` bodies (§11.1)
go through :func:`parse_invocations_request` with the same rules.

Server control frames (§5) are built from the frozen dataclasses below, whose ``to_json()`` output
always validates against its schema, and are read back by :func:`parse_server_control`.

Session rules (queue_full, duplicate_request_id, unknown_request, the pairing of surrogate halves across
an utterance's fragments) are not checked here: they need the session's state and live in
:mod:`protocol.server_session`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta, timezone
from itertools import accumulate
from typing import Any, Literal

from protocol import schemas
from protocol.encodings import DEFAULT_ENCODING, ENCODINGS
from protocol.errors import ErrorCode, ProtocolError
from protocol.lexicon import LexiconEntry, LexiconError, extract_inline, lexicon_json, parse_lexicon
from protocol.limits import Limits
from protocol.voices import (
    DEFAULT_VOICE,
    LANGUAGES,
    VOICE_LANGUAGE,
    InvalidVoiceError,
    is_blend,
    parse_voice,
    voice_gender,
)

__all__ = [
    "CHANNELS",
    "DEFAULT_SAMPLE_RATE",
    "DEFAULT_SPEED",
    "DEFAULT_VOICE",
    "ENCODING",
    "FEATURES",
    "FORMATS",
    "PROTOCOL_VERSION",
    "REQUEST_ID_MAX_CHARS",
    "SAMPLE_RATES",
    "SPEED_MAX",
    "SPEED_MIN",
    "STATUSES",
    "TRANSPORTS",
    "UTTERANCE_TYPES",
    "VOICE_ID_PATTERN",
    "VOICE_PATTERN",
    "Append",
    "Cancel",
    "Capabilities",
    "ClientMessage",
    "Close",
    "ControlReading",
    "Describe",
    "End",
    "ErrorFrame",
    "Flush",
    "InvalidServerFrame",
    "InvocationsRequest",
    "LanguageInfo",
    "Marks",
    "ServerControl",
    "ServerInfo",
    "SessionLexicon",
    "SynthesisComplete",
    "SynthesisRequest",
    "SynthesisStart",
    "UnknownFrameType",
    "Utterance",
    "UtteranceMessage",
    "VoiceInfo",
    "Word",
    "decode_json_object",
    "parse_client_message",
    "parse_invocations_body",
    "parse_invocations_request",
    "parse_server_control",
    "read_server_control",
    "rfc3339_to_epoch",
]

PROTOCOL_VERSION = "1.1"
"""The version of PROTOCOL.md this code implements (§1.7); ``capabilities.protocol`` carries it (§4.4)."""
FEATURES: tuple[str, ...] = (
    "cancel",
    "describe",
    "cancel_words",
    "utterance",
    "marks",
    "voice_blend",
    "lexicon",
)
"""Optional features of this version a server can list in ``capabilities.features`` (§1.5, §4.1, §4.2,
§4.4, §4.5, §5.3, §5.5, §14.3, §15.1). ``cancel_words``: a cancelled request's ``synthesis_complete``
carries the word timings of the audio sent (§5.3); ``lexicon``: pronunciation lexicons and inline
pronunciations (§4.5, §14.3)."""
SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 22050, 24000)
"""Output sample rates a request may ask for, in Hz (§4.1)."""
DEFAULT_SAMPLE_RATE = 24000
"""Kokoro-82M's native rate; no resampling happens at this rate."""
SPEED_MIN = 0.5
SPEED_MAX = 2.0
DEFAULT_SPEED = 1.0
REQUEST_ID_MAX_CHARS = 128
ENCODING = DEFAULT_ENCODING
"""The default audio frame encoding: signed 16-bit little-endian PCM (§3.3.1); the only one of version 1.
:data:`protocol.encodings.ENCODINGS` lists every encoding a request may ask for (§4.1)."""
CHANNELS = 1
STATUSES: tuple[str, ...] = ("completed", "cancelled", "failed")
"""Values of ``synthesis_complete.status`` (§5.3)."""
FORMATS: tuple[str, ...] = ("wav", "pcm", "mp3", "opus", "flac", "aac")
"""Values of ``format`` for ``POST /invocations`` (§11.1); all but ``wav`` and ``pcm`` are OPTIONAL
(§11.5, §11.7): a server offers those ``capabilities.formats`` lists."""
TRANSPORTS: tuple[str, ...] = ("binary", "sse")
"""Values of ``transport`` for ``POST /invocations`` (§11.1)."""
UTTERANCE_TYPES: tuple[str, ...] = ("utterance", "append", "flush", "end")
"""The ``type`` of the four utterance messages (§15.1), OPTIONAL in version 1.1."""

VOICE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+()-]{0,127}", re.ASCII)
"""Shape of a request's ``voice``, a voice id or a blend (§4.1); applied with ``fullmatch``. The request
schemas hold the same pattern."""
VOICE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", re.ASCII)
"""Shape of a voice id in ``capabilities.voices`` (§4.4): no parentheses, at most 64 characters."""

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII
)
_ERROR_CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")
_HIGH_SURROGATE = re.compile("[\ud800-\udbff]")
_LOW_SURROGATE = re.compile("[\udc00-\udfff]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}
_JSON_WHITESPACE = " \t\n\r"


def _is_number(value: object) -> bool:
    # JSON true/false arrive as bool, a subclass of int; they are never numbers here.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _to_json(obj: dict[str, Any]) -> str:
    # A surrogate half (the split pairs of §15.2) has no UTF-8 form: such a text is written with
    # \uXXXX escapes, as a UTF-16 client's serializer writes it.
    text = obj.get("text")
    escape = isinstance(text, str) and _SURROGATE.search(text) is not None
    return json.dumps(obj, ensure_ascii=escape, separators=(",", ":"), allow_nan=False)


# --- client messages (§4) -------------------------------------------------------------------------------


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
        return _to_json(self.to_dict())


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
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel one queued or active request, or all of them when ``request_id`` is ``None`` (§4.2)."""

    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "cancel"}`` plus ``request_id`` when set."""
        obj: dict[str, Any] = {"type": "cancel"}
        if self.request_id is not None:
            obj["request_id"] = self.request_id
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class Close:
    """Finish every accepted request, then close the WebSocket with 1000 (§4.3, §7.1)."""

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "close"}``."""
        return {"type": "close"}

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return _to_json(self.to_dict())


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
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class Append:
    """Append ``text`` to the open utterance ``request_id`` (§15.1). ``text`` may be ``""``."""

    request_id: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "append", "request_id", "text"}``."""
        return {"type": "append", "request_id": self.request_id, "text": self.text}

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict` (surrogate halves escaped, §15.2)."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class Flush:
    """Append ``text`` (if any), then speak everything the utterance holds now (§15.3)."""

    request_id: str
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "flush", "request_id"}`` plus ``text`` when set."""
        obj: dict[str, Any] = {"type": "flush", "request_id": self.request_id}
        if self.text is not None:
            obj["text"] = self.text
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict` (surrogate halves escaped, §15.2)."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class End:
    """Append ``text`` (if any), then close the utterance to new text: the rest is spoken (§15.4)."""

    request_id: str
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "end", "request_id"}`` plus ``text`` when set."""
        obj: dict[str, Any] = {"type": "end", "request_id": self.request_id}
        if self.text is not None:
            obj["text"] = self.text
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict` (surrogate halves escaped, §15.2)."""
        return _to_json(self.to_dict())


UtteranceMessage = Utterance | Append | Flush | End


@dataclass(frozen=True, slots=True)
class Describe:
    """Ask the server what it offers; it answers at once with one ``capabilities`` frame (§4.4).

    ``request_id`` is echoed in the answer; it names no synthesis request and is not checked for
    duplicates.
    """

    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "describe"}`` plus ``request_id`` when set."""
        obj: dict[str, Any] = {"type": "describe"}
        if self.request_id is not None:
            obj["request_id"] = self.request_id
        return obj

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`; also a valid ``POST /invocations`` body (§11.1)."""
        return _to_json(self.to_dict())


ClientMessage = (
    SynthesisRequest | Cancel | Close | Describe | Utterance | Append | Flush | End | SessionLexicon
)


@dataclass(frozen=True, slots=True)
class InvocationsRequest:
    """A parsed ``POST /invocations`` body (PROTOCOL.md §11.1).

    Attributes:
        request: the synthesis fields, validated as for the WebSocket (§4.1).
        format: one of :data:`FORMATS`.
        transport: ``"binary"`` or ``"sse"``.
        stream: binary transport only: stream the body (``True``) or send it whole with exact sizes.
    """

    request: SynthesisRequest
    format: Literal["wav", "pcm", "mp3", "opus", "flac", "aac"] = "wav"
    transport: Literal["binary", "sse"] = "binary"
    stream: bool = True


# --- server control frames (§5) -------------------------------------------------------------------------


def _check_request_id(request_id: object, *, optional: bool = False) -> None:
    if optional and request_id is None:
        return
    if not isinstance(request_id, str) or not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
        raise ValueError(f"request_id must be a string of 1 to {REQUEST_ID_MAX_CHARS} characters")


def _check_seconds(name: str, value: object) -> None:
    if not _is_number(value) or not math.isfinite(value) or value < 0:  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")


@dataclass(frozen=True, slots=True)
class Word:
    """One word's timing within a request's audio, in seconds from its first sample (§5.3).

    Raises:
        ValueError: a time is negative or not finite, or ``start_s > end_s``.
    """

    word: str
    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.word, str):
            raise ValueError("word must be a string")
        _check_seconds("start_s", self.start_s)
        _check_seconds("end_s", self.end_s)
        if self.start_s > self.end_s:
            raise ValueError(f"word starts after it ends ({self.start_s} > {self.end_s})")

    def to_dict(self) -> dict[str, Any]:
        """``{"word", "start_s", "end_s"}``."""
        return {"word": self.word, "start_s": self.start_s, "end_s": self.end_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthesisStart:
    """``synthesis_start``: opens a request's bracket and describes its audio (PROTOCOL.md §5.1).

    ``encoding`` is the request's (§3.3.1): every audio frame of the bracket is whole samples of it.

    Raises:
        ValueError: a field is out of its range (so :meth:`to_json` always validates).
    """

    request_id: str
    sample_rate: int
    voice: str
    speed: float
    encoding: str = ENCODING
    channels: int = CHANNELS

    def __post_init__(self) -> None:
        _check_request_id(self.request_id)
        if not _is_number(self.sample_rate) or self.sample_rate not in SAMPLE_RATES:
            raise ValueError(f"sample_rate must be one of {SAMPLE_RATES}, not {self.sample_rate!r}")
        if not isinstance(self.voice, str) or not self.voice:
            raise ValueError("voice must be a non-empty string")
        if not _is_number(self.speed) or not SPEED_MIN <= self.speed <= SPEED_MAX:
            raise ValueError(f"speed must be a number from {SPEED_MIN} to {SPEED_MAX}, not {self.speed!r}")
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"encoding must be one of {', '.join(ENCODINGS)}, not {self.encoding!r} (§3.3.1)"
            )
        if self.channels != CHANNELS or isinstance(self.channels, bool):
            raise ValueError(f"audio frames are always {CHANNELS} channel (§3.3.1)")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §5.1."""
        return {
            "type": "synthesis_start",
            "request_id": self.request_id,
            "sample_rate": self.sample_rate,
            "encoding": self.encoding,
            "channels": self.channels,
            "voice": self.voice,
            "speed": self.speed,
        }

    def to_json(self) -> str:
        """Compact JSON text; send it as a TEXT frame (§3.2)."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class SynthesisComplete:
    """``synthesis_complete``: closes a request's bracket (PROTOCOL.md §5.3).

    Attributes:
        request_id: the request.
        status: ``"completed"``, ``"cancelled"`` or ``"failed"``.
        audio_bytes: sum of the lengths of this request's audio frames (whole samples of its encoding:
            even for PCM16).
        total_duration_s: ``audio_bytes / sample_width / sample_rate`` (2 bytes per sample for PCM16,
            1 for G.711).
        elapsed_s: wall seconds from the request's acceptance to this frame.
        words: word timings, or ``None`` when the server has none (a list is stored as a tuple).

    Raises:
        ValueError: a field is out of its range (so :meth:`to_json` always validates).
    """

    request_id: str
    status: Literal["completed", "cancelled", "failed"]
    audio_bytes: int
    total_duration_s: float
    elapsed_s: float
    words: tuple[Word, ...] | None = None

    def __post_init__(self) -> None:
        _check_request_id(self.request_id)
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if isinstance(self.audio_bytes, bool) or not isinstance(self.audio_bytes, int):
            raise ValueError("audio_bytes must be an integer")
        if self.audio_bytes < 0:
            raise ValueError(f"audio_bytes must be >= 0, not {self.audio_bytes}")
        _check_seconds("total_duration_s", self.total_duration_s)
        _check_seconds("elapsed_s", self.elapsed_s)
        if self.words is not None:
            words = tuple(self.words)
            if not all(isinstance(w, Word) for w in words):
                raise ValueError("words must be Word instances")
            object.__setattr__(self, "words", words)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §5.3 (``words`` only when set)."""
        obj: dict[str, Any] = {
            "type": "synthesis_complete",
            "request_id": self.request_id,
            "status": self.status,
            "audio_bytes": self.audio_bytes,
            "total_duration_s": self.total_duration_s,
            "elapsed_s": self.elapsed_s,
        }
        if self.words is not None:
            obj["words"] = [w.to_dict() for w in self.words]
        return obj

    def to_json(self) -> str:
        """Compact JSON text; send it as a TEXT frame (§3.2)."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True, kw_only=True)
class Marks:
    """``marks``: what the audio of one synthesis segment says, sent inside the bracket of a request that
    asked for marks, before that audio (PROTOCOL.md §5.5, version 1.1).

    Attributes:
        request_id: the request whose bracket is open.
        segment: the segment's index in the request, from 0.
        text: the text the segment speaks, as the server spoke it (after any normalization).
        start_s: where the segment's audio begins, seconds from the request's first sample.
        end_s: where it ends, on the same timeline (``start_s <= end_s``).
        words: the segment's word timings on the same timeline, or ``None`` when the language has none
            (a list is stored as a tuple).

    Raises:
        ValueError: a field is out of its range (so :meth:`to_json` always validates).
    """

    request_id: str
    segment: int
    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...] | None = None

    def __post_init__(self) -> None:
        _check_request_id(self.request_id)
        if isinstance(self.segment, bool) or not isinstance(self.segment, int) or self.segment < 0:
            raise ValueError(f"segment must be an integer >= 0, not {self.segment!r}")
        if not isinstance(self.text, str):
            raise ValueError("text must be a string")
        _check_seconds("start_s", self.start_s)
        _check_seconds("end_s", self.end_s)
        if self.start_s > self.end_s:
            raise ValueError(f"the segment starts after it ends ({self.start_s} > {self.end_s})")
        if self.words is not None:
            words = tuple(self.words)
            if not all(isinstance(w, Word) for w in words):
                raise ValueError("words must be Word instances")
            object.__setattr__(self, "words", words)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §5.5 (``words`` only when set)."""
        obj: dict[str, Any] = {
            "type": "marks",
            "request_id": self.request_id,
            "segment": self.segment,
            "text": self.text,
            "start_s": self.start_s,
            "end_s": self.end_s,
        }
        if self.words is not None:
            obj["words"] = [w.to_dict() for w in self.words]
        return obj

    def to_json(self) -> str:
        """Compact JSON text; send it as a TEXT frame (§3.2)."""
        return _to_json(self.to_dict())


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    """``error`` (PROTOCOL.md §5.4, §9).

    Attributes:
        code: a registry :class:`~protocol.errors.ErrorCode`; a code this version does not know (from
            a newer server) is kept as a plain ``str``.
        message: for people: explains the refusal without repeating the code, which is in ``code``
            (§5.4, §9.3); kept as given, so a version 1 frame (code as a prefix) round-trips.
        request_id: the request or message concerned, ``None`` when unknown.
        fatal: the server closes the WebSocket right after this frame (§9.4).
        message_type: the ``type`` of the refused message (``"synthesize"`` for a request sent
            without one), ``None`` when unknown or when the frame refuses nothing (§5.4). It tells a
            refused utterance from a refused fragment of one (§15.6).

    Raises:
        ValueError: ``code`` is not a lower-case identifier, or another field has the wrong type.
    """

    code: ErrorCode | str
    message: str
    request_id: str | None = None
    fatal: bool = False
    message_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or not _ERROR_CODE_PATTERN.fullmatch(self.code):
            raise ValueError(f"code must be a lower-case identifier, not {self.code!r}")
        try:
            object.__setattr__(self, "code", ErrorCode(self.code))
        except ValueError:
            pass  # a code from a newer server: kept as a plain str (§1.7)
        if not isinstance(self.message, str):
            raise ValueError("message must be a string")
        _check_request_id(self.request_id, optional=True)
        if not isinstance(self.fatal, bool):
            raise ValueError("fatal must be a bool")
        if self.message_type is not None and (
            not isinstance(self.message_type, str) or not 1 <= len(self.message_type) <= 64
        ):
            raise ValueError("message_type must be a string of 1 to 64 characters")

    @classmethod
    def from_error(cls, error: ProtocolError) -> ErrorFrame:
        """The frame that answers ``error`` (§6.3)."""
        return cls(
            code=error.code,
            message=error.message,
            request_id=error.request_id,
            fatal=error.fatal,
            message_type=error.message_type,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §5.4; ``request_id`` is always present (``null`` when unknown),
        ``message_type`` only when known."""
        obj: dict[str, Any] = {
            "type": "error",
            "code": str(self.code),
            "message": self.message,
            "request_id": self.request_id,
            "fatal": self.fatal,
        }
        if self.message_type is not None:
            obj["message_type"] = self.message_type
        return obj

    def to_json(self) -> str:
        """Compact JSON text; send it as a TEXT frame (§3.2)."""
        return _to_json(self.to_dict())


_LANGUAGE_CODE = re.compile(r"[a-z][a-z0-9-]{0,15}", re.ASCII)
_FEATURE = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
_GENDERS = ("female", "male")


@dataclass(frozen=True, slots=True)
class VoiceInfo:
    """One voice in ``capabilities.voices`` (§4.4).

    Attributes:
        id: the name a request's ``voice`` member takes (§4.1).
        language: the ``code`` of one of ``capabilities.languages``.
        gender: ``"female"``, ``"male"`` or ``None`` (not stated).

    Raises:
        ValueError: ``id`` is not a voice name, ``language`` not a language code, or ``gender`` is
            another value.
    """

    id: str
    language: str
    gender: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not VOICE_ID_PATTERN.fullmatch(self.id):
            raise ValueError(f"voice id {self.id!r} is not a voice name (§4.1)")
        if not isinstance(self.language, str) or not _LANGUAGE_CODE.fullmatch(self.language):
            raise ValueError(f"language {self.language!r} is not a language code")
        if self.gender is not None and self.gender not in _GENDERS:
            raise ValueError(f"gender must be one of {_GENDERS} or None, not {self.gender!r}")

    @classmethod
    def kokoro(cls, voice: str) -> VoiceInfo:
        """The entry of a Kokoro voice: language and gender from its first two letters (§4.1)."""
        return cls(voice, VOICE_LANGUAGE.get(voice, voice[:1]), voice_gender(voice))

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "language", "gender"}`` (``gender`` only when stated)."""
        obj: dict[str, Any] = {"id": self.id, "language": self.language}
        if self.gender is not None:
            obj["gender"] = self.gender
        return obj


@dataclass(frozen=True, slots=True)
class LanguageInfo:
    """One language in ``capabilities.languages`` (§4.4, §14.1).

    Attributes:
        code: the code voices refer to (Kokoro's letter: ``"a"`` … ``"z"``).
        tag: its BCP 47 tag (``"en-US"``, ``"ja"`` …).
        name: its English name.
        word_timings: whether ``synthesis_complete`` carries ``words`` for requests in it (§5.3).

    Raises:
        ValueError: a field has the wrong type or shape.
    """

    code: str
    tag: str
    name: str
    word_timings: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or not _LANGUAGE_CODE.fullmatch(self.code):
            raise ValueError(f"language code {self.code!r} is not a lower-case code")
        if not isinstance(self.tag, str) or not self.tag or not isinstance(self.name, str):
            raise ValueError("tag must be a non-empty string and name a string")
        if not isinstance(self.word_timings, bool):
            raise ValueError("word_timings must be a bool")

    @classmethod
    def kokoro(cls, code: str, *, word_timings: bool) -> LanguageInfo:
        """The entry of one of Kokoro's languages (:data:`protocol.voices.LANGUAGES`)."""
        language = LANGUAGES[code]
        return cls(language.code, language.tag, language.name, word_timings)

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "tag", "name", "word_timings"}``."""
        return {"code": self.code, "tag": self.tag, "name": self.name, "word_timings": self.word_timings}


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """``capabilities.server``: what implementation answers (for people and logs; §4.4).

    Attributes:
        name: the implementation's name.
        version: its version.
        backend: the synthesis engine in use (``"onnx"``, ``"torch"``), or ``None``.
    """

    name: str
    version: str
    backend: str | None = None

    def __post_init__(self) -> None:
        for field_name in ("name", "version"):
            if not isinstance(getattr(self, field_name), str) or not getattr(self, field_name):
                raise ValueError(f"server.{field_name} must be a non-empty string")
        if self.backend is not None and not isinstance(self.backend, str):
            raise ValueError("server.backend must be a string or None")

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "version", "backend"}`` (``backend`` only when known)."""
        obj: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.backend is not None:
            obj["backend"] = self.backend
        return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """``capabilities``: what a server offers, the answer to ``describe`` (PROTOCOL.md §4.4).

    Attributes:
        server: the implementation.
        voices: every voice a request may name, each with its language; a request naming any other
            voice is refused with ``invalid_voice``.
        languages: every language of :attr:`voices`, with whether word timings are sent for it.
        protocol: the protocol version the server implements (``"1.1"``).
        sample_rates: the ``sample_rate`` values accepted (Hz).
        encodings: audio frame encodings a request may ask for (``"pcm_s16le"``, ``"pcm_mulaw"``,
            ``"pcm_alaw"``, §3.3.1, §4.1); a request naming another is refused with
            ``unsupported_encoding``.
        formats: ``POST /invocations`` formats offered (§11.1; ``mp3`` only with an encoder, §11.5).
        features: optional features offered (:data:`FEATURES`; later versions add more).
        limits: the server's limits of §10, name → value (numbers).
        request_id: the ``describe`` message's ``request_id``, ``None`` when it had none.

    Raises:
        ValueError: a field is out of its range, two voices share an id, or a voice's language is not
            in :attr:`languages` (so :meth:`to_json` always validates).
    """

    server: ServerInfo
    voices: tuple[VoiceInfo, ...]
    languages: tuple[LanguageInfo, ...]
    protocol: str = PROTOCOL_VERSION
    sample_rates: tuple[int, ...] = SAMPLE_RATES
    encodings: tuple[str, ...] = (ENCODING,)
    formats: tuple[str, ...] = FORMATS
    features: tuple[str, ...] = FEATURES
    limits: dict[str, float] | None = None
    request_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("voices", "languages", "sample_rates", "encodings", "formats", "features"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not isinstance(self.server, ServerInfo):
            raise ValueError("server must be a ServerInfo")
        if not isinstance(self.protocol, str) or not re.fullmatch(r"\d+\.\d+", self.protocol):
            raise ValueError(f"protocol must be a version like {PROTOCOL_VERSION!r}, not {self.protocol!r}")
        if not all(isinstance(v, VoiceInfo) for v in self.voices):
            raise ValueError("voices must be VoiceInfo instances")
        if not all(isinstance(lang, LanguageInfo) for lang in self.languages):
            raise ValueError("languages must be LanguageInfo instances")
        ids = [voice.id for voice in self.voices]
        if len(set(ids)) != len(ids):
            raise ValueError("two voices share an id")
        codes = [lang.code for lang in self.languages]
        if len(set(codes)) != len(codes):
            raise ValueError("two languages share a code")
        orphans = sorted({voice.language for voice in self.voices} - set(codes))
        if orphans:
            raise ValueError(f"voices speak languages not in languages: {orphans}")
        # Rates and names beyond this version's are allowed: a later server may offer more (§1.7).
        if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in self.sample_rates):
            raise ValueError("sample_rates must be positive integers (Hz)")
        for name in ("encodings", "formats", "features"):
            if not all(isinstance(item, str) and _FEATURE.fullmatch(item) for item in getattr(self, name)):
                raise ValueError(f"{name} must be lower-case identifiers")
        limits = dict(self.limits or {})
        if not all(isinstance(k, str) and _is_number(v) and math.isfinite(v) for k, v in limits.items()):
            raise ValueError("limits must map names to finite numbers")
        object.__setattr__(self, "limits", limits)
        _check_request_id(self.request_id, optional=True)

    @classmethod
    def from_limits(cls, limits: Limits, **members: Any) -> Capabilities:
        """Capabilities whose ``limits`` are the fields of ``limits`` (§10); ``members`` set the rest.

        A limit set to infinity (unbounded) is left out: JSON has no infinity (§1.4).
        """
        values = {f.name: getattr(limits, f.name) for f in fields(limits)}
        return cls(limits={k: v for k, v in values.items() if math.isfinite(v)}, **members)

    def answering(self, request_id: str | None) -> Capabilities:
        """The same capabilities as the answer to a ``describe`` with this ``request_id``."""
        return replace(self, request_id=request_id)

    @property
    def voice_ids(self) -> frozenset[str]:
        """The ids of :attr:`voices`."""
        return frozenset(voice.id for voice in self.voices)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of §4.4; ``request_id`` is always present (``null`` when none)."""
        return {
            "type": "capabilities",
            "protocol": self.protocol,
            "server": self.server.to_dict(),
            "voices": [voice.to_dict() for voice in self.voices],
            "languages": [lang.to_dict() for lang in self.languages],
            "sample_rates": list(self.sample_rates),
            "encodings": list(self.encodings),
            "formats": list(self.formats),
            "features": list(self.features),
            "limits": dict(self.limits or {}),
            "request_id": self.request_id,
        }

    def to_json(self) -> str:
        """Compact JSON text; a TEXT frame on the WebSocket, the body of ``POST /invocations`` (§4.4)."""
        return _to_json(self.to_dict())


ServerControl = SynthesisStart | SynthesisComplete | ErrorFrame | Capabilities | Marks


class InvalidServerFrame(ValueError):
    """A server control frame breaks its schema or a rule of §5 (from :func:`parse_server_control`)."""


class UnknownFrameType(InvalidServerFrame):
    """A server control frame has a ``type`` this version does not know.

    A client SHOULD ignore such a frame (§5): a newer server may send frame types added later.
    """


# --- strict JSON text (§3.1) ----------------------------------------------------------------------------


class _Refused(ValueError):
    """Raised from inside ``json.loads`` hooks; the message says why the text is refused."""


def _no_constants(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(f"number {literal[:32]} is out of range")
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _Refused(f"duplicate member name {json.dumps(key)[:64]}")
        obj[key] = value
    return obj


def _max_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in ``text``, without recursion and in linear time.

    Exact for valid JSON; for invalid JSON any answer is fine, since the parser refuses it anyway.
    Escaped backslashes go first, then escaped quotes; every quote left delimits a string, so the even
    pieces of a split on quotes are exactly the text outside strings.
    """
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", "".join(unescaped.split('"')[::2]))
    return max(accumulate(_BRACKET_DELTA[c] for c in brackets), default=0)


def _find_lone_surrogate(value: Any) -> bool:
    """Whether any string (member names included) of a parsed JSON value holds a surrogate code point.

    ``json`` joins escaped surrogate pairs into one character, so any surrogate left is a lone one.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _only_split_halves(value: Any) -> bool:
    """Whether every lone surrogate of ``value`` is one §15.2 admits: a high half ending the ``text`` of
    ``utterance``, ``append`` or ``flush``, or a low half beginning the ``text`` of ``append``, ``flush``
    or ``end``."""
    if not isinstance(value, dict) or value.get("type") not in UTTERANCE_TYPES:
        return False
    text = value.get("text")
    if not isinstance(text, str) or _find_lone_surrogate({**value, "text": ""}):
        return False
    kind = value["type"]
    if kind != "utterance" and text[:1] and _LOW_SURROGATE.fullmatch(text[0]):
        text = text[1:]
    if kind != "end" and text[-1:] and _HIGH_SURROGATE.fullmatch(text[-1]):
        text = text[:-1]
    return _SURROGATE.search(text) is None


def decode_json_object(
    data: bytes | str, *, max_bytes: int, max_depth: int, split_halves: bool = False
) -> dict[str, Any]:
    """Decode one client message to a JSON object under the strict rules of PROTOCOL.md §3.1.

    Every escaped lone surrogate is refused here; :func:`parse_client_message` alone admits the split
    surrogate pairs of utterance text (§15.2).

    Args:
        data: the whole message: ``bytes`` (a BINARY frame or HTTP body) or ``str`` (a TEXT frame).
        max_bytes: longest message in UTF-8 bytes (``Limits.max_message_bytes``).
        max_depth: deepest nesting allowed (``Limits.max_json_depth``); the top-level object is 1.
        split_halves: admit the surrogate halves an utterance message may carry at the edges of its
            ``text`` (§15.2); their pairing is the session's to check.

    Returns:
        The object, with members in message order.

    Raises:
        ProtocolError: ``message_too_large``; ``invalid_utf8`` (bad UTF-8 bytes, or a ``str`` holding a
            lone surrogate); ``invalid_json`` (empty, byte order mark, syntax error, trailing data,
            NaN/Infinity, a number out of double range or of more than 4300 digits, a duplicate member
            name, nesting deeper than ``max_depth``, an escaped lone surrogate); ``not_an_object``.
    """
    if isinstance(data, str):
        # A character is at least one UTF-8 byte: the cheap length test refuses huge input early.
        if len(data) > max_bytes:
            raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"message is longer than {max_bytes} bytes")
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError:
            raise ProtocolError(ErrorCode.INVALID_UTF8, "message holds a lone surrogate") from None
        if size > max_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE, f"message has {size} bytes; the limit is {max_bytes}"
            )
        text = data
    else:
        if len(data) > max_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE, f"message has {len(data)} bytes; the limit is {max_bytes}"
            )
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(ErrorCode.INVALID_UTF8, f"invalid UTF-8 at byte {exc.start}") from None
    if not text.strip(_JSON_WHITESPACE):
        raise ProtocolError(ErrorCode.INVALID_JSON, "empty message")
    if text.startswith("\ufeff"):
        # RFC 8259 §8.1: senders MUST NOT add a BOM. Refusing it keeps this parser and the §3.4
        # classification rule in agreement (a BOM-prefixed audio frame is audio, not control).
        raise ProtocolError(ErrorCode.INVALID_JSON, "byte order mark before the JSON text")
    depth = _max_depth(text)
    if depth > max_depth:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"nesting depth {depth} exceeds {max_depth}")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_float=_finite_float,
            parse_constant=_no_constants,
        )
    except _Refused as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_JSON, f"not a JSON text: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError:
        # int() refuses literals of more than sys.get_int_max_str_digits() (4300) digits.
        raise ProtocolError(ErrorCode.INVALID_JSON, "number literal too long") from None
    except RecursionError:  # unreachable after the depth check; kept so no input can escape as one
        raise ProtocolError(ErrorCode.INVALID_JSON, "nesting too deep") from None
    if _find_lone_surrogate(value) and not (split_halves and _only_split_halves(value)):
        # RFC 7493 (I-JSON) §2.1: such a string cannot be encoded as UTF-8 again.
        # An utterance message whose type and id could be read names both, so that a client can tell
        # which utterance or fragment was refused (§15.6).
        kind = value.get("type") if split_halves and isinstance(value, dict) else None
        fragment = kind in UTTERANCE_TYPES
        raise ProtocolError(
            ErrorCode.INVALID_JSON,
            "string holds an escaped lone surrogate",
            _valid_id(value) if fragment else None,
            message_type=kind if fragment else None,
        )
    if not isinstance(value, dict):
        raise ProtocolError(
            ErrorCode.NOT_AN_OBJECT, f"top-level JSON value is {type(value).__name__}, not an object"
        )
    return value


# --- field rules (§4.1, §9.2) ---------------------------------------------------------------------------

# What invalid_field says a member must be.
_EXPECTED = {
    "type": 'a string ("synthesize", "cancel", "close", "describe", "utterance", "append", "flush" or "end")',
    "request_id": f"a string of 1 to {REQUEST_ID_MAX_CHARS} characters",
    "text": "a string",
    "voice": "a string",
    "speed": "a number",
    "sample_rate": "an integer",
    "encoding": "a string",
    "request_timestamp": "Unix epoch seconds (a number) or an RFC 3339 date-time string",
    "format": "a string",
    "transport": '"binary" or "sse"',
    "stream": "a boolean",
    "marks": "a boolean",
    "lexicon": "an object mapping words to pronunciations",
}

# §9.2: members are checked in this order and the first failure is the answer.
_REQUEST_ORDER = (
    "request_id",
    "text",
    "voice",
    "speed",
    "sample_rate",
    "encoding",
    "request_timestamp",
    "marks",
    "lexicon",
)
_FRAGMENT_ORDER = ("request_id", "text")  # append, flush, end (§15.6)
_INVOCATIONS_ORDER = (
    "request_id",
    "text",
    "voice",
    "speed",
    "sample_rate",
    "encoding",
    "format",
    "transport",
    "stream",
    "request_timestamp",
    "lexicon",
)


def _show(value: object) -> str:
    shown = json.dumps(value, ensure_ascii=True)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def rfc3339_to_epoch(value: str) -> float | None:
    """Unix epoch seconds of an RFC 3339 ``date-time`` (§5.6 of RFC 3339), or ``None`` if it is not one.

    The offset is required (``Z`` or ``±hh:mm``); a leap second ``:60`` counts as the next second.
    """
    match = _RFC3339.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    fraction, zulu, sign, off_hour, off_minute = match.group(7, 8, 9, 10, 11)
    leap = 1 if second == 60 else 0
    try:
        if zulu:
            tz = UTC
        else:
            if int(off_hour) > 23 or int(off_minute) > 59:
                return None
            offset = timedelta(hours=int(off_hour), minutes=int(off_minute))
            tz = timezone(offset if sign == "+" else -offset)
        moment = datetime(year, month, day, hour, minute, second - leap, tzinfo=tz)
    except ValueError:
        return None
    return moment.timestamp() + leap + (float(fraction) if fraction else 0.0)


def _schema_failure(member: str, value: object, request_id: str | None) -> ProtocolError:
    """The most specific code for a member the schema refused (§9.2): it depends on the value's JSON type."""
    if member == "text":
        if value is None:
            return ProtocolError(ErrorCode.TEXT_REQUIRED, "text is required", request_id)
        if isinstance(value, str):
            return ProtocolError(ErrorCode.TEXT_REQUIRED, "text is empty", request_id)
    elif member == "voice" and isinstance(value, str):
        return ProtocolError(ErrorCode.INVALID_VOICE, f"voice {_show(value)} is not a voice name", request_id)
    elif member == "speed" and _is_number(value):
        return ProtocolError(
            ErrorCode.INVALID_SPEED,
            f"speed must be from {SPEED_MIN} to {SPEED_MAX}, not {_show(value)}",
            request_id,
        )
    elif member == "sample_rate" and _is_number(value):
        rates = ", ".join(map(str, SAMPLE_RATES))
        return ProtocolError(
            ErrorCode.INVALID_SAMPLE_RATE,
            f"sample_rate must be one of {rates}, not {_show(value)}",
            request_id,
        )
    elif member == "lexicon" and isinstance(value, dict):
        # An object whose entries break the schema: the entry at fault is named (§14.3).
        try:
            parse_lexicon(value, max_entries=len(value))
        except LexiconError as exc:
            return ProtocolError(ErrorCode.INVALID_LEXICON, str(exc), request_id)
        return ProtocolError(
            ErrorCode.INVALID_LEXICON, "lexicon entries must be strings or objects", request_id
        )
    elif member == "format" and isinstance(value, str):
        return ProtocolError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f"format must be one of {', '.join(FORMATS)}, not {_show(value)}",
            request_id,
        )
    if member == "request_id":
        request_id = None  # the id itself is what is wrong: the error cannot name it
        if value is None:
            return ProtocolError(
                ErrorCode.INVALID_FIELD, f"request_id is required: {_EXPECTED[member]}", request_id
            )
    expected = _EXPECTED.get(member, "valid")
    return ProtocolError(ErrorCode.INVALID_FIELD, f"{member} must be {expected}", request_id)


def _check_fields(
    obj: dict[str, Any],
    *,
    schema: str,
    order: tuple[str, ...],
    limits: Limits,
    now: float | None,
    known_voices: Collection[str] | None,
    mp3_available: bool = True,
    fragment: bool = False,
    encodings: Collection[str] | None = None,
    formats: Collection[str] | None = None,
    voice_blends: bool = False,
) -> None:
    """Apply schema ``schema`` and the rules it cannot express, member by member in ``order`` (§9.2).

    ``fragment``: ``text`` is a fragment of an utterance (§15.2), which may be empty or whitespace.
    ``encodings``: the encodings the server offers (§4.1); ``None``: every one of this version.
    ``voice_blends``: accept blends of ``known_voices`` (§4.1); a blend's ``obj["voice"]`` is replaced
    by its canonical form, the one ``synthesis_start`` echoes (§5.1).
    """
    refused: dict[str, Any] = {}
    for error in schemas.validator(schema).iter_errors(obj):
        if error.path:
            refused.setdefault(str(error.path[0]), error)
        elif error.validator == "required":
            for name in error.validator_value:
                if name not in obj:
                    refused.setdefault(name, error)
        else:  # pragma: no cover - obj is a dict and the schemas constrain nothing else at the root
            raise ProtocolError(ErrorCode.INVALID_FIELD, error.message[:200])
    request_id = obj.get("request_id") if "request_id" not in refused else None
    stray = sorted(refused.keys() - set(order))
    if stray:  # pragma: no cover - every member a schema constrains is in `order`
        raise _schema_failure(stray[0], obj.get(stray[0]), request_id)

    for member in order:
        value = obj.get(member)
        if member in refused:
            raise _schema_failure(member, value, request_id)
        if value is None:
            continue
        if member == "text":
            if not fragment and not value.strip():
                raise ProtocolError(ErrorCode.TEXT_REQUIRED, "text holds only whitespace", request_id)
            if len(value) > limits.max_text_chars:
                raise ProtocolError(
                    ErrorCode.TEXT_TOO_LONG,
                    f"text has {len(value)} characters; the limit is {limits.max_text_chars}",
                    request_id,
                )
        elif member == "voice":
            # fullmatch: a schema pattern's "$" lets a trailing newline through in Python's re.
            if not VOICE_PATTERN.fullmatch(value):
                raise ProtocolError(
                    ErrorCode.INVALID_VOICE, f"voice {_show(value)} is not a voice name", request_id
                )
            if voice_blends and known_voices is not None and value not in known_voices and is_blend(value):
                try:
                    obj[member] = str(parse_voice(value, known_voices))
                except InvalidVoiceError as exc:
                    raise ProtocolError(ErrorCode.INVALID_VOICE, str(exc), request_id) from None
            elif known_voices is not None and value not in known_voices:
                raise ProtocolError(
                    ErrorCode.INVALID_VOICE,
                    f'unknown voice {_show(value)}; send {{"type":"describe"}} for the voice list',
                    request_id,
                )
        elif member == "encoding":
            offered = ENCODINGS if encodings is None else encodings
            if value not in offered:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_ENCODING,
                    f"encoding must be one of {', '.join(offered)}, not {_show(value)}",
                    request_id,
                )
        elif member == "format":
            if value == "mp3" and not mp3_available:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_FORMAT, "this server cannot produce mp3", request_id
                )
            if formats is not None and value not in formats:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_FORMAT,
                    f"this server produces {', '.join(formats)}, not {_show(value)}",
                    request_id,
                )
        elif member == "request_timestamp":
            stamp = _timestamp(value)
            if stamp is None:
                raise ProtocolError(
                    ErrorCode.INVALID_FIELD, f"request_timestamp must be {_EXPECTED[member]}", request_id
                )
            age = (time.time() if now is None else now) - stamp
            if age > limits.max_request_age_s:
                raise ProtocolError(
                    ErrorCode.REQUEST_STALE,
                    f"request_timestamp is {age:.1f} s old; the limit is {limits.max_request_age_s:g} s",
                    request_id,
                )


def _timestamp(value: object) -> float | None:
    if isinstance(value, str):
        return rfc3339_to_epoch(value)
    try:
        stamp = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond the double range
        return None
    return stamp if math.isfinite(stamp) else None


def _request_from(obj: dict[str, Any]) -> SynthesisRequest:
    """Build the request from an object that passed :func:`_check_fields`; absent and null take defaults."""

    def given(name: str, default: Any) -> Any:
        value = obj.get(name)
        return default if value is None else value

    stamp = obj.get("request_timestamp")
    return SynthesisRequest(
        text=obj["text"],
        voice=given("voice", DEFAULT_VOICE),
        speed=float(given("speed", DEFAULT_SPEED)),
        sample_rate=int(given("sample_rate", DEFAULT_SAMPLE_RATE)),
        request_id=obj.get("request_id"),
        request_timestamp=None if stamp is None else _timestamp(stamp),
        marks=obj.get("marks") is True,
        encoding=given("encoding", DEFAULT_ENCODING),
        lexicon=obj.get("lexicon"),
    )


def _check_lexicon(obj: dict[str, Any], limits: Limits, *, inline: bool = True) -> None:
    """The ``lexicon`` member (§4.1) and, with ``inline``, the inline pronunciations of ``text`` (§14.3),
    after every other member (§9.2 step 6); ``obj["lexicon"]`` becomes its entries by word.

    Raises:
        ProtocolError: ``invalid_lexicon`` naming the entry at fault.
    """
    request_id = obj.get("request_id")
    try:
        if obj.get("lexicon") is not None:
            obj["lexicon"] = parse_lexicon(obj["lexicon"], max_entries=limits.max_lexicon_entries)
        text = obj.get("text")
        if inline and isinstance(text, str):
            extract_inline(text, max_entries=limits.max_lexicon_entries)
    except LexiconError as exc:
        raise ProtocolError(ErrorCode.INVALID_LEXICON, str(exc), request_id) from None


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
        return _client_message(
            obj, kind, limits, now, known_voices, utterances, encodings, voice_blends, lexicon
        )
    except ProtocolError as exc:
        if known:
            exc.message_type = "synthesize" if kind is None else kind
        raise


_CLIENT_TYPES = frozenset({"synthesize", "cancel", "close", "describe", "lexicon", *UTTERANCE_TYPES})


def _client_message(
    obj: dict[str, Any],
    kind: object,
    limits: Limits,
    now: float | None,
    known_voices: Collection[str] | None,
    utterances: bool,
    encodings: Collection[str] | None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> ClientMessage:
    if kind is None or kind == "synthesize":
        _check_fields(
            obj,
            schema="synthesis_request",
            order=_REQUEST_ORDER,
            limits=limits,
            now=now,
            known_voices=known_voices,
            encodings=encodings,
            voice_blends=voice_blends,
        )
        if lexicon:
            _check_lexicon(obj, limits)
        return _request_from(obj)
    if lexicon and kind == "lexicon":
        _check_fields(
            obj, schema="lexicon", order=("request_id", "lexicon"), limits=limits, now=now, known_voices=None
        )
        _check_lexicon(obj, limits, inline=False)
        return SessionLexicon(lexicon=obj["lexicon"], request_id=obj.get("request_id"))
    if kind == "cancel":
        _check_fields(obj, schema="cancel", order=("request_id",), limits=limits, now=now, known_voices=None)
        return Cancel(request_id=obj.get("request_id"))
    if kind == "close":
        _check_fields(obj, schema="close", order=(), limits=limits, now=now, known_voices=None)
        return Close()
    if kind == "describe":
        return _describe_from(obj, limits)
    if utterances and kind in UTTERANCE_TYPES:
        return _utterance_message(obj, kind, limits, now, known_voices, encodings, voice_blends, lexicon)
    if isinstance(kind, str):
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown message type {_show(kind)}", _valid_id(obj))
    raise ProtocolError(ErrorCode.INVALID_FIELD, f"type must be {_EXPECTED['type']}", _valid_id(obj))


def _utterance_message(
    obj: dict[str, Any],
    kind: str,
    limits: Limits,
    now: float | None,
    known_voices: Collection[str] | None,
    encodings: Collection[str] | None = None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> UtteranceMessage:
    """Check and build one of the four utterance messages (§15.1, §15.6)."""
    order = _REQUEST_ORDER if kind == "utterance" else _FRAGMENT_ORDER
    _check_fields(
        obj,
        schema=kind,
        order=order,
        limits=limits,
        now=now,
        known_voices=known_voices,
        fragment=True,
        encodings=encodings,
        voice_blends=voice_blends,
    )
    request_id: str = obj["request_id"]
    text = obj.get("text")
    if kind == "utterance" and lexicon:
        _check_lexicon(obj, limits, inline=False)  # an utterance's text comes in fragments: no inline forms
    if kind == "utterance":
        request = _request_from({**obj, "text": text or ""})
        return Utterance(
            request_id=request_id,
            text=text,
            voice=request.voice,
            speed=request.speed,
            sample_rate=request.sample_rate,
            request_timestamp=request.request_timestamp,
            marks=request.marks,
            encoding=request.encoding,
            lexicon=request.lexicon,
        )
    if kind == "append":
        return Append(request_id=request_id, text=text)
    if kind == "flush":
        return Flush(request_id=request_id, text=text)
    return End(request_id=request_id, text=text)


def _describe_from(obj: dict[str, Any], limits: Limits) -> Describe:
    _check_fields(obj, schema="describe", order=("request_id",), limits=limits, now=None, known_voices=None)
    return Describe(request_id=obj.get("request_id"))


def _valid_id(obj: dict[str, Any]) -> str | None:
    request_id = obj.get("request_id")
    if isinstance(request_id, str) and 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
        return request_id
    return None


def parse_invocations_request(
    body: bytes | str,
    *,
    limits: Limits | None = None,
    now: float | None = None,
    known_voices: Collection[str] | None = None,
    mp3_available: bool = True,
    encodings: Collection[str] | None = None,
    formats: Collection[str] | None = None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> InvocationsRequest:
    """Parse and validate a ``POST /invocations`` body (PROTOCOL.md §11.1).

    The same rules as :func:`parse_client_message` apply (``type`` is ignored), plus ``format``,
    ``transport`` and ``stream``. Answer a refusal with ``error.code.http_status`` and
    ``error.http_body()`` (§11.6).

    Args:
        body: the request body.
        limits: ``max_message_bytes`` bounds the body; see :func:`parse_client_message` for the rest.
        now: the current time in Unix epoch seconds; ``None`` reads the clock.
        known_voices: the voices the server has; ``None`` accepts any name of the §4.1 shape.
        mp3_available: whether the server can encode MP3 (§11.5); if not, ``format: "mp3"`` is refused
            with ``unsupported_format``.
        encodings: the encodings offered (§4.1); ``None``: all. An encoding other than ``pcm_s16le``
            applies to ``format: "pcm"`` only (§11.3); with another format it is ``unsupported_encoding``.
        formats: the formats offered (``capabilities.formats``); another of :data:`FORMATS` is refused
            with ``unsupported_format``. ``None``: all of them (but ``mp3`` per ``mp3_available``).
        voice_blends: accept blends of ``known_voices`` (§4.1), as :func:`parse_client_message` does.
        lexicon: read ``lexicon`` and inline pronunciations (§14.3), as :func:`parse_client_message` does.

    Raises:
        ProtocolError: the body is refused (first failure in the order of §9.2).
    """
    limits = limits or Limits()
    obj = decode_json_object(body, max_bytes=limits.max_message_bytes, max_depth=limits.max_json_depth)
    return _invocations_from(
        obj, limits, now, known_voices, mp3_available, encodings, formats, voice_blends, lexicon
    )


def parse_invocations_body(
    body: bytes | str,
    *,
    limits: Limits | None = None,
    now: float | None = None,
    known_voices: Collection[str] | None = None,
    mp3_available: bool = True,
    encodings: Collection[str] | None = None,
    formats: Collection[str] | None = None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> InvocationsRequest | Describe:
    """Parse a ``POST /invocations`` body that is either a synthesis request or ``describe`` (§11.1, §4.4).

    A body whose ``type`` is ``"describe"`` is a :class:`Describe` (answered with the
    ``capabilities`` object as ``application/json``); any other ``type`` is ignored, as in
    :func:`parse_invocations_request`, whose arguments and errors these are.

    Raises:
        ProtocolError: the body is refused (first failure in the order of §9.2).
    """
    limits = limits or Limits()
    obj = decode_json_object(body, max_bytes=limits.max_message_bytes, max_depth=limits.max_json_depth)
    if obj.get("type") == "describe":
        return _describe_from(obj, limits)
    return _invocations_from(
        obj, limits, now, known_voices, mp3_available, encodings, formats, voice_blends, lexicon
    )


def _invocations_from(
    obj: dict[str, Any],
    limits: Limits,
    now: float | None,
    known_voices: Collection[str] | None,
    mp3_available: bool,
    encodings: Collection[str] | None = None,
    formats: Collection[str] | None = None,
    voice_blends: bool = False,
    lexicon: bool = False,
) -> InvocationsRequest:
    if not lexicon:
        obj.pop("lexicon", None)
    _check_fields(
        obj,
        schema="invocations_request",
        order=_INVOCATIONS_ORDER,
        limits=limits,
        now=now,
        known_voices=known_voices,
        mp3_available=mp3_available,
        encodings=encodings,
        formats=formats,
        voice_blends=voice_blends,
    )
    if lexicon:
        _check_lexicon(obj, limits)
    request = _request_from(obj)
    fmt = obj.get("format") or "wav"
    if request.encoding != DEFAULT_ENCODING and fmt != "pcm":
        # G.711 is carried raw (§11.3); the containers of the other formats hold PCM16 or compress.
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_ENCODING,
            f'encoding {request.encoding} applies to format "pcm" only, not {_show(fmt)}',
            request.request_id,
        )
    return InvocationsRequest(
        request=request,
        format=obj.get("format") or "wav",
        transport=obj.get("transport") or "binary",
        stream=True if obj.get("stream") is None else obj["stream"],
    )


# --- reading server control frames (§5) -----------------------------------------------------------------

_SERVER_SCHEMAS = {
    "synthesis_start": "synthesis_start",
    "synthesis_complete": "synthesis_complete",
    "error": "error",
    "capabilities": "capabilities",
    "marks": "marks",
}


@dataclass(frozen=True, slots=True)
class ControlReading:
    """A server control frame read leniently: every rule of §5 it breaks is listed, nothing is raised.

    The one home of the §5 frame rules: :func:`parse_server_control` (strict: raises on the first problem)
    and lenient readers such as the conformance observer both go through :func:`read_server_control`.

    Attributes:
        obj: the decoded JSON object, as received.
        kind: ``"synthesis_start"``, ``"synthesis_complete"`` or ``"error"``; ``None`` when ``type`` is
            missing, not a string, or names no server frame of this version (see :attr:`known`).
        frame: the typed frame when the object is valid, else ``None``.
        problems: what breaks the frame's schema or a rule of §5, one sentence each (empty when valid).
    """

    obj: dict[str, Any]
    kind: str | None
    frame: ServerControl | None
    problems: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """Whether ``type`` names a server frame of this version."""
        return self.kind is not None

    def string(self, member: str) -> str | None:
        """``obj[member]`` when it is a non-empty string, else ``None``."""
        value = self.obj.get(member)
        return value if isinstance(value, str) and value else None

    def number(self, member: str) -> float | None:
        """``obj[member]`` when it is a finite JSON number (never a boolean), else ``None``."""
        value = self.obj.get(member)
        return float(value) if _is_number(value) and math.isfinite(value) else None

    def integer(self, member: str) -> int | None:
        """``obj[member]`` when it is an integral JSON number (§1.4: ``24000.0`` counts), else ``None``."""
        value = self.number(member)
        return int(value) if value is not None and value.is_integer() else None


def read_server_control(obj: dict[str, Any]) -> ControlReading:
    """Read a server control frame, already classified as a JSON object (§3.4), without raising (§5).

    Args:
        obj: the decoded JSON object.

    Returns:
        A :class:`ControlReading`: its ``frame`` is the typed frame when ``obj`` is valid; its ``problems``
        name every schema failure (each with the member concerned) and every rule of §5 it breaks.
    """
    kind = obj.get("type")
    name = _SERVER_SCHEMAS.get(kind) if isinstance(kind, str) else None
    if name is None:
        return ControlReading(obj, None, None, (f"unknown server frame type {_show(kind)}",))
    errors = sorted(
        schemas.validator(name).iter_errors(obj), key=lambda e: (list(e.absolute_path), e.message)
    )
    problems = tuple(f"{'/'.join(map(str, e.absolute_path)) or 'frame'}: {e.message[:200]}" for e in errors)
    if problems:
        return ControlReading(obj, name, None, problems)
    try:
        frame = _typed(name, obj)
    except (ValueError, KeyError, TypeError) as exc:
        return ControlReading(obj, name, None, (str(exc),))
    return ControlReading(obj, name, frame)


def _typed(name: str, obj: dict[str, Any]) -> ServerControl:
    """The frame of an object that validated against schema ``name`` (ValueError on a §5 rule)."""
    if name == "synthesis_start":
        return SynthesisStart(
            request_id=obj["request_id"],
            sample_rate=int(obj["sample_rate"]),
            voice=obj["voice"],
            speed=float(obj["speed"]),
            encoding=obj["encoding"],
        )
    if name == "synthesis_complete":
        words = obj.get("words")
        return SynthesisComplete(
            request_id=obj["request_id"],
            status=obj["status"],
            audio_bytes=int(obj["audio_bytes"]),
            total_duration_s=float(obj["total_duration_s"]),
            elapsed_s=float(obj["elapsed_s"]),
            words=None if words is None else _words(words),
        )
    if name == "marks":
        words = obj.get("words")
        return Marks(
            request_id=obj["request_id"],
            segment=int(obj["segment"]),
            text=obj["text"],
            start_s=float(obj["start_s"]),
            end_s=float(obj["end_s"]),
            words=None if words is None else _words(words),
        )
    if name == "capabilities":
        return _capabilities(obj)
    return ErrorFrame(
        code=obj["code"],
        message=obj["message"],
        request_id=obj.get("request_id"),
        fatal=obj["fatal"],
        message_type=obj.get("message_type"),
    )


def parse_server_control(obj: dict[str, Any]) -> ServerControl:
    """Validate a server control frame, already classified as a JSON object (§3.4), and type it (§5).

    Strict form of :func:`read_server_control`.

    Args:
        obj: the decoded JSON object.

    Returns:
        :class:`SynthesisStart`, :class:`SynthesisComplete`, :class:`ErrorFrame`,
        :class:`Capabilities` or :class:`Marks`. Unknown members are ignored.

    Raises:
        UnknownFrameType: ``type`` names no server frame of this version (a client SHOULD ignore it).
        InvalidServerFrame: the frame breaks its schema or a rule of §5 (the first problem is named).
    """
    if not isinstance(obj, dict):
        raise InvalidServerFrame(f"a control frame is a JSON object, not {type(obj).__name__}")
    reading = read_server_control(obj)
    if not reading.known:
        raise UnknownFrameType(reading.problems[0])
    if reading.frame is None:
        raise InvalidServerFrame(f"{reading.kind}: {reading.problems[0]}")
    return reading.frame


def _words(items: Iterable[dict[str, Any]]) -> tuple[Word, ...]:
    return tuple(Word(item["word"], float(item["start_s"]), float(item["end_s"])) for item in items)


def _capabilities(obj: dict[str, Any]) -> Capabilities:
    server = obj["server"]
    return Capabilities(
        protocol=obj["protocol"],
        server=ServerInfo(server["name"], server["version"], server.get("backend")),
        voices=tuple(VoiceInfo(v["id"], v["language"], v.get("gender")) for v in obj["voices"]),
        languages=tuple(
            LanguageInfo(lang["code"], lang["tag"], lang["name"], bool(lang.get("word_timings") or False))
            for lang in obj["languages"]
        ),
        sample_rates=tuple(int(rate) for rate in obj["sample_rates"]),
        encodings=tuple(obj["encodings"]),
        formats=tuple(obj["formats"]),
        features=tuple(obj["features"]),
        limits=dict(obj["limits"]),
        request_id=obj.get("request_id"),
    )

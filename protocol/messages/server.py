"""The server's control frames of PROTOCOL.md §5, each with its check, its serialisation and its parse.

Every frame is a frozen dataclass on the one base :class:`ServerFrame`: building a frame checks it
(:meth:`ServerFrame.check`, a ``ValueError`` on a field out of its range), so its :meth:`~ServerFrame.to_json`
output always validates against its schema; :meth:`~ServerFrame.from_dict` builds the frame back from an
object that validated against that schema (:mod:`protocol.messages.reading` reads frames off the wire).
``capabilities`` (§4.4) lives in :mod:`protocol.messages.capabilities` on the same base.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from protocol.encodings import ENCODINGS
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.constants import (
    CHANNELS,
    ENCODING,
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    SPEED_MAX,
    SPEED_MIN,
    STATUSES,
)
from protocol.messages.jsontext import compact_json, is_number

__all__ = ["ErrorFrame", "Marks", "ServerFrame", "SynthesisComplete", "SynthesisStart", "Word"]

_ERROR_CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)


def check_request_id(request_id: object, *, optional: bool = False) -> None:
    """``ValueError`` unless ``request_id`` is a string of 1 to 128 characters (or None, if ``optional``)."""
    if optional and request_id is None:
        return
    if not isinstance(request_id, str) or not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
        raise ValueError(f"request_id must be a string of 1 to {REQUEST_ID_MAX_CHARS} characters")


def _check_seconds(name: str, value: object) -> None:
    if not is_number(value) or not math.isfinite(value) or value < 0:  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")


class ServerFrame:
    """Base of the server control frames (§5): check on construction, ``to_dict``, ``to_json``, ``from_dict``.

    A subclass is a frozen dataclass that sets :attr:`type` and defines :meth:`check` (its field rules),
    :meth:`members` (its JSON members but ``type``, in wire order) and :meth:`from_dict`.
    """

    __slots__ = ()

    type: ClassVar[str]
    """The frame's ``type`` member (``"synthesis_start"`` …)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ``ValueError`` when a field is out of its range (called on construction)."""
        raise NotImplementedError

    def members(self) -> dict[str, Any]:
        """The frame's JSON members other than ``type``, in the order they are sent."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The frame's JSON object: ``type`` first, then :meth:`members`."""
        return {"type": self.type, **self.members()}

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`; send it as a TEXT frame (§3.2)."""
        return compact_json(self.to_dict())

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Self:
        """The frame of an object that validated against its schema.

        Raises:
            ValueError: the object breaks a rule of §5 no schema expresses.
        """
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Word:
    """One word's timing within a request's audio, in seconds from its first sample (§5.3), and, on a
    server with the feature ``text_spans``, the span of the request's text it speaks (§14.4).

    Attributes:
        text_start, text_end: the half-open range ``[text_start, text_end)`` of the request's original
            ``text`` (an utterance's: its fragments' texts joined, §15.2) the word reads, in Unicode code
            points (Python ``str`` indices); both ``None`` when the server gives no span.

    Raises:
        ValueError: a time is negative or not finite, or ``start_s > end_s``; a span bound is not an
            int, is negative, comes without the other, or ``text_start > text_end``.
    """

    word: str
    start_s: float
    end_s: float
    text_start: int | None = None
    text_end: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.word, str):
            raise ValueError("word must be a string")
        _check_seconds("start_s", self.start_s)
        _check_seconds("end_s", self.end_s)
        if self.start_s > self.end_s:
            raise ValueError(f"word starts after it ends ({self.start_s} > {self.end_s})")
        if (self.text_start is None) != (self.text_end is None):
            raise ValueError("text_start and text_end come together")
        if self.text_start is not None:
            for name, value in (("text_start", self.text_start), ("text_end", self.text_end)):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{name} must be a non-negative integer")
            assert self.text_end is not None
            if self.text_start > self.text_end:
                raise ValueError(f"word's text span is reversed ({self.text_start} > {self.text_end})")

    @property
    def span(self) -> tuple[int, int] | None:
        """``(text_start, text_end)``, or ``None`` when the word carries no span."""
        if self.text_start is None or self.text_end is None:
            return None
        return self.text_start, self.text_end

    def to_dict(self) -> dict[str, Any]:
        """``{"word", "start_s", "end_s"}``, with ``"text_start"`` and ``"text_end"`` when it has a span."""
        out: dict[str, Any] = {"word": self.word, "start_s": self.start_s, "end_s": self.end_s}
        if self.text_start is not None:
            out["text_start"], out["text_end"] = self.text_start, self.text_end
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Word:
        """The word of a ``{"word", "start_s", "end_s"[, "text_start", "text_end"]}`` object that
        validated against its schema."""
        start, end = obj.get("text_start"), obj.get("text_end")
        return cls(obj["word"], float(obj["start_s"]), float(obj["end_s"]), start, end)


def _words_tuple(words: Iterable[Word]) -> tuple[Word, ...]:
    """``words`` as a tuple of :class:`Word` (``ValueError`` on anything else)."""
    words = tuple(words)
    if not all(isinstance(w, Word) for w in words):
        raise ValueError("words must be Word instances")
    return words


def _words_from(obj: dict[str, Any]) -> tuple[Word, ...] | None:
    words = obj.get("words")
    return None if words is None else tuple(Word.from_dict(item) for item in words)


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthesisStart(ServerFrame):
    """``synthesis_start``: opens a request's bracket and describes its audio (PROTOCOL.md §5.1).

    ``encoding`` is the request's (§3.3.1): every audio frame of the bracket is whole samples of it.

    Raises:
        ValueError: a field is out of its range (so :meth:`to_json` always validates).
    """

    type: ClassVar[str] = "synthesis_start"

    request_id: str
    sample_rate: int
    voice: str
    speed: float
    encoding: str = ENCODING
    channels: int = CHANNELS

    def check(self) -> None:
        """The rules of §5.1."""
        check_request_id(self.request_id)
        if not is_number(self.sample_rate) or self.sample_rate not in SAMPLE_RATES:
            raise ValueError(f"sample_rate must be one of {SAMPLE_RATES}, not {self.sample_rate!r}")
        if not isinstance(self.voice, str) or not self.voice:
            raise ValueError("voice must be a non-empty string")
        if not is_number(self.speed) or not SPEED_MIN <= self.speed <= SPEED_MAX:
            raise ValueError(f"speed must be a number from {SPEED_MIN} to {SPEED_MAX}, not {self.speed!r}")
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"encoding must be one of {', '.join(ENCODINGS)}, not {self.encoding!r} (§3.3.1)"
            )
        if self.channels != CHANNELS or isinstance(self.channels, bool):
            raise ValueError(f"audio frames are always {CHANNELS} channel (§3.3.1)")

    def members(self) -> dict[str, Any]:
        """The members of §5.1."""
        return {
            "request_id": self.request_id,
            "sample_rate": self.sample_rate,
            "encoding": self.encoding,
            "channels": self.channels,
            "voice": self.voice,
            "speed": self.speed,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> SynthesisStart:
        """The frame of a ``synthesis_start`` object that validated against its schema."""
        return cls(
            request_id=obj["request_id"],
            sample_rate=int(obj["sample_rate"]),
            voice=obj["voice"],
            speed=float(obj["speed"]),
            encoding=obj["encoding"],
        )


@dataclass(frozen=True, slots=True)
class SynthesisComplete(ServerFrame):
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

    type: ClassVar[str] = "synthesis_complete"

    request_id: str
    status: Literal["completed", "cancelled", "failed"]
    audio_bytes: int
    total_duration_s: float
    elapsed_s: float
    words: tuple[Word, ...] | None = None

    def check(self) -> None:
        """The rules of §5.3; a list of words becomes a tuple."""
        check_request_id(self.request_id)
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if isinstance(self.audio_bytes, bool) or not isinstance(self.audio_bytes, int):
            raise ValueError("audio_bytes must be an integer")
        if self.audio_bytes < 0:
            raise ValueError(f"audio_bytes must be >= 0, not {self.audio_bytes}")
        _check_seconds("total_duration_s", self.total_duration_s)
        _check_seconds("elapsed_s", self.elapsed_s)
        if self.words is not None:
            object.__setattr__(self, "words", _words_tuple(self.words))

    def members(self) -> dict[str, Any]:
        """The members of §5.3 (``words`` only when set)."""
        obj: dict[str, Any] = {
            "request_id": self.request_id,
            "status": self.status,
            "audio_bytes": self.audio_bytes,
            "total_duration_s": self.total_duration_s,
            "elapsed_s": self.elapsed_s,
        }
        if self.words is not None:
            obj["words"] = [w.to_dict() for w in self.words]
        return obj

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> SynthesisComplete:
        """The frame of a ``synthesis_complete`` object that validated against its schema."""
        return cls(
            request_id=obj["request_id"],
            status=obj["status"],
            audio_bytes=int(obj["audio_bytes"]),
            total_duration_s=float(obj["total_duration_s"]),
            elapsed_s=float(obj["elapsed_s"]),
            words=_words_from(obj),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Marks(ServerFrame):
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

    type: ClassVar[str] = "marks"

    request_id: str
    segment: int
    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...] | None = None

    def check(self) -> None:
        """The rules of §5.5; a list of words becomes a tuple."""
        check_request_id(self.request_id)
        if isinstance(self.segment, bool) or not isinstance(self.segment, int) or self.segment < 0:
            raise ValueError(f"segment must be an integer >= 0, not {self.segment!r}")
        if not isinstance(self.text, str):
            raise ValueError("text must be a string")
        _check_seconds("start_s", self.start_s)
        _check_seconds("end_s", self.end_s)
        if self.start_s > self.end_s:
            raise ValueError(f"the segment starts after it ends ({self.start_s} > {self.end_s})")
        if self.words is not None:
            object.__setattr__(self, "words", _words_tuple(self.words))

    def members(self) -> dict[str, Any]:
        """The members of §5.5 (``words`` only when set)."""
        obj: dict[str, Any] = {
            "request_id": self.request_id,
            "segment": self.segment,
            "text": self.text,
            "start_s": self.start_s,
            "end_s": self.end_s,
        }
        if self.words is not None:
            obj["words"] = [w.to_dict() for w in self.words]
        return obj

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Marks:
        """The frame of a ``marks`` object that validated against its schema."""
        return cls(
            request_id=obj["request_id"],
            segment=int(obj["segment"]),
            text=obj["text"],
            start_s=float(obj["start_s"]),
            end_s=float(obj["end_s"]),
            words=_words_from(obj),
        )


@dataclass(frozen=True, slots=True)
class ErrorFrame(ServerFrame):
    """``error`` (PROTOCOL.md §5.4, §9): the one home of the error frame; a refusal's frame is
    :meth:`from_error`.

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

    type: ClassVar[str] = "error"

    code: ErrorCode | str
    message: str
    request_id: str | None = None
    fatal: bool = False
    message_type: str | None = None

    def check(self) -> None:
        """The rules of §5.4; a registry code becomes an :class:`~protocol.errors.ErrorCode`."""
        if not isinstance(self.code, str) or not _ERROR_CODE_PATTERN.fullmatch(self.code):
            raise ValueError(f"code must be a lower-case identifier, not {self.code!r}")
        try:
            object.__setattr__(self, "code", ErrorCode(self.code))
        except ValueError:
            pass  # a code from a newer server: kept as a plain str (§1.7)
        if not isinstance(self.message, str):
            raise ValueError("message must be a string")
        check_request_id(self.request_id, optional=True)
        if not isinstance(self.fatal, bool):
            raise ValueError("fatal must be a bool")
        if self.message_type is not None and (
            not isinstance(self.message_type, str) or not 1 <= len(self.message_type) <= 64
        ):
            raise ValueError("message_type must be a string of 1 to 64 characters")

    @classmethod
    def from_error(cls, error: ProtocolError) -> ErrorFrame:
        """The frame that answers ``error`` (§6.3); its ``message`` is the error's, without the code
        (§9.3): clients match ``code``."""
        return cls(
            code=error.code,
            message=error.message,
            request_id=error.request_id,
            fatal=error.fatal,
            message_type=error.message_type,
        )

    def members(self) -> dict[str, Any]:
        """The members of §5.4; ``request_id`` is always present (``null`` when unknown),
        ``message_type`` only when known."""
        obj: dict[str, Any] = {
            "code": str(self.code),
            "message": self.message,
            "request_id": self.request_id,
            "fatal": self.fatal,
        }
        if self.message_type is not None:
            obj["message_type"] = self.message_type
        return obj

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ErrorFrame:
        """The frame of an ``error`` object that validated against its schema."""
        return cls(
            code=obj["code"],
            message=obj["message"],
            request_id=obj.get("request_id"),
            fatal=obj["fatal"],
            message_type=obj.get("message_type"),
        )

"""The field rules of a client message, member by member in the order of PROTOCOL.md §9.2 (§4.1, §15.6).

After :mod:`protocol.messages.jsontext` decoded the text, :func:`check_fields` applies a message's schema
(:mod:`protocol.schemas`) and the rules a schema cannot express (voices, encodings, formats, timestamps,
text length), raising a :class:`~protocol.errors.ProtocolError` with the most specific registry code of
the first member that fails. :class:`ParseOptions` holds what the server accepts.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from protocol import schemas
from protocol.encodings import ENCODINGS
from protocol.errors import ErrorCode, ProtocolError
from protocol.lexicon import LexiconError, extract_inline, parse_lexicon
from protocol.limits import Limits
from protocol.messages.constants import (
    FORMATS,
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    SPEED_MAX,
    SPEED_MIN,
    VOICE_PATTERN,
)
from protocol.messages.jsontext import is_number, show
from protocol.voices import InvalidVoiceError, is_blend, parse_voice

__all__ = ["rfc3339_to_epoch"]


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII
)


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """What a server accepts, for parsing client messages and ``POST /invocations`` bodies (§4, §11.1).

    Attributes:
        limits: the server's limits (§10).
        now: the current time in Unix epoch seconds, for ``request_stale``; ``None`` reads the clock.
        known_voices: the voices the server has; ``None`` accepts any name of the §4.1 shape.
        encodings: the audio frame encodings offered (§3.3.1, §4.1); ``None``: every one of this version.
        voice_blends: accept blends of ``known_voices`` (§4.1, version 1.1).
        lexicon: read pronunciations (§4.1, §4.5, §14.3).
    """

    limits: Limits
    now: float | None = None
    known_voices: Collection[str] | None = None
    encodings: Collection[str] | None = None
    voice_blends: bool = False
    lexicon: bool = False


EXPECTED = {
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
"""What ``invalid_field`` says a member must be, by member name."""

# §9.2: members are checked in these orders and the first failure is the answer.
REQUEST_ORDER = (
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
FRAGMENT_ORDER = ("request_id", "text")  # append, flush, end (§15.6)
INVOCATIONS_ORDER = (
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
        return ProtocolError(ErrorCode.INVALID_VOICE, f"voice {show(value)} is not a voice name", request_id)
    elif member == "speed" and is_number(value):
        return ProtocolError(
            ErrorCode.INVALID_SPEED,
            f"speed must be from {SPEED_MIN} to {SPEED_MAX}, not {show(value)}",
            request_id,
        )
    elif member == "sample_rate" and is_number(value):
        rates = ", ".join(map(str, SAMPLE_RATES))
        return ProtocolError(
            ErrorCode.INVALID_SAMPLE_RATE,
            f"sample_rate must be one of {rates}, not {show(value)}",
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
            f"format must be one of {', '.join(FORMATS)}, not {show(value)}",
            request_id,
        )
    if member == "request_id":
        request_id = None  # the id itself is what is wrong: the error cannot name it
        if value is None:
            return ProtocolError(
                ErrorCode.INVALID_FIELD, f"request_id is required: {EXPECTED[member]}", request_id
            )
    expected = EXPECTED.get(member, "valid")
    return ProtocolError(ErrorCode.INVALID_FIELD, f"{member} must be {expected}", request_id)


def check_fields(
    obj: dict[str, Any],
    *,
    schema: str,
    order: tuple[str, ...],
    options: ParseOptions,
    mp3_available: bool = True,
    fragment: bool = False,
    formats: Collection[str] | None = None,
) -> None:
    """Apply schema ``schema`` and the rules it cannot express, member by member in ``order`` (§9.2).

    ``options``: what the server accepts; with ``options.voice_blends``, a blend's ``obj["voice"]`` is
    replaced by its canonical form, the one ``synthesis_start`` echoes (§5.1).
    ``mp3_available``, ``formats``: ``POST /invocations`` only (§11.1, §11.5).
    ``fragment``: ``text`` is a fragment of an utterance (§15.2), which may be empty or whitespace.

    Raises:
        ProtocolError: the first member that fails, with the most specific code (§9.2).
    """
    limits, now, known_voices = options.limits, options.now, options.known_voices
    encodings, voice_blends = options.encodings, options.voice_blends
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
                    ErrorCode.INVALID_VOICE, f"voice {show(value)} is not a voice name", request_id
                )
            if voice_blends and known_voices is not None and value not in known_voices and is_blend(value):
                try:
                    obj[member] = str(parse_voice(value, known_voices))
                except InvalidVoiceError as exc:
                    raise ProtocolError(ErrorCode.INVALID_VOICE, str(exc), request_id) from None
            elif known_voices is not None and value not in known_voices:
                raise ProtocolError(
                    ErrorCode.INVALID_VOICE,
                    f'unknown voice {show(value)}; send {{"type":"describe"}} for the voice list',
                    request_id,
                )
        elif member == "encoding":
            offered = ENCODINGS if encodings is None else encodings
            if value not in offered:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_ENCODING,
                    f"encoding must be one of {', '.join(offered)}, not {show(value)}",
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
                    f"this server produces {', '.join(formats)}, not {show(value)}",
                    request_id,
                )
        elif member == "request_timestamp":
            stamp = timestamp(value)
            if stamp is None:
                raise ProtocolError(
                    ErrorCode.INVALID_FIELD, f"request_timestamp must be {EXPECTED[member]}", request_id
                )
            age = (time.time() if now is None else now) - stamp
            if age > limits.max_request_age_s:
                raise ProtocolError(
                    ErrorCode.REQUEST_STALE,
                    f"request_timestamp is {age:.1f} s old; the limit is {limits.max_request_age_s:g} s",
                    request_id,
                )


def timestamp(value: object) -> float | None:
    """Unix epoch seconds of a ``request_timestamp`` (a number or an RFC 3339 string), ``None`` if invalid."""
    if isinstance(value, str):
        return rfc3339_to_epoch(value)
    try:
        stamp = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond the double range
        return None
    return stamp if math.isfinite(stamp) else None


def check_lexicon(obj: dict[str, Any], limits: Limits, *, inline: bool = True) -> None:
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

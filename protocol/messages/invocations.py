"""``POST /invocations``: one synthesis over HTTP, its body parsed with the WebSocket's rules (§11.1).

A body is a synthesis request plus ``format``, ``transport`` and ``stream``, or ``describe`` (§4.4). Its
members are checked by :mod:`protocol.messages.fields` in the order of §9.2, as a WebSocket request's are
(:func:`protocol.messages.client.parse_client_message`, named ``parse_client_message`` below).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from protocol.encodings import DEFAULT_ENCODING
from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages.client import Describe, SynthesisRequest
from protocol.messages.fields import INVOCATIONS_ORDER, ParseOptions, check_fields, check_lexicon
from protocol.messages.jsontext import decode_json_object, show

__all__ = ["InvocationsRequest", "parse_invocations_body", "parse_invocations_request"]


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

    @classmethod
    def parse(
        cls,
        obj: dict[str, Any],
        options: ParseOptions,
        *,
        mp3_available: bool = True,
        formats: Collection[str] | None = None,
    ) -> InvocationsRequest:
        """Check a decoded body's members in the order of §9.2 and build the request (``type`` is ignored).

        ``obj`` is changed in place (a blend's canonical form, the lexicon's entries).

        Raises:
            ProtocolError: the first member that fails.
        """
        if not options.lexicon:
            obj.pop("lexicon", None)
        check_fields(
            obj,
            schema="invocations_request",
            order=INVOCATIONS_ORDER,
            options=options,
            mp3_available=mp3_available,
            formats=formats,
        )
        if options.lexicon:
            check_lexicon(obj, options.limits)
        request = SynthesisRequest.from_checked(obj)
        fmt = obj.get("format") or "wav"
        if request.encoding != DEFAULT_ENCODING and fmt != "pcm":
            # G.711 is carried raw (§11.3); the containers of the other formats hold PCM16 or compress.
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_ENCODING,
                f'encoding {request.encoding} applies to format "pcm" only, not {show(fmt)}',
                request.request_id,
            )
        return cls(
            request=request,
            format=obj.get("format") or "wav",
            transport=obj.get("transport") or "binary",
            stream=True if obj.get("stream") is None else obj["stream"],
        )


# --- server control frames (§5) -------------------------------------------------------------------------


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
    options = ParseOptions(limits, now, known_voices, encodings, voice_blends, lexicon)
    return InvocationsRequest.parse(obj, options, mp3_available=mp3_available, formats=formats)


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
        return Describe.parse(obj, ParseOptions(limits))
    options = ParseOptions(limits, now, known_voices, encodings, voice_blends, lexicon)
    return InvocationsRequest.parse(obj, options, mp3_available=mp3_available, formats=formats)

"""``capabilities``: what a server offers, the answer to ``describe`` (PROTOCOL.md §4.4), and its parts.

:class:`Capabilities` is a server frame on the base :class:`~protocol.messages.server.ServerFrame`; its
members :class:`ServerInfo`, :class:`VoiceInfo` and :class:`LanguageInfo` are plain objects, each with
its check (on construction), ``to_dict`` and ``from_dict``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from protocol.limits import Limits
from protocol.messages.constants import (
    ENCODING,
    FEATURES,
    FORMATS,
    PROTOCOL_VERSION,
    SAMPLE_RATES,
    VOICE_ID_PATTERN,
)
from protocol.messages.jsontext import is_number
from protocol.messages.server import ServerFrame, check_request_id
from protocol.voices import LANGUAGES, language_of, voice_gender

__all__ = ["Capabilities", "LanguageInfo", "ServerInfo", "VoiceInfo"]

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
        """The entry of a Kokoro voice: language and gender from its first two letters (§4.1).

        Raises:
            ValueError: the first letter names no Kokoro language (:func:`protocol.voices.language_of`).
        """
        try:
            language = language_of(voice).code
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        return cls(voice, language, voice_gender(voice))

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "language", "gender"}`` (``gender`` only when stated)."""
        obj: dict[str, Any] = {"id": self.id, "language": self.language}
        if self.gender is not None:
            obj["gender"] = self.gender
        return obj

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> VoiceInfo:
        """The entry of an object of ``capabilities.voices`` that validated against the schema."""
        return cls(obj["id"], obj["language"], obj.get("gender"))


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

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> LanguageInfo:
        """The entry of an object of ``capabilities.languages`` that validated against the schema."""
        return cls(obj["code"], obj["tag"], obj["name"], bool(obj.get("word_timings") or False))


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

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ServerInfo:
        """The member ``capabilities.server`` of an object that validated against the schema."""
        return cls(obj["name"], obj["version"], obj.get("backend"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities(ServerFrame):
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

    type: ClassVar[str] = "capabilities"

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

    def check(self) -> None:
        """The rules of §4.4; sequences become tuples and ``limits`` a dict."""
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
        if not all(isinstance(k, str) and is_number(v) and math.isfinite(v) for k, v in limits.items()):
            raise ValueError("limits must map names to finite numbers")
        object.__setattr__(self, "limits", limits)
        check_request_id(self.request_id, optional=True)

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

    def members(self) -> dict[str, Any]:
        """The members of §4.4; ``request_id`` is always present (``null`` when none)."""
        return {
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

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Capabilities:
        """The frame of a ``capabilities`` object that validated against its schema."""
        return cls(
            protocol=obj["protocol"],
            server=ServerInfo.from_dict(obj["server"]),
            voices=tuple(VoiceInfo.from_dict(voice) for voice in obj["voices"]),
            languages=tuple(LanguageInfo.from_dict(lang) for lang in obj["languages"]),
            sample_rates=tuple(int(rate) for rate in obj["sample_rates"]),
            encodings=tuple(obj["encodings"]),
            formats=tuple(obj["formats"]),
            features=tuple(obj["features"]),
            limits=dict(obj["limits"]),
            request_id=obj.get("request_id"),
        )

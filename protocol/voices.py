"""The 54 voices of Kokoro-82M v1.0 and the nine languages they speak (PROTOCOL.md §4.1, §14.1).

A voice name is ``<language><gender>_<name>``: the first letter is Kokoro's language code (the
``lang_code`` of ``kokoro.KPipeline``), the second is ``f`` or ``m``. The list is the one shipped as
``voices-v1.0.bin`` and in the ``kokoro-js`` npm package (REFERENCE.md §4).

The voice decides the language of a request: a request has no language member (§14.1). A ``voice``
member is read once into a :class:`Voice` (:meth:`Voice.parse`): one voice or a blend of voices of one
language, which knows that language. Code that works per language (the text front-end, the segmenter,
G2P) takes a :class:`Language`, found with :attr:`Voice.language`, :func:`language_of` (from a voice
string) or :func:`language` (from a Kokoro code or a BCP 47 tag).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

__all__ = [
    "BLEND_MAX_VOICES",
    "BLEND_WEIGHT_UNIT",
    "DEFAULT_VOICE",
    "KOKORO_VOICES",
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "LANGUAGE_TAGS",
    "VOICE_LANGUAGE",
    "InvalidVoiceError",
    "Language",
    "Voice",
    "is_blend",
    "language",
    "language_code",
    "language_of",
    "parse_voice",
    "voice_gender",
    "voice_language",
]

DEFAULT_VOICE = "af_heart"
"""The voice used when a request names none (§4.1); the AWS sample's default too."""

KOKORO_VOICES: frozenset[str] = frozenset(
    """
    af_alloy af_aoede af_bella af_heart af_jessica af_kore af_nicole af_nova af_river af_sarah af_sky
    am_adam am_echo am_eric am_fenrir am_liam am_michael am_onyx am_puck am_santa
    bf_alice bf_emma bf_isabella bf_lily bm_daniel bm_fable bm_george bm_lewis
    ef_dora em_alex em_santa
    ff_siwis
    hf_alpha hf_beta hm_omega hm_psi
    if_sara im_nicola
    jf_alpha jf_gongitsune jf_nezumi jf_tebukuro jm_kumo
    pf_dora pm_alex pm_santa
    zf_xiaobei zf_xiaoni zf_xiaoxiao zf_xiaoyi zm_yunjian zm_yunxi zm_yunxia zm_yunyang
    """.split()
)
"""Every official Kokoro-82M v1.0 voice name (54)."""


@dataclass(frozen=True, slots=True)
class Language:
    """One language Kokoro-82M v1.0 speaks.

    Attributes:
        code: Kokoro's one-letter code, the first letter of its voices (``"a"`` … ``"z"``).
        tag: its BCP 47 tag (RFC 5646), as ``capabilities`` lists it (§4.4).
        name: its English name.
        aliases: other tags and names that :func:`language` accepts for it (lower case), among them
            the ``lang_code`` aliases of ``kokoro.KPipeline`` (``"fr-fr"``, ``"pt-br"`` …).
    """

    code: str
    tag: str
    name: str
    aliases: tuple[str, ...] = ()

    @property
    def primary(self) -> str:
        """The primary language subtag (``"en"``, ``"ja"``, ``"zh"`` …), for libraries keyed by it."""
        return self.tag.split("-")[0].lower()


LANGUAGES: Mapping[str, Language] = MappingProxyType(
    {
        language.code: language
        for language in (
            Language("a", "en-US", "American English", ("en", "en-us")),
            Language("b", "en-GB", "British English", ("en-gb", "en-uk")),
            Language("e", "es", "Spanish", ("es-es",)),
            Language("f", "fr", "French", ("fr-fr",)),
            Language("h", "hi", "Hindi", ("hi-in",)),
            Language("i", "it", "Italian", ("it-it",)),
            Language("j", "ja", "Japanese", ("ja-jp",)),
            Language("p", "pt-BR", "Brazilian Portuguese", ("pt", "pt-br")),
            Language("z", "zh", "Mandarin Chinese", ("cmn", "zh-cn", "zh-hans", "cmn-hans")),
        )
    }
)
"""Kokoro language code → :class:`Language`, for the nine languages of Kokoro-82M v1.0."""

LANGUAGE_NAMES: Mapping[str, str] = MappingProxyType({code: lang.name for code, lang in LANGUAGES.items()})
"""Kokoro language code → language name."""

LANGUAGE_TAGS: Mapping[str, str] = MappingProxyType({code: lang.tag for code, lang in LANGUAGES.items()})
"""Kokoro language code → BCP 47 tag (for sentence segmentation and text normalization)."""


def _code(voice_id: str) -> str:
    """A voice id's Kokoro language code: its first letter (§4.1); the one place that rule is written."""
    return voice_id[:1]


VOICE_LANGUAGE: Mapping[str, str] = MappingProxyType({voice: _code(voice) for voice in sorted(KOKORO_VOICES)})
"""Voice name → Kokoro language code (its first letter)."""

_BY_NAME: Mapping[str, Language] = MappingProxyType(
    {
        key: lang
        for lang in LANGUAGES.values()
        for key in (lang.code, lang.tag.lower(), lang.name.lower(), *lang.aliases)
    }
)


def voice_language(voice: str) -> str:
    """The Kokoro language code (``"a"``, ``"b"``, … ``"z"``) of an official voice.

    Raises:
        KeyError: ``voice`` is not in :data:`KOKORO_VOICES`.
    """
    return VOICE_LANGUAGE[voice]


def language_of(voice: str | Voice) -> Language:
    """The language a voice or blend speaks: the one its voices' first letter names (PROTOCOL.md §4.1, §14.1).

    A string is read with :meth:`Voice.parse` without a voice list, so names beyond the official 54 (a
    server's own packs, or blends of voices of one language) work too.

    Raises:
        KeyError: the first letter names no language of :data:`LANGUAGES`, or ``voice`` is a malformed
            blend (:class:`InvalidVoiceError`), so it names no language.
    """
    try:
        parsed = voice if isinstance(voice, Voice) else Voice.parse(voice)
    except InvalidVoiceError as exc:
        raise KeyError(f"voice {voice!r} names no Kokoro language ({exc})") from None
    if parsed.language is None:
        raise KeyError(f"voice {str(parsed)!r} names no Kokoro language (first letter {parsed.code!r})")
    return parsed.language


def language(code_or_tag: str) -> Language:
    """A :class:`Language` from its Kokoro code (``"j"``), BCP 47 tag (``"ja"``, ``"pt-BR"``) or alias.

    Matching ignores case and treats ``_`` as ``-`` (``"pt_BR"``). ``"en"`` alone is American English.

    Raises:
        KeyError: nothing in :data:`LANGUAGES` has that code, tag or alias.
    """
    key = code_or_tag.strip().lower().replace("_", "-")
    try:
        return _BY_NAME[key]
    except KeyError:
        raise KeyError(f"no Kokoro language has the code or tag {code_or_tag!r}") from None


def language_code(code_or_tag: str) -> str:
    """Kokoro's one-letter code for a language named by its code, BCP 47 tag, ISO 639 code or alias;
    ``""`` when it names none of :data:`LANGUAGES`. The one place a tag becomes a Kokoro language: the
    text front-end's normalization, sentence rules and segmenter all ask it.

    Matching is as :func:`language`'s (case and ``_`` ignored, ``"en"`` is American English, ``"en-UK"``
    British), then by the primary subtag alone: ``"fr-CA"`` gives ``"f"``, ``"en-AU"`` ``"a"``,
    ``"zh-TW"`` ``"z"``.

    Raises:
        TypeError: ``code_or_tag`` is not a string.
    """
    if not isinstance(code_or_tag, str):
        raise TypeError(f"a language must be a str, not {type(code_or_tag).__name__}")
    key = code_or_tag.strip().lower().replace("_", "-")
    found = _BY_NAME.get(key) or _BY_NAME.get(key.split("-")[0])
    return "" if found is None else found.code


def voice_gender(voice: str) -> str | None:
    """``"female"`` or ``"male"`` from a voice name's second letter (``f``/``m``), else ``None``."""
    return {"f": "female", "m": "male"}.get(voice[1:2])


# --- voice blends (§4.1, version 1.1) ----------------------------------------------------------------

BLEND_MAX_VOICES = 4
"""The most voices one blend may name (§4.1): four voices in canonical form stay within the 128
characters of the ``voice`` pattern whatever their names (the longest official one has 13)."""

BLEND_WEIGHT_UNIT = Fraction(1, 10_000)
"""Canonical weights are multiples of 1/10,000 (four decimals, §4.1)."""

_PART = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*)(?:\((\d+(?:\.\d+)?|\.\d+)\))?", re.ASCII)
_LOOSE_PART = re.compile(r"([^()]*)\((.*)\)", re.ASCII)


class InvalidVoiceError(ValueError):
    """A ``voice`` that names no voice and no valid blend (answered with ``invalid_voice``, §4.1).

    Attributes:
        part: the offending part of the string (the whole string when no part is to blame).
    """

    def __init__(self, message: str, part: str) -> None:
        super().__init__(message)
        self.part = part


@dataclass(frozen=True, slots=True)
class Voice:
    """A ``voice`` member, read: one voice, or a weighted blend of voices of one language (PROTOCOL.md §4.1).

    Made by :meth:`Voice.parse` (or :func:`parse_voice`); every place that needs a voice's language or
    parts reads them here rather than from the string.

    Attributes:
        parts: ``(voice id, weight)`` sorted by id, the weights canonical: positive multiples of
            :data:`BLEND_WEIGHT_UNIT` summing to exactly 1. A plain voice is one part of weight 1.

    ``str(voice)`` is the canonical form a server echoes in ``synthesis_start.voice`` (§5.1):
    ``af_bella(0.6667)+af_sky(0.3333)``, or the bare id for a single voice. Parsing the canonical form
    again gives the same value, and its first letter is the voice's language.
    """

    parts: tuple[tuple[str, Fraction], ...]

    @classmethod
    def parse(
        cls, text: str, voices: Collection[str] | None = None, *, max_voices: int = BLEND_MAX_VOICES
    ) -> Voice:
        """Read a ``voice`` member: one of ``voices``, or a blend of them (§4.1); see :func:`parse_voice`.

        Args:
            text: the request's ``voice``.
            voices: the voice ids the server lists (§4.4); ``None`` checks the blend grammar and rules only,
                any id being taken as a voice (for a ``voice`` a session has already accepted).
            max_voices: the most voices a blend may name.

        Raises:
            InvalidVoiceError: ``text`` names no voice of ``voices`` and no valid blend of them; a server
                answers it with ``invalid_voice``.
        """
        return parse_voice(text, voices, max_voices=max_voices)

    @property
    def voices(self) -> tuple[str, ...]:
        """The voice ids, sorted."""
        return tuple(voice for voice, _ in self.parts)

    @property
    def weights(self) -> tuple[float, ...]:
        """The canonical weights as floats, in the order of :attr:`voices` (they sum to 1 within 1e-12)."""
        return tuple(float(weight) for _, weight in self.parts)

    @property
    def is_blend(self) -> bool:
        """More than one voice."""
        return len(self.parts) > 1

    @property
    def code(self) -> str:
        """Kokoro's one-letter language code: the first letter of the voice ids, which a blend's voices
        share (§4.1). A server's own voice may have a letter that names no language of :data:`LANGUAGES`
        (then :attr:`language` is ``None``); ``""`` for an empty id."""
        return _code(self.parts[0][0])

    @property
    def language(self) -> Language | None:
        """The :class:`Language` the voice speaks (§14.1), or ``None`` if :attr:`code` names none."""
        return LANGUAGES.get(self.code)

    def __str__(self) -> str:
        if not self.is_blend:
            return self.parts[0][0]
        return "+".join(f"{voice}({_decimal(weight)})" for voice, weight in self.parts)


def _decimal(weight: Fraction) -> str:
    """``Fraction(6667, 10000)`` → ``"0.6667"``: the shortest decimal of a multiple of 1/10,000."""
    units = int(weight / BLEND_WEIGHT_UNIT)
    whole, rest = divmod(units, 10_000)
    return f"{whole}.{rest:04d}".rstrip("0").rstrip(".") if rest else str(whole)


def is_blend(voice: str) -> bool:
    """Whether ``voice`` is written as a blend (it has a ``+`` or a weight in parentheses, §4.1)."""
    return "+" in voice or "(" in voice or ")" in voice


def parse_voice(
    voice: str, voices: Collection[str] | None = None, *, max_voices: int = BLEND_MAX_VOICES
) -> Voice:
    """Read a ``voice`` member: one of ``voices``, or a blend of them (PROTOCOL.md §4.1).

    Grammar: ``part ("+" part)*`` where ``part`` is ``voice`` or ``voice(weight)`` and ``weight`` a
    decimal number greater than 0 (``2``, ``0.5``, ``.25``; default 1), as Kokoro-FastAPI writes blends
    (``af_bella(2)+af_sky(1)``). A string that is itself one of ``voices`` is that voice, whatever it
    holds. The weights are normalized to sum to 1 and rounded to 1/10,000 by the largest remainder
    (ties to the earlier voice in sorted order), so that the canonical weights sum to exactly 1.

    Args:
        voice: the request's ``voice``.
        voices: the voice ids the server lists (§4.4). A voice's language is its first letter (§4.1).
            ``None``: any id is a voice (the grammar and the other rules still hold).
        max_voices: the most voices a blend may name.

    Returns:
        The :class:`Voice`; ``str()`` of it is the canonical form.

    Raises:
        InvalidVoiceError: an unknown voice, a malformed part or weight, a weight of 0, a voice named
            twice, voices of different languages, more than ``max_voices`` voices, or a voice whose share
            rounds to 0. The message names the offending part.
    """
    listed = voice in voices if voices is not None else not is_blend(voice)
    if listed:  # a listed voice is that voice, whatever it holds (without a list: any non-blend)
        return Voice(((voice, Fraction(1)),))
    if not is_blend(voice):
        raise InvalidVoiceError(
            f'unknown voice "{voice}"; send {{"type":"describe"}} for the voice list', voice
        )
    pieces = voice.split("+")
    if len(pieces) > max_voices:
        raise InvalidVoiceError(
            f'the blend "{voice}" names {len(pieces)} voices; at most {max_voices}', voice
        )
    weights: dict[str, Fraction] = {}
    for index, piece in enumerate(pieces):
        if not piece:
            where = f'after "{pieces[index - 1]}"' if index else "at the start"
            raise InvalidVoiceError(f'the blend "{voice}" has an empty part {where}', voice)
        match = _PART.fullmatch(piece)
        if match is None:
            loose = _LOOSE_PART.fullmatch(piece)
            if loose is not None and loose.group(1):
                raise InvalidVoiceError(
                    f'"{piece}": the weight "{loose.group(2)}" is not a decimal number like 2 or 0.5',
                    piece,
                )
            raise InvalidVoiceError(f'"{piece}" is not a voice or voice(weight)', piece)
        name, written = match.group(1), match.group(2)
        if voices is not None and name not in voices:
            raise InvalidVoiceError(
                f'unknown voice "{name}" in the blend; send {{"type":"describe"}} for the voice list', name
            )
        if name in weights:
            raise InvalidVoiceError(f"{name} appears twice in the blend", name)
        weight = Fraction(1) if written is None else Fraction(written)
        if weight <= 0:
            raise InvalidVoiceError(f'"{piece}": the weight of {name} must be greater than 0', piece)
        weights[name] = weight
    first = next(iter(weights))
    for name in weights:
        if _code(name) != _code(first):
            raise InvalidVoiceError(
                f"{name} speaks another language than {first}: a blend's voices share one language", name
            )
    return Voice(_canonical_weights(weights))


def _canonical_weights(weights: Mapping[str, Fraction]) -> tuple[tuple[str, Fraction], ...]:
    """Normalize to sum 1 and round to :data:`BLEND_WEIGHT_UNIT` by the largest remainder (§4.1)."""
    total = sum(weights.values())
    names = sorted(weights)
    scaled = {name: weights[name] / total / BLEND_WEIGHT_UNIT for name in names}
    units = {name: int(value) for name, value in scaled.items()}  # floor: the values are positive
    left = int(1 / BLEND_WEIGHT_UNIT) - sum(units.values())
    by_remainder = sorted(names, key=lambda name: (-(scaled[name] - units[name]), names.index(name)))
    for name in by_remainder[:left]:
        units[name] += 1
    for name in names:
        if units[name] == 0:
            raise InvalidVoiceError(
                f"the share of {name} in the blend rounds to 0 (under 1/10000 of the whole)", name
            )
    return tuple((name, units[name] * BLEND_WEIGHT_UNIT) for name in names)

"""The 54 voices of Kokoro-82M v1.0 and the nine languages they speak (PROTOCOL.md §4.1, §14.1).

A voice name is ``<language><gender>_<name>``: the first letter is Kokoro's language code (the
``lang_code`` of ``kokoro.KPipeline``), the second is ``f`` or ``m``. The list is the one shipped as
``voices-v1.0.bin`` and in the ``kokoro-js`` npm package (REFERENCE.md §4).

The voice decides the language of a request: a request has no language member (§14.1). Code that
works per language (the text front-end, the segmenter, G2P) takes a :class:`Language`, found with
:func:`language_of` (from a voice) or :func:`language` (from a Kokoro code or a BCP 47 tag).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "DEFAULT_VOICE",
    "KOKORO_VOICES",
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "LANGUAGE_TAGS",
    "VOICE_LANGUAGE",
    "Language",
    "language",
    "language_of",
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

VOICE_LANGUAGE: Mapping[str, str] = MappingProxyType({voice: voice[0] for voice in sorted(KOKORO_VOICES)})
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


def language_of(voice: str) -> Language:
    """The language a voice speaks: the one its first letter names (PROTOCOL.md §4.1, §14.1).

    Any voice name whose first letter is a Kokoro language code has that language, so names beyond
    the official 54 (a server's own packs, or blends of voices of one language) work too.

    Raises:
        KeyError: the first letter names no language of :data:`LANGUAGES`.
    """
    code = voice[:1]
    if code not in LANGUAGES:
        raise KeyError(f"voice {voice!r} names no Kokoro language (first letter {code!r})")
    return LANGUAGES[code]


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


def voice_gender(voice: str) -> str | None:
    """``"female"`` or ``"male"`` from a voice name's second letter (``f``/``m``), else ``None``."""
    return {"f": "female", "m": "male"}.get(voice[1:2])

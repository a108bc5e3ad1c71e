"""The 54 voices of Kokoro-82M v1.0 and the language each speaks (PROTOCOL.md §4.1, ``voice``).

A voice name is ``<language><gender>_<name>``: the first letter is Kokoro's language code (the
``lang_code`` of ``kokoro.KPipeline``), the second is ``f`` or ``m``. The list is the one shipped as
``voices-v1.0.bin`` and in the ``kokoro-js`` npm package (REFERENCE.md §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "DEFAULT_VOICE",
    "KOKORO_VOICES",
    "LANGUAGE_NAMES",
    "LANGUAGE_TAGS",
    "VOICE_LANGUAGE",
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

LANGUAGE_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "a": "American English",
        "b": "British English",
        "e": "Spanish",
        "f": "French",
        "h": "Hindi",
        "i": "Italian",
        "j": "Japanese",
        "p": "Brazilian Portuguese",
        "z": "Mandarin Chinese",
    }
)
"""Kokoro language code → language name."""

LANGUAGE_TAGS: Mapping[str, str] = MappingProxyType(
    {
        "a": "en-US",
        "b": "en-GB",
        "e": "es",
        "f": "fr",
        "h": "hi",
        "i": "it",
        "j": "ja",
        "p": "pt-BR",
        "z": "zh",
    }
)
"""Kokoro language code → BCP 47 tag (for sentence segmentation and text normalization)."""

VOICE_LANGUAGE: Mapping[str, str] = MappingProxyType({voice: voice[0] for voice in sorted(KOKORO_VOICES)})
"""Voice name → Kokoro language code (its first letter)."""


def voice_language(voice: str) -> str:
    """The Kokoro language code (``"a"``, ``"b"``, … ``"z"``) of an official voice.

    Raises:
        KeyError: ``voice`` is not in :data:`KOKORO_VOICES`.
    """
    return VOICE_LANGUAGE[voice]

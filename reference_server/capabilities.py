"""What this server offers, as the ``capabilities`` answer to ``describe`` (PROTOCOL.md §4.4).

Everything in it is known before the model loads: the backend's voices (each voice's language and
gender come from its name, §4.1), the languages for which the backend gives word timings (§14.1),
the protocol's sample rates and encodings (PCM16 and G.711 μ-law and A-law, §3.3.1), the formats this
install can encode (MP3 only with ``lameenc``, §11.5; Opus, FLAC and AAC only with PyAV, §11.7), the
optional features the session implements, and the limits of §10.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from protocol.encodings import ENCODINGS
from protocol.limits import Limits
from protocol.messages import FEATURES, Capabilities, LanguageInfo, ServerInfo, VoiceInfo
from protocol.voices import LANGUAGES
from reference_server.encoders import available_formats

__all__ = ["SERVER_NAME", "server_capabilities", "server_version"]

SERVER_NAME = "kokoro-bidi-tts"
"""``capabilities.server.name`` of the reference server (the distribution's name)."""


def server_version() -> str:
    """The installed distribution's version, or ``"0+unknown"`` when run from a bare source tree."""
    try:
        return importlib.metadata.version(SERVER_NAME)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def server_capabilities(backend: Any, limits: Limits, *, mp3: bool) -> Capabilities:
    """The capabilities of a server running ``backend`` under ``limits``.

    Args:
        backend: a backend (:class:`reference_server.backends.Backend` or a test double): ``name``,
            ``voices`` and, optionally, ``word_timing_languages`` (language codes with word timings;
            none when absent) and ``voice_blends`` (whether it mixes blends of its voices, §4.1;
            ``False`` when absent).
        limits: the server's limits (§10).
        mp3: whether ``format: "mp3"`` is offered (§11.5).

    Returns:
        Voices sorted by id; languages in Kokoro's order (a, b, e, f, h, i, j, p, z), only those some
        voice speaks. ``request_id`` is ``None``: the session and ``POST /invocations`` set it per
        ``describe`` (:meth:`~protocol.messages.Capabilities.answering`).
    """
    voices = tuple(VoiceInfo.kokoro(voice) for voice in sorted(backend.voices))
    timed = frozenset(getattr(backend, "word_timing_languages", ()))
    spoken = {voice.language for voice in voices}
    languages = tuple(
        LanguageInfo.kokoro(code, word_timings=code in timed) for code in LANGUAGES if code in spoken
    )
    unknown = sorted(spoken - set(LANGUAGES))
    if unknown:  # a voice pack outside Kokoro's nine languages: listed, never claimed to have timings
        languages += tuple(LanguageInfo(code, code, code) for code in unknown)
    return Capabilities.from_limits(
        limits,
        server=ServerInfo(SERVER_NAME, server_version(), getattr(backend, "name", None)),
        voices=voices,
        languages=languages,
        encodings=tuple(ENCODINGS),  # the session encodes G.711 itself (protocol.server_session)
        formats=tuple(f for f in available_formats() if mp3 or f != "mp3"),
        features=tuple(f for f in FEATURES if f != "voice_blend" or getattr(backend, "voice_blends", False)),
    )

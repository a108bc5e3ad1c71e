"""The protocol's constants: version, features and the ranges of a request's members (PROTOCOL.md §1.5, §4).

Every module of :mod:`protocol.messages` takes its numbers and value lists from here, and so do servers
and clients that need them (``from protocol.messages import SAMPLE_RATES``).
"""

from __future__ import annotations

import re

from protocol.encodings import DEFAULT_ENCODING
from protocol.voices import DEFAULT_VOICE

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
]

PROTOCOL_VERSION = "1.1"
"""The version of PROTOCOL.md this code implements (§1.7); ``capabilities.protocol`` carries it (§4.4)."""
FEATURES: tuple[str, ...] = (
    "cancel",
    "describe",
    "cancel_words",
    "text_spans",
    "utterance",
    "marks",
    "voice_blend",
    "lexicon",
)
"""Optional features of this version a server can list in ``capabilities.features`` (§1.5, §4.1, §4.2,
§4.4, §4.5, §5.3, §5.5, §14.3, §15.1). ``cancel_words``: a cancelled request's ``synthesis_complete``
carries the word timings of the audio sent (§5.3); ``lexicon``: pronunciation lexicons and inline
pronunciations (§4.5, §14.3); ``text_spans``: every word timing carries the span of the request's text it
reads (§14.4)."""
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

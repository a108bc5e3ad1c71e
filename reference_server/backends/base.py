"""What a synthesis backend is: the interface the server's runtime drives (PROTOCOL.md §5.2, §5.3).

A backend turns one request's text into a sequence of :class:`Segment`, each the audio of a piece of
text Kokoro speaks in one pass (:mod:`reference_server.backends.phonemes`). :meth:`Backend.synthesize`
returns a generator, so the caller can send each segment as soon as it exists and stop between
segments (cancel, disconnect: PROTOCOL.md §4.2, §7.4) by closing it.
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from protocol.messages import Word
from protocol.voices import DEFAULT_VOICE, KOKORO_VOICES
from reference_server.backends.phonemes import EspeakPhonemizer, PhonemeSegment, espeak_language

__all__ = [
    "ENGLISH_VOICES",
    "SAMPLE_RATE",
    "Backend",
    "BackendNotLoadedError",
    "Segment",
    "UnknownVoiceError",
]

SAMPLE_RATE = 24_000
"""Kokoro-82M's output rate in Hz."""

ENGLISH_VOICES: frozenset[str] = frozenset(voice for voice in KOKORO_VOICES if voice[0] in "ab")
"""The 28 American (``a…``) and British (``b…``) voices: the backends' G2P is English only."""

MIN_SPEED = 0.5
MAX_SPEED = 2.0


class UnknownVoiceError(ValueError):
    """The voice is not one this backend speaks; ``voice`` names it."""

    def __init__(self, voice: str, known: frozenset[str]) -> None:
        super().__init__(f"unknown voice {voice!r}; this backend speaks: {', '.join(sorted(known))}")
        self.voice = voice


class BackendNotLoadedError(RuntimeError):
    """``synthesize`` was called before ``load``."""


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """The audio of one segment of a request's text.

    Attributes:
        text: the text spoken (whitespace-normalized).
        audio: float32 mono samples at :data:`SAMPLE_RATE` Hz, nominally within [-1, 1].
        words: each word's timing in seconds from this segment's first sample, or ``None`` when the
            backend cannot tell (the runtime shifts them onto the request's timeline, §5.3).
        phonemes: the phoneme string the model was given.
    """

    text: str
    audio: np.ndarray
    words: tuple[Word, ...] | None
    phonemes: str


class Backend(abc.ABC):
    """A Kokoro-82M synthesizer: ``load()`` once, ``warm_up()`` once, then ``synthesize()`` from any thread.

    Attributes:
        name: ``"onnx"`` or ``"torch"``.
        sample_rate: always :data:`SAMPLE_RATE`.
        voices: the voice names :meth:`synthesize` accepts (:data:`ENGLISH_VOICES`), known before loading.
        word_timing_languages: the language codes (PROTOCOL.md §14.1) whose segments carry word timings.

    Subclasses implement :meth:`load` and :meth:`_speak`; text cutting, G2P and argument checks are here.
    """

    name: ClassVar[str]
    sample_rate: ClassVar[int] = SAMPLE_RATE
    voices: frozenset[str] = ENGLISH_VOICES
    word_timing_languages: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._phonemizer: EspeakPhonemizer | None = None

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model and voices (seconds; call off the event loop).

        Raises:
            reference_server.assets.AssetError: the verified assets are not in place.
        """

    @abc.abstractmethod
    def _speak(
        self, segment: PhonemeSegment, voice: str, speed: float
    ) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        """Run the model on one segment: float32 samples at 24 kHz and segment-relative word timings."""

    def _load_phonemizer(self, config: Path) -> None:
        vocab: dict[str, Any] = json.loads(config.read_text(encoding="utf-8"))["vocab"]
        self._phonemizer = EspeakPhonemizer(vocab)

    def warm_up(self) -> None:
        """Synthesize one short sentence so the first client does not pay for lazy initialisation."""
        for _ in self.synthesize("Hello.", DEFAULT_VOICE, 1.0):
            pass

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Iterator[Segment]:
        """Speak ``text``: a generator of :class:`Segment`, one per model pass, in order.

        The arguments are checked at once (not on the first ``next``). Closing the generator between
        segments stops the work; a segment already running finishes first.

        Args:
            text: plain text; cut into sentences and then into pieces of at most 510 phoneme tokens.
            voice: one of :attr:`voices`.
            speed: 0.5 to 2.0 (1.0 is the voice's natural rate).

        Raises:
            UnknownVoiceError: ``voice`` is not in :attr:`voices`.
            ValueError: ``speed`` is not a finite number in [0.5, 2.0].
            BackendNotLoadedError: :meth:`load` has not run.
        """
        if voice not in self.voices:
            raise UnknownVoiceError(voice, self.voices)
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not math.isfinite(speed):
            raise ValueError(f"speed must be a number, not {speed!r}")
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be from {MIN_SPEED} to {MAX_SPEED}, not {speed}")
        phonemizer = self._phonemizer
        if phonemizer is None:
            raise BackendNotLoadedError(f"the {self.name} backend is not loaded")
        return self._segments(phonemizer, text, voice, float(speed))

    def _segments(
        self, phonemizer: EspeakPhonemizer, text: str, voice: str, speed: float
    ) -> Iterator[Segment]:
        for segment in phonemizer.segments(text, espeak_language(voice)):
            audio, words = self._speak(segment, voice, speed)
            yield Segment(segment.text, audio, words, segment.phonemes)

"""TEST DOUBLE: a deterministic stand-in for the Kokoro backend, for fast protocol-logic tests.

:class:`ToneBackend` implements the backend interface of :mod:`reference_server.backends` (``name``,
``sample_rate``, ``voices``, ``load()``, ``warm_up()``, ``synthesize()`` yielding its ``Segment``)
without a model: every sentence of the text is one segment, every word in it a 0.1 s sine tone whose
pitch identifies the voice. Gates let a test hold synthesis at a known point, so tests of
cancel, keepalive and look-ahead are decided by events, never by timing.

Real synthesis is tested with real Kokoro (test_kokoro_e2e.py, test_soak.py); nothing here is used by
the server itself.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator

import numpy as np

from protocol.messages import Word
from protocol.voices import Voice, is_blend
from reference_server.backends import Segment

SAMPLE_RATE = 24000
WORD_S = 0.1
"""Seconds of tone per word at speed 1.0."""
VOICES = ("af_heart", "af_bella", "am_adam", "am_michael", "bf_emma", "bm_george")
FAIL_MARKER = "FAIL"
"""A sentence containing this word makes the generator raise when it reaches it."""

_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def voice_frequency(voice: str) -> float:
    """The tone frequency of ``voice`` in Hz (distinct per voice, so cross-talk is audible to an FFT); a
    blend's is the weighted mean of its voices' (PROTOCOL.md §4.1)."""
    if is_blend(voice):
        blend = Voice.parse(voice, VOICES)
        return sum(w * voice_frequency(v) for v, w in zip(blend.voices, blend.weights, strict=True))
    return 300.0 + 100.0 * sorted(VOICES).index(voice)


def segment_texts(text: str) -> list[str]:
    """The sentences :class:`ToneBackend` makes segments of."""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def expected_samples(text: str, speed: float = 1.0) -> int:
    """Samples at 24 kHz that :class:`ToneBackend` produces for ``text``."""
    return sum(_word_samples(speed) * len(s.split()) for s in segment_texts(text))


def _word_samples(speed: float) -> int:
    return round(WORD_S / speed * SAMPLE_RATE)


class ToneBackend:
    """Test double of the Kokoro backend (see the module docstring).

    Attributes:
        load_gate: if set, ``load()`` waits for it (keeps the server "loading").
        segment_permits: if not ``None``, each segment takes a permit before it is produced; tests hand
            permits out with ``segment_permits.release(n)``.
        entered: released each time a generator is about to wait for a permit (a segment "is being
            synthesized"); tests ``acquire`` it to know synthesis has reached that point.
        open_generators: generators started and not yet finished or closed.
        segments_produced: segments yielded by ``synthesize`` generators (warm-up excluded).
        calls: ``(text, voice, speed)`` of each ``synthesize`` call, in order.
        voice_blends: requests may name blends of the voices (``blends=True``; off by default).
    """

    name = "tone"
    sample_rate = SAMPLE_RATE

    def __init__(self, voices: Iterable[str] = VOICES, *, gated: bool = False, blends: bool = False) -> None:
        self.voices = frozenset(voices)
        self.voice_blends = blends
        self.load_gate: threading.Event | None = None
        self.segment_permits: threading.Semaphore | None = threading.Semaphore(0) if gated else None
        self.entered = threading.Semaphore(0)
        self.calls: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        self.open_generators = 0
        self.segments_produced = 0
        self.warmed_up = False

    def load(self) -> None:
        if self.load_gate is not None:
            self.load_gate.wait()

    def warm_up(self) -> None:
        permits, self.segment_permits = self.segment_permits, None
        try:
            for _ in self._segments("Warm up.", "af_heart", 1.0):
                pass
        finally:
            self.segment_permits = permits
        self.segments_produced = 0
        self.warmed_up = True

    def synthesize(self, text: str, voice: str, speed: float) -> Iterator[Segment]:
        self.calls.append((text, voice, speed))
        return self._segments(text, voice, speed)

    def _segments(self, text: str, voice: str, speed: float) -> Iterator[Segment]:
        with self._lock:
            self.open_generators += 1
        try:
            for sentence in segment_texts(text):
                if self.segment_permits is not None:
                    self.entered.release()
                    self.segment_permits.acquire()
                if FAIL_MARKER in sentence.split():
                    raise RuntimeError("tone backend: asked to fail")
                words = sentence.split()
                n = _word_samples(speed)
                t = np.arange(n * len(words), dtype=np.float32) / SAMPLE_RATE
                audio = (0.3 * np.sin(2 * np.pi * voice_frequency(voice) * t)).astype(np.float32)
                timings = tuple(
                    Word(w, i * n / SAMPLE_RATE, (i + 1) * n / SAMPLE_RATE) for i, w in enumerate(words)
                )
                self.segments_produced += 1
                yield Segment(sentence, audio, timings, phonemes=sentence)
        finally:
            with self._lock:
                self.open_generators -= 1

"""A stand-in for Kokoro whose audio and speed are known exactly, on a fake clock (the capacity model of
bench §10, and a test double of tests/reference_server/test_scheduling.py).

:class:`PacedBackend` speaks like Kokoro in the ways that matter to segmentation and scheduling
(PROTOCOL.md §10.1, §10.2), and nothing else:

* every pass (every ``Segment``) starts with ``lead_s`` of silence and ends with ``tail_s`` of silence,
  as Kokoro's do (about 0.35 s and 0.45 s, measured on the int8 ONNX);
* each word is a tone of ``s_per_unit`` seconds per spoken unit (:func:`speech.segmenter.spoken_units`),
  words separated by ``gap_s`` of silence; word timings are exact;
* synthesis "takes" ``fixed_s + audio_s / xrt`` seconds: the backend advances a :class:`FakeClock` by
  that much instead of spending it, so a test runs a minute of simulated speech in milliseconds and
  every time the server measures is known in advance.

``synthesize`` cuts the text into sentences with the project's chunker, one ``Segment`` per sentence,
as the real backends do. Nothing here is used by the server itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from protocol.messages import Word
from reference_server.backends import Segment
from speech.chunker import IncrementalSentenceChunker
from speech.segmenter import spoken_units

SAMPLE_RATE = 24_000
VOICES = ("af_heart", "am_adam", "bf_emma", "ef_dora", "ff_siwis", "jf_alpha", "zf_xiaobei")


class FakeClock:
    """Monotonic seconds that only move when :meth:`advance` is called (thread-safe)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class PacedBackend:
    """Test double of a Kokoro backend with known audio and known speed (see the module docstring)."""

    name = "paced"
    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        clock: FakeClock,
        *,
        xrt: float = 3.45,
        fixed_s: float = 0.0,
        lead_s: float = 0.35,
        tail_s: float = 0.45,
        s_per_unit: float = 0.06,
        gap_s: float = 0.02,
    ) -> None:
        self.clock = clock
        self.xrt = xrt
        self.fixed_s = fixed_s
        self.lead_s = lead_s
        self.tail_s = tail_s
        self.s_per_unit = s_per_unit
        self.gap_s = gap_s
        self.voices = frozenset(VOICES)
        self.calls: list[str] = []
        self.passes: list[tuple[str, float, float]] = []  # (text, audio_s, compute_s) of every pass

    def load(self) -> None:
        pass

    def warm_up(self) -> None:
        pass

    def speak(self, text: str) -> tuple[np.ndarray, tuple[Word, ...]]:
        """One pass over ``text``: its audio (float32 at 24 kHz) and word timings; no clock change."""
        rate = SAMPLE_RATE
        pieces = [np.zeros(round(self.lead_s * rate), dtype=np.float32)]
        words = []
        at = len(pieces[0])
        for index, word in enumerate(text.split()):
            if index:
                gap = np.zeros(round(self.gap_s * rate), dtype=np.float32)
                pieces.append(gap)
                at += len(gap)
            n = max(1, round(spoken_units(word) * self.s_per_unit * rate))
            t = np.arange(n, dtype=np.float32) / rate
            pieces.append((0.2 * np.sin(2 * np.pi * 440.0 * t) + 0.4).astype(np.float32))  # never near 0
            words.append(Word(word, at / rate, (at + n) / rate))
            at += n
        pieces.append(np.zeros(round(self.tail_s * rate), dtype=np.float32))
        return np.concatenate(pieces), tuple(words)

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Iterator[Segment]:
        if voice not in self.voices:
            raise ValueError(f"unknown voice {voice!r}")
        self.calls.append(text)
        return self._segments(text)

    def _segments(self, text: str) -> Iterator[Segment]:
        chunker = IncrementalSentenceChunker("en", markdown=False)
        sentences = chunker.feed(text)
        if (last := chunker.flush()) is not None:
            sentences.append(last)
        for sentence in sentences:
            audio, words = self.speak(sentence)
            audio_s = len(audio) / SAMPLE_RATE
            compute_s = self.fixed_s + audio_s / self.xrt
            self.clock.advance(compute_s)
            self.passes.append((sentence, audio_s, compute_s))
            yield Segment(sentence, audio, words, phonemes=sentence)

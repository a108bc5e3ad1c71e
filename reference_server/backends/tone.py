"""``--backend tone``: the shipped server with a deterministic tone synthesizer in place of Kokoro.

Everything but the model is the reference server's own: the runtime, the scheduler and its speed model,
the segmenter, the per-language text front-end and G2P (:mod:`reference_server.backends.g2p`), the split
of a pass into its text side and its decoder (:meth:`Backend.align`, :meth:`Backend.decode`), aborts on
cancel, the HTTP routes and the encoders. Only :meth:`ToneBackend._speak` differs: where Kokoro predicts
each phoneme token's duration and decodes audio, this backend gives each token a fixed duration by its
kind and renders a tone for each word. So the whole conformance suite can run against the shipped code in
about a minute with no model weights (mutation testing, issue #31); Kokoro stays the default and what
``make conformance`` certifies.

The audio, for a pass of phoneme tokens ``t_0 … t_{n+1}`` (start token, symbols, end token):

* each token lasts :data:`START_FRAMES`, :data:`PHONEME_FRAMES`, :data:`SPACE_FRAMES`,
  :data:`PAUSE_FRAMES` or :data:`END_FRAMES` frames of 600 samples (Kokoro's 25 ms), divided by the
  speed (at least one frame), as Kokoro's durations shrink with speed;
* a word's frames carry a tone at the voice's pitch (:func:`voice_pitch`; a blend's is the weighted mean of
  its voices', since its "pack" is the weighted mean of theirs, :meth:`Backend.resolve_voice`) with a
  second partial at 2.5 times the pitch, faded in and out over 10 ms; every other frame is silence, so the
  start token's frames are the pass's lead-in (§5.2) and word timings (§5.3) are exact;
* the pass takes real time: ``FIXED_S + audio_s / xrt`` seconds (default 20 times faster than real time),
  so requests are queued, active and cancelled mid-pass as on a real model, and a cancel aborts the wait
  (:class:`~reference_server.backends.base.AbortSignal`).
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from protocol.voices import KOKORO_VOICES
from reference_server.backends.base import (
    SAMPLE_RATE,
    Alignment,
    Backend,
    Segment,
    current_abort,
)
from reference_server.backends.g2p import PhonemeSegment

__all__ = ["DEFAULT_XRT", "FIXED_S", "ToneBackend", "token_frames", "voice_pitch"]

CONFIG = Path(__file__).resolve().parents[1] / "data" / "kokoro-v1_0.config.json"
"""Kokoro's phoneme vocabulary (shipped with the package): the G2P keeps only symbols the model knows."""

START_FRAMES = 16
"""The start token: 400 ms at speed 1, within Kokoro's usual 14 to 20 frames (its lead-in is 45 % of it)."""
PHONEME_FRAMES = 3
"""One phoneme symbol: 75 ms, about Kokoro's 12 to 14 symbols a second."""
SPACE_FRAMES = 1
"""A space between words."""
PAUSE_FRAMES = 8
"""A punctuation mark's pause (200 ms)."""
END_FRAMES = 8
"""The end token: the tail of silence after the last word."""

DEFAULT_XRT = 20.0
"""How many times faster than real time a pass runs by default: fast, yet long enough for a cancel to land
mid-pass."""
FIXED_S = 0.005
"""Fixed cost of one pass, seconds."""

_PAUSES = frozenset('.,!?;:—…"()“”«»¡¿、。，！？；：')
_FADE_S = 0.01


def voice_pitch(voice: str) -> float:
    """A plain voice's tone frequency in Hz: 140 to 299, fixed per name (distinct enough to tell apart)."""
    return 140.0 + zlib.crc32(voice.encode()) % 160


def token_frames(phonemes: str, speed: float) -> list[int]:
    """Each token's duration in frames for ``phonemes`` at ``speed``: ``len(phonemes) + 2`` entries (start
    token, one per symbol, end token), each at least 1, shrinking with speed as Kokoro's do."""

    def scaled(frames: int) -> int:
        return max(1, round(frames / speed))

    body = [
        scaled(SPACE_FRAMES if s.isspace() else PAUSE_FRAMES if s in _PAUSES else PHONEME_FRAMES)
        for s in phonemes
    ]
    return [scaled(START_FRAMES), *body, scaled(END_FRAMES)]


class ToneBackend(Backend):
    """The reference server's backend interface with tones for audio (see the module docstring).

    Args:
        languages: the language codes to serve; ``None``: every language whose G2P is installed.
        xrt: how many times faster than real time a pass runs (``math.inf``: only :data:`FIXED_S` per pass).
        lazy_g2p: load a language's G2P when a text first needs it, not in :meth:`load` (a server started
            per mutant, most of which speak one language, starts about a second sooner).

    Raises:
        ValueError: ``xrt`` is not positive.
    """

    name = "tone"
    aligns = True

    def __init__(
        self, languages: Iterable[str] | None = None, *, xrt: float = DEFAULT_XRT, lazy_g2p: bool = False
    ) -> None:
        if not xrt > 0:
            raise ValueError(f"xrt must be positive, not {xrt}")
        super().__init__(languages)
        self.xrt = xrt
        self.lazy_g2p = lazy_g2p

    def load(self) -> None:
        """Load the G2P of every language served (about a second: espeak-ng, misaki, jieba), or with
        ``lazy_g2p`` each on first use; there is no model."""
        self._load_phonemizer(CONFIG, lazy=self.lazy_g2p)
        self._packs = {v: np.float64(voice_pitch(v)) for v in KOKORO_VOICES if v in self.voices}

    def _speak(self, segment: PhonemeSegment, pack: Any, speed: float) -> tuple[np.ndarray, Sequence[int]]:
        alignment = self._align(segment, pack, speed)
        return self.decode(alignment).audio, alignment.durations

    def _align(self, segment: PhonemeSegment, pack: Any, speed: float) -> Alignment:
        return Alignment.of(segment, token_frames(segment.phonemes, speed), speed, float(pack))

    def decode(self, alignment: Alignment) -> Segment:
        """The tones of an :meth:`align` result, after the pass's compute time.

        Raises:
            reference_server.backends.base.PassAborted: the request's abort signal was set meanwhile.
        """
        audio = np.zeros(alignment.samples, dtype=np.float32)
        pitch = float(alignment.features)
        fade = round(_FADE_S * SAMPLE_RATE)
        for word in alignment.words:
            start, end = round(word.start_s * SAMPLE_RATE), round(word.end_s * SAMPLE_RATE)
            if end - start < 2:
                continue
            t = np.arange(end - start) / SAMPLE_RATE
            wave = 0.25 * np.sin(2 * math.pi * pitch * t) + 0.08 * np.sin(2 * math.pi * 2.5 * pitch * t)
            ramp = np.minimum(1.0, np.minimum(np.arange(end - start), np.arange(end - start)[::-1]) / fade)
            audio[start:end] = wave * ramp
        self._compute(FIXED_S + alignment.samples / SAMPLE_RATE / self.xrt)
        segment = alignment.segment
        return Segment(segment.text, audio, alignment.words, segment.phonemes)

    @staticmethod
    def _compute(seconds: float) -> None:
        """Take ``seconds`` of wall time as a model pass would, ended early by the request's abort signal."""
        if not math.isfinite(seconds):
            return
        signal = current_abort()
        if signal is None:
            time.sleep(seconds)
            return
        stopped = threading.Event()
        with signal.hook(stopped.set):
            if stopped.wait(seconds):
                raise signal.stopped()

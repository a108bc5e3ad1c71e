"""Checks on received audio: plausible length for the text, real little-endian PCM, not silence (no I/O).

The protocol fixes the format (PCM16LE mono at the declared rate, PROTOCOL.md §3.3.1) but not the voice, so
the checks are bounds a speech synthesizer at a sane rate meets and a broken stream does not:

* **length**: at speed 1 spoken English runs at about 10–20 characters per second; Kokoro-82M speaks the
  REFERENCE.md §3 texts at about 16 (``"Hello there."``: 12 characters, 1.525 s) and pads short texts
  with about a second of breath and silence. :func:`duration_bounds` allows 0.03 to 0.15 s per character
  plus 1.5 s, divided by ``speed``: audio cut to a fraction, or several times too long (a wrong
  ``sample_rate`` in the header, doubled audio), falls outside. A CJK character (kanji, kana, hanzi) is a
  syllable or more: it counts 0.12 to 0.45 s (Kokoro: about 0.3 for Japanese and Chinese), so Japanese or
  Chinese read with another language's G2P (spelled out letter by letter, or skipped) falls outside too.
* **voice**: :func:`voice_distance_db` compares two recordings' long-term spectra (mean power per frequency
  up to 4 kHz, in dB): a voice's timbre whatever the words' timing. Two Kokoro voices are several dB apart
  (af_bella and af_sky about 7), a 2:1 blend of them about 3 dB from the first and 5 from the second, and
  the same voice twice 0 dB (onnx) or a fraction of a dB.
* **byte order**: speech is smooth sample to sample, so the mean absolute step between consecutive samples
  is small next to the mean level (0.2 at 24 kHz, 0.43 at 8 kHz for Kokoro); the same samples read with
  the wrong byte order look like noise (about 1.3). :data:`MAX_ROUGHNESS` sits between.
* **level**: speech has an RMS level well above digital silence.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    "MAX_ROUGHNESS",
    "MIN_RMS",
    "check_speech",
    "duration_bounds",
    "rms",
    "roughness",
    "voice_distance_db",
]

MAX_ROUGHNESS = 0.9
"""Highest :func:`roughness` accepted as speech read with the right byte order (see the module docstring)."""

MIN_RMS = 100.0
"""Lowest RMS level (of 32768) accepted as audible speech; Kokoro speaks at about 2000."""

SECONDS_PER_CHAR_MIN = 0.03
SECONDS_PER_CHAR_MAX = 0.15
SECONDS_PER_SYLLABLE_MIN = 0.12
SECONDS_PER_SYLLABLE_MAX = 0.45
PADDING_MAX_S = 1.5
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


def duration_bounds(text: str, speed: float = 1.0) -> tuple[float, float]:
    """``(low, high)`` seconds a synthesizer plausibly takes to speak ``text`` at ``speed``."""
    chars = len(text.strip())
    syllables = len(_CJK.findall(text))
    low = SECONDS_PER_CHAR_MIN * (chars - syllables) + SECONDS_PER_SYLLABLE_MIN * syllables
    high = PADDING_MAX_S + SECONDS_PER_CHAR_MAX * (chars - syllables) + SECONDS_PER_SYLLABLE_MAX * syllables
    return low / speed, high / speed


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float64)


def rms(pcm: bytes) -> float:
    """Root-mean-square level of PCM16LE ``pcm`` (0 for no samples)."""
    x = _samples(pcm)
    return float(np.sqrt(np.mean(x * x))) if len(x) else 0.0


def roughness(pcm: bytes) -> float:
    """Mean absolute difference of consecutive samples over the mean absolute level (PCM16LE ``pcm``)."""
    x = _samples(pcm)
    level = float(np.mean(np.abs(x))) if len(x) else 0.0
    if len(x) < 2 or level == 0.0:
        return 0.0
    return float(np.mean(np.abs(np.diff(x)))) / level


def check_speech(pcm: bytes, sample_rate: int, text: str, speed: float = 1.0) -> list[str]:
    """Problems with ``pcm`` as the speech of ``text`` at ``sample_rate`` and ``speed`` (empty: none)."""
    problems = []
    seconds = len(pcm) / 2 / sample_rate
    low, high = duration_bounds(text, speed)
    if not low <= seconds <= high:
        problems.append(
            f"{seconds:.3f} s of audio for {len(text.strip())} characters at speed {speed} "
            f"(plausible: {low:.2f} to {high:.2f} s)"
        )
    level = rms(pcm)
    if level < MIN_RMS:
        problems.append(f"the audio is (near) silence: RMS {level:.1f} of 32768")
    rough = roughness(pcm)
    if rough > MAX_ROUGHNESS:
        problems.append(
            f"the samples look like noise (roughness {rough:.2f} > {MAX_ROUGHNESS}): not PCM16 little-endian?"
        )
    return problems


VOICE_SPECTRUM_MAX_HZ = 4000.0
"""The voice spectrum stops at 4 kHz: the band every sample rate of §4.1 carries, where formants live."""

VOICE_WINDOW_S = 0.0427
"""Spectrum window, seconds (1,024 samples at 24 kHz): about 23 Hz per bin, finer than pitch steps."""


def voice_spectrum_db(pcm: bytes, sample_rate: int) -> np.ndarray:
    """Long-term average spectrum of PCM16LE ``pcm`` up to 4 kHz in dB (Hann windows, half overlapping)."""
    n = max(64, round(VOICE_WINDOW_S * sample_rate))
    x = _samples(pcm) / 32768.0
    if len(x) < n:
        x = np.pad(x, (0, n - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[:: n // 2] * np.hanning(n)
    power = np.mean(np.abs(np.fft.rfft(frames, axis=1)) ** 2, axis=0)
    return 10 * np.log10(power[: int(n * VOICE_SPECTRUM_MAX_HZ / sample_rate)] + 1e-12)


def voice_distance_db(a: bytes, b: bytes, sample_rate: int) -> float:
    """How far apart two voices sound: the RMS difference of their :func:`voice_spectrum_db`, in dB.

    Both are PCM16LE at ``sample_rate``; they may differ in length (the same text in two voices rarely
    lasts the same)."""
    return float(
        np.sqrt(np.mean((voice_spectrum_db(a, sample_rate) - voice_spectrum_db(b, sample_rate)) ** 2))
    )

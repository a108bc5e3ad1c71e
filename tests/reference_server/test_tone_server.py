"""``--backend tone``: the shipped server with a tone synthesizer (reference_server/backends/tone.py).

The backend itself: durations, word timings, lead-in, abort mid-pass, blends. That the whole conformance
suite passes against ``python -m reference_server --backend tone``, as against Kokoro, is the control run
of every mutation test (tests/conformance/test_mutation.py: the unmutated tree must pass every case).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from reference_server.backends import create_backend
from reference_server.backends.base import FRAME_SAMPLES, SAMPLE_RATE, AbortSignal, PassAborted, aborting
from reference_server.backends.tone import START_FRAMES, ToneBackend, token_frames, voice_pitch
from reference_server.settings import load_settings


@pytest.fixture(scope="module")
def tone() -> ToneBackend:
    backend = ToneBackend(["a", "j"], xrt=float("inf"))
    backend.load()
    return backend


def test_settings_and_the_factory_know_the_tone_backend() -> None:
    assert load_settings(["--backend", "tone"], environ={}).backend == "tone"
    assert isinstance(create_backend("tone"), ToneBackend)
    with pytest.raises(ValueError, match="xrt must be positive"):
        ToneBackend(xrt=0)


def test_durations_shrink_with_speed_and_never_vanish() -> None:
    assert token_frames("hˈɛloʊ.", 1.0) == [START_FRAMES, 3, 3, 3, 3, 3, 3, 8, 8]
    fast = token_frames("a b", 2.0)
    assert fast == [8, 2, 1, 2, 4] and min(token_frames("a b", 2.0)) >= 1


@pytest.mark.parametrize(
    ("text", "voice"), [("Hello there, quiet world.", "af_heart"), ("こんにちは。", "jf_alpha")]
)
def test_words_are_tones_where_their_timings_say_and_silence_elsewhere(tone, text, voice) -> None:
    (segment,) = tone.synthesize(text, voice, 1.0)
    audio = segment.audio
    assert audio.dtype == np.float32 and len(audio) % FRAME_SAMPLES == 0
    assert segment.words, "word timings for every language"
    voiced = np.zeros(len(audio), dtype=bool)
    for word in segment.words:
        start, end = round(word.start_s * SAMPLE_RATE), round(word.end_s * SAMPLE_RATE)
        assert end > start and np.sqrt(np.mean(audio[start:end] ** 2)) > 0.1, word
        voiced[start:end] = True
    assert not np.any(audio[~voiced]), "only words make sound"
    lead_in = round(segment.words[0].start_s * SAMPLE_RATE)
    assert lead_in >= START_FRAMES * FRAME_SAMPLES, "the start token's frames are the lead-in"
    spectrum = np.abs(np.fft.rfft(audio))
    assert abs(np.argmax(spectrum) * SAMPLE_RATE / len(audio) - voice_pitch(voice)) < 2.0


def test_a_blend_sounds_between_its_voices(tone) -> None:
    pitch = {}
    for voice in ("af_heart", "am_adam", "af_heart(1)+am_adam(3)"):
        (segment,) = tone.synthesize("Hello.", voice, 1.0)
        spectrum = np.abs(np.fft.rfft(segment.audio))
        pitch[voice] = np.argmax(spectrum) * SAMPLE_RATE / len(segment.audio)
    expected = 0.25 * voice_pitch("af_heart") + 0.75 * voice_pitch("am_adam")
    assert abs(pitch["af_heart(1)+am_adam(3)"] - expected) < 2.0


def test_a_pass_takes_its_time_and_an_abort_ends_it_at_once() -> None:
    backend = ToneBackend(["a"], xrt=1.0)  # real time: a 2 s sentence is a 2 s pass
    backend.load()
    text = "One two three four five six seven eight nine ten eleven twelve."
    signal = AbortSignal()
    threading.Timer(0.2, signal.set).start()
    started = time.monotonic()
    with aborting(signal), pytest.raises(PassAborted):
        list(backend.synthesize(text, "af_heart", 1.0))
    assert time.monotonic() - started < 1.0 and signal.aborted == 1
    backend.xrt = 20.0
    started = time.monotonic()
    (segment,) = backend.synthesize(text, "af_heart", 1.0)
    elapsed, audio_s = time.monotonic() - started, len(segment.audio) / SAMPLE_RATE
    assert audio_s / 20 <= elapsed < audio_s / 20 + 1.0

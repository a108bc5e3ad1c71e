"""All 54 voices, nine languages, both backends, offline (issue 14; PROTOCOL.md §14.1).

Every voice speaks its language's native sentence (g2p_battery.NATIVE) on the ONNX and on the torch
backend: the phonemes are the pinned ones of its language (so a voice never reads its text with another
language's G2P), the audio is non-silent and as long as that many phonemes take to say, and the word
timings cover the sentence's words in order inside the audio.

Cost: each backend is loaded once, the voices of a language share one three-word sentence, and it is
spoken at speed 2, which halves the audio the model computes (Kokoro divides every duration by the
speed, so the bounds below are divided by it too). 108 short syntheses; the torch backend on a CPU is
the slower half.
"""

from __future__ import annotations

import numpy as np
import pytest
from g2p_battery import NATIVE, VOICE_OF, key, load
from test_backends import TORCH_READY, needs_torch, rms, seconds

from protocol.voices import KOKORO_VOICES, LANGUAGES, VOICE_LANGUAGE

PINNED = load()
SPEED = 2.0


@pytest.fixture(scope="module")
def onnx_backend(kokoro_assets):
    from reference_server.backends import create_backend

    backend = create_backend("onnx", model_dir=kokoro_assets.directory)
    backend.load()
    return backend


@pytest.fixture(scope="module")
def torch_backend(kokoro_assets):
    from reference_server.backends import create_backend

    if not TORCH_READY:
        pytest.skip("the torch extra (torch, kokoro, onnx) is not installed")
    backend = create_backend("torch", model_dir=kokoro_assets.directory, device="cpu")
    backend.load()
    return backend


@pytest.fixture(scope="module")
def kokoro_assets():
    from reference_server import assets

    return assets.fetch()


@pytest.fixture(params=["onnx", pytest.param("torch", marks=needs_torch)])
def backend(request):
    return request.getfixturevalue(f"{request.param}_backend")


def test_both_backends_offer_all_54_voices_with_word_timings(onnx_backend):
    assert onnx_backend.voices == KOKORO_VOICES
    assert onnx_backend.word_timing_languages == set(LANGUAGES)


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_every_voice_speaks_its_native_sentence(backend, code):
    text = NATIVE[code]
    voices = sorted(v for v in KOKORO_VOICES if VOICE_LANGUAGE[v] == code)
    assert voices and set(voices) <= backend.voices
    for voice in voices:
        segments = list(backend.synthesize(text, voice, SPEED))
        phonemes = [segment.phonemes for segment in segments]
        assert phonemes == PINNED[key(VOICE_OF[code], text)], voice  # the language's own G2P
        audio = np.concatenate([segment.audio for segment in segments])
        tokens = sum(len(p) for p in phonemes)
        # Kokoro speaks 8 to 25 phoneme symbols a second at speed 1, plus about half a second of lead-in
        # and tail; a wrong language or a truncated text falls outside.
        low, high = (tokens / 25 + 0.3) / SPEED, (tokens / 8 + 1.2) / SPEED
        assert low < seconds(audio) < high, (voice, seconds(audio), tokens)
        assert rms(audio) > 0.02 and np.abs(audio).max() > 0.2, voice
        assert len(segments) == 1, voice  # so the words' times are all from the first sample
        words = segments[0].words
        assert len(words) >= 2, voice
        starts = [w.start_s for w in words]
        assert starts == sorted(starts) and all(w.start_s < w.end_s for w in words), voice
        assert 0 < words[0].start_s and words[-1].end_s <= seconds(audio), voice

"""A speech's lead-in goes out before its first segment is decoded (PROTOCOL.md §10.1), on the real weights.

The onnx backend runs Kokoro's text side and decoder as two sessions (``split_model``); these tests hold
the split to the one-pass audio sample for sample, the lead-in's digital silence to Kokoro's own samples
within :data:`LEAD_IN_ERROR_BOUND`, and the runtime's two-step first segment to the one-step one: same
length, same word timings, same samples after the lead-in. Nothing is timed (the benchmark measures first
audio: ``python -m bench first_audio``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

from protocol.messages import SynthesisRequest
from reference_server import assets
from reference_server.backends.base import FRAME_SAMPLES, LEAD_IN_ERROR_BOUND, lead_in_frames
from reference_server.backends.onnx_backend import OnnxBackend
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Runtime
from reference_server.settings import Settings

GUARD = 60.0
"""Seconds: only guards against hangs; nothing is timed."""


@pytest.fixture(scope="module")
def backends() -> tuple[OnnxBackend, OnnxBackend]:
    """The same weights twice: split in two sessions, and as one session (the one-pass reference)."""
    pytest.importorskip("onnx")
    directory = assets.fetch().directory
    split = OnnxBackend(directory, languages=["a", "b"], split=True)
    whole = OnnxBackend(directory, languages=["a", "b"], split=False)
    split.load()
    whole.load()
    assert split.aligns and not whole.aligns
    return split, whole


# Texts and voices other than those the lead-in rule was measured on (lead_in_frames' docstring).
CASES = [
    ("Good morning.", "af_sky", 1.0),
    ("Certainly, I can", "am_adam", 1.0),
    ("Fine.", "bf_isabella", 1.3),
    ("Seven", "bm_lewis", 0.7),
]


@pytest.mark.parametrize(("text", "voice", "speed"), CASES)
def test_the_split_graph_speaks_the_one_pass_audio_and_the_lead_in_is_silence(backends, text, voice, speed):
    split, whole = backends
    (one_pass,) = whole.synthesize(text, voice, speed)
    (two_steps,) = split.synthesize(text, voice, speed)
    (alignment,) = split.align(text, voice, speed)
    decoded = split.decode(alignment)
    # The decoder's inputs are the graph's own tensors: the same samples, not merely close ones.
    assert np.array_equal(two_steps.audio, one_pass.audio)
    assert np.array_equal(decoded.audio, one_pass.audio)
    assert alignment.samples == len(one_pass.audio) == FRAME_SAMPLES * sum(alignment.durations)
    assert alignment.words == decoded.words == one_pass.words
    frames = lead_in_frames(alignment.durations[0], speed)
    assert alignment.lead_in_samples == FRAME_SAMPLES * frames > 0
    lead_in = one_pass.audio[: alignment.lead_in_samples]
    assert np.abs(lead_in).max() <= LEAD_IN_ERROR_BOUND
    # ... and the lead-in is not all of the silence: the first word starts after it.
    assert one_pass.words[0].start_s * 24_000 > alignment.lead_in_samples


def _speak(split: OnnxBackend, lead_in: str, request: SynthesisRequest):
    runtime = Runtime(replace(Settings(), lead_in=lead_in), split)

    async def pieces():
        audio = RequestAudio(runtime, request)
        out = []
        while (piece := await audio.next()) is not None:
            out.append(piece)
        audio.close()
        return out

    try:
        return asyncio.run(asyncio.wait_for(pieces(), GUARD))
    finally:
        runtime.scheduler.close()


def _pcm(pieces) -> np.ndarray:
    return np.frombuffer(b"".join(piece.pcm for piece in pieces), dtype="<i2").astype(np.int32)


def test_the_runtime_sends_the_lead_in_first_and_then_the_same_audio(backends):
    """Same request, lead_in early vs off: one more piece in front (the lead-in, zeros, no text), then
    the same samples, the same length, the same word timings and the same segment spans."""
    split, _ = backends
    text = "Happy to help. Your order shipped today."
    request = SynthesisRequest(text=text, voice="af_heart", request_id="l")
    early = _speak(split, "early", request)
    off = _speak(split, "off", request)
    head, rest = early[0], early[1:]
    assert head.text is None and head.words is None and head.pcm and not any(head.pcm)
    sent = len(head.pcm) // 2
    assert sent % FRAME_SAMPLES == 0 and sent >= 4 * FRAME_SAMPLES  # at least 100 ms of lead-in
    pcm_early, pcm_off = _pcm(early), _pcm(off)
    assert len(pcm_early) == len(pcm_off)
    assert np.array_equal(pcm_early[sent:], pcm_off[sent:])  # after the lead-in: the same samples
    assert np.abs(pcm_off[:sent]).max() <= LEAD_IN_ERROR_BOUND * 32767 + 1  # what the zeros replaced
    assert [p.words for p in rest] == [p.words for p in off]
    assert [(p.text, p.start_s, p.end_s) for p in rest] == [(p.text, p.start_s, p.end_s) for p in off]
    assert rest[0].start_s == 0.0  # the first segment's span still starts at the request's first sample


def test_a_request_that_asks_for_marks_gets_its_segment_in_one_piece(backends):
    """A marks frame comes before its segment's audio (§5.5): no lead-in piece without a text."""
    split, _ = backends
    request = SynthesisRequest(text="Happy to help.", voice="af_heart", request_id="m", marks=True)
    pieces = _speak(split, "early", request)
    assert pieces[0].text == "Happy to help."

"""Real Kokoro-82M synthesis of real text, end to end through ``python -m reference_server``.

The server runs as the containers run it (the entry command, in a subprocess, on a loopback port) with
the real ONNX backend for the WebSocket and POST routes, and once with the torch backend. The expected
lengths are the issue's acceptance ranges (REFERENCE.md §3 has the AWS sample's figures: 1.525 s,
2.250 s, 2.050 s).
"""

from __future__ import annotations

import re
import time

import httpx
import numpy as np
import pytest
from server_harness import ServerProcess, kokoro_assets_available, run
from ws_conversation import GUARD_S, open_session

from protocol.pcm import parse_wav_header

SENTENCES = {
    "Hello there.": (0.8, 2.3),
    "This is a deployment check.": (1.2, 3.0),
    "It has three sentences.": (1.2, 2.8),
}
"""Text → accepted audio length in seconds (the issue's acceptance ranges)."""


def assert_speech(pcm: bytes, sample_rate: int, text: str) -> float:
    """Audio of ``text`` is within its accepted length and not silent; returns its length in seconds."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    seconds = len(samples) / sample_rate
    low, high = SENTENCES[text]
    assert low <= seconds <= high, f"{text!r}: {seconds:.3f} s is outside [{low}, {high}]"
    rms = float(np.sqrt(np.mean(samples**2)))
    assert rms > 0.01 and np.abs(samples).max() > 0.1, f"{text!r} is (nearly) silent: rms {rms:.4f}"
    return seconds


def test_websocket_speaks_the_three_sentences(kokoro_server):
    """Sent exactly as the AWS sample's client sends them (REFERENCE.md §3): BINARY frames holding
    ``{text, voice, request_timestamp}`` with no request_id, all three pipelined on one session."""

    async def scenario():
        async with open_session(kokoro_server.ws_url) as conv:
            for text in SENTENCES:
                await conv.send(
                    {"text": text, "voice": "af_heart", "request_timestamp": time.time()}, expect=True
                )
            for text in SENTENCES:
                answer = await conv.until_complete()
                assert answer.start.sample_rate == 24000
                assert answer.complete.status == "completed"
                seconds = assert_speech(answer.pcm, 24000, text)
                assert answer.complete.total_duration_s == pytest.approx(seconds)

    run(scenario())


def test_post_invocations_speaks_the_three_sentences(kokoro_server):
    with httpx.Client(base_url=kokoro_server.http_url, timeout=GUARD_S) as client:
        for text in SENTENCES:
            response = client.post("/invocations", json={"text": text, "voice": "af_heart"})
            assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
            header = parse_wav_header(response.content)
            assert (header.sample_rate, header.data_bytes) == (24000, None)  # streamed: size unknown
            assert_speech(response.content[44:], 24000, text)


def test_long_text_is_cut_into_segments_and_cancel_stops_it(kokoro_server):
    """A long request streams segment by segment; cancel after its first audio ends it early (§4.2)."""
    text = " ".join(
        [
            "Streaming speech starts with the first sentence.",
            "The second sentence is synthesized while the first one plays.",
            "A third one follows, and then a fourth, each its own segment.",
            "This last sentence is never reached because the client cancels.",
        ]
    )

    async def scenario():
        async with open_session(kokoro_server.ws_url) as conv:
            rid = await conv.request(text)
            await conv.until_audio(rid)
            await conv.send({"type": "cancel", "request_id": rid})
            answer = await conv.until_complete(rid)
            assert answer.complete.status == "cancelled"
            seconds = len(answer.pcm) / 2 / 24000
            assert 0 < seconds < 8, f"{seconds:.1f} s of audio after cancel: more than about one segment"
            after = await conv.until_complete(await conv.request("Hello there."))
            assert_speech(after.pcm, 24000, "Hello there.")

    run(scenario())


@pytest.fixture(scope="module")
def torch_server():
    missing = kokoro_assets_available()
    if missing:
        pytest.fail(missing)
    server = ServerProcess("--backend", "torch")
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def test_torch_backend_speaks_the_three_sentences_with_word_timings(torch_server):
    async def scenario():
        async with open_session(torch_server.ws_url) as conv:
            for text in SENTENCES:
                answer = await conv.until_complete(await conv.request(text, voice="af_heart"))
                seconds = assert_speech(answer.pcm, 24000, text)
                words = answer.complete.words
                assert words, "the torch backend gives word timings"
                spoken = [re.sub(r"\W", "", w.word).lower() for w in words]
                assert spoken == [re.sub(r"\W", "", w).lower() for w in text.split()]
                assert all(0 <= w.start_s <= w.end_s <= seconds + 0.05 for w in words)
                assert [w.start_s for w in words] == sorted(w.start_s for w in words)

    run(scenario())


def test_markdown_and_figures_are_spoken_as_their_words(kokoro_server):
    """§14.2: the markdown of an LLM's text is not read aloud and its figures are read as words, so the
    text sounds as long as its normalized words do, not as its symbols spelled out."""
    written = "## Price\n**It costs $1,234.50** today 🎉"
    said = "Price\nIt costs one thousand two hundred and thirty-four dollars and fifty cents today"
    with httpx.Client(base_url=kokoro_server.http_url, timeout=GUARD_S) as client:
        lengths = []
        for text in (written, said):
            response = client.post("/invocations", json={"text": text, "voice": "af_heart", "stream": False})
            assert response.status_code == 200
            samples = np.frombuffer(response.content[44:], "<i2")
            assert np.abs(samples).max() > 3000
            lengths.append(len(samples) / 24000)
    assert lengths[1] > 3.0
    assert lengths[0] == pytest.approx(lengths[1], rel=0.1), lengths


def test_torch_word_timings_are_the_spoken_words(torch_server):
    """§14.2: ``words`` are the words as spoken, after normalization."""

    async def scenario():
        async with open_session(torch_server.ws_url) as conv:
            answer = await conv.until_complete(
                await conv.request("**It costs $5** at 10:30.", voice="af_heart")
            )
            spoken = [re.sub(r"\W", "", w.word).lower() for w in answer.complete.words]
            assert spoken == ["it", "costs", "five", "dollars", "at", "ten", "thirty"]

    run(scenario())

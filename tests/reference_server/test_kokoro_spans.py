"""Text spans of word timings on the reference server with real Kokoro (PROTOCOL.md §14.4): the G2P gives
each word its token's position, RequestAudio / UtteranceAudio move it back through the segment, the
sentence, the front-end's piece and an inline form into the text as the client wrote it. Both backends
(onnx on the CPU; torch where its extra is installed) share this code."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import httpx
import pytest
from server_harness import GUARD_S

from protocol import schemas
from protocol.messages import SynthesisRequest
from protocol.sse import SSEDecoder
from reference_server import assets
from reference_server.backends import create_backend
from reference_server.backends.g2p import word_sources
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Runtime
from reference_server.settings import Settings
from reference_server.utterance import UtteranceAudio

TORCH_READY = all(importlib.util.find_spec(name) for name in ("torch", "kokoro", "onnx"))
LANGUAGES = ["a", "j", "z"]


@pytest.fixture(scope="module")
def onnx():
    backend = create_backend("onnx", model_dir=assets.fetch().directory, languages=LANGUAGES)
    backend.load()
    return backend


@pytest.fixture(scope="module")
def torch_backend():
    if not TORCH_READY:
        pytest.skip("the torch extra (torch, kokoro, onnx) is not installed")
    backend = create_backend("torch", model_dir=assets.fetch().directory, languages=["a"])
    backend.load()
    return backend


def spoken(backend, request: SynthesisRequest, *, fragments: list[str] | None = None, flush_at: int = -1):
    """The pieces of a request (or of an utterance fed ``fragments``), as the server makes them."""
    runtime = Runtime(Settings(), backend)

    async def pieces():
        if fragments is None:
            audio = RequestAudio(runtime, request)
        else:
            audio = UtteranceAudio(runtime, request)
            for index, fragment in enumerate(fragments):
                audio.append(fragment)
                if index == flush_at:
                    audio.flush()
            audio.end()
        out = []
        while (piece := await audio.next()) is not None:
            out.append(piece)
        audio.close()
        return out

    try:
        return asyncio.run(asyncio.wait_for(pieces(), GUARD_S))
    finally:
        runtime.scheduler.close()


def read(backend, text: str, voice: str = "af_heart", **fields) -> list[tuple[str, str]]:
    """Each word timing with the text its span reads."""
    request = SynthesisRequest(request_id="s", text=text, voice=voice, **fields)
    words = [w for piece in spoken(backend, request) for w in piece.words or ()]
    assert words and all(w.span is not None for w in words), words
    return [(w.word, text[w.text_start : w.text_end]) for w in words]


def test_words_read_the_text_as_written(onnx):
    text = "# Prices\nIt costs **$12.50** today, said Dr. Smith 🎉🎉 at 10:30. I [read](/ɹˈɛd/) it."
    assert read(onnx, text) == [
        ("Prices", "Prices"),
        ("It", "It"),
        ("costs", "costs"),
        *[(word, "$12.50") for word in ("twelve", "dollars", "and", "fifty", "cents")],
        ("today,", "today,"),
        ("said", "said"),
        ("Dr.", "Dr."),
        ("Smith", "Smith"),
        ("at", "at"),
        ("ten", "10:30"),
        ("thirty.", "10:30."),
        ("I", "I"),
        ("read", "[read](/ɹˈɛd/)"),  # an inline form reads as written, brackets and all (§14.3)
        ("it.", "it."),
    ]


def test_cjk_words_cover_what_they_read(onnx):
    assert read(onnx, "今天🎉天气很好。", voice="zf_xiaobei") == [
        ("今天天气", "今天🎉天气"),
        ("很", "很"),
        ("好", "好"),
    ]
    assert read(onnx, "今日はいい天気です。", voice="jf_alpha") == [
        ("今日", "今日"),
        ("は", "は"),
        ("いい", "いい"),
        ("天気", "天気"),
        ("です", "です"),
    ]


def test_sentence_segmentation_gives_the_same_spans(onnx):
    text = "First one here. Then **two** costs $3. Last 🎉 one!"
    runtime_default = read(onnx, text)
    request = SynthesisRequest(request_id="s", text=text, voice="af_heart")
    runtime = Runtime(Settings(segmentation="sentence"), onnx)

    async def pieces():
        audio = RequestAudio(runtime, request)
        out = []
        while (piece := await audio.next()) is not None:
            out.append(piece)
        audio.close()
        return out

    try:
        words = [w for p in asyncio.run(asyncio.wait_for(pieces(), GUARD_S)) for w in p.words or ()]
    finally:
        runtime.scheduler.close()
    assert [(w.word, text[w.text_start : w.text_end]) for w in words] == runtime_default


def test_an_utterance_counts_its_fragments_joined_across_a_flush(onnx):
    text = "Hello there. It costs **$12.50** 🎉 today.\nDone, said Dr. Smith."
    fragments = [text[i : i + 3] for i in range(0, len(text), 3)]
    request = SynthesisRequest(request_id="u", text="", voice="af_heart")
    pieces = spoken(onnx, request, fragments=fragments, flush_at=7)
    words = [w for piece in pieces for w in piece.words or ()]
    got = [(w.word, text[w.text_start : w.text_end]) for w in words]
    assert ("twelve", "$12.50") in got and ("today.", "today.") in got and ("Smith.", "Smith.") in got
    written = [
        (word, span) for word, span in got if word not in ("twelve", "dollars", "and", "fifty", "cents")
    ]
    assert all(word == span for word, span in written), got


def test_word_sources_by_position():
    words = [("Hello,", "h"), ("world", "w")]
    assert word_sources("Hello,  world", words, per_token=True) == [(0, 6), (8, 13)]
    # Not one word per token: consecutive runs, marks of inline forms skipped.
    assert word_sources("今天\U000f0000天气\U000f0001", [("今天", ""), ("天气", "")], per_token=False) == [
        (0, 2),
        (3, 5),
    ]
    # The library rewrote the text (numerals): from there every word gets the rest of it.
    assert word_sources("价格5元", [("价格", ""), ("五", ""), ("元", "")], per_token=False) == [
        (0, 2),
        (2, 4),
        (2, 4),
    ]


@pytest.mark.parametrize("kind", ["onnx", "torch"])
def test_both_backends_give_token_spans_of_the_text_they_were_given(kind, onnx, request):
    backend = onnx if kind == "onnx" else request.getfixturevalue("torch_backend")
    text = "Well, twelve dollars. And then some more words here!"
    words = [w for segment in backend.synthesize(text, "af_heart", 1.0) for w in segment.words or ()]
    assert [(w.word, text[w.text_start : w.text_end]) for w in words] == [(t, t) for t in text.split()]


def test_sse_words_carry_spans(onnx, serve):
    server = serve(onnx)
    text = "It costs $5 🎉 now."
    body = {"text": text, "transport": "sse", "format": "pcm", "request_id": "sse-s", "voice": "af_heart"}
    response = httpx.post(f"{server.http_url}/invocations", json=body, timeout=GUARD_S)
    assert response.status_code == 200
    decoder = SSEDecoder()
    events = decoder.feed(response.content) + decoder.close()
    complete = json.loads(events[-1].data)
    schemas.validate("sse_synthesis_complete", complete)
    got = [(w["word"], text[w["text_start"] : w["text_end"]]) for w in complete["words"]]
    assert got == [("It", "It"), ("costs", "costs"), ("five", "$5"), ("dollars", "$5"), ("now.", "now.")]
    describe = httpx.post(f"{server.http_url}/invocations", json={"type": "describe"}, timeout=GUARD_S).json()
    assert "text_spans" in describe["features"]

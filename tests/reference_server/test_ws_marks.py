"""Marks (PROTOCOL.md §5.5) on the real WebSocket route, with the tone TEST DOUBLE backend.

The tone backend makes a 0.1 s tone per word, with word timings, at 24 kHz, and records the text of each
segment it is asked to speak, so every span and word time is known exactly. Every answer also passes
``ClientSession``'s checks (marks only when asked, inside the bracket, numbered, in order, never after a
later segment's audio).
Real Kokoro with marks runs in the playground's browser test.
"""

from __future__ import annotations

import pytest
from server_harness import run
from tone_backend import SAMPLE_RATE, WORD_S, ToneBackend
from ws_conversation import open_session

from protocol.errors import ErrorCode

TEXT = "Hello there. This is a test. Three sentences here."


def test_each_segment_is_marked_before_its_audio_with_its_words(serve):
    backend = ToneBackend()
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(TEXT, marks=True)
            return await conv.until_complete(rid)

    answer = run(scenario())
    marks = [frame for frame, _ in answer.marks]
    # One frame per segment the server synthesized, saying what it said, in order.
    assert [m.text for m in marks] == [text for text, _, _ in backend.calls]
    assert " ".join(m.text for m in marks) == TEXT
    assert [m.segment for m in marks] == list(range(len(marks))) and len(marks) >= 3
    t = 0.0
    for frame, received in answer.marks:
        length = len(frame.text.split()) * WORD_S
        assert frame.start_s == pytest.approx(t, abs=1e-3) and frame.end_s == pytest.approx(
            t + length, abs=1e-3
        )
        # Sent right before the segment's own audio: the audio before it is the segments before it.
        assert received / 2 / SAMPLE_RATE == pytest.approx(t, abs=1e-3)
        assert [w.word for w in frame.words] == frame.text.split()
        t += length
    assert t == pytest.approx(answer.complete.total_duration_s, abs=1e-3)
    # The words of synthesis_complete are the marks' words, on the same timeline.
    assert answer.complete.words == tuple(w for m in marks for w in m.words)


def test_asking_for_marks_changes_nothing_else(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            plain = await conv.until_complete(await conv.request(TEXT, request_id="plain"))
            marked = await conv.until_complete(await conv.request(TEXT, request_id="marked", marks=True))
            return plain, marked

    plain, marked = run(scenario())
    assert plain.marks == [] and len(marked.marks) == 3
    assert marked.pcm == plain.pcm
    assert (marked.complete.audio_bytes, marked.complete.words) == (
        plain.complete.audio_bytes,
        plain.complete.words,
    )
    assert marked.start.sample_rate == plain.start.sample_rate


def test_an_utterance_is_marked_segment_by_segment_as_the_server_cuts_it(serve):
    backend = ToneBackend()
    server = serve(backend)
    tokens = ["Good", " ques", "tion.", " The short", " answer is", " yes.", " It streams", "."]

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1", marks=True)
            for token in tokens:
                await conv.fragment("append", "u1", token)
            await conv.fragment("end", "u1")
            return await conv.until_complete("u1")

    answer = run(scenario())
    texts = [m.text for m, _ in answer.marks]
    assert texts == [text for text, _, _ in backend.calls] and len(texts) >= 3
    assert " ".join(texts) == "".join(tokens)
    assert answer.complete.words == tuple(w for m, _ in answer.marks for w in m.words)


def test_resampled_audio_keeps_marks_on_the_request_timeline(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            return await conv.until_complete(await conv.request(TEXT, sample_rate=16000, marks=True))

    answer = run(scenario())
    assert len(answer.marks) == 3
    last = answer.marks[-1][0]
    assert abs(last.end_s - answer.complete.total_duration_s) < 0.005


def test_a_marks_member_that_is_not_a_boolean_is_refused_and_capabilities_list_the_feature(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            capabilities = await conv.describe()
            await conv.send({"text": "Hi.", "request_id": "bad", "marks": "yes"})
            error = await conv.until_error()
            await conv.send({"type": "utterance", "request_id": "bad-u", "marks": 1})
            return capabilities, error, await conv.until_error()

    capabilities, error, utterance_error = run(scenario())
    assert "marks" in capabilities.features
    assert (error.code, error.request_id, error.message_type) == (
        ErrorCode.INVALID_FIELD,
        "bad",
        "synthesize",
    )
    assert "marks" in error.message
    assert (utterance_error.code, utterance_error.message_type) == (ErrorCode.INVALID_FIELD, "utterance")

"""Utterances (PROTOCOL.md §15) on the real WebSocket route, with the tone TEST DOUBLE backend.

Everything here is decided by events (audio arrives, a bracket completes), never by timing, except the
idle timeout, whose test only checks a lower bound. Real Kokoro through the same route is at the end.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import numpy as np
import pytest
from server_harness import run
from tone_backend import SAMPLE_RATE, ToneBackend, expected_samples
from ws_conversation import open_session

from protocol.errors import ErrorCode
from protocol.limits import Limits
from protocol.server_output import SynthesisCompleted, SynthesisStarted
from reference_agent.scripted import tokenize
from reference_server.utterance import segment_frontend
from speech.frontend import speech_pieces

PADDING_S = 0.8
"""One segment's padding: Kokoro puts about 0.8 s of silence around each synthesis pass."""

TEXT = "Good question. The short answer is yes, and it streams. Nothing else changes!"


def pieces(text: str, how: str) -> list[str]:
    """``text`` whole, per token (the scripted model's word pieces) or per character."""
    if how == "whole":
        return [text]
    if how == "token":
        return tokenize(text)
    return list(text)


async def speak(conv, request_id: str, parts: list[str], **fields) -> object:
    await conv.utterance(request_id, **fields)
    for part in parts:
        await conv.fragment("append", request_id, part)
    await conv.fragment("end", request_id)
    return await conv.until_complete(request_id)


# --- segmentation (no server) -----------------------------------------------------------------------------


def test_utterance_segments_are_the_request_segments_of_the_whole_text():
    """The utterance front-end is configured as a request's (runtime.RequestAudio), so a request and an
    utterance of the same text are cut at the same places; any fragmentation gives the same cut."""
    text = TEXT + "\n## Next steps\n- Pay **$1,234.50** by 10:30.\n- Done 🎉"
    expected = [piece.text for piece in speech_pieces(text, "a")]
    assert expected[-3:] == [
        "Next steps",
        "Pay one thousand two hundred and thirty-four dollars and fifty cents by ten thirty.",
        "Done",
    ]
    for how in ("whole", "token", "char"):
        frontend = segment_frontend("af_heart")
        got = [piece.text for part in pieces(text, how) for piece in frontend.feed(part)]
        got += [piece.text for piece in frontend.flush()]
        assert got == expected, how


# --- the route, tone backend ------------------------------------------------------------------------------


def test_fragmentation_does_not_change_the_audio_or_the_words(serve):
    """§15.3: whole, per token and per character give the same audio and word timings, and the same
    audio as a synthesize request of the text."""
    backend = ToneBackend()
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            answers = {how: await speak(conv, how, pieces(TEXT, how)) for how in ("whole", "token", "char")}
            plain = await conv.until_complete(await conv.request(TEXT))
        return answers, plain

    answers, plain = run(scenario())
    for how, answer in answers.items():
        assert answer.complete.status == "completed", how
        assert answer.pcm == plain.pcm, how
        assert answer.complete.words == plain.complete.words, how
    assert len(plain.pcm) == 2 * expected_samples(TEXT)
    words = plain.complete.words
    assert [w.word for w in words] == TEXT.split()
    # Timings run on one timeline from the utterance's first sample, across segments (§15.3).
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in itertools.pairwise(words))
    assert words[-1].end_s == pytest.approx(len(plain.pcm) / 2 / SAMPLE_RATE, abs=1e-3)
    # Each sentence was synthesized on its own as it completed (three segments per utterance).
    assert [call[0] for call in backend.calls[:3]] == [
        "Good question.",
        "The short answer is yes, and it streams.",
        "Nothing else changes!",
    ]


def test_speech_starts_before_the_utterance_is_ended(serve):
    """§15.3: the first sentence is spoken while the client is still writing (no end, no flush)."""
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1")
            for part in tokenize("Hello there. How are"):
                await conv.fragment("append", "u1", part)
            first = await conv.until_audio("u1")  # arrives although the utterance is open
            assert len(first) == 2 * expected_samples("Hello there.")
            await conv.fragment("end", "u1", " you?")
            answer = await conv.until_complete("u1")
            assert len(answer.pcm) == 2 * expected_samples("Hello there. How are you?")

    run(scenario())


def test_flush_speaks_an_unfinished_sentence_without_end(serve):
    """§15.3: after flush the held text is spoken with no end and no further text; text after the flush
    starts a new segment."""
    backend = ToneBackend()
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1", text="A sentence with no")
            await conv.fragment("flush", "u1", " end yet")
            audio = await conv.until_audio("u1")
            assert len(audio) == 2 * expected_samples("A sentence with no end yet")
            assert backend.calls[-1][0] == "A sentence with no end yet"
            await conv.fragment("end", "u1", " and more.")
            answer = await conv.until_complete("u1")
            assert len(answer.pcm) == 2 * expected_samples("A sentence with no end yet and more.")
            assert backend.calls[-1][0] == "and more."

    run(scenario())


def test_a_split_surrogate_pair_is_joined(serve):
    backend = ToneBackend()
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            # U+20000, a CJK ideograph outside the BMP (an emoji would be dropped by the front-end, §14.2)
            await conv.utterance("u1", text="Smile \ud840")
            await conv.fragment("append", "u1", "\udc00 please.")
            await conv.fragment("end", "u1")
            answer = await conv.until_complete("u1")
            assert answer.complete.status == "completed" and not conv.errors
            assert backend.calls[-1][0] == "Smile \U00020000 please."

    run(scenario())


def test_cancel_mid_utterance_stops_it_and_closes_it(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1", text="One sentence here. Another one follows. ")
            backend.segment_permits.release(1)
            await conv.until_audio("u1")
            await conv.send({"type": "cancel", "request_id": "u1"})
            backend.segment_permits.release(10)
            answer = await conv.until_complete("u1")
            assert answer.complete.status == "cancelled"
            assert (
                answer.complete.audio_bytes
                == len(answer.pcm)
                < 2 * expected_samples("One sentence here. Another one follows.")
            )
            await conv.fragment("append", "u1", "Too late.")
            error = await conv.until_error()
            assert (error.code, error.request_id, error.message_type) == ("unknown_request", "u1", "append")
            # The session lives on.
            after = await conv.until_complete(await conv.request("Still here."))
            assert after.complete.status == "completed"

    run(scenario())


def test_close_ends_an_open_utterance_and_speaks_what_it_holds(serve):
    """§15.5: close treats an open utterance as ended; everything it holds is spoken, then 1000."""
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1", text="First sentence. And a half")
            await conv.send({"type": "close"})
            code = await conv.until_closed()
            answer = conv.answers["u1"]
            assert answer.complete.status == "completed"
            assert len(answer.pcm) == 2 * expected_samples("First sentence. And a half")
            assert code == 1000

    run(scenario())


def test_requests_after_an_open_utterance_wait_for_it(serve):
    """§15.4: one bracket per utterance, answered in acceptance order; the checker enforces the order."""
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            # The chunker releases "Opening words." once the next sentence has begun (it could be an
            # abbreviation until then), so audio flows while the utterance is still open.
            await conv.utterance("u1", text="Opening words. And then")
            later = await conv.request("Queued behind it.")
            await conv.until_audio("u1")
            await conv.fragment("end", "u1", " closing words.")
            assert not conv.errors, conv.errors  # ended by end, not by the idle timeout
            kinds = []
            while later not in conv.answers:
                event = await conv.next_event()
                if isinstance(event, SynthesisStarted | SynthesisCompleted):
                    kinds.append((type(event).__name__, event.frame.request_id))
            assert kinds == [
                ("SynthesisCompleted", "u1"),
                ("SynthesisStarted", later),
                ("SynthesisCompleted", later),
            ]

    run(scenario())


def test_idle_utterance_times_out_with_a_notice_and_completes(serve):
    server = serve(ToneBackend(), limits=Limits(utterance_idle_timeout_s=0.3))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            sent = time.monotonic()
            await conv.utterance("u1", text="Spoken anyway")
            notice = await conv.until_error()
            waited = time.monotonic() - sent
            assert notice.code == ErrorCode.UTTERANCE_TIMEOUT and notice.request_id == "u1"
            assert not notice.fatal and waited >= 0.3
            answer = await conv.until_complete("u1")
            assert answer.complete.status == "completed"
            assert len(answer.pcm) == 2 * expected_samples("Spoken anyway")

    run(scenario())


def test_refusals_keep_the_utterance_and_name_the_message(serve):
    server = serve(ToneBackend(), limits=Limits(max_text_chars=40))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            plain = await conv.request("A plain request.")
            await conv.send({"type": "append", "request_id": plain, "text": "no"})
            error = await conv.until_error()
            assert (error.code, error.message_type) == ("unknown_request", "append")
            await conv.utterance("u1", text="Twenty characters. ")
            await conv.fragment("append", "u1", "x" * 30)  # 50 > 40: refused, nothing changes
            error = await conv.until_error()
            assert (error.code, error.message_type) == ("text_too_long", "append")
            await conv.fragment("end", "u1", "Done.")
            answer = await conv.until_complete("u1")
            assert len(answer.pcm) == 2 * expected_samples("Twenty characters. Done.")

    run(scenario())


def test_disconnect_with_an_open_utterance_frees_everything(serve):
    backend = ToneBackend()
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.utterance("u1", text="Left open. Forever")
            await conv.until_audio("u1")
        # The server notices the disconnect and drops the session (§7.4).
        for _ in range(500):
            if server.runtime.sessions == 0 and backend.open_generators == 0:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the session outlived its connection")

    run(scenario())


# --- real Kokoro ------------------------------------------------------------------------------------------


def test_kokoro_speaks_the_same_audio_whole_per_token_and_per_character(kokoro_server):
    """The issue's acceptance: the same text sent whole, per token and per character yields audio of the
    same length and the same words, on real Kokoro (ONNX); and it is the audio of the plain request."""
    text = "Good question. Streaming speech starts with the first sentence."

    async def scenario():
        async with open_session(kokoro_server.ws_url) as conv:
            answers = {how: await speak(conv, how, pieces(text, how)) for how in ("whole", "token", "char")}
            plain = await conv.until_complete(await conv.request(text))
        return answers, plain

    answers, plain = run(scenario())
    samples = np.frombuffer(plain.pcm, "<i2")
    assert len(samples) / 24000 > 2.0 and np.abs(samples).max() > 3000  # real speech, not silence
    for how, answer in answers.items():
        assert answer.complete.status == "completed", how
        # §15.3: the same words; the same length up to the silence of a segment boundary (a server that
        # cuts by deadline, §10.1, may cut a sentence at another word when the timing differs).
        difference_s = abs(len(answer.pcm) - len(plain.pcm)) / 2 / 24000
        assert difference_s <= PADDING_S, (how, difference_s)
        if plain.complete.words is not None:
            assert [w.word for w in answer.complete.words] == [w.word for w in plain.complete.words], how

"""An utterance whose text arrives over time (PROTOCOL.md §15.3, §10.1): the start of a sentence still being
written is released when the listener would otherwise run dry, and only then.

The runtime runs on the Kokoro stand-in of known speed (:class:`bench.paced.PacedBackend`) and a fake
clock: tokens arrive at fixed times on that clock and synthesis advances it by a known amount, so what is
released when, and the silence a real-time listener would hear, are decided exactly, never timed.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from bench.paced import SAMPLE_RATE, FakeClock, PacedBackend
from bench.playback import underrun
from bench.texts import REPLY
from protocol.messages import SynthesisRequest
from reference_agent.scripted import tokenize
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Runtime
from reference_server.scheduling import Listener
from reference_server.settings import Settings, SettingsError
from reference_server.utterance import UtteranceAudio
from speech.chunker import IncrementalSentenceChunker
from speech.frontend import speech_text
from speech.segmenter import Boundary, Segmenter

TOKENS_PER_S = 10.0
"""The issue's LLM pace: about ten words a second (the agent benchmark's scripted model writes 10.2)."""


def _runtime(clock: FakeClock, release: str, **options) -> Runtime:
    settings = replace(Settings(), utterance_release=release)
    return Runtime(settings, PacedBackend(clock, **options), clock=clock, lockstep=True)


def _warm(runtime: Runtime, clock: FakeClock) -> None:
    """Let the model-speed estimate learn the stand-in's speed, as a server does from its first requests."""

    async def speak() -> None:
        for number in range(6):
            request = SynthesisRequest(
                text="One two three four five six seven eight nine ten eleven twelve.",
                voice="af_heart",
                request_id=f"w{number}",
            )
            audio = RequestAudio(runtime, request, Listener())
            while await audio.next() is not None:
                pass

    asyncio.run(speak())


def _stream(runtime: Runtime, clock: FakeClock, parts: list[str], tokens_per_s: float = TOKENS_PER_S):
    """Append ``parts`` to one utterance, one every ``1 / tokens_per_s`` seconds of the fake clock, end it
    after the last, and synthesize as a server does; returns ((clock, seconds of audio, piece) per piece,
    the utterance, the clock when the first part arrived)."""

    async def scenario():
        request = SynthesisRequest(text="", voice="af_heart", request_id="u1")
        utterance = UtteranceAudio(runtime, request, Listener())
        start = clock()
        due = [(start + i / tokens_per_s, part) for i, part in enumerate(parts)]
        produced = []
        while True:
            while due and due[0][0] <= clock():
                utterance.append(due.pop(0)[1])
            if not due and not utterance._ended:
                utterance.end()
            if not (utterance._ready or utterance.has_pending() or utterance._ended):
                utterance.release_early()  # what next() does before it waits for text
                if not utterance._ready:
                    clock.advance(due[0][0] - clock())  # nothing to synthesize until the next token
                    continue
            piece = await utterance.next()
            if piece is None:
                break
            produced.append((clock(), len(piece.pcm) / 2 / SAMPLE_RATE, piece))
        utterance.close()
        return produced, utterance, start

    return asyncio.run(scenario())


def _underrun_s(produced) -> float:
    """Silence a real-time player inserts after the first piece (:func:`bench.playback.underrun`)."""
    return underrun([(at, len(piece.pcm)) for at, _, piece in produced], 2 * SAMPLE_RATE)[0]


def _words(produced) -> list[str]:
    return [w.word for _, _, piece in produced for w in (piece.words or ())]


@pytest.mark.parametrize("xrt", [3.45, 2.0])
def test_a_reply_written_at_llm_pace_plays_without_underrun_only_with_early_release(xrt):
    """The agent benchmark's reply ("Happy to help." then a 100-character sentence) written token by token
    at ten words a second: waiting for each sentence's end leaves the listener silent while the long
    second sentence is still being written; releasing its start when the short first one runs low does not.
    The same words are spoken either way, and the first audio is no later."""
    results = {}
    for release in ("sentence", "deadline"):
        clock = FakeClock()
        runtime = _runtime(clock, release, xrt=xrt)
        _warm(runtime, clock)
        results[release] = _stream(runtime, clock, tokenize(REPLY))
        runtime.scheduler.close()
    old, old_utterance, old_start = results["sentence"]
    new, new_utterance, new_start = results["deadline"]
    assert old_utterance.released == []
    assert _underrun_s(old) > 0.2  # the stall this fixes
    assert _underrun_s(new) == 0.0
    assert new_utterance.released  # something was released before its sentence ended
    for _, opened in new_utterance.released:
        assert opened.boundary is not Boundary.END
    assert new[0][0] - new_start <= old[0][0] - old_start
    expected = speech_text(REPLY).split()
    assert _words(old) == expected
    assert _words(new) == expected
    # Each early cut trims Kokoro's silence to the boundary's pause: the audio stays about as long.
    old_s, new_s = sum(s for _, s, _ in old), sum(s for _, s, _ in new)
    assert abs(new_s - old_s) < 0.8


def test_with_slack_nothing_is_released_before_its_sentence_ends():
    """A fast model and a fast writer (40 words a second): the listener always has more audio queued than the
    words written take to synthesize, so every sentence waits for its end and is one segment. (At ten words
    a second even an infinitely fast model cannot wait: "Happy to help." lasts 1.5 s and the next sentence
    takes 1.6 s to write, so its start is released; that is the first test's case.)"""
    clock = FakeClock()
    runtime = _runtime(clock, "deadline", xrt=200.0)
    _warm(runtime, clock)
    produced, utterance, _ = _stream(runtime, clock, tokenize(REPLY), tokens_per_s=40.0)
    runtime.scheduler.close()
    assert utterance.released == []
    assert [piece.text for _, _, piece in produced if piece.text] == list(
        IncrementalSentenceChunker("a").feed(REPLY + " X")
    )


def test_a_long_first_sentence_starts_once_a_first_segment_is_written():
    """Nothing is queued for a new listener: its first segment is released as soon as a first segment's
    worth of complete words is written (DEFAULT_FIRST_UNITS), at the best break among them, instead of at
    the sentence's end; the rest of the sentence continues it (no new lead-in)."""
    text = REPLY.split(". ", 1)[1]  # starts with the 100-character sentence
    clock = FakeClock()
    runtime = _runtime(clock, "deadline")
    _warm(runtime, clock)
    tokens = tokenize(text)
    produced, utterance, start = _stream(runtime, clock, tokens)
    runtime.scheduler.close()
    sentence_end = start + [t.strip() for t in tokens].index("afternoon.") / TOKENS_PER_S
    when, first = utterance.released[0]
    assert when < produced[0][0] < sentence_end  # heard before the sentence was even written
    assert first.text == "Your order shipped this morning"
    assert first.boundary is Boundary.PREPOSITION
    assert produced[0][2].text == "Your order shipped this morning"
    assert produced[1][2].text.startswith("from our Denver")
    assert _words(produced) == speech_text(text).split()
    first_segment = utterance.segments[0]
    assert first_segment.boundary == "PREPOSITION"  # trimmed to the boundary's pause, not a sentence end


def test_the_old_behaviour_waits_for_the_sentence_end():
    text = REPLY.split(". ", 1)[1]
    clock = FakeClock()
    runtime = _runtime(clock, "sentence")
    _warm(runtime, clock)
    produced, utterance, _ = _stream(runtime, clock, tokenize(text))
    runtime.scheduler.close()
    assert utterance.released == []
    assert produced[0][2].text.startswith("Your order shipped")
    assert "Thursday afternoon." in " ".join(p.text for _, _, p in produced[:3] if p.text)


@pytest.mark.parametrize("how", ["token", "char"])
def test_early_release_keeps_the_words_whatever_the_fragmentation(how):
    """§15.3: per token or per character at the same pace of words, the same words are spoken."""
    text = "Well, sure. The technician will arrive at your house between nine and eleven tomorrow morning."
    parts = tokenize(text) if how == "token" else list(text)
    per_s = TOKENS_PER_S if how == "token" else TOKENS_PER_S * len(text) / len(tokenize(text))
    clock = FakeClock()
    runtime = _runtime(clock, "deadline", xrt=2.0)
    _warm(runtime, clock)
    produced, utterance, _ = _stream(runtime, clock, parts, per_s)
    runtime.scheduler.close()
    assert utterance.released
    assert _words(produced) == speech_text(text).split()


def test_settings_refuse_an_unknown_release():
    with pytest.raises(SettingsError, match="utterance_release"):
        Settings(utterance_release="never")


# --- the pieces: the segmenter's early cut and the chunker's take ----------------------------------------


def test_early_cut_leaves_unfinished_words_and_figures_alone():
    segmenter = Segmenter("a")
    # The last token may still grow ("Den" -> "Denver"): no cut after "our", whose next word is unfinished.
    cut = segmenter.early_cut("Your order shipped this morning from our Den", 100.0)
    assert cut is not None and cut.position == len("Your order shipped this morning ")
    assert cut.kind is Boundary.PREPOSITION
    # Never next to a figure or symbol the front-end rewrites ("$5 million" is one amount).
    text = "Please send the full amount of $5 million to them today "
    for budget in (0.0, 20.0, 100.0):
        found = segmenter.early_cut(text, budget)
        assert found is not None
        assert not text[: found.position].rstrip().endswith("$5")
        assert not text[found.position :].startswith(("$5", "million"))
    # A first segment waits for a first segment's worth of words, then takes the best break within it.
    assert segmenter.early_cut("Your order shipped this ", 0.0, first=True) is None
    assert segmenter.early_cut("Your order shipped this ", 0.0) is not None
    # Japanese or Chinese without spaces is never cut early.
    assert segmenter.early_cut("今日はとても良い天気ですね、散歩に行きましょう。そして", 0.0) is None


def test_chunker_take_hands_out_the_start_and_goes_on_from_the_rest():
    chunker = IncrementalSentenceChunker("a")
    assert chunker.feed("Your order shipped this morning from our Den") == []
    assert chunker.held == "Your order shipped this morning from our Den"
    with pytest.raises(ValueError):
        chunker.take(len("Your order shipped this morning from our D"))  # inside a word
    assert chunker.take(len("Your order shipped this morning ")).text == "Your order shipped this morning"
    assert chunker.held == "from our Den"
    assert chunker.feed("ver warehouse. Next") == ["from our Denver warehouse."]
    assert chunker.flush() == "Next"

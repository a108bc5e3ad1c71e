"""The agent's words point into the reply the client displays (PROTOCOL.md §14.4): the segmenters carry
where each text sent to the TTS is in the reply, and the speaker moves the TTS's spans back there."""

from __future__ import annotations

from protocol.messages import SynthesisComplete, Word
from reference_agent.events import Segment
from reference_agent.pipeline import SentenceSegments, WholeReply
from reference_agent.tts import SourcedText, Speaker


def _complete(request_id: str, words: tuple[Word, ...]) -> SynthesisComplete:
    return SynthesisComplete(
        request_id=request_id,
        status="completed",
        audio_bytes=2,
        total_duration_s=0.0,
        elapsed_s=0.0,
        words=words,
    )


def _spans(text: SourcedText, reply: str) -> list[str]:
    """What each whitespace token of the text sent reads in the reply."""
    out, position = [], 0
    for token in text.split(" "):
        out.append(reply[slice(*text.source.span(position, position + len(token)))])
        position += len(token) + 1
    return out


def test_bidi_sentences_know_their_place_in_the_reply():
    reply = "## Plan 🎉\nFirst **step** now. Then $5 more"
    segments = SentenceSegments("a")
    said = [s for i in range(len(reply)) for s in segments.feed(reply[i])]
    tail = segments.flush()
    said += [tail] if tail else []
    assert said == ["Plan 🎉", "First step now.", "Then $5 more"]
    assert all(isinstance(s, SourcedText) for s in said)
    assert _spans(said[1], reply) == ["First", "step", "now."]
    assert _spans(said[2], reply) == ["Then", "$5", "more"]


def test_a_whole_reply_knows_its_place_too():
    reply = "# Title\n\n- one  **two**\n- three"
    text = WholeReply().flush() if False else None
    whole = WholeReply()
    whole.feed(reply)
    text = whole.flush()
    assert text == "Title\none two\nthree" and isinstance(text, SourcedText)
    assert [reply[slice(*text.source.span(i, i + len(w)))] for i, w in ((0, "Title"), (10, "two"))] == [
        "Title",
        "two",
    ]


def test_the_speaker_moves_the_tts_spans_into_the_reply():
    reply = "It **costs** $5."
    segments = SentenceSegments("a")
    segments.feed(reply)
    sent = segments.flush()
    assert isinstance(sent, SourcedText) and sent == "It costs $5."
    speaker = Speaker(None, voice="af_heart", speed=1.0, sample_rate=24000)  # type: ignore[arg-type]
    speaker._sources["r1"] = sent.source
    words = (Word("It", 0.0, 0.1, 0, 2), Word("costs", 0.1, 0.4, 3, 8), Word("five", 0.4, 0.6, 9, 11))
    moved = speaker._reply_words(_complete("r1", words))
    assert [reply[w["text_start"] : w["text_end"]] for w in moved] == ["It", "costs", "$5"]
    speaker._replies.add("u1")  # an utterance's text is the reply: its spans stay as they are
    assert speaker._reply_words(_complete("u1", words))[1] == {
        "word": "costs",
        "start_s": 0.1,
        "end_s": 0.4,
        "text_start": 3,
        "text_end": 8,
    }
    assert Segment("x", 2, moved).to_json()["words"][2]["text_end"] == 15

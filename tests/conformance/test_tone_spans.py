"""The tone server's word spans for utterances (PROTOCOL.md §14.4, §15.2): each segment the chunker cuts from
an utterance's fragments is found in the fragments joined, so its words point into that text."""

from __future__ import annotations

from conformance.mutants.base import ToneSynthesizer, ToneUtterance, segment_source


def test_a_segment_is_found_with_the_whitespace_the_chunker_collapsed() -> None:
    text = "Hi.  Good\n\n morning, dear."
    found = segment_source(text, "Good morning, dear.", 3)
    assert found is not None
    source, after = found
    assert after == len(text)
    assert text[slice(*source.span(0, 4))] == "Good"
    assert text[slice(*source.span(5, 13))] == "morning,"


def test_a_segment_that_is_not_the_text_next_is_not_found() -> None:
    assert segment_source("Good morning.", "Good evening.") is None
    assert segment_source("Good morning.", "Good", 5) is None


def test_utterance_words_point_into_the_fragments_joined() -> None:
    fragments = ["Good mor", "ning,  **de", "ar** friend. It costs $12", ".50 to", "day."]
    utterance, segments = ToneUtterance(), []
    for fragment in fragments:
        utterance.text += fragment
        segments += utterance.chunker.feed(fragment)
    utterance.flush()
    segments += utterance.ready
    synth, at, read = ToneSynthesizer(), 0, []
    for segment in segments:
        found = segment_source(utterance.text, segment, at)
        assert found is not None, segment
        source, at = found
        words = synth.words(segment, "af_heart", 0.0, 1.0, source=source) or ()
        read += [(w.word, utterance.text[w.text_start : w.text_end]) for w in words]
    assert read == [
        ("Good", "Good"),
        ("morning,", "morning,"),
        ("dear", "dear"),
        ("friend.", "friend."),
        ("It", "It"),
        ("costs", "costs"),
        *[(word, "$12.50") for word in ("twelve", "dollars", "and", "fifty", "cents")],
        ("today.", "today."),
    ]

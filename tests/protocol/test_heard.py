"""protocol.heard: the text heard and not heard, from word timings and the player's position (§5.3)."""

from __future__ import annotations

import pytest

from protocol.heard import NoWordTimings, heard_of, split_heard
from protocol.messages import SynthesisComplete, Word

TEXT = "Hello there. I have 42 apples, friend."
WORDS = (
    Word("Hello", 0.275, 0.6),
    Word("there", 0.6, 1.0),
    Word(".", 1.0, 1.1),
    Word("I", 1.4, 1.5),
    Word("have", 1.5, 1.8),
    Word("forty-two", 1.8, 2.4),  # the server read the figure out (§14.2): not in the text
    Word("apples", 2.4, 2.9),
    Word(",", 2.9, 2.95),
    Word("friend", 3.1, 3.5),
    Word(".", 3.5, 3.6),
)


def _complete(status: str, words, duration_s: float = 3.8) -> SynthesisComplete:
    return SynthesisComplete(
        request_id="a1",
        status=status,  # type: ignore[arg-type]
        audio_bytes=round(duration_s * 48000),
        total_duration_s=duration_s,
        elapsed_s=0.5,
        words=words,
    )


@pytest.mark.parametrize(
    ("played_ms", "heard"),
    [
        (0, ""),
        (599, ""),  # "Hello" not played to its end
        (600, "Hello"),
        (1000, "Hello there"),
        (1100, "Hello there."),
        (1799, "Hello there. I"),
        (1800, "Hello there. I have"),
        (2399, "Hello there. I have"),  # inside the figure read out
        # "forty-two" is not in the text: "42" is heard only with the words around it
        (2899, "Hello there. I have"),
        (2900, "Hello there. I have 42 apples"),
        (3600, TEXT),
        (99_000, TEXT),
    ],
)
def test_split_heard_cuts_after_the_last_word_played_to_its_end(played_ms, heard):
    split = split_heard(TEXT, WORDS, played_ms)
    assert split.heard == heard
    assert split.heard + split.not_heard == TEXT
    assert all(w.end_s * 1000 <= played_ms for w in split.words)
    assert len(split.words) == sum(w.end_s * 1000 <= played_ms for w in WORDS)


def test_split_heard_matches_case_insensitively_and_in_order():
    words = (Word("the", 0.1, 0.2), Word("cat", 0.2, 0.5), Word("the", 0.6, 0.7), Word("end", 0.7, 0.9))
    assert split_heard("The cat saw the end.", words, 700).heard == "The cat saw the"
    assert split_heard("The cat saw the end.", words, 200).heard == "The"


def test_split_heard_never_counts_text_after_the_last_word_found():
    # A cancelled request's words end with the audio sent: the rest of the text was never spoken.
    words = (Word("One", 0.2, 0.5), Word("two", 0.5, 0.8))
    split = split_heard("One two. Three four.", words, 60_000)
    assert (split.heard, split.not_heard) == ("One two", ". Three four.")


@pytest.mark.parametrize("played_ms", [-1, float("nan"), "10", None, True])
def test_split_heard_refuses_a_bad_position(played_ms):
    with pytest.raises(ValueError, match="played_ms"):
        split_heard(TEXT, WORDS, played_ms)


def test_heard_of_a_completed_request_played_to_its_end_is_the_whole_text_even_without_words():
    assert heard_of(TEXT, _complete("completed", None), 3800).heard == TEXT
    assert heard_of(TEXT, _complete("completed", WORDS), 3800).words == WORDS


def test_heard_of_a_cancelled_request_keeps_only_the_words_sent():
    sent = WORDS[:3]  # the server sent the first segment's audio, then the cancel stopped it
    heard = heard_of(TEXT, _complete("cancelled", sent, duration_s=1.3), 5000)
    assert (heard.heard, heard.not_heard) == ("Hello there.", " I have 42 apples, friend.")


def test_heard_of_without_word_timings():
    assert heard_of(TEXT, _complete("cancelled", None, duration_s=0), 0).heard == ""
    assert heard_of(TEXT, _complete("completed", None), 0).not_heard == TEXT
    with pytest.raises(NoWordTimings, match="no word timings"):
        heard_of(TEXT, _complete("completed", None), 1000)
    with pytest.raises(NoWordTimings):
        heard_of(TEXT, _complete("cancelled", None, duration_s=1.0), 5000)


def test_words_with_spans_cut_the_text_where_they_point():
    """A word that carries its span (§14.4, text_spans) cuts there, also where its text is not in the text
    ("twelve dollars" for "$12"), and the markdown written around it stays with it."""
    text = "It costs **$12** now."
    words = [
        Word("It", 0.0, 0.2, 0, 2),
        Word("costs", 0.2, 0.5, 3, 8),
        Word("twelve", 0.5, 0.8, 11, 14),
        Word("dollars", 0.8, 1.1, 11, 14),
        Word("now.", 1.1, 1.4, 17, 21),
    ]
    assert split_heard(text, words, 1100).heard == "It costs **$12"
    assert split_heard(text, words, 700).heard == "It costs"
    # Without spans the read-out words are not found, and the cut falls back to "costs".
    plain = [Word(w.word, w.start_s, w.end_s) for w in words]
    assert split_heard(text, plain, 1100).heard == "It costs"

"""protocol.messages.Word's span members (PROTOCOL.md §14.4): both or neither, integers, in order, on the
wire only when present, and valid against the word schemas of synthesis_complete, marks and SSE."""

from __future__ import annotations

import pytest

from protocol import schemas
from protocol.messages import Word


def test_a_span_travels_and_an_absent_one_stays_absent():
    word = Word("dollars", 0.5, 0.9, 9, 15)
    assert word.to_dict() == {
        "word": "dollars",
        "start_s": 0.5,
        "end_s": 0.9,
        "text_start": 9,
        "text_end": 15,
    }
    assert Word.from_dict(word.to_dict()) == word and word.span == (9, 15)
    plain = Word("hi", 0.0, 0.1)
    assert plain.to_dict() == {"word": "hi", "start_s": 0.0, "end_s": 0.1} and plain.span is None
    assert Word.from_dict(plain.to_dict()) == plain


@pytest.mark.parametrize(
    ("start", "end", "match"),
    [
        (3, None, "together"),
        (None, 3, "together"),
        (-1, 2, "non-negative"),
        (2, 1, "reversed"),
        (True, 2, "integer"),
    ],
)
def test_bad_spans_are_refused(start, end, match):
    with pytest.raises(ValueError, match=match):
        Word("x", 0.0, 0.1, start, end)


def test_the_schemas_hold_spans_and_refuse_half_a_span():
    complete = {
        "type": "synthesis_complete",
        "request_id": "a",
        "status": "completed",
        "audio_bytes": 2,
        "total_duration_s": 0.0,
        "elapsed_s": 0.0,
        "words": [Word("x", 0.0, 0.0, 0, 1).to_dict()],
    }
    schemas.validate("synthesis_complete", complete)
    marks = {"type": "marks", "request_id": "a", "segment": 0, "text": "x", "start_s": 0.0, "end_s": 0.1}
    schemas.validate("marks", {**marks, "words": complete["words"]})
    sse = {k: v for k, v in complete.items()} | {"chunks": 1}
    schemas.validate("sse_synthesis_complete", sse)
    half = {"word": "x", "start_s": 0.0, "end_s": 0.0, "text_start": 0}
    for name, obj in (("synthesis_complete", complete), ("marks", marks), ("sse_synthesis_complete", sse)):
        with pytest.raises(Exception, match="text_end"):
            schemas.validate(name, {**obj, "words": [half]})

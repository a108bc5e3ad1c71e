"""Tests for text spans through the front-end (speech.spans, PROTOCOL.md §14.4): the markdown stripper's
sources, the chunker's hand-out of them, normalization's token spans, and the maps the pieces carry."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speech.frontend import SpeechFrontend, speech_pieces
from speech.markdown import MarkdownStripper, strip_markdown
from speech.normalization import normalize_spans
from speech.spans import NonSpaceSources, SourceMap, normalized

MARKDOWN = [
    "# Title\n**Bold** and _it_ [link](http://x.com) `code` ![alt](i.png) [1] <br> x < y",
    "\\*star\\* ~5 ~~del~~ snake_case 2*3 a * b",
    "| a | b |\n|---|---|\n| 1 | 2 |\n- item\n1. one\n```py\ncode\n```\nafter <https://a.b/c> done",
    '> quoted\n> - item\n>> deeper\n- [x] Done\nTitle\n=====\n<span class="x">in</span> [^2] end',
    "$12.50 and **Dr.** Smith 🎉 你好 `` a`b `` [x](y z) <b and c> \\q",
]

ALPHABET = "ab1 *_~`#[]()!<>|\\-\n\t.$🎉"
_ADDED = ", \n"
"""What the stripper adds (table cell separators, line breaks): sourced at the character that made it."""


def sourced(text: str, size: int) -> tuple[str, list[int]]:
    stripper = MarkdownStripper()
    out, sources = [], []
    for start in range(0, len(text), size):
        piece, where = stripper.feed_sourced(text[start : start + size])
        out.append(piece)
        sources += where
    piece, where = stripper.flush_sourced()
    return "".join(out) + piece, sources + where


@pytest.mark.parametrize("text", MARKDOWN)
@pytest.mark.parametrize("size", [1, 2, 7, 10_000])
def test_every_kept_character_is_sourced_at_itself(text, size):
    out, sources = sourced(text, size)
    assert out == strip_markdown(text)
    assert len(sources) == len(out)
    assert all(0 <= source < len(text) for source in sources)
    wrong = [(char, text[source]) for char, source in zip(out, sources, strict=True) if char != text[source]]
    assert all(char in _ADDED for char, _ in wrong), wrong


def test_sources_are_the_characters_read_not_the_first_equal_one():
    # "1" of the citation is dropped: the kept "1" is the later one, which a search from the start misses.
    text = "See [1] 1 apple, **bold**."
    out, sources = sourced(text, 3)
    assert out == "See  1 apple, bold."
    assert sources[out.index("1")] == text.index(" 1 ") + 1
    assert [text[s] for s in sources[out.index("bold") : out.index("bold") + 4]] == list("bold")
    assert sources[out.index("bold")] == text.index("bold")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(alphabet=st.sampled_from(list("ab1 *_~`#[]()!<>|\\-\n\t.$🎉")), max_size=60), st.integers(1, 9)
)
def test_sources_hold_for_any_text_and_fragmentation(text, size):
    out, sources = sourced(text, size)
    whole, whole_sources = sourced(text, 10_000)
    assert (out, sources) == (whole, whole_sources)
    assert len(sources) == len(out)
    assert all(0 <= s < max(1, len(text)) for s in sources)
    assert all(char == text[s] or char in _ADDED for char, s in zip(out, sources, strict=True))


def spans(text: str, language: str = "a") -> list[tuple[str, str]]:
    """Each spoken token with the text it reads, for the whole text."""
    out = []
    for piece in speech_pieces(text, language, sourced=True):
        assert piece.source is not None and piece.source.text == piece.text
        out += [
            (m.group(), text[slice(*piece.source.span(*m.span()))]) for m in re.finditer(r"\S+", piece.text)
        ]
    return out


def test_written_words_read_themselves_and_figures_the_whole_token():
    text = "# Prices\nIt costs **$12.50** today, said Dr. Smith 🎉🎉 at 10:30."
    assert spans(text) == [
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
    ]


def test_markup_inside_a_word_is_left_out_with_the_punctuation_beyond_it():
    """R14.4-4: a word's span holds no markup. ``notes!`` after a link reads ``notes`` and ``!`` with the
    link's target between them, ``bold,`` reads ``bold`` and ``,`` with ``**`` between: the span keeps the
    letters and drops the punctuation beyond the markup, rather than reach over the markup to it."""
    text = "See [the notes](https://x.y/z)! And **bold**, ok: *it*."
    assert spans(text) == [
        ("See", "See"),
        ("the", "the"),
        ("notes!", "notes"),
        ("And", "And"),
        ("bold,", "bold"),
        ("ok:", "ok:"),
        ("it.", "it"),
    ]
    assert SourceMap("a!", (0, 5), (1, 6)).span(0, 2) == (0, 1)
    assert SourceMap("!a!", (0, 3, 7), (1, 4, 8)).span(0, 3) == (3, 4)
    assert SourceMap("!?", (0, 5), (1, 6)).span(0, 2) == (0, 6)  # no letter: everything it reads


def test_code_points_not_utf16_units():
    text = "𝄞🎉 naïve café 🎉 end"
    got = spans(text)
    assert got[-1] == ("end", "end")
    (piece,) = speech_pieces(text, "a", sourced=True)
    assert piece.source.span(piece.text.index("end"), len(piece.text)) == (len(text) - 3, len(text))


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        (
            "z",
            "今天🎉天气很好。价格是$5。",
            [("今天天气很好。", "今天🎉天气很好。"), ("价格是5美元。", "价格是$5。")],
        ),
        ("j", "今日は$5です。", [("今日は5ドルです。", "今日は$5です。")]),
        (
            "e",
            "Cuesta 5 € hoy.",
            [("Cuesta", "Cuesta"), ("cinco", "5 €"), ("euros", "5 €"), ("hoy.", "hoy.")],
        ),
    ],
)
def test_other_languages(language, text, expected):
    assert spans(text, language) == expected


@pytest.mark.parametrize("text", [*MARKDOWN, "Hello there. It costs $5.\n\nNext: 10:30, 2024-03-15 and 🎉!"])
def test_sources_change_nothing_spoken_and_do_not_depend_on_fragments(text):
    plain = [(p.text, p.written, p.hard_break) for p in speech_pieces(text, "a")]
    whole = list(speech_pieces(text, "a", sourced=True))
    assert [(p.text, p.written, p.hard_break) for p in whole] == plain  # the audio cannot change
    frontend = SpeechFrontend("a", sourced=True)
    by_char = [piece for char in text for piece in frontend.feed(char)] + frontend.flush()
    assert [(p.text, p.source) for p in by_char] == [(p.text, p.source) for p in whole]


def test_a_flush_restarts_the_count_and_take_keeps_it():
    frontend = SpeechFrontend("a", sourced=True)
    frontend.feed("One two three ")
    taken = frontend.take(8)
    assert taken is not None and taken.source is not None
    assert taken.source.span(0, len(taken.text)) == (0, 7)
    (rest,) = frontend.flush()
    assert rest.source.span(0, len(rest.text)) == (8, 13)
    (again,) = frontend.feed("Four.") + frontend.flush()
    assert again.source.span(0, len(again.text)) == (0, 5)  # a new text: an utterance shifts it (§15.2)


def test_source_map_rules():
    source = SourceMap.identity("ab cd", 10)
    assert source.span(0, 5) == (10, 15)
    assert source.span(2, 3) == (12, 12)  # whitespace reads nothing
    assert source.strip().text == "ab cd"
    assert [m.span(0, len(m.text)) for m in source.parts(["ab", "cd"])] == [(10, 12), (13, 15)]
    assert source.shifted(5).span(0, 2) == (15, 17)
    with pytest.raises(ValueError, match="do not cover"):
        source.parts(["ab", "ce"])
    with pytest.raises(ValueError, match="inside"):
        source.span(3, 9)
    with pytest.raises(ValueError, match="sources for"):
        SourceMap("ab", (0,), (1,))
    with pytest.raises(ValueError, match="written parts"):
        normalized([("x", "y")], source)


def test_normalized_collapses_whitespace_as_normalize_text():
    text = "  costs   $5  now "
    pairs = normalize_spans(text, "a")
    mapped = normalized(pairs, SourceMap.identity(text))
    assert mapped.text == "costs five dollars now"
    assert mapped.span(mapped.text.index("five"), mapped.text.index("dollars") + 7) == (10, 12)


def test_non_space_sources_hand_out_in_order():
    sources = NonSpaceSources()
    sources.add("a b\nc", [5, 6, 7, 8, 9])
    first = sources.map("a b")
    assert (first.starts, first.ends) == ((5, 7, 7), (6, 7, 8))
    assert sources.map("c").span(0, 1) == (9, 10)

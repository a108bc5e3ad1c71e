"""The segmentation policy (PROTOCOL.md §10.1): where a sentence may be cut, and which cut is chosen.

Properties over generated sentences: every cut lies at an allowed boundary (never inside a word, a number
or after an abbreviation), the segment and the rest give back the text exactly, every segment but a
speech's first is at least ``min_units`` long and so is every rest, and cutting a sentence repeatedly
ends with the whole sentence spoken. Then the rules of each of Kokoro's nine languages, by example.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.voices import language_code
from speech.segmenter import (
    DEFAULT_FIRST_UNITS,
    DEFAULT_MIN_UNITS,
    Boundary,
    Segmenter,
    cuts,
    spoken_units,
)

BENCH_SENTENCE = (
    "Your order shipped this morning from our Denver warehouse and should reach you by Thursday afternoon."
)

_TOKENS = st.sampled_from(
    [
        "order", "shipped", "the", "and", "from", "because", "which", "Denver,", "warehouse;", "Dr.",
        "e.g.", "J.", "1", "000", "555", "1,234", "3.5%", "—", "-", "(see", "above)", "\"quoted\"",
        "well-known", "don't", "U.S.", "wait…", "x", "Thursday:", "%", "$",
    ]
)  # fmt: skip
_SENTENCES = st.lists(_TOKENS, min_size=1, max_size=30).map(lambda words: " ".join(words) + ".")


def _segments_of(text: str, segmenter: Segmenter, budgets: list[float]) -> list[str]:
    """Cut ``text`` again and again with the given budgets (the first cut as a speech's first)."""
    pieces = []
    rest = text
    for index, budget in enumerate(budgets):
        if not rest:
            break
        cut = segmenter.next_cut(rest, budget, first=index == 0)
        pieces.append(rest[: cut.position])
        rest = rest[cut.position :]
    while rest:
        cut = segmenter.next_cut(rest, 1e9)
        pieces.append(rest[: cut.position])
        rest = rest[cut.position :]
    return pieces


# --- properties ---------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(_SENTENCES)
def test_every_cut_is_at_an_allowed_boundary(text):
    found = cuts(text, "a")
    positions = [cut.position for cut in found]
    assert positions == sorted(set(positions)) and positions[-1] == len(text) and 0 not in positions
    assert found[-1].kind is Boundary.END
    for cut in found[:-1]:
        before, after = text[: cut.position], text[cut.position :]
        assert before[-1].isspace() and not after[0].isspace()  # English: only at spaces, never in a word
        if cut.kind is Boundary.FORBIDDEN:
            continue
        previous, following = before.split()[-1], after.split()[0]
        assert any(c.isalnum() for c in following), "a segment never starts with punctuation"
        assert not (previous[-1].isdigit() and following[0].isdigit()), "never between digit groups"
        assert not previous.endswith(".") or previous.endswith("..."), "never after an abbreviation"
        assert cut.units == spoken_units(before)


@settings(max_examples=300, deadline=None)
@given(_SENTENCES, st.lists(st.floats(0, 120), min_size=1, max_size=8))
def test_cutting_again_and_again_loses_nothing_and_respects_the_minimum(text, budgets):
    segmenter = Segmenter("a")
    pieces = _segments_of(text, segmenter, budgets)
    assert "".join(pieces) == text
    assert all(piece.strip() for piece in pieces)
    for index, piece in enumerate(pieces):
        if len(pieces) == 1:
            break
        if index:  # every segment but the first is at least min_units long ...
            assert spoken_units(piece) >= DEFAULT_MIN_UNITS
        # ... and so is what is left after every cut but the last
        if index < len(pieces) - 1:
            assert spoken_units("".join(pieces[index + 1 :])) >= DEFAULT_MIN_UNITS


@settings(max_examples=200, deadline=None)
@given(_SENTENCES, st.floats(0, 200))
def test_a_cut_fits_the_budget_whenever_an_allowed_cut_does(text, budget):
    segmenter = Segmenter("a")
    cut = segmenter.next_cut(text, budget)
    total = spoken_units(text)
    allowed = [
        c
        for c in cuts(text, "a")
        if c.kind is Boundary.END
        or (
            c.kind is not Boundary.FORBIDDEN
            and c.units >= DEFAULT_MIN_UNITS
            and total - c.units >= DEFAULT_MIN_UNITS
        )
    ]
    assert cut in allowed
    if any(c.units <= budget for c in allowed):
        assert cut.units <= budget


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=60))
def test_any_text_in_any_language_is_cut_without_losing_a_character(text):
    for language in ("a", "e", "f", "h", "i", "j", "p", "z", "xx"):
        found = cuts(text, language)
        assert found[-1].position == len(text)
        for cut in found:
            assert 0 < cut.position <= len(text) or (cut.position == 0 and not text)
        pieces = _segments_of(text, Segmenter(language), [0.0, 5.0])
        assert "".join(pieces) == text


# --- the choice -----------------------------------------------------------------------------------------


def test_a_generous_budget_never_cuts():
    assert Segmenter("a").next_cut(BENCH_SENTENCE, 1e6).kind is Boundary.END
    assert Segmenter("a").next_cut(BENCH_SENTENCE, 1e6, first=True).kind is Boundary.END


def test_a_speechs_first_segment_is_a_few_words_at_a_natural_break():
    cut = Segmenter("a").next_cut(BENCH_SENTENCE, 0.0, first=True)
    assert BENCH_SENTENCE[: cut.position] == "Your order shipped this morning "
    assert cut.kind is Boundary.PREPOSITION and cut.units <= DEFAULT_FIRST_UNITS
    # A short first sentence is not cut at all.
    assert Segmenter("a").next_cut("Happy to help.", 0.0, first=True).kind is Boundary.END


def test_later_segments_grow_with_the_budget_and_prefer_better_boundaries():
    segmenter = Segmenter("a")
    lengths = [segmenter.next_cut(BENCH_SENTENCE, budget).units for budget in (20, 35, 50, 70, 90)]
    assert lengths == sorted(lengths) and lengths[-1] == spoken_units(BENCH_SENTENCE)
    # Within 57 units a conjunction at 49 beats a plain word boundary at 40.
    cut = segmenter.next_cut(BENCH_SENTENCE, 57)
    assert BENCH_SENTENCE[cut.position :].startswith("and should") and cut.kind is Boundary.CONJUNCTION


def test_no_fragment_shorter_than_the_minimum_is_left_behind():
    text = "We can ship it to your office today."
    cut = Segmenter("a").next_cut(text, spoken_units(text) - 3)
    assert spoken_units(text[cut.position :]) >= DEFAULT_MIN_UNITS or cut.kind is Boundary.END


def test_when_nothing_fits_a_short_segment_at_a_natural_break_is_taken():
    cut = Segmenter("a").next_cut(BENCH_SENTENCE, 1.0)
    assert DEFAULT_MIN_UNITS <= cut.units <= DEFAULT_MIN_UNITS + DEFAULT_FIRST_UNITS
    assert cut.kind >= Boundary.PREPOSITION


def test_negative_settings_are_refused():
    with pytest.raises(ValueError):
        Segmenter("a", min_units=-1)


# --- boundaries per language ----------------------------------------------------------------------------


def _kinds(text: str, language: str) -> dict[str, Boundary]:
    """Allowed cuts of ``text`` as {segment text: kind}."""
    return {
        text[: cut.position].strip(): cut.kind
        for cut in cuts(text, language)
        if cut.kind not in (Boundary.FORBIDDEN, Boundary.END)
    }


def test_english_clause_phrase_word_and_forbidden_boundaries():
    text = "Dr. Smith paid $1 000 000, e.g. for the house (see above) — twice… as soon as he could."
    kinds = _kinds(text, "a")
    assert "Dr." not in kinds and "Dr. Smith paid $1" not in kinds and "Dr. Smith paid $1 000" not in kinds
    assert "Dr. Smith paid $1 000 000, e.g." not in kinds  # after an abbreviation
    assert kinds["Dr. Smith paid $1 000 000,"] is Boundary.CLAUSE
    assert kinds["Dr. Smith paid $1 000 000, e.g. for the"] is Boundary.WEAK  # "the | house"
    assert kinds["Dr. Smith paid $1 000 000, e.g. for the house"] is Boundary.CONJUNCTION  # "(" opens
    assert kinds["Dr. Smith paid $1 000 000, e.g. for the house (see above) —"] is Boundary.CLAUSE
    assert kinds["Dr. Smith paid $1 000 000, e.g. for the house (see above) — twice…"] is Boundary.CLAUSE
    assert (
        kinds["Dr. Smith paid $1 000 000, e.g. for the house (see above) — twice… as soon"] is Boundary.WEAK
    )
    assert "Dr. Smith paid $1 000 000, e.g. for the house (see above)" not in kinds  # before "—"


def test_spelled_out_numbers_stay_whole():
    kinds = _kinds("It costs one thousand two hundred dollars and forty cents today.", "a")
    assert not any(k.endswith(("one", "thousand", "two", "hundred")) for k in kinds), kinds
    assert kinds["It costs one thousand two hundred dollars"] is Boundary.CONJUNCTION
    kinds = _kinds("Son mil doscientos euros y cuarenta céntimos.", "e")
    assert "Son mil" not in kinds


def test_english_conjunctions_relatives_and_prepositions():
    kinds = _kinds("I found the book which you wanted in the shop because it was cheap.", "b")
    assert kinds["I found the book"] is Boundary.CONJUNCTION  # before "which"
    assert kinds["I found the book which you wanted"] is Boundary.PREPOSITION  # before "in"
    assert kinds["I found the book which you wanted in the shop"] is Boundary.CONJUNCTION
    assert kinds["I found the"] is Boundary.WEAK


@pytest.mark.parametrize(
    ("language", "text", "conjunction", "preposition"),
    [
        ("e", "Compré el libro que querías en la tienda.", "Compré el libro", "Compré el libro que querías"),
        ("f", "Je pense qu'il viendra demain avec sa sœur.", "Je pense", "Je pense qu'il viendra demain"),
        ("i", "Ho il libro che volevi in libreria.", "Ho il libro", "Ho il libro che volevi"),
        ("p", "Comprei o livro que você quis na loja.", "Comprei o livro", "Comprei o livro que você quis"),
    ],
)
def test_romance_languages_cut_before_conjunctions_and_prepositions(language, text, conjunction, preposition):
    kinds = _kinds(text, language)
    assert kinds[conjunction] is Boundary.CONJUNCTION
    assert kinds[preposition] is Boundary.PREPOSITION


def test_french_elision_and_compound_conjunctions():
    kinds = _kinds("Je pense qu'il viendra demain parce que l'été est là.", "f")
    assert kinds["Je pense qu'il viendra demain"] is Boundary.CONJUNCTION  # before "parce que"
    assert kinds["Je pense qu'il viendra demain parce"] is Boundary.WEAK  # never "parce | que"
    assert kinds["Je pense qu'il viendra demain parce que"] is Boundary.WEAK


def test_hindi_cuts_after_postpositions_and_before_conjunctions():
    kinds = _kinds("वह घर में है और मैं बाज़ार से आया।", "h")
    assert kinds["वह घर में"] is Boundary.PREPOSITION  # after the postposition
    assert kinds["वह घर"] is Boundary.WEAK  # never before it
    assert kinds["वह घर में है"] is Boundary.CONJUNCTION  # before "और"


def test_japanese_cuts_at_punctuation_and_after_particles_never_inside_a_word():
    text = "東京都に住んでいる友達から連絡がありました、そしてコンピューターを買いました。"
    kinds = _kinds(text, "j")
    assert kinds["東京都に"] is Boundary.PREPOSITION
    assert kinds["東京都に住んでいる友達から"] is Boundary.PREPOSITION
    assert kinds["東京都に住んでいる友達から連絡がありました、"] is Boundary.CLAUSE
    for segment in kinds:
        assert not segment.endswith(("東", "京", "住", "コ", "ン", "ピ", "ュ", "ー")), segment
    assert language_code("ja-JP") == "j"


def test_a_long_japanese_or_chinese_run_without_breaks_stays_whole():
    assert _kinds("東京都千代田区丸の内一丁目", "j") == {}
    assert _kinds("中华人民共和国国务院新闻办公室", "z") == {}
    segment = Segmenter("z").next_cut("中华人民共和国国务院新闻办公室发布会", 3.0)
    assert segment.kind is Boundary.END


def test_chinese_cuts_at_punctuation_and_before_conjunctions():
    kinds = _kinds("我今天很高兴，因为我们完成了项目但是还有很多工作。", "z")
    assert kinds == {
        "我今天很高兴，": Boundary.CLAUSE,
        "我今天很高兴，因为我们完成了项目": Boundary.CONJUNCTION,
    }
    assert _kinds("数字1,000不能分开", "z") == {}  # an ASCII comma between digits is no clause mark
    assert language_code("cmn") == "z" and language_code("zh-CN") == "z"


def test_spoken_units_weigh_scripts_by_speaking_time():
    assert spoken_units("Hello, world!") == 10
    assert spoken_units("こんにちは") == 10  # five kana
    assert spoken_units("你好") == 6  # two ideographs
    assert spoken_units("नमस्ते") == 4  # letters count, vowel signs do not


def test_language_codes():
    assert [
        language_code(x) for x in ("a", "en-US", "en-GB", "en", "es", "fr-CA", "hi", "it", "pt-BR")
    ] == list("aabaefhip")
    assert language_code("xx") == ""

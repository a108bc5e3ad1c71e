"""Tests for speech.chunker: streaming sentence boundaries per language, line breaks, length cap, cost."""

from __future__ import annotations

import itertools
import json
import re

import pytest
import sentencex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from speech.chunker import (
    DEFAULT_MAX_CHUNK_CHARS,
    Chunk,
    IncrementalSentenceChunker,
    sentence_language,
    strip_markdown,
)


def run(text_or_fragments: str | list[str], **kwargs) -> list[str]:
    """Every chunk the chunker returns for the fragments, flush included."""
    fragments = [text_or_fragments] if isinstance(text_or_fragments, str) else text_or_fragments
    chunker = IncrementalSentenceChunker(**kwargs)
    chunks = []
    for fragment in fragments:
        chunks += chunker.feed(fragment)
    return chunks + [chunk.text for chunk in chunker.finish()]


def run_by_char(text: str, **kwargs) -> list[str]:
    return run(list(text), **kwargs)


def normalize(text: str) -> str:
    return " ".join(text.split())


def assert_partition(chunks: list[str], text: str, markdown: bool = True) -> None:
    """The normalisation contract: chunks cover norm(strip_markdown(text)), separated by "" or " "."""
    expected = normalize(strip_markdown(text) if markdown else text)
    pos = 0
    for index, chunk in enumerate(chunks):
        assert chunk, chunks
        assert chunk == normalize(chunk), chunk
        if index and expected.startswith(" ", pos):
            pos += 1
        assert expected.startswith(chunk, pos), (chunk, expected[pos : pos + len(chunk) + 10])
        pos += len(chunk)
    assert pos == len(expected), (chunks, expected)


# --- the examples of the issue ---------------------------------------------------------------------------


def test_birthday_then_another_sentence_in_two_fragments():
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("My birthday is Jan 1, 1980.") == []
    assert chunker.feed(" Another one.") == ["My birthday is Jan 1, 1980."]
    assert chunker.flush() == "Another one."


def test_price_then_thanks():
    assert run("It costs $3.14. Thank you!") == ["It costs $3.14.", "Thank you!"]


def test_decimal_number_is_not_a_boundary():
    assert run("My temperature is 98.6 today.") == ["My temperature is 98.6 today."]


def test_abbreviations_titles_and_eg():
    text = "Dr. Smith and Mrs. Jones went to the U.S. capital. We met, e.g. on Monday."
    expected = ["Dr. Smith and Mrs. Jones went to the U.S. capital.", "We met, e.g. on Monday."]
    assert run(text) == expected
    assert run_by_char(text) == expected


def test_cjk_sentence_is_emitted_with_the_next_character():
    # One character of lookahead keeps closing quotes and further marks with their sentence (「你好。」,
    # 你好？！) whatever the fragmentation; the last sentence waits for the end of the text.
    chunker = IncrementalSentenceChunker(language="zh")
    returned = [chunker.feed(char) for char in "你好。我很好！你呢？"]
    assert returned == [[], [], [], ["你好。"], [], [], [], ["我很好！"], [], []]
    assert chunker.flush() == "你呢？"


def test_hindi_danda():
    text = "मैं घर जा रहा हूँ। तुम कहाँ हो?"
    assert run(text, language="hi") == ["मैं घर जा रहा हूँ।", "तुम कहाँ हो?"]
    assert run_by_char(text, language="hi") == ["मैं घर जा रहा हूँ।", "तुम कहाँ हो?"]


def test_sentence_is_emitted_when_the_first_letter_of_the_next_arrives():
    text = "This is a test. Testing"
    chunker = IncrementalSentenceChunker()
    returned = {index: chunk for index, char in enumerate(text) if (chunk := chunker.feed(char))}
    assert returned == {text.index("T", 1): ["This is a test."]}
    assert chunker.flush() == "Testing"


def test_not_one_sentence_late():
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("First one. Second") == ["First one."]
    assert chunker.flush() == "Second"


# --- boundary details ------------------------------------------------------------------------------------


def test_abbreviation_is_held_until_the_next_character_then_kept():
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("I saw Dr.") == []
    assert chunker.feed(" ") == []
    assert chunker.feed("S") == []  # decided here: "Dr. S" is no boundary, and stays so
    assert chunker.feed("mith. He") == ["I saw Dr. Smith."]
    assert chunker.flush() == "He"


def test_initialism_before_lowercase_is_not_a_boundary():
    assert run("He lives in the U.S. capital city. Nice.") == ["He lives in the U.S. capital city.", "Nice."]


def test_sentence_final_number_is_a_boundary_once_the_next_sentence_starts():
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("He was born in 1980.") == []
    assert chunker.feed(" ") == []
    assert chunker.feed("A") == ["He was born in 1980."]


def test_ellipses():
    assert run("Wait... What happened? I think... maybe nothing.") == [
        "Wait...",
        "What happened?",
        "I think... maybe nothing.",
    ]
    # "…" is read as "..." (sentencex 1.0.32 alone would not end a sentence at "…" + capital).
    assert run("I think… maybe. Yes… Fine.") == ["I think… maybe.", "Yes…", "Fine."]


def test_closing_quotes_and_brackets_belong_to_the_sentence():
    assert run('He said "Hi." Then left.') == ['He said "Hi."', "Then left."]
    assert run("She wrote: “It works!” Good.") == ["She wrote: “It works!”", "Good."]
    assert run("It was great.) Then rain.") == ["It was great.)", "Then rain."]
    assert run("He said: «Oui.» Then left.") == ["He said: «Oui.»", "Then left."]
    assert run("「你好。」他说。") == ["「你好。」", "他说。"]


# --- quotes, brackets and languages (issue 14's defects among them) -------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ('"Hello," she said. "How are you?"', "en", ['"Hello," she said.', '"How are you?"']),
        ('"Hello!" she said. Then she left.', "en", ['"Hello!" she said.', "Then she left."]),
        ('"Are you coming?" he asked. "Yes."', "en", ['"Are you coming?" he asked.', '"Yes."']),
        ("“Wait!” cried Anna. We stopped.", "en", ["“Wait!” cried Anna.", "We stopped."]),
        ("'Hi,' said Tom. 'Bye.'", "en", ["'Hi,' said Tom.", "'Bye.'"]),
        ('He asked, "Why?" and left.', "en", ['He asked, "Why?" and left.']),
        ('"Stop." He did.', "en", ['"Stop."', "He did."]),
        ("He left. (She stayed.) Then it rained.", "en", ["He left.", "(She stayed.)", "Then it rained."]),
        ("We won. (Finally!) The end.", "en", ["We won.", "(Finally!)", "The end."]),
        ("It was late (around 3 a.m.). We slept.", "en", ["It was late (around 3 a.m.).", "We slept."]),
        ("See the note {below.} Then go.", "en", ["See the note {below.}", "Then go."]),
        ("Hola. ¿Qué tal? ¡Muy bien! Gracias.", "e", ["Hola.", "¿Qué tal?", "¡Muy bien!", "Gracias."]),
        ("¿Vienes? —preguntó ella. —Sí.", "e", ["¿Vienes? —preguntó ella.", "—Sí."]),
        ("«Ven», dijo. «¡Ahora!» Y se fue.", "e", ["«Ven», dijo.", "«¡Ahora!»", "Y se fue."]),
        (
            "« Bonjour ! » dit-elle. « Ça va ? » Oui.",
            "f",
            ["« Bonjour ! » dit-elle.", "« Ça va ? »", "Oui."],
        ),
        ("Il a dit : « Oui. » Puis il est parti.", "fr", ["Il a dit : « Oui. »", "Puis il est parti."]),
        ("Il est parti… Pourquoi ? Je ne sais pas.", "f", ["Il est parti…", "Pourquoi ?", "Je ne sais pas."]),
        ("M. Dupont est là. Il attend.", "f", ["M. Dupont est là.", "Il attend."]),
        (
            "今日は晴れです。明日は雨でしょう！本当？",
            "j",
            ["今日は晴れです。", "明日は雨でしょう！", "本当？"],
        ),
        (
            "「はい。」と彼は言った。「いいえ。」それから",
            "j",
            ["「はい。」と彼は言った。", "「いいえ。」", "それから"],
        ),
        ("他说：“你好。”然后走了。", "z", ["他说：“你好。”", "然后走了。"]),
        ("你好？！我很好。。。", "z", ["你好？！", "我很好。。。"]),
        ("मैं ठीक हूँ। आप कैसे हैं? धन्यवाद॥", "h", ["मैं ठीक हूँ।", "आप कैसे हैं?", "धन्यवाद॥"]),
        ("Ciao! Come stai? «Bene», disse.", "i", ["Ciao!", "Come stai?", "«Bene», disse."]),
        (
            "Olá! Tudo bem? Sim. O Sr. Silva chegou.",
            "p",
            ["Olá!", "Tudo bem?", "Sim.", "O Sr. Silva chegou."],
        ),
    ],
)
def test_quotes_speech_tags_brackets_and_language_punctuation(text, language, expected):
    assert run(text, language=language) == expected
    assert run_by_char(text, language=language) == expected


def test_sentence_language_accepts_kokoro_codes_and_tags():
    assert [sentence_language(code) for code in "abefhijpz"] == [
        "en",
        "en",
        "es",
        "fr",
        "hi",
        "it",
        "ja",
        "pt",
        "zh",
    ]
    assert sentence_language("pt-BR") == "pt" and sentence_language("en_GB") == "en"
    assert sentence_language("cmn") == "zh" and sentence_language("de") == "de"
    with pytest.raises(ValueError):
        IncrementalSentenceChunker(language=" ")


def test_chunks_say_whether_they_end_at_a_line_break():
    chunker = IncrementalSentenceChunker()
    chunks = chunker.feed_chunks("# Title\nOne. Two.\nThree, cut here and there") + chunker.finish()
    assert chunks == [
        Chunk("Title", True),
        Chunk("One.", False),
        Chunk("Two.", True),
        Chunk("Three, cut here and there", False),
    ]
    capped = IncrementalSentenceChunker(max_chunk_chars=10)
    assert capped.feed_chunks("alpha beta gamma delta") == [Chunk("alpha beta", False), Chunk("gamma", False)]


def test_urls_and_email_addresses_never_split():
    text = "Visit example.com/a.b today. Write to john.doe@mail.com or https://x.org/v1.2/a.html now."
    expected = [
        "Visit example.com/a.b today.",
        "Write to john.doe@mail.com or https://x.org/v1.2/a.html now.",
    ]
    assert run(text) == expected
    assert run_by_char(text) == expected


def test_eg_and_ie_mid_sentence():
    text = "Bring fruit, e.g. apples, i.e. something sweet. Thanks."
    assert run_by_char(text) == ["Bring fruit, e.g. apples, i.e. something sweet.", "Thanks."]


def test_arabic_question_mark():
    assert run("هل أنت بخير؟ نعم.", language="ar") == ["هل أنت بخير؟", "نعم."]


def test_numbered_list_on_separate_lines_gives_one_chunk_per_item():
    text = "Steps:\n1. Mix the flour.\n2. Bake it\n10. Eat"
    assert run(text) == ["Steps:", "1. Mix the flour.", "2. Bake it", "10. Eat"]
    assert run_by_char(text) == ["Steps:", "1. Mix the flour.", "2. Bake it", "10. Eat"]


def test_run_in_numbered_list_is_read_like_a_sentence_ending_in_a_number():
    # "1." alone is never a chunk; "2. Second" is indistinguishable from "in 1980. Another".
    assert run("1. First item 2. Second item") == ["1. First item 2.", "Second item"]


def test_line_break_is_a_boundary_without_a_terminator():
    # Issue 14: "Title line\nBody text here." became one sentence and the line break was lost.
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Title line") == []
    assert chunker.feed_chunks("\nBody text here.") == [Chunk("Title line", True)]
    assert chunker.finish() == [Chunk("Body text here.", False)]
    assert run_by_char("A heading without stop\n\nText") == ["A heading without stop", "Text"]


def test_whitespace_growing_into_a_paragraph_break_across_fragments():
    # "Title " is scanned first; the space then grows into a blank line and must be looked at again.
    assert run(["Title ", "\n", "\nText"]) == ["Title", "Text"]
    assert run(["Steps ", "\n1. Mix"]) == ["Steps", "1. Mix"]


def test_every_line_break_ends_a_chunk():
    # Language models do not wrap lines: a line break is structure (a title, an item, a verse).
    assert run("one line\nand its continuation") == ["one line", "and its continuation"]
    assert run("Dear John,\nThanks.\r\nBye") == ["Dear John,", "Thanks.", "Bye"]


def test_chunk_without_letters_joins_the_next():
    assert run("... Then it began. !!! Wow.") == ["... Then it began.", "!!! Wow."]


def test_flush_resets_and_returns_none_when_empty():
    chunker = IncrementalSentenceChunker()
    assert chunker.flush() is None
    assert chunker.feed("  \n ") == []
    assert chunker.flush() is None
    assert chunker.feed("One. Two") == ["One."]
    assert chunker.flush() == "Two"
    assert chunker.feed("Three.") == []
    assert chunker.flush() == "Three."


def test_whitespace_is_normalised_inside_and_between_chunks():
    assert run("  Hello \t there.\r\n\r\n  General\u00a0\u202fKenobi.  ") == [
        "Hello there.",
        "General Kenobi.",
    ]


def test_cjk_closer_in_a_later_fragment_stays_with_its_sentence():
    assert run(["「你好。", "」他说。"]) == ["「你好。」", "他说。"]
    assert run(["你好？", "！我"]) == ["你好？！", "我"]


def test_arguments_are_checked():
    with pytest.raises(TypeError):
        IncrementalSentenceChunker(language=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        IncrementalSentenceChunker(max_chunk_chars=12.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        IncrementalSentenceChunker(max_chunk_chars=True)
    with pytest.raises(ValueError):
        IncrementalSentenceChunker(max_chunk_chars=0)
    with pytest.raises(TypeError):
        IncrementalSentenceChunker().feed(b"bytes")  # type: ignore[arg-type]


# --- markdown (rules in tests/speech/test_markdown.py) -------------------------------------------------


def test_markdown_headings_and_list_items_do_not_run_together():
    # Issue 14: headings and list items ran together with the text after them.
    text = "# Title\nIntro text\n- one\n* two\n+ three\n---\n```python\nprint(1)\n```\nDone"
    assert run(text) == ["Title", "Intro text", "one", "two", "three", "Done"]
    assert run_by_char(text) == ["Title", "Intro text", "one", "two", "three", "Done"]


def test_markdown_does_not_break_boundaries():
    text = "This is **bold.** Then _em_. A `code` span. See [docs](http://a.b/c.d). # not a heading"
    assert run(text) == ["This is bold.", "Then em.", "A code span.", "See docs.", "# not a heading"]
    assert run("**Dr. Smith** is _here_. Good.") == ["Dr. Smith is here.", "Good."]


def test_markdown_can_be_turned_off():
    assert run("a_b **c**\n# d", markdown=False) == ["a_b **c**", "# d"]


def test_text_the_stripper_releases_at_the_end_is_chunked():
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("One. Two!") == ["One."]
    assert chunker.finish() == [Chunk("Two!", False)]


# --- length cap ------------------------------------------------------------------------------------------


def test_long_sentence_is_cut_at_the_last_clause_mark():
    text = "This sentence is long, and it keeps going; without a stop it goes on and on and on"
    chunks = run(text, max_chunk_chars=40)
    assert chunks == [
        "This sentence is long,",
        "and it keeps going;",
        "without a stop it goes on and on and on",
    ]


def test_clause_cut_prefers_punctuation_over_whitespace():
    assert run("Alpha beta, gamma delta epsilon zeta eta theta", max_chunk_chars=30) == [
        "Alpha beta,",
        "gamma delta epsilon zeta eta",
        "theta",
    ]


def test_numbers_with_commas_and_ranges_are_not_clause_marks():
    assert run("Totals 1,234,567 and 1990–2000 here", max_chunk_chars=20) == [
        "Totals 1,234,567 and",
        "1990–2000 here",
    ]


def test_word_longer_than_the_cap_is_cut_inside():
    assert run("x" * 25, max_chunk_chars=10) == ["x" * 10, "x" * 10, "x" * 5]


def test_hard_cut_keeps_combining_marks_with_their_base():
    decomposed = "e\u0301" * 6  # é as e + COMBINING ACUTE ACCENT
    chunks = run(decomposed, max_chunk_chars=5)
    assert chunks == ["e\u0301e\u0301", "e\u0301e\u0301", "e\u0301e\u0301"]


def test_cjk_without_punctuation_is_cut_at_the_cap_and_at_ideographic_commas():
    assert run("你" * 25, max_chunk_chars=10) == ["你" * 10, "你" * 10, "你" * 5]
    assert run("我很好，你呢我很好你呢我很好", max_chunk_chars=8) == ["我很好，", "你呢我很好你呢我", "很好"]


def test_default_cap_holds_for_long_text():
    text = " ".join(["Lorem ipsum dolor sit amet, consectetur adipiscing elit"] * 20)
    chunks = run_by_char(text)
    assert len(chunks) > 5
    assert all(len(chunk) <= DEFAULT_MAX_CHUNK_CHARS for chunk in chunks)
    assert_partition(chunks, text)


NUMBER_DENSE = (
    "In fiscal year 2023 the company reported revenue of $1,234,567,890, up 12.5% from $1,097,393,680 in "
    "2022. Operating expenses rose to $987,654,321, while net income reached $246,913,569, or $3.14 per "
    "diluted share. The board approved a dividend of $0.42 per share, payable on March 15, 2024 to "
    "shareholders of record on February 28, 2024. Headcount grew from 12,345 to 14,567 employees across 37 "
    "offices in 21 countries. At 9:45 a.m. on 12/31/2023 the share price was 98.6, and by 4:00 p.m. it had "
    "closed at 101.25, a gain of 2.69%. Population estimates: 8,045,311,447 people worldwide, 331,449,281 "
    "in the U.S., and 1,425,671,352 in India, with growth of 0.9% a year since 1950 in most regions."
)


def test_default_cap_keeps_number_dense_chunks_under_kokoro_limit():
    """Phonemize every chunk as the server does (espeak-ng en-us and en-gb, reference_server.backends.g2p);
    each must fit Kokoro's 510 phoneme tokens."""
    g2p = pytest.importorskip("reference_server.backends.g2p")
    from reference_server.assets import CONFIG_PATH

    vocab = json.loads(CONFIG_PATH.read_text(encoding="utf-8"))["vocab"]
    chunks = run(NUMBER_DENSE)
    assert any(len(chunk) > 100 for chunk in chunks)
    for code in "ab":
        english = g2p.create_g2p(code, vocab)
        counts = [english.phonemize(chunk).token_count for chunk in chunks]
        assert max(counts) <= 510, (code, counts)


# --- cost ------------------------------------------------------------------------------------------------

EN_CORPUS = [
    "The old lighthouse stood at the edge of the cliff. Every evening the keeper climbed the stairs.",
    "Dr. Smith and Mrs. Jones went to the U.S. capital. We met, e.g. on Monday.",
    "It costs $3.14. Thank you! My temperature is 98.6 today.",
    "My birthday is Jan 1, 1980. Another one is in Feb. 2001, isn't it?",
    'He said "Hi." Then left. She asked (why? nobody knows) and went home.',
    "Wait... What happened? I don't know… maybe nothing. Really?! Yes.",
    "Visit example.com/a.b or write to john.doe@mail.com. The U.S. Army base is near.",
    "Here's how: first, install Python 3.12; then, run pip install requests. That's all!",
    "Sentences can be long, with many clauses, commas, and numbers like 1,234,567 or 3.5%; they go on.",
    "The meeting is at 5 p.m. Tomorrow we go. See Fig. 3 for details, i.e. the chart.",
]
MIXED_CORPUS = [
    "你好。我很好！你呢？",
    "मैं घर जा रहा हूँ। तुम कहाँ हो?",
    "هل أنت بخير؟ نعم.",
    "「你好。」他说。我们走吧！",
    "**Note:** this is _important_. Use `pip` now.\n\n# Steps\n1. First.\n2. Second\n- bullet one\n- two",
    "See [the docs](https://x.com/a_(b)) for more. 1. First item 2. Second item",
    "This is a test. Testing",
    "Bonjour ! Ça va ? Oui.",
]


def count_library(monkeypatch) -> list[int]:
    """Record the window length of every sentencex call."""
    calls: list[int] = []
    real = sentencex.get_sentence_boundaries

    def counting(language: str, text: str):
        calls.append(len(text))
        return real(language, text)

    monkeypatch.setattr(sentencex, "get_sentence_boundaries", counting)
    return calls


def test_cost_is_linear_in_text_length(monkeypatch):
    """Counted, not timed: sentencex calls and the characters they read grow linearly with the text."""
    calls = count_library(monkeypatch)
    base = " ".join(EN_CORPUS)
    window = DEFAULT_MAX_CHUNK_CHARS + 10  # the cap, one space, the lookahead, "…" read as "..."
    results = {}
    for repeats in (14, 28):
        calls.clear()
        text = " ".join([base] * repeats)
        assert len(text) >= 10_000
        chunker = IncrementalSentenceChunker()
        most_pending = 0
        for char in text:
            chunker.feed(char)
            most_pending = max(most_pending, chunker.pending)
        chunker.flush()
        # at most one call per candidate (terminator, closers, whitespace), on a window bounded by the cap
        assert len(calls) <= len(re.findall(r"[.!?…]+[\"')\]]*\s", text))
        assert max(calls) <= window
        assert most_pending <= window
        results[repeats] = (len(calls), sum(calls))
    (calls_1, chars_1), (calls_2, chars_2) = results[14], results[28]
    assert calls_2 <= 2 * calls_1 + 2
    assert chars_2 <= 2 * chars_1 + 2 * window


def test_one_long_fragment_is_segmented_like_small_ones():
    text = " ".join(EN_CORPUS + MIXED_CORPUS[:3]) * 30  # about 30 k characters, CJK included
    assert len(text) > 20_000
    whole = run(text)
    assert whole == run([text[i : i + 7] for i in range(0, len(text), 7)])
    assert_partition(whole, text)
    # Internal pieces never end between a CJK full stop and its closing bracket. The prefixes shift the
    # text through all five alignments, so some piece edge falls right after a "。" whatever the size.
    for prefix in ("", "A", "AB", "ABC", "ABCD"):
        assert run(prefix + "「你好。」" * 3000) == [prefix + "「你好。」"] + ["「你好。」"] * 2999


def test_text_without_terminators_never_calls_the_library(monkeypatch):
    calls = count_library(monkeypatch)
    chunker = IncrementalSentenceChunker()
    chunks = []
    for char in "word, " * 2000:
        chunks += chunker.feed(char)
        assert chunker.pending <= DEFAULT_MAX_CHUNK_CHARS + 2
    assert calls == []
    assert len(chunks) > 50


# --- properties ------------------------------------------------------------------------------------------

TOKENS = [
    "Hello", "world", "the", "I", "A", "Dr.", "U.S.", "e.g.", "1980.", "3.14", "1,234", "$5", "Smith", "you",
    ".", ".", "!", "?", "...", "…", "?!", "。", "！", "？", "।", "؟", "你好", "मैं", "नमस्ते", "é", "e\u0301",
    "👍", '"', "'", "“", "”", ")", "(", "」", "「", ",", ";", ":", "—", "–", "，",
    "**", "*", "_", "`", "```", "#", "# ", "- ", "+ ", "> ", "[", "]", "](", "[link](http://x.y/z)", "\\",
    "1.", "2)", "example.com", "a_b", "2*3", "john.doe@mail.com",
    " ", " ", " ", "  ", "\n", "\n\n", "\t",
]  # fmt: skip
random_texts = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
realistic_texts = st.lists(st.sampled_from(EN_CORPUS + MIXED_CORPUS), min_size=1, max_size=4).map(" ".join)


@st.composite
def fragmentations(draw, texts):
    text = draw(texts)
    cuts = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=25))
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(text)}), len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(fragmentations(realistic_texts))
def test_fragmentation_does_not_change_realistic_chunks(case):
    text, fragments = case
    whole, streamed = run(text), run(fragments)
    assert streamed == whole
    for chunks in (whole, streamed):
        assert_partition(chunks, text)
        assert all(len(chunk) <= DEFAULT_MAX_CHUNK_CHARS for chunk in chunks)


@PROPERTY_SETTINGS
@given(fragmentations(random_texts), st.integers(1, 40), st.booleans())
@example(("Dr. —", ["Dr. —"]), 1, False)  # the text ended while a dash after "Dr." was undecided: one chunk
@example(("Dr. —", ["Dr.", " —"]), 3, True)  # of five characters came out past the cap
def test_fragmentation_does_not_change_random_chunks(case, cap, markdown):
    text, fragments = case
    whole = run(text, max_chunk_chars=cap, markdown=markdown)
    streamed = run(fragments, max_chunk_chars=cap, markdown=markdown)
    assert streamed == whole
    for chunks in (whole, streamed):
        assert_partition(chunks, text, markdown=markdown)
        assert all(len(chunk) <= cap for chunk in chunks)


@PROPERTY_SETTINGS
@given(random_texts)
def test_character_by_character_matches_whole_text(text):
    assert run_by_char(text, max_chunk_chars=30) == run(text, max_chunk_chars=30)

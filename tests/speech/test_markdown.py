"""Tests for speech.markdown: the rules one by one, streaming, no-loss and fragmentation properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speech.markdown import MAX_LINK_TARGET_CHARS, MarkdownStripper, strip_markdown


def lines(text: str) -> list[str]:
    """The stripped text's non-blank lines, whitespace-collapsed: what the chunker makes segments of."""
    return [" ".join(line.split()) for line in strip_markdown(text).split("\n") if line.strip()]


def flat(text: str) -> str:
    return " ".join(strip_markdown(text).split())


# --- line starts -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("# Title\nBody", ["Title", "Body"]),
        ("###### Six\n####### seven", ["Six", "####### seven"]),
        ("#hashtag and #1", ["#hashtag and #1"]),
        ("## **Bold** heading", ["Bold heading"]),
        ("- one\n* two\n+ three", ["one", "two", "three"]),
        ("  - nested\n    - deeper", ["nested", "deeper"]),
        ("1. First\n2) Second\n10. Tenth", ["1. First", "2) Second", "10. Tenth"]),
        ("- [x] Done\n- [ ] Open\n* [X] Also", ["Done", "Open", "Also"]),
        ("> quoted\n> - item\n>> deeper", ["quoted", "item", "deeper"]),
        ("-5 degrees\n+1 vote\n-- an aside", ["-5 degrees", "+1 vote", "-- an aside"]),
        ("before\n---\nafter\n***\n* * *\n___\nend", ["before", "after", "end"]),
        ("Title\n=====\nText\n--\nmore", ["Title", "Text", "--", "more"]),
        ("#\n-\n+\n*\n## \ntext", ["text"]),
        ("Ends in\n#", ["Ends in"]),
    ],
)
def test_line_start_markers(markdown, expected):
    assert lines(markdown) == expected


def test_fenced_code_blocks_are_not_spoken():
    text = "Run this:\n```python\nprint('hi')\n# not a heading\n```\nThen this.\n~~~\ncode\n~~~\nDone."
    assert lines(text) == ["Run this:", "Then this.", "Done."]


def test_fence_closes_only_with_its_own_character_and_length():
    text = "````\n```\nstill code\n~~~\n````\nout"
    assert lines(text) == ["out"]
    assert lines("> ```\n> code\n> ```\nafter") == ["after"]


def test_unclosed_fence_runs_to_the_end():
    assert lines("Intro\n```\nnever closed\nmore") == ["Intro"]
    assert strip_markdown("```") == ""


def test_table_rows_speak_their_cells_separated_by_commas():
    table = "| Plan | Price |\n|:-----|------:|\n| Basic | $9.99 |\n| **Pro** | | $20 |\n|---|\n| x |"
    assert lines(table) == ["Plan, Price", "Basic, $9.99", "Pro, $20", "x"]


def test_table_cell_spacing_does_not_depend_on_where_spaces_fall():
    assert lines("|a   b|  c  |") == ["a b, c"]
    assert lines("|  |  |\n|a|") == ["a"]
    assert lines("| `a|b` | c \\| d |") == ["a|b, c | d"]


def test_line_of_marker_characters_only_is_text_unless_a_rule_or_a_dangling_run():
    assert lines("**\nok") == ["ok"]
    assert lines("::\n==\n~~") == ["::", "=="]


# --- inline ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "clean"),
    [
        (
            "**bold** and *em* and _em_ and __strong__ and ***both***",
            "bold and em and em and strong and both",
        ),
        ("snake_case_name, 2*3, a * b, a ** b", "snake_case_name, 2*3, a * b, a ** b"),
        ("~~struck~~ and ~5 and a~~b", "struck and ~5 and a~~b"),
        ("This is **bold.** Then _em_.", "This is bold. Then em."),
        ("Use `pip install x` now", "Use pip install x now"),
        ("Code `**kwargs` and ``a ` b`` stay", "Code **kwargs and a ` b stay"),
        ("A stray ` backtick\nnext", "A stray backtick next"),
        ("See [the docs](https://x.com/a_(b)) and [1].", "See the docs and ."),
        ("An image ![a cat](cat.png) and ![](x.png) here", "An image a cat and here"),
        ("Wow! [link](u) and done!", "Wow! link and done!"),
        ("[note](see below)", "note(see below)"),
        ("Unclosed [x](http://a.b/c", "Unclosed x"),
        ("Cited [1][2] and [^3] and [4, 5] and [6-8].", "Cited and and and ."),
        ("A [1](http://x) link", "A 1 link"),
        ("array[i] and [a b]", "arrayi and a b"),
        ("a \\*literal\\* star and C:\\path", "a *literal* star and C:\\path"),
        ("Line<br>break and <b>bold</b> and <sup>2</sup>", "Line break and bold and 2"),
        ('<span class="x">styled</span> text', "styled text"),
        ("x < y and a <b and c> d and <3", "x < y and a <b and c> d and <3"),
        ("Mail <john@x.org> or <https://x.org/a>", "Mail john@x.org or https://x.org/a"),
        ("Trailing **", "Trailing"),
        ("Unclosed <abc", "Unclosed <abc"),
        ("Ends with a bang!", "Ends with a bang!"),
        ("Citation at the end [12]", "Citation at the end"),
        ("Half a citation [12", "Half a citation 12"),
    ],
)
def test_inline_markup(markdown, clean):
    assert flat(markdown) == clean


def test_long_link_target_is_text():
    target = "(" + "a" * (MAX_LINK_TARGET_CHARS + 10) + ")"
    assert flat("[x]" + target) == "x" + target


def test_block_html_tags_end_a_line():
    assert lines("<p>One</p><p>Two</p>") == ["One", "Two"]


# --- streaming -------------------------------------------------------------------------------------------


def test_stripper_streams_and_holds_only_undecided_markers():
    stripper = MarkdownStripper()
    assert stripper.feed("**Hel") == "Hel"
    assert stripper.feed("lo**") == "lo"
    assert stripper.feed(" [x](http://a") == " x"
    assert stripper.pending == len("(http://a")
    assert stripper.feed(".b) end") == " end"
    assert stripper.feed("\n#") == "\n"
    assert stripper.pending == 1
    assert stripper.feed(" Head") == "Head"
    assert stripper.flush() == ""


def test_flush_returns_held_text_and_resets():
    stripper = MarkdownStripper()
    assert stripper.feed("Wow!") == "Wow"
    assert stripper.flush() == "!"
    assert stripper.feed("**x**") == "x"
    assert stripper.flush() == ""


def test_fragments_must_be_strings():
    with pytest.raises(TypeError):
        MarkdownStripper().feed(b"**x**")  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------------------

TOKENS = [
    "Hello", "world", "snake_case", "2*3", "3.14", "é", "你好", "नमस्ते", "👍",
    "*", "**", "_", "__", "~", "~~", "`", "``", "```", "~~~", "#", "# ", "## ", "- ", "+ ", "* ", "> ", "1. ",
    "|", "| ", " |", "---", "===", "[", "]", "](", ")", "(", "!", "![", "[1]", "[x]", "[ ]", "<", ">", "<br>",
    "<b>", "</b>", "<a href=\"x\">", "<http://x.y>", "\\", "\\*", ":", "-", "=", ".", "!", "?",
    " ", " ", "  ", "\t", "\n", "\n", "\n\n", "\r\n",
]  # fmt: skip
random_texts = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


@st.composite
def fragmentations(draw, texts):
    text = draw(texts)
    cuts = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=25))
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(text)}), len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(fragmentations(random_texts))
def test_output_does_not_depend_on_fragmentation(case):
    text, fragments = case
    stripper = MarkdownStripper()
    streamed = "".join(stripper.feed(fragment) for fragment in fragments) + stripper.flush()
    assert streamed == strip_markdown(text)
    assert stripper.pending == 0


def alnum(text: str) -> str:
    return "".join(char for char in text if char.isalnum())


def is_subsequence(short: str, long: str) -> bool:
    chars = iter(long)
    return all(char in chars for char in short)


@PROPERTY_SETTINGS
@given(random_texts)
def test_letters_and_digits_come_from_the_input_in_order(text):
    """Markup is only removed (never invented): output letters/digits are a subsequence of the input's."""
    assert is_subsequence(alnum(strip_markdown(text)), alnum(text))


PLAIN = st.text(
    alphabet=st.characters(blacklist_characters="*_~`#+-=|:>[]()!<\\", blacklist_categories=["Cs"])
)


@PROPERTY_SETTINGS
@given(PLAIN)
def test_text_without_markdown_characters_is_unchanged_but_line_ends(text):
    """Plain text keeps every line and every word; only indentation and the kind of line end change."""
    expected = "".join("\n" if char in "\r\u2028\u2029\x85" else char for char in text)
    assert [line.split() for line in strip_markdown(text).split("\n")] == [
        line.split() for line in expected.split("\n")
    ]


# Model-based: random documents built from blocks whose spoken words are known.
WORDS = st.sampled_from(["alpha", "Beta", "gamma", "3", "42", "día", "ça", "東京", "टेस्ट"])
PHRASES = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)


@st.composite
def inline(draw):
    """(markdown, spoken words) of one inline element."""
    words = draw(PHRASES)
    kind = draw(st.sampled_from(["plain", "bold", "em", "strike", "code", "link", "image", "cite"]))
    if kind == "plain":
        return words, words
    if kind == "bold":
        return f"**{words}**", words
    if kind == "em":
        return f"_{words}_", words
    if kind == "strike":
        return f"~~{words}~~", words
    if kind == "code":
        return f"`{words}`", words
    if kind == "link":
        return f"[{words}](https://example.com/x_(y))", words
    if kind == "image":
        return f"![{words}](pic.png)", words
    return f"{words} [{draw(st.integers(1, 99))}]", words


@st.composite
def line_content(draw):
    parts = draw(st.lists(inline(), min_size=1, max_size=4))
    return " ".join(md for md, _ in parts), " ".join(words for _, words in parts)


@st.composite
def block(draw):
    """(markdown lines, spoken lines) of one block."""
    kind = draw(st.sampled_from(["para", "heading", "bullets", "numbered", "quote", "table", "code", "rule"]))
    if kind == "code":
        body = draw(st.lists(PHRASES, max_size=3))
        return ["```" + draw(st.sampled_from(["", "python", "sh"])), *body, "```"], []
    if kind == "rule":
        return [draw(st.sampled_from(["---", "***", "___", "- - -"]))], []
    if kind == "table":
        rows = draw(st.lists(st.lists(line_content(), min_size=1, max_size=3), min_size=1, max_size=3))
        width = max(len(row) for row in rows)
        markdown = ["| " + " | ".join(md for md, _ in rows[0]) + " |", "|" + "---|" * width]
        markdown += ["| " + " | ".join(md for md, _ in row) + " |" for row in rows[1:]]
        return markdown, [", ".join(words for _, words in row) for row in rows]
    items = draw(st.lists(line_content(), min_size=1, max_size=3))
    if kind == "para":
        return [md for md, _ in items], [words for _, words in items]
    if kind == "heading":
        md, words = items[0]
        return [draw(st.sampled_from(["#", "##", "###"])) + " " + md], [words]
    if kind == "bullets":
        marker = draw(st.sampled_from(["-", "*", "+", "  -"]))
        return [f"{marker} {md}" for md, _ in items], [words for _, words in items]
    if kind == "numbered":
        return [f"{n}. {md}" for n, (md, _) in enumerate(items, 1)], [
            f"{n}. {words}" for n, (_, words) in enumerate(items, 1)
        ]
    return [f"> {md}" for md, _ in items], [words for _, words in items]


@PROPERTY_SETTINGS
@given(st.lists(block(), min_size=1, max_size=6))
def test_documents_speak_exactly_their_words_line_by_line(blocks):
    markdown = "\n\n".join("\n".join(md) for md, _ in blocks)
    spoken = [line for _, said in blocks for line in said]
    assert lines(markdown) == spoken

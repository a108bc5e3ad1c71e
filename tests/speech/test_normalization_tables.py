"""Tests for speech.languages: every language's tables are complete and registered under its Kokoro code.

The behaviour of the tables is tested through the engine (test_normalization.py); these tests catch a
language module that forgets a word the engine asks for, so a new language fails here, not on a reply.
"""

from __future__ import annotations

import re

import pytest

from protocol.voices import LANGUAGES as KOKORO_LANGUAGES
from protocol.voices import language_code
from speech.languages import CJK_LANGUAGES, LANGUAGES
from speech.normalization import normalize_text

WORD_KEYS = frozenset(
    "percent minus to about times plus equals divided number dot slash at and cents_and".split()
)
"""The keys of ``Language.words`` the engine reads."""


def test_every_kokoro_language_has_tables_of_one_kind():
    assert set(LANGUAGES) | set(CJK_LANGUAGES) == set(KOKORO_LANGUAGES)
    assert not set(LANGUAGES) & set(CJK_LANGUAGES)
    for code, lang in [*LANGUAGES.items(), *CJK_LANGUAGES.items()]:
        assert lang.code == code
        assert language_code(code) == code


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_a_language_has_every_word_and_table_the_engine_reads(code):
    lang = LANGUAGES[code]
    assert lang.words.keys() >= WORD_KEYS
    assert len(lang.months) == 12 and all(lang.months)
    assert "." in lang.point or "," in lang.point
    assert all(money.one and money.many for money in lang.currencies.values())
    assert all(one and many for one, many in lang.units.values())
    assert lang.feminine <= {one for one, _ in lang.units.values()}
    for pattern in (lang.grouping, *lang.name_patterns, *lang.patterns):
        re.compile(pattern)
    assert re.fullmatch(lang.grouping, "1,234" if not lang.decimal_comma else "1.234")


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_a_language_says_a_time_and_a_date_in_its_own_words(code):
    lang = LANGUAGES[code]
    said = normalize_text("2024-03-15 10:30", code)
    assert lang.months[2] in said
    assert "2024-03-15" not in said and "10:30" not in said


@pytest.mark.parametrize("code", sorted(CJK_LANGUAGES))
def test_a_cjk_language_names_every_currency_symbol_and_the_clock(code):
    words = CJK_LANGUAGES[code].words
    assert {"$", "US$", "€", "£", "¥", "₹", "hour", "minute"} <= set(words)
    for pattern in CJK_LANGUAGES[code].patterns:
        re.compile(pattern)

"""What a language's tables are made of: the :class:`Language` and :class:`Currency` records and the small
table formats its module writes them in (PROTOCOL.md §14.2).

A language module of :mod:`speech.languages` (``en``, ``es``, ``fr`` ...) fills one :class:`Language`
with its words (units, currencies, months, scales, abbreviations), its number conventions (decimal
separator, digit grouping), the extra token patterns only it has (English dates, French ``10h30``,
ordinal suffixes) and how it reads a time and a date. The engine (:mod:`speech.normalization`) finds the
tokens and reads the numbers; it asks the language for everything else. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "CJK_NUMBER",
    "CJK_PATTERNS",
    "GROUPED_COMMA",
    "GROUPED_POINT",
    "ORDINAL_INDICATORS",
    "START",
    "CjkLanguage",
    "Clock",
    "Currency",
    "Date",
    "Language",
    "Numbers",
    "currencies",
    "day_of_month",
    "pairs",
    "units",
]

START = r"(?<![\w@./+-])"
"""Regular-expression look-behind: a token starts a word (not after a letter, digit, ``@ . / + -``)."""
GROUPED_POINT = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?"
"""A number grouped by commas in threes, with a decimal point (``1,234.5``): English and the default."""
GROUPED_COMMA = r"\d{1,3}(?:,\d{3})+\.\d+|\d{1,3}(?:\.\d{3})+(?:,\d+)?"
"""A number grouped by dots, with a decimal comma (``1.234,5``), or written the English way with a
decimal part (``1,234.5``): Spanish, Italian, Portuguese."""
CJK_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
"""A number in Japanese or Chinese text, grouped or not: these scripts write no spaces, so their tokens
start after any non-digit."""
CJK_PATTERNS = (
    r"(?P<date_iso>(?<![\d.-])(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})(?![\d-]))",
    r"(?P<time>(?<![\d:.])(?P<hh>[01]?\d|2[0-3]):(?P<mm>[0-5]\d)(?![\d:]))",
    rf"(?P<currency>(?<![\d$€£¥₹])(?P<cur_pre>US\$|[$€£¥₹])(?P<amount_pre>{CJK_NUMBER})(?![\d.,])"
    rf"|(?<![\d.,])(?P<amount_post>{CJK_NUMBER})\s?(?P<cur_post>[$€£¥₹]))",
)
"""The tokens Japanese and Chinese share: ISO dates, times, amounts with a currency symbol."""
ORDINAL_INDICATORS = (
    rf"(?P<ordinal>{START}(?P<ord>\d+)\.?(?P<ord_suffix>[ºª°]|\.(?:er|o|a)(?![\w])))",
    r"(?P<numero>(?<![\w])(?:#|n\.?º\s?|N\.?º\s?|nº\s?|n\.\s)(?=\d))",
)
"""Spanish, Italian and Portuguese tokens: ordinals with an indicator (``1º``, ``2ª``, ``1.er``) and
``nº 5`` / ``n.º 5``."""


class Numbers(Protocol):
    """What a language's readers ask of the engine: figures as the language's words (digit strings in, as
    written; words out)."""

    def cardinal(self, digits: str) -> str:
        """``"21"`` → "twenty-one" (digits as they are where the language leaves them to the G2P)."""
        ...

    def ordinal(self, digits: str, feminine: bool = False) -> str:
        """``"21"`` → "twenty-first"."""
        ...

    def year(self, digits: str) -> str:
        """``"1990"`` → "nineteen ninety" where the language reads years so, else the cardinal."""
        ...


Clock = Callable[[Numbers, int, int, str | None], str]
"""How a language says a time: ``(numbers, hours 0-23, minutes 0-59, "a.m."/"pm"... or None)`` → words."""
Date = Callable[[Numbers, str, str, str], str]
"""How a language says a valid date: ``(numbers, day as written, the month's name, year as written)``."""


@dataclass(frozen=True)
class CjkLanguage:
    """Japanese or Chinese: the G2P reads digit runs itself (cutlet, cn2an), so only what it misreads
    around them is rewritten.

    Attributes:
        code: its Kokoro code (``"j"``, ``"z"``).
        words: the engine's vocabulary by key: currency symbols (``"$"``, ``"US$"``, ``"€"`` ...),
            ``"hour"`` and ``"minute"`` after a time's numbers, and where the language has those tokens
            ``"%"``, ``"minus"`` and ``"point"``.
        patterns: token patterns after :data:`CJK_PATTERNS`: named groups the engine knows.
    """

    code: str
    words: dict[str, str]
    patterns: tuple[str, ...]


@dataclass(frozen=True)
class Currency:
    """One currency's names in one language.

    Attributes:
        one, many: the unit's name, singular and plural ("dollar", "dollars").
        cent_one, cent_many: the hundredth's name ("cent", "cents"); empty when the amount has none.
        feminine: the unit's name is feminine (agreement of "un"/"una" ...).
    """

    one: str
    many: str
    cent_one: str = ""
    cent_many: str = ""
    feminine: bool = False


@dataclass(frozen=True)
class Language:
    """The words and conventions of one language, for the engine of :mod:`speech.normalization`.

    Attributes:
        code: its Kokoro code (:data:`protocol.voices.LANGUAGE_TAGS`).
        num2words: num2words' language; ``None``: digits are left for the G2P to read.
        decimal_comma: ``","`` is the decimal separator, ``"."`` (and spaces in French) group thousands.
        point: decimal separator as written → its word.
        words: the engine's vocabulary in this language, by key: ``percent minus to about times plus
            equals divided number dot slash at and cents_and``.
        currencies: symbol or ISO code as written → :class:`Currency`.
        scales: ``"million"``, ``"k"`` ... as written → the word said before the currency (the same
            word where the key is one).
        scale_of: word between a scale and the currency ("de" in es/pt/fr, "di" in it; "" none).
        scale_of_elided: what ``scale_of`` becomes before a currency starting with a vowel, written
            against it (French "d'": "deux millions d'euros"); "" keeps ``scale_of``.
        units: abbreviation → (singular, plural).
        months: the twelve months' names, January first.
        grouping: regular expression of a grouped number (``1,234.5``, ``1.234,5``, ``1 234``, ``1,23,456``).
        clock: how a time is said (:data:`Clock`).
        date: how a date is said (:data:`Date`).
        abbreviations: abbreviation as written → words.
        feminine: unit names (singular) of feminine gender.
        agreement: a number's last word → (before a masculine noun, before a feminine one): "uno" →
            ("un", "una").
        name_patterns: token patterns read before the symbols (French ``M.`` before a name, English
            ``St.`` after a street's name): named groups the engine knows.
        patterns: token patterns read after times and before currency (English dates and decades,
            ordinal suffixes, ``No.``): named groups the engine knows.
        month_first: a date written ``1/2/2024`` is month first (American English).
        decimal_digits: the digits after the point are read one by one ("three point one four").
        reads_years: a year is read as a year ("nineteen ninety"), not as a cardinal.
    """

    code: str
    num2words: str | None
    decimal_comma: bool
    point: dict[str, str]
    words: dict[str, str]
    currencies: dict[str, Currency]
    scales: dict[str, str]
    scale_of: str
    units: dict[str, tuple[str, str]]
    months: tuple[str, ...]
    grouping: str
    clock: Clock
    date: Date
    abbreviations: dict[str, str] = field(default_factory=dict)
    feminine: frozenset[str] = frozenset()
    agreement: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    name_patterns: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    scale_of_elided: str = ""
    month_first: bool = False
    decimal_digits: bool = False
    reads_years: bool = False


def pairs(text: str) -> dict[str, str]:
    """``"key=value; key=value"`` → dict (values may hold spaces)."""
    return dict(item.split("=", 1) for item in text.split("; "))


def units(table: str) -> dict[str, tuple[str, str]]:
    """Lines ``abbreviations | singular | plural`` → abbreviation → (singular, plural)."""
    found = {}
    for line in table.strip().splitlines():
        names, one, many = (part.strip() for part in line.split("|"))
        found.update(dict.fromkeys(names.split(), (one, many)))
    return found


def currencies(table: str) -> dict[str, Currency]:
    """Lines ``symbols and codes | one | many [| cent | cents] [| feminine]`` → symbol → currency."""
    found = {}
    for line in table.strip().splitlines():
        names, *words = (part.strip() for part in line.split("|"))
        feminine = words[-1] == "feminine"
        one, many, *cents = words[:-1] if feminine else words
        currency = Currency(one, many, *(cents or ("", "")), feminine)
        found.update(dict.fromkeys(names.split(), currency))
    return found


def day_of_month(numbers: Numbers, day: str) -> str:
    """The day of a date as Spanish, French, Italian and Portuguese say it: the first as an ordinal
    ("primero", "premier", "primo"), the others as cardinals."""
    return numbers.ordinal("1") if int(day) == 1 else numbers.cardinal(str(int(day)))

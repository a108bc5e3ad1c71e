"""Normalization for speech: numbers, currency, dates, times, units and symbols as words (PROTOCOL.md §14.2).

The G2P a Kokoro voice goes through reads words well and written-out figures badly. espeak-ng (es, fr, hi,
it, pt-BR and, in this server, English) is driven word by word with punctuation kept, so a separator splits
a number: ``1,234`` is read "one, two hundred thirty-four", ``3.14`` "three. fourteen", ``$5`` "dollar
five", ``10:30`` "ten: thirty", ``5 km`` "five k m", ``2024-03-15`` "two thousand twenty-four dash zero
three ...", and emoji are read by name ("grinning face"). :func:`normalize_text` rewrites one chunk of
text (a sentence from :mod:`speech.chunker`) so that the G2P reads it as a person would.

What is rewritten, per language (Kokoro codes, :data:`protocol.voices.LANGUAGE_TAGS`):

===========  ===============================================================================================
languages    rewritten
===========  ===============================================================================================
a b e f i p  numbers as words (num2words): integers, grouped numbers (``1,234`` in English, ``1.234`` in
             es/it/pt, ``1 234`` in French), decimals (the separator as written: "point", "coma",
             "virgule" ...), negative numbers, ordinals (``21st``, ``2e``, ``1º``), currency before or after
             the amount (``$1,234.50``, ``5 €``, ``R$ 10``, ``€2.5 million``, ``EUR 5``), percentages,
             times (``10:30``, ``9:05 p.m.``, ``3pm``, French ``10h30``), dates (``2024-03-15``,
             ``15/03/2024`` -- month first in American English --, English ``March 15, 2024`` and
             ``15 March``), English years after a cue word (``in 1990``) and decades (``1990s``), numbers
             with a unit (``5 km``, ``20 °C``, ``3.5 GB``, ``100 mph``), ranges with a dash (``10–20``),
             arithmetic between numbers (``2 + 2 = 4``, ``3 × 4``), version numbers (``3.12.1``), phone
             numbers (digit by digit), ``#1`` and ``No. 5``, ``~5``
h            the same shapes, but digits stay digits (espeak-ng reads Hindi cardinals well; num2words has no
             Hindi): separators, decimals, currency, units, times and dates get Hindi words around them
j            digits stay digits (misaki's Japanese G2P, cutlet, reads digit runs) but what it misreads around
             them is rewritten: grouping (``1,234`` -> ``1234``), decimals (``3.14`` -> ``3点1 4``), times
             (``10:30`` -> ``10時30分``), ISO dates (``2024年3月15日``), currency (``$5`` -> ``5ドル``),
             percentages (``50パーセント``), negative numbers (``マイナス5``)
z            misaki's Chinese G2P normalizes numbers itself (cn2an: decimals, percentages, dates), but not
             digit grouping (``1,234`` -> ``1234``), times (``10:30`` -> ``10点30分``), ISO dates
             (``2024年3月15日``) and currency symbols (``$5`` -> ``5美元``)
all          emoji (pictographs, flags, keycaps, with their modifiers and joiners) are dropped; ``™ ®`` are
             dropped; URLs and e-mail addresses are spoken as host and path with the language's "dot",
             "slash" and "at" (scheme, ``www.``, query and fragment dropped); bare domains and file names
             with a known suffix (``example.com``, ``main.py``); ``&``, arrows ``→`` and a few
             abbreviations the G2P spells out (English ``e.g.``, ``i.e.``, ``vs.``, ``approx.``; ``p. ej.``,
             ``p. ex.``, ``ecc.``, French ``M.`` before a name, Spanish and Portuguese ``Sr.``/``Sra.``,
             Italian ``dott.``, ``sig.``, English ``St.`` after a street's name); an amount with cents
             before a currency's name (``12,50 euro``, ``12.50 dollars``) is read as money
===========  ===============================================================================================

Anything else stays as written: words, plain punctuation, and figures next to letters (``Q1``, ``4K``,
``mp3``, ``COVID-19``'s ``19`` is read, ``H2O`` is not touched).

Nothing is lost: :func:`normalize_spans` returns the text as consecutive ``(written, spoken)`` pairs whose
``written`` parts concatenate to the input exactly; ``spoken`` differs from ``written`` only for a matched
figure, symbol, abbreviation, address or emoji, and :func:`normalize_text` is the ``spoken`` parts joined,
whitespace collapsed. Cost: one regular-expression pass over the chunk, linear in its length (every token
pattern is anchored at a word start by a look-behind and has no nested repetition); each number costs
num2words time linear in its digits (numbers over 15 digits are read digit by digit).

This module is the engine: the token patterns every language shares, and the reading of each token
kind. What a language says (its units, currencies, months, scales, abbreviations, how it groups digits,
says a time or a date) and the token shapes only it writes are its module's tables in
:mod:`speech.languages` (``en``, ``es``, ``fr``, ``hi``, ``it``, ``ja``, ``pt``, ``zh``).
"""

from __future__ import annotations

import re
from functools import cache

from num2words import num2words

from protocol.voices import language_code
from speech.languages import CJK_LANGUAGES, LANGUAGES, en
from speech.languages.base import CJK_PATTERNS, GROUPED_POINT, START, Currency, Language

__all__ = ["normalize_spans", "normalize_text"]

_MAX_CARDINAL_DIGITS = 15  # longer digit strings are identifiers: read digit by digit

# --- emoji ---------------------------------------------------------------------------------------------

_PICTOGRAPH = (
    "\U0001f000-\U0001faff"  # mahjong .. symbols and pictographs extended-A (flags, skin tones included)
    "\u2600-\u27bf"  # miscellaneous symbols, dingbats
    "\u2b00-\u2bff"  # miscellaneous symbols and arrows (⭐ ⬆)
    "\u231a\u231b\u2328\u23cf\u23e9-\u23f3\u23f8-\u23fa"  # ⌚ ⌛ ⌨ ⏏ ⏩.. ⏸..
    "\u3030\u303d\u3297\u3299"
)
_MODIFIERS = "\ufe0e\ufe0f\U0001f3fb-\U0001f3ff"
_EMOJI = (
    rf"[0-9#*]\ufe0f?\u20e3"  # keycaps
    rf"|[{_PICTOGRAPH}][{_MODIFIERS}]*(?:\u200d[{_PICTOGRAPH}][{_MODIFIERS}]*)*[\U000e0020-\U000e007f]*"
    r"|[\ufe0e\ufe0f\u20e3]|[\u2122\u00ae]"
)

# --- languages -----------------------------------------------------------------------------------------

_GENERIC = Language(
    code="",
    num2words=None,
    decimal_comma=False,
    point={},
    words={},
    currencies={},
    scales={},
    scale_of="",
    units={},
    months=(),
    grouping=GROUPED_POINT,
    clock=en.clock,
    date=en.american_date,
)  # any other language: emoji and addresses only (no figure token reaches its clock or date)


# --- patterns ------------------------------------------------------------------------------------------

_TLDS = (
    "com|org|net|edu|gov|io|ai|dev|app|co|uk|us|de|fr|es|it|br|in|jp|cn|info|biz|me|tv|ly|gg|eu|ca|au|"
    "py|js|ts|json|yaml|yml|md|txt|html|css|csv|pdf|png|jpg|jpeg|gif|svg|toml|xml|sql|sh|exe|zip|rs|go|rb|php"
)
_END = r"(?![\w@])(?![.,]\d)"  # a token ends a word (a number does not stop before a separator and digits)
_SIGN = r"(?<![^\s(\[{\"'“‘«¿¡])[-−]"  # a minus sign: at the start or after a space, bracket or quote
_AMPM = r"(?P<ampm>[ap]\.?\s?m\.?|[AP]\.?\s?M\.?)(?![\w])"


def _number_pattern(lang: Language) -> str:
    """A number as the language writes it, grouped or not (group ``number`` is set by the caller)."""
    return rf"(?:{lang.grouping}|\d+(?:[.,]\d+)?)"


def _currency_names(lang: Language) -> dict[str, Currency]:
    """A currency's names as words ("euro", "euros", "dollars") -> the currency, for amounts written before
    them; names that are not plain words are left out."""
    found: dict[str, Currency] = {}
    for money in lang.currencies.values():
        for name in (money.one, money.many):
            if name and name.replace(" ", "").isalpha():
                found.setdefault(name, money)
    return found


@cache
def _compiled(code: str) -> re.Pattern[str]:
    lang = LANGUAGES.get(code, _GENERIC)
    parts = [rf"(?P<emoji>{_EMOJI})"]
    parts.append(
        r"(?P<url>(?:https?://|www\.)[\w\-.~:/?#\[\]@!$&'()*+,;=%]+?)"
        r"(?=[.,;:!?)\]\"'»”]*(?:[^\w\-.~:/?#\[\]@!$&'()*+,;=%]|$))"
        r"|(?P<email>(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+)(?![\w@-])(?!\.\w)"
        rf"|(?P<domain>(?<![\w@./-])[A-Za-z0-9][\w-]*(?:\.[A-Za-z0-9][\w-]*)*\.(?:{_TLDS})(?:/[\w./-]*[\w/])?)(?![\w@-])"
    )
    if lang.abbreviations:
        names = "|".join(re.escape(name) for name in sorted(lang.abbreviations, key=len, reverse=True))
        parts.append(rf"(?<![\w.])(?P<abbr>{names})(?![\w])")
    parts += lang.name_patterns
    parts.append(r"(?P<symbol>(?<=\s)(?:&|→|⇒|⟶|->)(?=\s))")
    if code in CJK_LANGUAGES:
        parts += [*CJK_PATTERNS, *CJK_LANGUAGES[code].patterns]
    if code not in LANGUAGES:
        return re.compile("|".join(parts))
    number = _number_pattern(lang)
    scales = "|".join(re.escape(s) for s in sorted(lang.scales, key=len, reverse=True))
    symbols = "|".join(re.escape(s) for s in sorted(lang.currencies, key=len, reverse=True))
    units = "|".join(re.escape(u) for u in sorted(lang.units, key=len, reverse=True))
    parts += [
        # phone numbers, dates and times before plain numbers
        r"(?P<date_iso>(?<![\w.-])(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})(?![\w-]))",
        r"(?P<phone>(?<![\w+-])(?:\+\d{1,3}[ -]?)?"
        r"(?:\(\d{2,4}\)[ -]?\d{2,4}(?:-\d{2,4})*|\d{3}-\d{3,4}(?:-\d{4})?)(?![\w-]))",
        r"(?P<date_slash>(?<![\w/.])(?P<d1>\d{1,2})(?P<ds>[/.])(?P<d2>\d{1,2})(?P=ds)(?P<d3>\d{4})(?![\w/]))",
        rf"(?P<time>(?<![\w:.])(?P<hh>[01]?\d|2[0-3]):(?P<mm>[0-5]\d)(?::[0-5]\d)?(?:\s?{_AMPM}|(?![\w])))",
    ]
    parts += lang.patterns
    # An amount with cents before a currency's name ("12,50 euro", "12.50 dollars") is money, not a decimal.
    names = "|".join(re.escape(n) for n in sorted(_currency_names(lang), key=len, reverse=True)) or "(?!)"
    cents = r"[\d.\u00a0\u202f ]*,\d{2}" if lang.decimal_comma else r"[\d,]*\.\d{2}"
    parts += [
        rf"(?P<currency>(?<![\w$€£¥₹])(?P<cur_pre>{symbols})\s*(?P<amount_pre>{number})(?![.,]\d)(?:\s+(?P<scale_pre>{scales})|(?P<scale_pre2>k|K|M|B|bn|mn))?(?![\w])"
        rf"|{START}(?P<amount_post>{number})(?![.,]\d)(?:\s*(?P<scale_post>{scales}))?\s*(?P<cur_post>{symbols})(?![\w$€£¥₹])"
        rf"|{START}(?=\d{cents}\s)(?P<amount_word>{number})(?![.,]\d)\s+(?P<cur_word>{names})(?![\w]))",
        rf"(?P<percent>(?:(?P<sign_p>{_SIGN})|{START})(?P<amount_p>{number})(?![.,]\d)\s*%)",
        rf"(?P<unit>(?:(?P<sign_u>{_SIGN})|{START})(?P<amount_u>{number})(?![.,]\d)\s*(?P<unit_name>{units})(?![\w/]))",
        r"(?P<operator>(?<=\d)\s*(?P<op>[×÷=+*–—])\s*(?=[-−]?\d))",
        r"(?P<approx>(?<![\w])[~≈]\s*(?=\d))",
        rf"(?P<number>(?:(?P<sign>{_SIGN})|(?<![\w.,]))(?P<amount>{number}){_END})",
        r"(?P<version>(?<![\w.])v?\d+(?:\.\d+){2,}(?![\w.]))",
    ]
    return re.compile("|".join(parts))


# --- reading -------------------------------------------------------------------------------------------


class _Reader:
    """Reads the tokens of one language."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.lang = LANGUAGES.get(code, _GENERIC)
        self.pattern = _compiled(code)
        self.spaced = code not in CJK_LANGUAGES  # the script separates words with spaces

    # numbers

    def digits(self, digits: str) -> str:
        if self.lang.num2words is None:
            return " ".join(digits)
        return " ".join(num2words(int(digit), lang=self.lang.num2words) for digit in digits)

    def cardinal(self, digits: str) -> str:
        if self.lang.num2words is None:
            return digits  # the G2P reads the digits
        if len(digits) > _MAX_CARDINAL_DIGITS or (len(digits) > 1 and digits[0] == "0"):
            return self.digits(digits)
        return num2words(int(digits), lang=self.lang.num2words).replace(",", "")

    def ordinal(self, digits: str, feminine: bool = False) -> str:
        if self.lang.num2words is None or len(digits) > _MAX_CARDINAL_DIGITS:
            return self.cardinal(digits)
        words = num2words(int(digits), lang=self.lang.num2words, to="ordinal").replace(",", "")
        if feminine:
            words = " ".join(word[:-1] + "a" if word.endswith("o") else word for word in words.split())
        return words

    def parse(self, text: str) -> tuple[str, str | None, str]:
        """``(integer digits, fraction digits or None, separator written)`` of a number token."""
        text = text.replace("\u00a0", " ").replace("\u202f", " ")
        if self.lang.decimal_comma:
            if "," in text and "." in text:
                decimal = "," if text.rindex(",") > text.rindex(".") else "."
            elif "," in text:
                decimal = ","
            elif "." in text:
                head, *groups = text.split(".")
                grouping = head != "0" and len(head) <= 3 and all(len(group) == 3 for group in groups)
                decimal = "" if grouping else "."
            else:
                decimal = ""
        else:
            decimal = "." if "." in text else ""
        if decimal and text.count(decimal) == 1:
            whole, fraction = text.split(decimal)
        else:
            whole, fraction = text, None
            decimal = ""
        return re.sub(r"\D", "", whole) or "0", fraction, decimal

    def number(self, text: str) -> str:
        whole, fraction, separator = self.parse(text)
        words = self.cardinal(whole)
        if fraction is None:
            return words
        point = self.lang.point.get(separator) or self.lang.point.get(".", ".")
        if self.lang.num2words is None or self.lang.decimal_digits:
            return f"{words} {point} {self.digits(fraction)}"
        zeros = len(fraction) - len(fraction.lstrip("0"))
        rest = fraction[zeros:]
        read = self.cardinal(rest) if rest and len(rest) <= 2 else self.digits(rest) if rest else ""
        return " ".join(
            part for part in (words, point, self.digits("0" * zeros) if zeros else "", read) if part
        )

    def is_one(self, text: str) -> bool:
        whole, fraction, _ = self.parse(text)
        return whole.lstrip("0") == "1" and not (fraction or "").strip("0")

    def before_noun(self, words: str, feminine: bool) -> str:
        """Agreement of a cardinal with the noun after it (un, una, une, uma, duas ...)."""
        head, _, last = words.rpartition(" ")
        forms = self.lang.agreement.get(last)
        if forms is not None:
            last = forms[feminine]
        return f"{head} {last}" if head else last

    # tokens

    def read(self, match: re.Match[str]) -> str:
        kind = match.lastgroup
        group = match.group
        words = self.lang.words
        if kind == "emoji":
            return ""
        if self.code in CJK_LANGUAGES and kind not in ("url", "email", "domain", "abbr", "symbol"):
            return self.read_cjk(match)
        if kind in ("url", "email", "domain"):
            return self.address(group(kind), kind)
        if kind == "abbr":
            return self.lang.abbreviations[group("abbr")]
        if kind == "monsieur":
            return "Monsieur"
        if kind == "street":  # its dot also ended the sentence when nothing follows
            return "Street" if match.string[match.end() :].strip() else "Street."
        if kind == "symbol":
            return {"&": words.get("and", "&")}.get(group("symbol"), words.get("to", ""))
        if kind == "date_iso":
            return self.date(group("id"), group("im"), group("iy")) or group(kind)
        if kind == "date_slash":
            first, second, year = group("d1"), group("d2"), group("d3")
            if self.lang.month_first and group("ds") == "/":
                day, month = (first, second) if int(first) > 12 else (second, first)
            else:
                day, month = (second, first) if int(second) > 12 else (first, second)
            return self.date(day, month, year) or group(kind)
        if kind == "phone":
            return ", ".join(self.digits(run) for run in re.findall(r"\d+", group("phone")))
        if kind == "time":
            return self.time(group("hh"), group("mm"), group("ampm"))
        if kind == "hour_ampm":
            return self.time(group("h12"), "00", group("ampm2"))
        if kind == "time_h":
            return self.time(group("fh"), group("fm") or "00", None)
        if kind == "month_day":
            return self.english_date(group("md_day"), group("md_month"), group("md_year"), day_first=False)
        if kind == "day_month":
            return self.english_date(group("dm_day"), group("dm_month"), group("dm_year"), day_first=True)
        if kind == "month_year":
            return f"{self.month_name(group('my_month'))} {self.year(group('my_year'))}"
        if kind == "year_cue":
            return f"{group('cue')} {self.year(group('cue_year'))}"
        if kind == "decade":
            if group("dec_short"):
                return _plural_decade(self.cardinal(group("dec_short")))
            return _plural_decade(self.year(group("dec_full")))
        if kind == "ordinal":
            suffix = match.groupdict().get("ord_suffix") or ""
            return self.ordinal(group("ord"), feminine=suffix.endswith(("ª", "a", "re", "ère", "nde")))
        if kind == "numero":
            return words["number"] + " "
        if kind == "fraction":
            return _english_fraction(int(group("fn")), int(group("fd")), self)
        if kind == "currency":
            return self.currency(match)
        if kind == "percent":
            sign = words["minus"] + " " if group("sign_p") else ""
            return f"{sign}{self.number(group('amount_p'))} {words['percent']}"
        if kind == "unit":
            amount = group("amount_u")
            one, many = self.lang.units[group("unit_name")]
            sign = words["minus"] + " " if group("sign_u") else ""
            count = self.number(amount)
            if self.parse(amount)[1] is None:
                count = self.before_noun(count, one in self.lang.feminine)
            return f"{sign}{count} {one if self.is_one(amount) and not sign else many}"
        if kind == "version":
            point = self.lang.point.get(".", ".")
            text = group("version")
            head = "v " if text.startswith("v") else ""
            return head + f" {point} ".join(self.cardinal(part) for part in text.lstrip("v").split("."))
        if kind == "operator":
            op = group("op")
            word = {
                "×": "times",
                "*": "times",
                "÷": "divided",
                "=": "equals",
                "+": "plus",
                "–": "to",
                "—": "to",
            }[op]
            return f" {words[word]} "
        if kind == "approx":
            return words["about"] + " "
        sign = words["minus"] + " " if group("sign") else ""
        return sign + self.number(group("amount"))

    def read_cjk(self, match: re.Match[str]) -> str:
        """Japanese and Chinese: digits stay digits (the G2P reads them); what is around them becomes
        words (年月日, 時分 / 点分, currency names, パーセント, マイナス, 点 between a number's parts)."""
        kind, group, words = match.lastgroup, match.group, CJK_LANGUAGES[self.code].words
        if kind == "grouped":
            return group("grouped").replace(",", "")
        if kind == "date_iso":
            return f"{int(group('iy'))}年{int(group('im'))}月{int(group('id'))}日"
        if kind == "time":
            hours, minutes = int(group("hh")), int(group("mm"))
            return f"{hours}{words['hour']}" + (f"{minutes}{words['minute']}" if minutes else "")
        if kind == "currency":
            amount = group("amount_pre") or group("amount_post")
            return self.cjk_number(amount) + words[group("cur_pre") or group("cur_post")]
        if kind == "percent":
            sign = words["minus"] if group("sign_p") else ""
            return sign + self.cjk_number(group("amount_p")) + words["%"]
        sign = words["minus"] if group("sign") else ""
        return sign + self.cjk_number(group("amount"))

    def cjk_number(self, text: str) -> str:
        whole, _, fraction = text.replace(",", "").partition(".")
        point = CJK_LANGUAGES[self.code].words.get("point")
        if not fraction or point is None:
            return whole + ("." + fraction if fraction else "")  # Chinese: cn2an reads "3.14" itself
        return f"{whole}{point}{' '.join(fraction)}"

    def currency(self, match: re.Match[str]) -> str:
        group = match.group
        symbol = group("cur_pre") or group("cur_post")
        amount = group("amount_pre") or group("amount_post") or group("amount_word")
        scale_written = group("scale_pre") or group("scale_pre2") or group("scale_post")
        money = self.lang.currencies[symbol] if symbol else _currency_names(self.lang)[group("cur_word")]
        whole, fraction, _ = self.parse(amount)
        if scale_written:
            scale = self.lang.scales.get(scale_written, scale_written)
            of, elided = self.lang.scale_of, self.lang.scale_of_elided
            if elided and money.many[:1] in "aeiouéè":
                noun = f" {elided}{money.many}"  # "deux millions d'euros"
            else:
                noun = f" {of} {money.many}" if of else f" {money.many}"
            return f"{self.number(amount)} {scale}{noun}".replace(" d' ", " d'")
        if fraction is not None and len(fraction) == 2 and money.cent_many:
            cents = int(fraction)
            parts = []
            if int(whole) or not cents:
                unit = money.one if int(whole) == 1 else money.many
                parts.append(f"{self.before_noun(self.cardinal(whole), money.feminine)} {unit}")
            if cents:
                cent = money.cent_one if cents == 1 else money.cent_many
                parts.append(f"{self.before_noun(self.cardinal(str(cents)), False)} {cent}")
            return f" {self.lang.words['cents_and']} ".join(parts)
        unit = money.one if self.is_one(amount) else money.many
        count = self.number(amount) if fraction is not None else self.cardinal(whole)
        if fraction is None:
            count = self.before_noun(count, money.feminine)
        return f"{count} {unit}"

    def address(self, text: str, kind: str) -> str:
        words = self.lang.words
        dot, slash, at = words.get("dot", "dot"), words.get("slash", "slash"), words.get("at", "at")
        if kind == "url":
            text = re.sub(r"^(?:https?://)?(?:www\.)?", "", text)
            text = re.split(r"[?#]", text, maxsplit=1)[0].rstrip("/")
        text = text.replace("@", f" {at} ").replace("/", f" {slash} ")
        text = re.sub(r"(?<=\w)\.(?=\w)", f" {dot} ", text).replace(".", " ")
        if self.lang.num2words is None:
            return text
        return re.sub(r"(?<!\w)\d+(?!\w)", lambda number: self.cardinal(number.group()), text)

    def year(self, digits: str) -> str:
        if self.lang.reads_years:
            return num2words(int(digits), lang=self.lang.num2words, to="year").replace(",", "")
        return self.cardinal(digits)

    def month_name(self, written: str) -> str:
        return self.lang.months[en.MONTH_NUMBERS[written.lower()[:3]] - 1]

    def english_date(self, day: str, month: str, year: str | None, *, day_first: bool) -> str:
        if not 1 <= int(day) <= 31:
            return f"{month} {day}" if not day_first else f"{day} {month}"
        name = self.month_name(month)
        nth = self.ordinal(day)
        said = f"the {nth} of {name}" if day_first or not self.lang.month_first else f"{name} {nth}"
        return f"{said}, {self.year(year)}" if year else said

    def date(self, day: str, month: str, year: str) -> str | None:
        d, m = int(day), int(month)
        if not (1 <= m <= 12 and 1 <= d <= 31):
            return None
        return self.lang.date(self, day, self.lang.months[m - 1], year)

    def time(self, hours: str, minutes: str, ampm: str | None) -> str:
        return self.lang.clock(self, int(hours), int(minutes), ampm)


def _plural_decade(words: str) -> str:
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}" if head else last


def _english_fraction(numerator: int, denominator: int, reader: _Reader) -> str:
    if reader.code not in ("a", "b"):
        return f"{numerator}/{denominator}"
    names = {2: ("half", "halves"), 4: ("quarter", "quarters")}
    one, many = names.get(denominator) or (reader.ordinal(str(denominator)),) * 2
    if denominator not in names:
        many = one + "s"
    return f"{reader.cardinal(str(numerator))} {one if numerator == 1 else many}"


_STICKY = frozenset("#~≈-−+$€£¥₹@/.:")  # characters digits must not touch


@cache
def _reader(code: str) -> _Reader:
    return _Reader(code)


def normalize_spans(text: str, language: str) -> list[tuple[str, str]]:
    """The text as consecutive ``(written, spoken)`` pairs; the ``written`` parts concatenate to ``text``.

    ``spoken`` equals ``written`` except for the figures, symbols, abbreviations, addresses and emoji
    listed in the module docstring. ``language`` as for :func:`protocol.voices.language_code`.

    Raises:
        TypeError: ``text`` or ``language`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    reader = _reader(language_code(language))
    spans: list[tuple[str, str]] = []
    position = 0
    for match in reader.pattern.finditer(text):
        if match.start() > position:
            spans.append((text[position : match.start()], text[position : match.start()]))
        written, spoken = match.group(), reader.read(match)
        if not spoken and reader.spaced:
            # A dropped emoji must not glue its neighbours together ("1980.🎉1980." is two numbers).
            before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
            if before and not before.isspace() and after.isalnum():
                spoken = " "
        elif spoken != written and reader.spaced:
            # Keep words apart from what surrounds them, so a second pass finds nothing new to read
            # ("#$5" must not become "#5 dollars").
            before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
            if (before.isalnum() or (before in _STICKY and spoken[0].isdigit())) and not spoken[0].isspace():
                spoken = " " + spoken
            if after.isalnum() and not spoken[-1].isspace():
                spoken += " "
        spans.append((written, spoken))
        position = match.end()
    if position < len(text):
        spans.append((text[position:], text[position:]))
    return spans


def normalize_text(text: str, language: str) -> str:
    """``text`` rewritten for the G2P of ``language`` (module docstring), whitespace collapsed.

    ``language``: a Kokoro code or a BCP 47 / ISO 639 tag (:func:`protocol.voices.language_code`); a
    language it does not name gets the generic rules: emoji and addresses only.

    Raises:
        TypeError: ``text`` or ``language`` is not a string.
    """
    return " ".join("".join(spoken for _, spoken in normalize_spans(text, language)).split())

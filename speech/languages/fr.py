"""French's tables for speech normalization (Kokoro ``f``, PROTOCOL.md §14.2).

Numbers are read by num2words (``"fr"``) with a decimal comma and spaces or dots grouping thousands
(``1 234,5``, ``1.234,5``); times are also written ``10h30`` and said "dix heures trente", "une heure";
ordinals take ``er``, ``e``, ``ème`` ...; ``M.`` before a capitalised name is "Monsieur"; an amount with a
scale before a currency beginning with a vowel takes "d'" ("deux millions d'euros").
"""

from __future__ import annotations

from speech.languages.base import START, Language, Numbers, currencies, day_of_month, pairs, units

__all__ = ["FRENCH"]

UNITS = units(
    """
    km | kilomètre | kilomètres
    m | mètre | mètres
    cm | centimètre | centimètres
    mm | millimètre | millimètres
    kg | kilogramme | kilogrammes
    g | gramme | grammes
    mg | milligramme | milligrammes
    l L | litre | litres
    ml mL | millilitre | millilitres
    km/h | kilomètre heure | kilomètres heure
    mph | mile par heure | miles par heure
    ko Ko KB | kilo-octet | kilo-octets
    Mo MB | mégaoctet | mégaoctets
    Go GB | gigaoctet | gigaoctets
    To TB | téraoctet | téraoctets
    Hz | hertz | hertz
    kHz | kilohertz | kilohertz
    MHz | mégahertz | mégahertz
    GHz | gigahertz | gigahertz
    W | watt | watts
    kW | kilowatt | kilowatts
    kWh | kilowattheure | kilowattheures
    V | volt | volts
    ms | milliseconde | millisecondes
    min | minute | minutes
    s | seconde | secondes
    °C | degré Celsius | degrés Celsius
    °F | degré Fahrenheit | degrés Fahrenheit
    ° | degré | degrés
    """
)

GROUPING = r"\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:,\d+)?|\d{1,3}(?:\.\d{3})+(?:,\d+)?"
"""A number grouped by spaces (plain, no-break or narrow no-break) or dots, decimal comma: ``1 234,5``."""
PATTERNS = (
    r"(?P<time_h>(?<![\w:.])(?P<fh>[01]?\d|2[0-3])\s?h\s?(?P<fm>[0-5]\d)?(?![\w]))",
    rf"(?P<ordinal>{START}(?P<ord>\d+)(?P<ord_suffix>er|re|ère|e|ème|nd|nde)(?![\w]))",
    r"(?P<numero>(?<![\w])(?:#|n°\s?|N°\s?|no\s)(?=\d))",
)
NAME_PATTERNS = (r"(?<![\w.])(?P<monsieur>M\.)(?=\s[A-ZÀ-Ý])",)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``10:30`` "dix heures trente", ``1:00`` "une heure"."""
    hour = "une" if hours == 1 else numbers.cardinal(str(hours))
    hour += " heure" if hours <= 1 else " heures"
    return hour if not minutes else f"{hour} {numbers.cardinal(str(minutes))}"


def date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "quinze mars deux mille vingt-quatre"; the first of a month "premier"."""
    return f"{day_of_month(numbers, day)} {month} {numbers.year(year)}"


FRENCH = Language(
    code="f",
    num2words="fr",
    decimal_comma=True,
    point={",": "virgule", ".": "point"},
    words=pairs(
        "percent=pour cent; minus=moins; to=à; about=environ; times=fois; plus=plus; equals=égale; "
        "divided=divisé par; number=numéro; dot=point; slash=slash; at=arobase; and=et; cents_and=et"
    ),
    currencies=currencies(
        """
        $ US$ USD | dollar | dollars | cent | cents
        € EUR | euro | euros | centime | centimes
        £ GBP | livre | livres | penny | pence | feminine
        ¥ JPY | yen | yens
        ₹ INR | roupie | roupies | feminine
        R$ BRL | réal | réais | centavo | centavos
        """
    ),
    scales=pairs(
        "mille=mille; million=million; millions=millions; milliard=milliard; milliards=milliards; "
        "k=mille; M=millions; Md=milliards"
    ),
    scale_of="de",
    scale_of_elided="d'",
    units=UNITS,
    months=tuple(
        "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split()
    ),
    abbreviations=pairs("p. ex.=par exemple; p.ex.=par exemple"),
    feminine=frozenset(["milliseconde", "minute", "seconde"]),
    grouping=GROUPING,
    clock=clock,
    date=date,
    agreement={"un": ("un", "une")},
    name_patterns=NAME_PATTERNS,
    patterns=PATTERNS,
)
"""French (Kokoro ``f``)."""

"""English's tables for speech normalization: American (Kokoro ``a``) and British (``b``) (PROTOCOL.md §14.2).

Numbers are read by num2words (``"en"``), decimals digit by digit ("three point one four") and years in
pairs ("nineteen ninety"). Only English has written-out dates (``March 15, 2024``, ``15th of March``),
years after a cue word (``in 1990``), decades (``1990s``, ``'90s``), ``3pm``, ordinal suffixes
(``21st``), ``No. 5`` and simple fractions (``3/4``) as tokens; American English writes a date month
first (``03/15/2024``) and says it "March fifteenth", British English "the fifteenth of March".
"""

from __future__ import annotations

from dataclasses import replace

from speech.languages.base import GROUPED_POINT, START, Language, Numbers, currencies, pairs, units

__all__ = ["AMERICAN", "BRITISH", "MONTH", "MONTH_NUMBERS"]

UNITS = units(
    """
    km | kilometer | kilometers
    m | meter | meters
    cm | centimeter | centimeters
    mm | millimeter | millimeters
    kg | kilogram | kilograms
    g | gram | grams
    mg | milligram | milligrams
    l L | liter | liters
    ml mL | milliliter | milliliters
    km/h kph | kilometer per hour | kilometers per hour
    mph | mile per hour | miles per hour
    ft | foot | feet
    mi | mile | miles
    lb lbs | pound | pounds
    oz | ounce | ounces
    KB kB | kilobyte | kilobytes
    MB | megabyte | megabytes
    GB | gigabyte | gigabytes
    TB | terabyte | terabytes
    Hz | hertz | hertz
    kHz | kilohertz | kilohertz
    MHz | megahertz | megahertz
    GHz | gigahertz | gigahertz
    W | watt | watts
    kW | kilowatt | kilowatts
    MW | megawatt | megawatts
    kWh | kilowatt hour | kilowatt hours
    V | volt | volts
    mAh | milliamp hour | milliamp hours
    ms | millisecond | milliseconds
    sec | second | seconds
    min | minute | minutes
    h hr hrs | hour | hours
    °C | degree Celsius | degrees Celsius
    °F | degree Fahrenheit | degrees Fahrenheit
    ° | degree | degrees
    """
)
MONTHS = tuple(
    "January February March April May June July August September October November December".split()
)
MONTH_NUMBERS = {name.lower()[:3]: index for index, name in enumerate(MONTHS, 1)}
"""A month's first three letters, lower-cased → its number (1-12): how the engine reads :data:`MONTH`."""
MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan\.?|Feb\.?|Mar\.?|Apr\.?|Jun\.?|Jul\.?|Aug\.?|Sept?\.?|Oct\.?|Nov\.?|Dec\.?)"
)
"""A month's name as English writes it, in full or abbreviated."""
_YEAR_CUES = "in since by from until till of circa around before after during year early late mid"
_YEAR_CUE = "(?:" + "|".join(f"[{cue[0].upper()}{cue[0]}]{cue[1:]}" for cue in _YEAR_CUES.split()) + ")"

PATTERNS = (
    r"(?P<hour_ampm>(?<![\w:.])(?P<h12>1[0-2]|0?[1-9])\s?(?P<ampm2>[ap]\.?m\.?|[AP]\.?M\.?)(?![\w]))",
    rf"(?P<month_day>(?<![\w])(?P<md_month>{MONTH})\s(?P<md_day>[0-3]?\d)(?:st|nd|rd|th)?(?![\w])"
    rf"(?:,?\s(?P<md_year>\d{{4}})(?![\w]))?)",
    rf"(?P<day_month>(?<![\w.,])(?P<dm_day>[0-3]?\d)(?:st|nd|rd|th)?\s(?:of\s)?(?P<dm_month>{MONTH})(?![\w])"
    rf"(?:,?\s(?P<dm_year>\d{{4}})(?![\w]))?)",
    rf"(?P<month_year>(?<![\w])(?P<my_month>{MONTH})\s(?P<my_year>\d{{4}})(?![\w]))",
    rf"(?P<year_cue>(?<![\w])(?P<cue>{_YEAR_CUE})\s(?P<cue_year>1[1-9]\d\d|20\d\d)(?![\w])(?![.,]\d))",
    r"(?P<decade>(?<![\w'])(?:(?P<dec_full>1[1-9]\d0|20\d0)|'(?P<dec_short>\d0))s(?![\w]))",
    rf"(?P<ordinal>{START}(?P<ord>\d+)(?:st|nd|rd|th)(?![\w]))",
    r"(?P<numero>(?<![\w])(?:#|No\.\s?)(?=\d))",
    r"(?P<fraction>(?<![\w/.])(?P<fn>[1-9])/(?P<fd>[2-9]|10)(?![\w/]))",
)
# "Main St." is a street; "St. Louis" (a capital after it) is a saint, left to the G2P.
NAME_PATTERNS = (r"(?<=\w )(?P<street>St\.)(?!\s+[A-Z])",)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``9:05 p.m.`` "nine oh five p m", ``10:00`` "ten o'clock", ``14:00`` "fourteen hundred"."""
    said = numbers.cardinal(str(hours))
    if ampm:
        marker = "a m" if ampm.lower().startswith("a") else "p m"
        if minutes:
            said += (
                " oh " + numbers.cardinal(str(minutes))
                if minutes < 10
                else " " + numbers.cardinal(str(minutes))
            )
        return f"{said} {marker}"
    if not minutes:
        return f"{said} o'clock" if hours <= 12 else f"{said} hundred"
    if minutes < 10:
        return f"{said} oh {numbers.cardinal(str(minutes))}"
    return f"{said} {numbers.cardinal(str(minutes))}"


def american_date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "March fifteenth, twenty twenty-four"."""
    return f"{month} {numbers.ordinal(day)}, {numbers.year(year)}"


def british_date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "the fifteenth of March, twenty twenty-four"."""
    return f"the {numbers.ordinal(day)} of {month}, {numbers.year(year)}"


AMERICAN = Language(
    code="a",
    num2words="en",
    decimal_comma=False,
    point={".": "point"},
    words=pairs(
        "percent=percent; minus=minus; to=to; about=about; times=times; plus=plus; equals=equals; "
        "divided=divided by; number=number; dot=dot; slash=slash; at=at; and=and; cents_and=and"
    ),
    currencies=currencies(
        """
        $ US$ USD | dollar | dollars | cent | cents
        € EUR | euro | euros | cent | cents
        £ GBP | pound | pounds | penny | pence
        ¥ JPY | yen | yen
        ₹ INR | rupee | rupees | paisa | paise
        R$ BRL | real | reais | centavo | centavos
        """
    ),
    scales=pairs(
        "thousand=thousand; million=million; billion=billion; trillion=trillion; k=thousand; "
        "K=thousand; M=million; mn=million; B=billion; bn=billion"
    ),
    scale_of="",
    units=UNITS,
    months=MONTHS,
    grouping=GROUPED_POINT,
    clock=clock,
    date=american_date,
    abbreviations=pairs(
        "e.g.=for example; i.e.=that is; vs.=versus; vs=versus; approx.=approximately; 24/7=twenty-four seven"
    ),
    name_patterns=NAME_PATTERNS,
    patterns=PATTERNS,
    month_first=True,
    decimal_digits=True,
    reads_years=True,
)
"""American English (Kokoro ``a``)."""
BRITISH = replace(AMERICAN, code="b", date=british_date, month_first=False)
"""British English (Kokoro ``b``): American's words; dates day first, said "the fifteenth of March"."""

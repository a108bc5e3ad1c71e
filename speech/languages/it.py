"""Italian's tables for speech normalization (Kokoro ``i``, PROTOCOL.md §14.2).

Numbers are read by num2words (``"it"``) with a decimal comma and dots grouping thousands (``1.234,5``);
ordinals take an indicator (``1º``, ``2ª``); a number agrees with a feminine noun (``una ora``); times are
said "dieci e trenta", "una"; dates "quindici marzo duemilaventiquattro", the first of a month "primo".
"""

from __future__ import annotations

from speech.languages.base import (
    GROUPED_COMMA,
    ORDINAL_INDICATORS,
    Language,
    Numbers,
    currencies,
    day_of_month,
    pairs,
    units,
)

__all__ = ["ITALIAN"]

UNITS = units(
    """
    km | chilometro | chilometri
    m | metro | metri
    cm | centimetro | centimetri
    mm | millimetro | millimetri
    kg | chilogrammo | chilogrammi
    g | grammo | grammi
    mg | milligrammo | milligrammi
    l L | litro | litri
    ml mL | millilitro | millilitri
    km/h | chilometro orario | chilometri orari
    mph | miglio orario | miglia orarie
    KB kB | kilobyte | kilobyte
    MB | megabyte | megabyte
    GB | gigabyte | gigabyte
    TB | terabyte | terabyte
    Hz | hertz | hertz
    kHz | kilohertz | kilohertz
    MHz | megahertz | megahertz
    GHz | gigahertz | gigahertz
    W | watt | watt
    kW | kilowatt | kilowatt
    kWh | chilowattora | chilowattora
    V | volt | volt
    ms | millisecondo | millisecondi
    min | minuto | minuti
    h | ora | ore
    s | secondo | secondi
    °C | grado Celsius | gradi Celsius
    °F | grado Fahrenheit | gradi Fahrenheit
    ° | grado | gradi
    """
)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``10:30`` "dieci e trenta", ``1:00`` "una"."""
    hour = "una" if hours == 1 else numbers.cardinal(str(hours))
    return hour if not minutes else f"{hour} e {numbers.cardinal(str(minutes))}"


def date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "quindici marzo duemilaventiquattro"; the first of a month "primo"."""
    return f"{day_of_month(numbers, day)} {month} {numbers.year(year)}"


ITALIAN = Language(
    code="i",
    num2words="it",
    decimal_comma=True,
    point={",": "virgola", ".": "punto"},
    words=pairs(
        "percent=per cento; minus=meno; to=a; about=circa; times=per; plus=più; equals=uguale a; "
        "divided=diviso; number=numero; dot=punto; slash=barra; at=chiocciola; and=e; cents_and=e"
    ),
    currencies=currencies(
        """
        $ US$ USD | dollaro | dollari | centesimo | centesimi
        € EUR | euro | euro | centesimo | centesimi
        £ GBP | sterlina | sterline | penny | pence | feminine
        ¥ JPY | yen | yen
        ₹ INR | rupia | rupie | feminine
        R$ BRL | real | real | centavo | centavos
        """
    ),
    scales=pairs(
        "mila=mila; milione=milione; milioni=milioni; miliardo=miliardo; miliardi=miliardi; k=mila; "
        "M=milioni; mld=miliardi"
    ),
    scale_of="di",
    units=UNITS,
    months=tuple(
        "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre "
        "dicembre".split()
    ),
    abbreviations=pairs(
        "ecc.=eccetera; etc.=eccetera; dott.=dottor; Dott.=dottor; dott.ssa=dottoressa; "
        "Dott.ssa=dottoressa; sig.=signor; Sig.=signor; sig.ra=signora; Sig.ra=signora"
    ),
    feminine=frozenset(["ora"]),
    grouping=GROUPED_COMMA,
    clock=clock,
    date=date,
    agreement={"uno": ("un", "una")},
    patterns=ORDINAL_INDICATORS,
)
"""Italian (Kokoro ``i``)."""

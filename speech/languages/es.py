"""Spanish's tables for speech normalization (Kokoro ``e``, PROTOCOL.md §14.2).

Numbers are read by num2words (``"es"``) with a decimal comma and dots grouping thousands (``1.234,5``);
ordinals take an indicator (``1º``, ``2ª``, ``1.er``); a number agrees with a feminine noun (``una hora``,
``veintiuna libras``); times are said "las diez y treinta" without the article ("diez y treinta", "una en
punto") and dates "quince de marzo de dos mil veinticuatro", the first of a month "primero".
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

__all__ = ["SPANISH"]

UNITS = units(
    """
    km | kilómetro | kilómetros
    m | metro | metros
    cm | centímetro | centímetros
    mm | milímetro | milímetros
    kg | kilogramo | kilogramos
    g | gramo | gramos
    mg | miligramo | miligramos
    l L | litro | litros
    ml mL | mililitro | mililitros
    km/h | kilómetro por hora | kilómetros por hora
    mph | milla por hora | millas por hora
    KB kB | kilobyte | kilobytes
    MB | megabyte | megabytes
    GB | gigabyte | gigabytes
    TB | terabyte | terabytes
    Hz | hercio | hercios
    kHz | kilohercio | kilohercios
    MHz | megahercio | megahercios
    GHz | gigahercio | gigahercios
    W | vatio | vatios
    kW | kilovatio | kilovatios
    kWh | kilovatio hora | kilovatios hora
    V | voltio | voltios
    ms | milisegundo | milisegundos
    min | minuto | minutos
    h | hora | horas
    seg | segundo | segundos
    °C | grado Celsius | grados Celsius
    °F | grado Fahrenheit | grados Fahrenheit
    ° | grado | grados
    """
)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``10:30`` "diez y treinta", ``1:00`` "una en punto"."""
    hour = "una" if hours == 1 else numbers.cardinal(str(hours))
    return f"{hour} en punto" if not minutes else f"{hour} y {numbers.cardinal(str(minutes))}"


def date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "quince de marzo de dos mil veinticuatro"."""
    return f"{day_of_month(numbers, day)} de {month} de {numbers.year(year)}"


SPANISH = Language(
    code="e",
    num2words="es",
    decimal_comma=True,
    point={",": "coma", ".": "punto"},
    words=pairs(
        "percent=por ciento; minus=menos; to=a; about=unos; times=por; plus=más; equals=igual a; "
        "divided=entre; number=número; dot=punto; slash=barra; at=arroba; and=y; cents_and=con"
    ),
    currencies=currencies(
        """
        $ US$ USD | dólar | dólares | centavo | centavos
        € EUR | euro | euros | céntimo | céntimos
        £ GBP | libra | libras | penique | peniques | feminine
        ¥ JPY | yen | yenes
        ₹ INR | rupia | rupias | feminine
        R$ BRL | real | reales | centavo | centavos
        """
    ),
    scales=pairs(
        "mil=mil; millón=millón; millones=millones; mil millones=mil millones; billones=billones; "
        "k=mil; M=millones"
    ),
    scale_of="de",
    units=UNITS,
    months=tuple(
        "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split()
    ),
    abbreviations=pairs(
        "p. ej.=por ejemplo; p.ej.=por ejemplo; aprox.=aproximadamente; Sr.=señor; Sra.=señora"
    ),
    feminine=frozenset(["hora", "milla por hora"]),
    grouping=GROUPED_COMMA,
    clock=clock,
    date=date,
    agreement={"uno": ("un", "una"), "un": ("un", "una"), "veintiuno": ("veintiún", "veintiuna")},
    patterns=ORDINAL_INDICATORS,
)
"""Spanish (Kokoro ``e``)."""

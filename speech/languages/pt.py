"""Brazilian Portuguese's tables for speech normalization (Kokoro ``p``, PROTOCOL.md §14.2).

Numbers are read by num2words (``"pt_BR"``) with a decimal comma and dots grouping thousands
(``1.234,5``); ordinals take an indicator (``1º``, ``2ª``); a number agrees with a feminine noun (``uma
hora``, ``duas horas``); times are said "dez e trinta", "uma hora", "duas horas"; dates "quinze de março de
dois mil e vinte e quatro", the first of a month "primeiro".
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

__all__ = ["PORTUGUESE"]

UNITS = units(
    """
    km | quilômetro | quilômetros
    m | metro | metros
    cm | centímetro | centímetros
    mm | milímetro | milímetros
    kg | quilograma | quilogramas
    g | grama | gramas
    mg | miligrama | miligramas
    l L | litro | litros
    ml mL | mililitro | mililitros
    km/h | quilômetro por hora | quilômetros por hora
    mph | milha por hora | milhas por hora
    KB kB | kilobyte | kilobytes
    MB | megabyte | megabytes
    GB | gigabyte | gigabytes
    TB | terabyte | terabytes
    Hz | hertz | hertz
    kHz | quilohertz | quilohertz
    MHz | mega-hertz | mega-hertz
    GHz | giga-hertz | giga-hertz
    W | watt | watts
    kW | quilowatt | quilowatts
    kWh | quilowatt-hora | quilowatts-hora
    V | volt | volts
    ms | milissegundo | milissegundos
    min | minuto | minutos
    h | hora | horas
    s | segundo | segundos
    °C | grau Celsius | graus Celsius
    °F | grau Fahrenheit | graus Fahrenheit
    ° | grau | graus
    """
)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``10:30`` "dez e trinta", ``1:00`` "uma hora", ``2:00`` "duas horas"."""
    hour = "uma" if hours == 1 else "duas" if hours == 2 else numbers.cardinal(str(hours))
    if not minutes:
        return f"{hour} {'hora' if hours == 1 else 'horas'}"
    return f"{hour} e {numbers.cardinal(str(minutes))}"


def date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "quinze de março de dois mil e vinte e quatro"; the first "primeiro"."""
    return f"{day_of_month(numbers, day)} de {month} de {numbers.year(year)}"


PORTUGUESE = Language(
    code="p",
    num2words="pt_BR",
    decimal_comma=True,
    point={",": "vírgula", ".": "ponto"},
    words=pairs(
        "percent=por cento; minus=menos; to=a; about=cerca de; times=vezes; plus=mais; equals=igual "
        "a; divided=dividido por; number=número; dot=ponto; slash=barra; at=arroba; and=e; "
        "cents_and=e"
    ),
    currencies=currencies(
        """
        $ US$ USD | dólar | dólares | centavo | centavos
        € EUR | euro | euros | centavo | centavos
        £ GBP | libra | libras | pêni | pence | feminine
        ¥ JPY | iene | ienes
        ₹ INR | rupia | rupias | feminine
        R$ BRL | real | reais | centavo | centavos
        """
    ),
    scales=pairs(
        "mil=mil; milhão=milhão; milhões=milhões; bilhão=bilhão; bilhões=bilhões; k=mil; M=milhões; "
        "bi=bilhões; mi=milhões"
    ),
    scale_of="de",
    units=UNITS,
    months=tuple(
        "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split()
    ),
    abbreviations=pairs(
        "p. ex.=por exemplo; p.ex.=por exemplo; Sr.=senhor; Sra.=senhora; aprox.=aproximadamente"
    ),
    feminine=frozenset(["hora", "milha por hora"]),
    grouping=GROUPED_COMMA,
    clock=clock,
    date=date,
    agreement={"um": ("um", "uma"), "dois": ("dois", "duas")},
    patterns=ORDINAL_INDICATORS,
)
"""Brazilian Portuguese (Kokoro ``p``)."""

"""Hindi's tables for speech normalization (Kokoro ``h``, PROTOCOL.md §14.2).

num2words has no Hindi and espeak-ng reads Hindi cardinals well, so digits stay digits: this module is
the Hindi number reader's words around them. Numbers are grouped the Indian way (lakh and crore:
``1,23,456``) with a decimal point said "दशमलव"; currencies (``₹``, ``Rs.``), units, percentages and
operators get their Hindi names; a time is said "10 बजे" or "10 बजकर 30 मिनट", a date "15 मार्च 2024".
"""

from __future__ import annotations

from speech.languages.base import Language, Numbers, currencies, pairs, units

__all__ = ["HINDI"]

GROUPING = r"\d{1,3}(?:,\d{2,3})+(?:\.\d+)?"
"""A number grouped the Indian way, lakh and crore (``1,23,45,678``), decimal point."""
PATTERNS = (r"(?P<numero>(?<![\w])#(?=\d))",)


def clock(numbers: Numbers, hours: int, minutes: int, ampm: str | None) -> str:
    """``10:00`` "10 बजे", ``10:30`` "10 बजकर 30 मिनट" (digits stay digits)."""
    return f"{hours} बजे" if not minutes else f"{hours} बजकर {minutes} मिनट"


def date(numbers: Numbers, day: str, month: str, year: str) -> str:
    """``2024-03-15``: "15 मार्च 2024" (digits stay digits)."""
    return f"{int(day)} {month} {int(year)}"


HINDI = Language(
    code="h",
    num2words=None,
    decimal_comma=False,
    point={".": "दशमलव"},
    words=pairs(
        "percent=प्रतिशत; minus=माइनस; to=से; about=लगभग; times=गुणा; plus=प्लस; equals=बराबर; "
        "divided=भाग; number=नंबर; dot=डॉट; slash=स्लैश; at=एट; and=और; cents_and=और"
    ),
    currencies=currencies(
        """
        $ US$ USD | डॉलर | डॉलर | सेंट | सेंट
        € EUR | यूरो | यूरो | सेंट | सेंट
        £ GBP | पाउंड | पाउंड | पेंस | पेंस
        ¥ JPY | येन | येन
        ₹ INR Rs. | रुपया | रुपये | पैसा | पैसे
        R$ BRL | रियाल | रियाल | सेंटावो | सेंटावो
        """
    ),
    scales=pairs("हज़ार=हज़ार; लाख=लाख; करोड़=करोड़; k=हज़ार; M=मिलियन"),
    scale_of="",
    units=units(
        """
        km | किलोमीटर | किलोमीटर
        m | मीटर | मीटर
        cm | सेंटीमीटर | सेंटीमीटर
        mm | मिलीमीटर | मिलीमीटर
        kg | किलोग्राम | किलोग्राम
        g | ग्राम | ग्राम
        mg | मिलीग्राम | मिलीग्राम
        l L | लीटर | लीटर
        ml mL | मिलीलीटर | मिलीलीटर
        km/h | किलोमीटर प्रति घंटा | किलोमीटर प्रति घंटा
        mph | मील प्रति घंटा | मील प्रति घंटा
        KB kB | किलोबाइट | किलोबाइट
        MB | मेगाबाइट | मेगाबाइट
        GB | गीगाबाइट | गीगाबाइट
        TB | टेराबाइट | टेराबाइट
        Hz | हर्ट्ज़ | हर्ट्ज़
        kHz | किलोहर्ट्ज़ | किलोहर्ट्ज़
        MHz | मेगाहर्ट्ज़ | मेगाहर्ट्ज़
        GHz | गीगाहर्ट्ज़ | गीगाहर्ट्ज़
        W | वाट | वाट
        kW | किलोवाट | किलोवाट
        kWh | किलोवाट घंटा | किलोवाट घंटा
        V | वोल्ट | वोल्ट
        ms | मिलीसेकंड | मिलीसेकंड
        min | मिनट | मिनट
        h | घंटे | घंटे
        °C | डिग्री सेल्सियस | डिग्री सेल्सियस
        °F | डिग्री फ़ारेनहाइट | डिग्री फ़ारेनहाइट
        ° | डिग्री | डिग्री
        """
    ),
    months=tuple("जनवरी फ़रवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर अक्टूबर नवंबर दिसंबर".split()),
    grouping=GROUPING,
    clock=clock,
    date=date,
    patterns=PATTERNS,
)
"""Hindi (Kokoro ``h``)."""

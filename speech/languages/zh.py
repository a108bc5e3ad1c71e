"""Mandarin Chinese's tables for speech normalization (Kokoro ``z``, PROTOCOL.md §14.2).

misaki's Chinese G2P normalizes numbers itself (cn2an: decimals, percentages, dates), but not digit
grouping (``1,234`` → ``1234``), times (``10:30`` → ``10点30分``), ISO dates (``2024年3月15日``) and
currency symbols (``$5`` → ``5美元``).
"""

from __future__ import annotations

from speech.languages.base import CjkLanguage

__all__ = ["CHINESE"]

CHINESE = CjkLanguage(
    code="z",
    words={"$": "美元", "US$": "美元", "€": "欧元", "£": "英镑", "¥": "元", "₹": "卢比",
           "hour": "点", "minute": "分"},
    patterns=(r"(?P<grouped>(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d])(?!,\d))",),
)  # fmt: skip
"""Mandarin Chinese (Kokoro ``z``)."""

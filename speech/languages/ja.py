"""Japanese's tables for speech normalization (Kokoro ``j``, PROTOCOL.md §14.2).

misaki's Japanese G2P (cutlet) reads digit runs, so digits stay digits; what it misreads around them is
rewritten: grouping (``1,234`` → ``1234``), decimals (``3.14`` → ``3点1 4``), times (``10:30`` →
``10時30分``), ISO dates (``2024年3月15日``), currency (``$5`` → ``5ドル``), percentages
(``50パーセント``) and negative numbers (``マイナス5``).
"""

from __future__ import annotations

from speech.languages.base import CJK_NUMBER, CjkLanguage

__all__ = ["JAPANESE"]

JAPANESE = CjkLanguage(
    code="j",
    words={"$": "ドル", "US$": "ドル", "€": "ユーロ", "£": "ポンド", "¥": "円", "₹": "ルピー",
           "%": "パーセント", "minus": "マイナス", "point": "点", "hour": "時", "minute": "分"},
    patterns=(
        rf"(?P<percent>(?<![\d.,])(?P<sign_p>[-−])?(?P<amount_p>{CJK_NUMBER})\s?[%％])",
        rf"(?P<number>(?<![\d.,])(?:(?<![\dA-Za-z)\]])(?P<sign>[-−]))?(?P<amount>{CJK_NUMBER})(?![\d.,]))",
    ),
)  # fmt: skip
"""Japanese (Kokoro ``j``)."""

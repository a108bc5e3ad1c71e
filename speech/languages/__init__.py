"""Each language's tables for speech normalization, one module per language (PROTOCOL.md §14.2).

The engine (:mod:`speech.normalization`) finds figures, symbols, addresses and emoji in a text and reads
them; what it says, and the shapes only one language writes, come from here, by Kokoro language code:

- :data:`LANGUAGES`: the languages whose figures become words (:class:`~speech.languages.base.Language`):
  ``a`` and ``b`` (:mod:`~speech.languages.en`), ``e`` (``es``), ``f`` (``fr``), ``i`` (``it``), ``p``
  (``pt``), and ``h`` (``hi``: digits stay digits, Hindi words around them).
- :data:`CJK_LANGUAGES`: Japanese (``ja``) and Mandarin (``zh``), whose G2P reads digit runs itself
  (:class:`~speech.languages.base.CjkLanguage`).

A tenth language: a module here that builds its :class:`~speech.languages.base.Language` (tables, digit
grouping, clock, date, its own token patterns), registered below under its Kokoro code (its tags are
:data:`protocol.voices.LANGUAGES`', read by :func:`protocol.voices.language_code`); its cases go in
tests/speech/test_normalization.py. A language in neither table gets the generic rules (emoji and
addresses only).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from speech.languages.base import CjkLanguage, Language
from speech.languages.en import AMERICAN, BRITISH
from speech.languages.es import SPANISH
from speech.languages.fr import FRENCH
from speech.languages.hi import HINDI
from speech.languages.it import ITALIAN
from speech.languages.ja import JAPANESE
from speech.languages.pt import PORTUGUESE
from speech.languages.zh import CHINESE

__all__ = ["CJK_LANGUAGES", "LANGUAGES"]

LANGUAGES: Mapping[str, Language] = MappingProxyType(
    {lang.code: lang for lang in (AMERICAN, SPANISH, FRENCH, ITALIAN, PORTUGUESE, HINDI, BRITISH)}
)
"""Kokoro code → the tables of a language whose figures are read as words (read-only)."""
CJK_LANGUAGES: Mapping[str, CjkLanguage] = MappingProxyType({lang.code: lang for lang in (JAPANESE, CHINESE)})
"""Kokoro code → Japanese's or Chinese's tables (read-only)."""

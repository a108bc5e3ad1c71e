"""Pronunciation lexicons: words a client tells the server how to say (PROTOCOL.md §4.1, §4.5, §14.3).

A lexicon maps a word to its pronunciation, either phonemes in Kokoro's phoneme alphabet
(:data:`PHONEMES`, the ``vocab`` of Kokoro-82M v1.0's ``config.json``) or a respelling, plain text the
server's G2P reads instead of the word::

    {"Kokoro": "kˈOkəɹO", "SQL": {"respell": "sequel"}, "Nguyen": {"phonemes": "wˈɪn"}}

It comes with a request (its ``lexicon`` member), for a whole session (the ``lexicon`` message, §4.5),
or inline in the text in misaki's form ``[Kokoro](/kˈOkəɹO/)`` (§14.3), which gives one occurrence its
phonemes. Everything here is sans-I/O: :func:`parse_lexicon` checks a lexicon member and
:func:`extract_inline` finds and checks the inline forms of a text; both raise :class:`LexiconError`,
whose message names the entry at fault (the server answers ``invalid_lexicon``, §9.1).

An inline form is carried through the text front-end (markdown, sentence chunks, normalization) as
its word between two private-use characters, :data:`INLINE_OPEN` before and ``inline_close(i)`` after
(``i`` the form's index), which no stage rewrites; the G2P recognizes the pair and speaks the form's
phonemes (``reference_server.backends.g2p``). :func:`strip_marks` removes them from text shown to a
client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INLINE_OPEN",
    "INLINE_PATTERN",
    "MAX_PHONEMES_CHARS",
    "MAX_RESPELLING_CHARS",
    "MAX_WORD_CHARS",
    "PHONEMES",
    "Lexicon",
    "LexiconEntry",
    "LexiconError",
    "extract_inline",
    "inline_close",
    "inline_index",
    "inline_sources",
    "lexicon_json",
    "parse_lexicon",
    "strip_marks",
]

PHONEMES = frozenset(
    ' !"(),.:;?AIOQSTWYabcdefhijklmnopqrstuvwxyz'
    "æçðøŋœɐɑɒɔɕɖəɚɛɜɟɡɣɤɥɨɪɯɰɲɳɴɸɹɻɽɾʁʂʃʈʊʋʌʎʒʔʝʣʤʥʦʧʨʰʲˈˌː̃βθχᵊᵝᵻ—“”…→↓↗↘ꭧ"
)
"""Kokoro's phoneme alphabet: the 114 symbols of Kokoro-82M v1.0's ``vocab`` (one token each, §14.3)."""
MAX_WORD_CHARS = 64
"""Longest lexicon word, in code points (§10)."""
MAX_PHONEMES_CHARS = 128
"""Longest pronunciation in phonemes, in symbols (§10): Kokoro speaks at most 510 in one pass."""
MAX_RESPELLING_CHARS = 128
"""Longest respelling, in code points (§10)."""

INLINE_OPEN = "\U000f0000"
"""Private-use character before an inline form's word in the text the front-end carries."""
_INLINE_CLOSE_BASE = 0xF0001
INLINE_PATTERN = re.compile(r"\[([^\[\]\n]*)\]\(/([^/()\n]*)/\)")
"""misaki's inline pronunciation ``[word](/phonemes/)``: group 1 the word, group 2 the phonemes."""
_MARKS = re.compile("[\U000f0000-\U000fffff]")


class LexiconError(ValueError):
    """A lexicon or an inline form breaks a rule of §14.3; the message names the entry (invalid_lexicon)."""


@dataclass(frozen=True, slots=True)
class LexiconEntry:
    """One word's pronunciation: exactly one of ``phonemes`` and ``respell`` is set.

    Attributes:
        word: the word as the client wrote it (the word timings' text, §5.3).
        phonemes: symbols of :data:`PHONEMES` (no whitespace at the edges), or ``None``.
        respell: text the G2P reads instead of the word, or ``None``.
    """

    word: str
    phonemes: str | None = None
    respell: str | None = None


@dataclass(frozen=True, slots=True)
class Lexicon:
    """The pronunciations one request is spoken with: its words (the session's, then the request's
    entries over them) and the inline forms of its text, by index.

    Attributes:
        words: word → entry; a word of the text matches a key equal to it, else one equal to it
            case-folded (§14.3).
        inline: the inline forms of the text, in order (:func:`extract_inline`).
    """

    words: Mapping[str, LexiconEntry] = field(default_factory=dict)
    inline: tuple[LexiconEntry, ...] = ()
    _folded: dict[str, LexiconEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        folded: dict[str, LexiconEntry] = {}
        for key, entry in self.words.items():
            folded.setdefault(key.casefold(), entry)  # the first key of a case-folded spelling wins
        object.__setattr__(self, "_folded", folded)

    def lookup(self, word: str) -> LexiconEntry | None:
        """The entry for one word of the text (punctuation already removed), or ``None``: the key equal to
        it, else the first key equal to it case-folded (a dictionary look-up either way)."""
        entry = self.words.get(word)
        return entry if entry is not None else self._folded.get(word.casefold())

    def __bool__(self) -> bool:
        return bool(self.words) or bool(self.inline)

    def merged(self, words: Mapping[str, LexiconEntry] | None) -> Lexicon:
        """This lexicon with ``words`` over its words (a request's entries over the session's)."""
        return Lexicon({**self.words, **(words or {})}, self.inline)


def inline_close(index: int) -> str:
    """The private-use character after the word of inline form ``index`` (0-based)."""
    return chr(_INLINE_CLOSE_BASE + index)


def inline_index(char: str) -> int | None:
    """The inline form a closing mark stands for, or ``None`` when ``char`` is not one."""
    code = ord(char) - _INLINE_CLOSE_BASE
    return code if 0 <= code < 0xFFFF - 1 else None


def strip_marks(text: str) -> str:
    """``text`` without the private-use marks of inline forms."""
    return _MARKS.sub("", text)


def _check_word(word: object, where: str) -> str:
    if not isinstance(word, str) or not word.strip():
        raise LexiconError(f"{where}: the word is empty")
    if any(char.isspace() for char in word):
        raise LexiconError(f"{where}: the word {_show(word)} holds whitespace; an entry is one word")
    if len(word) > MAX_WORD_CHARS:
        raise LexiconError(f"{where}: the word has {len(word)} characters; the limit is {MAX_WORD_CHARS}")
    if not any(char.isalnum() for char in word):
        raise LexiconError(f"{where}: the word {_show(word)} has no letter or digit")
    if _MARKS.search(word):
        raise LexiconError(f"{where}: the word holds a private-use character of plane 15")
    return word


def _check_phonemes(phonemes: object, where: str) -> str:
    if not isinstance(phonemes, str) or not phonemes.strip():
        raise LexiconError(f"{where}: the phonemes are empty")
    phonemes = phonemes.strip()
    if len(phonemes) > MAX_PHONEMES_CHARS:
        raise LexiconError(
            f"{where}: the phonemes have {len(phonemes)} symbols; the limit is {MAX_PHONEMES_CHARS}"
        )
    unknown = sorted({char for char in phonemes if char not in PHONEMES})
    if unknown:
        shown = " ".join(f"{char!r} (U+{ord(char):04X})" for char in unknown[:4])
        raise LexiconError(f"{where}: {shown} not in Kokoro's phoneme alphabet")
    return phonemes


def _show(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:39] + "…")


def parse_lexicon(value: object, *, max_entries: int) -> dict[str, LexiconEntry]:
    """Check a ``lexicon`` member (§4.1, §4.5) and return its entries by word.

    Args:
        value: the member's JSON value: an object whose members map a word to a string (phonemes) or
            to an object with exactly one of ``"phonemes"`` and ``"respell"`` (strings).
        max_entries: the server's ``max_lexicon_entries`` (§10).

    Raises:
        LexiconError: not an object, more than ``max_entries`` words, or an entry breaking a rule of
            §14.3 (an empty word, whitespace in a word, a symbol outside :data:`PHONEMES`, a value of
            another shape, a length over :data:`MAX_WORD_CHARS`, :data:`MAX_PHONEMES_CHARS` or
            :data:`MAX_RESPELLING_CHARS`); the message names the entry.
    """
    if not isinstance(value, dict):
        raise LexiconError("lexicon must be an object mapping words to pronunciations")
    if len(value) > max_entries:
        raise LexiconError(f"lexicon has {len(value)} words; the limit is {max_entries}")
    entries: dict[str, LexiconEntry] = {}
    for word, pronunciation in value.items():
        where = f"lexicon entry {_show(word)}"
        _check_word(word, where)
        if isinstance(pronunciation, str):
            entries[word] = LexiconEntry(word, phonemes=_check_phonemes(pronunciation, where))
            continue
        if not isinstance(pronunciation, dict) or len(pronunciation) != 1:
            raise LexiconError(f'{where}: must be phonemes (a string), {{"phonemes": …}} or {{"respell": …}}')
        ((kind, given),) = pronunciation.items()
        if kind == "phonemes":
            entries[word] = LexiconEntry(word, phonemes=_check_phonemes(given, where))
        elif kind == "respell":
            if not isinstance(given, str) or not given.strip():
                raise LexiconError(f"{where}: the respelling is empty")
            if len(given) > MAX_RESPELLING_CHARS:
                raise LexiconError(
                    f"{where}: the respelling has {len(given)} characters; "
                    f"the limit is {MAX_RESPELLING_CHARS}"
                )
            if _MARKS.search(given) or INLINE_PATTERN.search(given):
                raise LexiconError(f"{where}: a respelling is plain text")
            entries[word] = LexiconEntry(word, respell=" ".join(given.split()))
        else:
            raise LexiconError(f'{where}: must be phonemes (a string), {{"phonemes": …}} or {{"respell": …}}')
    return entries


def extract_inline(text: str, *, max_entries: int) -> tuple[str, tuple[LexiconEntry, ...]]:
    """Find misaki's inline forms ``[word](/phonemes/)`` in ``text`` (§14.3).

    Returns:
        ``(marked, entries)``: ``text`` with each form replaced by its word between :data:`INLINE_OPEN`
        and ``inline_close(i)``, and the forms' entries in order. A text without forms comes back
        unchanged.

    Raises:
        LexiconError: a form's word is empty or holds whitespace, its phonemes are empty or hold a
            symbol outside :data:`PHONEMES`, or the text has more than ``max_entries`` forms; the
            message names the form (by its number and word, never the rest of the text, §13).
    """
    entries: list[LexiconEntry] = []

    def mark(match: re.Match[str]) -> str:
        index = len(entries)
        where = f"inline pronunciation {index + 1}"
        word = _check_word(match.group(1), where)
        where = f"{where} ({_show(word)})"
        if index >= max_entries:
            raise LexiconError(f"the text has more than {max_entries} inline pronunciations")
        entries.append(LexiconEntry(word, phonemes=_check_phonemes(match.group(2), where)))
        return INLINE_OPEN + word + inline_close(index)

    if "](/" not in text:
        return text, ()
    marked = INLINE_PATTERN.sub(mark, _MARKS.sub("", text))
    return marked, tuple(entries)


def inline_sources(text: str) -> tuple[int, ...]:
    """For each character of :func:`extract_inline`'s marked text, its index in ``text`` (PROTOCOL.md
    §14.4): a form's word keeps its own characters' indices, its opening mark stands for the ``[`` and
    its closing mark for the ``)``, so a span that covers the marked word covers the whole form
    ``[word](/phonemes/)`` as written. Indices are code points. Call it on a text that
    :func:`extract_inline` accepted.
    """
    if "](/" not in text:
        return tuple(range(len(text)))
    kept = [i for i, char in enumerate(text) if not _MARKS.match(char)]
    stripped = _MARKS.sub("", text)
    out: list[int] = []
    position = 0
    for match in INLINE_PATTERN.finditer(stripped):
        out += kept[position : match.start()]
        out.append(kept[match.start()])
        out += kept[match.start(1) : match.end(1)]
        out.append(kept[match.end() - 1])
        position = match.end()
    out += kept[position:]
    return tuple(out)


def lexicon_json(entries: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object of a lexicon: entries as phonemes (a plain string) or ``{"respell": …}``; a value
    that is not a :class:`LexiconEntry` is passed as it is (a client may build the JSON itself)."""

    def value(entry: Any) -> Any:
        if not isinstance(entry, LexiconEntry):
            return entry
        return entry.phonemes if entry.phonemes is not None else {"respell": entry.respell}

    return {word: value(entry) for word, entry in entries.items()}

"""Text → phonemes Kokoro can speak in one pass, per language (PROTOCOL.md §14.1); both backends use this.

The voice's first letter picks the language (:func:`protocol.voices.language_of`); each language has one
grapheme-to-phoneme converter (G2P) behind the :class:`G2P` interface, and the same code runs on the onnx
and the torch backend, so the two speak the same phonemes:

====  ======================================================  ============================================
code  G2P                                                     words (for word timings)
====  ======================================================  ============================================
a, b  espeak-ng ``en-us`` / ``en-gb`` through phonemizer,      each whitespace-separated word, phonemized
      word by word, as ``kokoro-onnx`` 0.6.1 calls it          on its own
e, f, misaki's ``EspeakG2P`` (espeak-ng ``es``, ``fr-fr``,      the sentence's words, phonemized together
h, i, ``hi``, ``it``, ``pt-br``), as ``kokoro.KPipeline``      (liaison, lenition); word by word when
p     builds it for these languages                           espeak-ng's words do not match the text's
j     misaki's Japanese G2P (``misaki.cutlet.Cutlet``, the     the MeCab words (fugashi + unidic-lite) the
      default of ``misaki.ja.JAG2P``, as KPipeline builds it)  G2P groups, of the normalized text
z     misaki's Chinese G2P (``misaki.zh.ZHG2P``, the legacy    jieba's words of the normalized text
      path KPipeline takes for Kokoro-82M v1.0)                (numerals spelled out by cn2an)
====  ======================================================  ============================================

A piece of text becomes a :class:`PhonemeSegment`: the phoneme string the model is given (symbols outside
Kokoro's vocabulary dropped, as ``kokoro.KModel`` drops them) and each word's span in it, which is what
word timings need (:func:`reference_server.backends.base.word_timings`). For every language except
English the string is exactly what the library produces for the whole piece (the tests hold each G2P to
its library); the words are aligned onto it.

:class:`Phonemizer` cuts a request's text into segments: sentences first
(:class:`speech.chunker.IncrementalSentenceChunker`, with the language's rules), then a token guard:
a segment is at most :data:`MAX_TOKENS` phoneme tokens, Kokoro's single-pass limit. A sentence whose
phonemes exceed it is re-split between words, at the last clause mark that fits, else at the last word
boundary, else (one word longer than the limit) inside the word.

Everything here runs offline: espeak-ng and its data come from the ``espeakng-loader`` wheel, the
Japanese dictionary from ``unidic-lite``, the Chinese ones from ``jieba`` and ``pypinyin``. The G2P
libraries keep process-wide state (espeak-ng above all), so every G2P call is serialized by one lock;
synthesis runs outside it.
"""

from __future__ import annotations

import abc
import importlib.util
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.lexicon import Lexicon, LexiconEntry, inline_index, strip_marks
from protocol.voices import LANGUAGES, Language, language_of
from speech.chunker import DEFAULT_MAX_CHUNK_CHARS, IncrementalSentenceChunker
from speech.spans import SourceMap

__all__ = [
    "ESPEAK_LANGUAGES",
    "G2P",
    "MAX_TOKENS",
    "PAUSE_SYMBOLS",
    "WARM_UP_TEXTS",
    "G2PUnavailableError",
    "PhonemeSegment",
    "Phonemizer",
    "WordSpan",
    "available_languages",
    "create_g2p",
    "sentence_chunker",
]

MAX_TOKENS = 510
"""Most phoneme tokens Kokoro-82M takes in one pass (``KModel.context_length`` 512 minus 2 pads)."""

PAUSE_SYMBOLS = frozenset(';:,.!?¡¿—…"«»“”()')
"""Phoneme-string symbols that are punctuation (pauses), not speech: a word's span leaves them out."""

ESPEAK_LANGUAGES: Mapping[str, str] = {
    "a": "en-us",
    "b": "en-gb",
    "e": "es",
    "f": "fr-fr",
    "h": "hi",
    "i": "it",
    "p": "pt-br",
}
"""Kokoro language code → espeak-ng voice (the ``LANG_CODES`` of ``kokoro.KPipeline``)."""

# The modules each language's G2P imports; a language whose modules are not all installed is not offered.
_REQUIREMENTS: Mapping[str, tuple[str, ...]] = {
    **{code: ("phonemizer", "espeakng_loader") for code in "ab"},
    **{code: ("misaki", "phonemizer", "espeakng_loader") for code in "efhip"},
    "j": ("misaki", "fugashi", "unidic_lite", "jaconv", "mojimoji"),
    "z": ("misaki", "jieba", "pypinyin", "cn2an", "ordered_set"),
}
WARM_UP_TEXTS: Mapping[str, str] = {
    "a": "Hello.",
    "b": "Hello.",
    "e": "Hola.",
    "f": "Bonjour.",
    "h": "नमस्ते।",
    "i": "Ciao.",
    "j": "こんにちは。",
    "p": "Olá.",
    "z": "你好。",
}
"""A short greeting per language: phonemized once at load so no request pays for a dictionary load."""
_CLAUSE_MARKS = frozenset(",;:—–…")
_G2P_LOCK = threading.Lock()


class G2PUnavailableError(RuntimeError):
    """A language's G2P cannot run here: a library it needs is not installed (the message names it)."""


@dataclass(frozen=True, slots=True)
class WordSpan:
    """One word of a segment and where it is spoken in the segment's phonemes.

    Attributes:
        text: the word as the language's G2P cuts the text (§14.1).
        start: index in :attr:`PhonemeSegment.phonemes` of its first spoken symbol.
        end: one past its last spoken symbol (punctuation around it is not part of the span).
        source: the half-open range of the text phonemized that the word reads, in code points (the text
            given to :meth:`G2P.phonemize`, or to :meth:`Phonemizer.segments`, which shifts it); ``None``
            when unknown. Found by the word's position among the G2P's words, never by searching.
    """

    text: str
    start: int
    end: int
    source: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class PhonemeSegment:
    """Text Kokoro speaks in one pass.

    Attributes:
        text: the segment's text.
        phonemes: the model input, one token per character, every character in Kokoro's vocabulary.
        words: the words that have a spoken span, in order, spans not overlapping.
    """

    text: str
    phonemes: str
    words: tuple[WordSpan, ...]

    @property
    def token_count(self) -> int:
        """Number of phoneme tokens; at most :data:`MAX_TOKENS` in segments :class:`Phonemizer` yields."""
        return len(self.phonemes)


def available_languages() -> frozenset[str]:
    """Kokoro language codes whose G2P libraries are installed (checked without importing them)."""
    return frozenset(
        code
        for code, modules in _REQUIREMENTS.items()
        if all(importlib.util.find_spec(module) is not None for module in modules)
    )


def sentence_chunker(
    language: Language, max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS
) -> IncrementalSentenceChunker:
    """The sentence chunker a request's text is cut with before G2P (plain text, the language's rules)."""
    return IncrementalSentenceChunker(language.primary, max_chunk_chars, markdown=False, sourced=True)


_TOKEN = re.compile(r"\S+")


def word_sources(text: str, words: list[tuple[str, str]], per_token: bool) -> list[tuple[int, int]]:
    """Where each of a G2P's ``words`` is in ``text`` (PROTOCOL.md §14.4), by position.

    A G2P with one word per whitespace-separated token (:attr:`G2P.word_per_token`) gives the i-th word
    the i-th token. Another (Japanese, Chinese) gives the words consecutive runs of the text: each word's
    characters, whitespace and the marks of inline forms aside, must be the next ones of the text; from
    the first word that is not (the G2P rewrote the text: numerals read out), every word left gets the
    rest of the text, so a span always covers what its word reads.
    """
    tokens = [match.span() for match in _TOKEN.finditer(text)]
    if per_token and len(tokens) == len(words):
        return tokens
    out: list[tuple[int, int]] = []
    position = 0
    for word, _ in words:
        start = None
        matched = True
        for char in word:
            if char.isspace():
                continue
            while position < len(text) and (text[position].isspace() or inline_mark(text[position])):
                position += 1
            if position >= len(text) or text[position] != char:
                matched = False
                break
            start = position if start is None else start
            position += 1
        if not matched:
            rest = len(text) - len(text[position:].lstrip()) if position < len(text) else len(text)
            end = len(text.rstrip())
            out += [(min(rest, end), end)] * (len(words) - len(out))
            return out
        out.append((position, position) if start is None else (start, position))
    return out


def inline_mark(char: str) -> bool:
    """``char`` is one of the private-use marks around an inline form's word (§14.3)."""
    return "\U000f0000" <= char <= "\U000fffff"


class G2P(abc.ABC):
    """One language's G2P for Kokoro: :meth:`phonemize` turns a piece of text into a :class:`PhonemeSegment`.

    Args:
        vocab: Kokoro's phoneme vocabulary; symbols outside it are dropped, as ``kokoro.KModel`` does.

    Attributes:
        language: the language spoken.
        word_joiner: what separates two words of this language in text (``" "``, or ``""`` for ja, zh).
    """

    word_joiner: ClassVar[str] = " "
    word_per_token: ClassVar[bool] = False
    """:meth:`_convert` gives exactly one word per whitespace-separated token of its text."""

    def __init__(self, language: Language, vocab: Iterable[str]) -> None:
        self.language = language
        self.vocab = frozenset(vocab)

    @abc.abstractmethod
    def _convert(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """The library's phonemes of ``text`` and its words as ``(word, phonemes)`` pairs.

        The words' phonemes, read without whitespace, must be the whole string read without whitespace
        (the words are aligned onto the string by that).
        """

    def phonemize(self, text: str, lexicon: Lexicon | None = None) -> PhonemeSegment:
        """Phonemize one piece of text (a sentence; no length limit here, see :class:`Phonemizer`).

        With a ``lexicon`` (PROTOCOL.md §14.3), each word it names and each inline form (its word between
        the marks of :func:`protocol.lexicon.extract_inline`) is spoken with its entry's phonemes, or
        its respelling's, as one word whose text is the word as written; the text between such words is
        phonemized by the language's G2P as it would be alone (:meth:`_pronounce`).

        Raises:
            RuntimeError: the library failed (its errors pass through).
        """
        with _G2P_LOCK:
            if lexicon:
                phonemes, words = self._pronounce(text, lexicon)
            else:
                phonemes, words = self._convert(strip_marks(text))
        sources = word_sources(text, words, self.word_per_token)
        text = strip_marks(text)
        kept = "".join(symbol for symbol in phonemes if symbol in self.vocab)
        spans = _align(kept, words, self.vocab, sources)
        if spans is None:  # cannot happen by construction; speak the words as they were phonemized
            pieces = ("".join(s for s in p if s in self.vocab).strip() for _, p in words)
            kept = " ".join(piece for piece in pieces if piece)
            spans = _align(kept, words, self.vocab, sources)
            assert spans is not None
        return PhonemeSegment(text.strip(), kept, spans)

    def _pronounce(self, text: str, lexicon: Lexicon) -> tuple[str, list[tuple[str, str]]]:
        """:meth:`_convert` with the lexicon's words and the inline forms of ``text`` (§14.3).

        The text is cut into runs of plain text and pronounced words (:func:`_cut_pronounced`). A G2P with
        one word per token (English, the espeak-ng languages) converts the whole text as written and puts
        each pronounced word's phonemes in place of its own (:meth:`_substitute`), so no other word
        changes. Otherwise (Japanese, Chinese, or when the words do not match the tokens) each run is
        converted on its own (sounds joining a run to a pronounced word are not made) and the pieces are
        joined by spaces. A pronounced word gets its entry's phonemes (a respelling's are the G2P's of
        the respelling) with the pause marks of the punctuation written around it (:meth:`_said`).
        """
        pieces = list(_cut_pronounced(text, lexicon))
        if self.word_per_token:
            substituted = self._substitute(pieces)
            if substituted is not None:
                return substituted
        phonemes: list[str] = []
        words: list[tuple[str, str]] = []
        for piece in pieces:
            if isinstance(piece, str):
                plain = strip_marks(piece).strip()
                if plain:
                    run_phonemes, run_words = self._convert(plain)
                    if run_phonemes.strip():
                        phonemes.append(run_phonemes.strip())
                    words += run_words
                continue
            lead, word, trail, _ = piece
            spoken = self._said(piece)
            phonemes.append(spoken)
            words.append((lead + word + trail, spoken))
        return " ".join(phonemes), words

    def _said(self, piece: Pronounced) -> str:
        """A pronounced word's phonemes: its entry's (a respelling's as the G2P reads it), between the
        pause marks of the punctuation written around it."""
        lead, _, trail, entry = piece
        if entry.phonemes is not None:
            said = entry.phonemes
        else:
            assert entry.respell is not None
            said = " ".join(self._convert(entry.respell)[0].split())
        pause = "".join(c for c in lead if c in PAUSE_SYMBOLS and c in self.vocab)
        after = "".join(c for c in trail if c in PAUSE_SYMBOLS and c in self.vocab)
        return pause + said + after

    def _substitute(self, pieces: list[str | Pronounced]) -> tuple[str, list[tuple[str, str]]] | None:
        """For a G2P with one word per whitespace token (:attr:`word_per_token`): the whole text converted
        as written, then each pronounced word's phonemes put in place of the G2P's, so no other word's
        phonemes change (liaison and stress around it stay as the sentence has them). ``None`` when the
        G2P's words do not match the tokens one to one."""
        tokens: list[str] = []
        pronounced: dict[int, Pronounced] = {}
        for piece in pieces:
            if isinstance(piece, str):
                tokens += strip_marks(piece).split()
            else:
                pronounced[len(tokens)] = piece
                tokens.append(piece[0] + piece[1] + piece[2])
        _, words = self._convert(" ".join(tokens))
        if len(words) != len(tokens):
            return None
        words = [
            (token, self._said(pronounced[i])) if i in pronounced else word
            for i, (token, word) in enumerate(zip(tokens, words, strict=True))
        ]
        return " ".join(p for _, p in words if p.strip()), words


def _edges(word: str) -> tuple[str, str, str]:
    """``word`` as (punctuation before, the word, punctuation after): no letter or digit at the edges."""
    start, end = 0, len(word)
    while start < end and not word[start].isalnum():
        start += 1
    while end > start and not word[end - 1].isalnum():
        end -= 1
    return word[:start], word[start:end], word[end:]


_INLINE_SPAN = re.compile("\U000f0000([^\U000f0000-\U000fffff]*)([\U000f0001-\U000fffff])")
_GLUED_BEFORE = re.compile("[^\\s\\w\U000f0000-\U000fffff]*$")
_GLUED_AFTER = re.compile("[^\\s\\w\U000f0000-\U000fffff]*")

Pronounced = tuple[str, str, str, LexiconEntry]
"""A word said as a lexicon entry says: (punctuation before, the word's text, punctuation after, entry)."""


def _cut_pronounced(text: str, lexicon: Lexicon) -> Iterator[str | Pronounced]:
    """``text`` as plain runs (``str``) and pronounced words (:data:`Pronounced`), in order.

    An inline form is its marked span with the punctuation glued to either side; its text is the entry's
    word as the client wrote it, whatever normalization made of the span. A lexicon word is a
    whitespace-separated token whose letters and digits, its edges' punctuation aside, match a key
    (:meth:`protocol.lexicon.Lexicon.lookup`): never a part of a longer word.
    """
    position = 0
    for match in _INLINE_SPAN.finditer(text):
        index = inline_index(match.group(2))
        entry = lexicon.inline[index] if index is not None and index < len(lexicon.inline) else None
        if entry is None or match.start() < position:
            continue  # a mark without its form: the text is spoken as it is
        before = text[position : match.start()]
        glued = _GLUED_BEFORE.search(before)
        lead = glued.group(0) if glued else ""
        after = _GLUED_AFTER.match(text, match.end())
        trail = after.group(0) if after else ""
        yield from _words_of(before[: len(before) - len(lead)], lexicon)
        yield lead, entry.word, trail, entry
        position = match.end() + len(trail)
    yield from _words_of(text[position:], lexicon)


def _words_of(text: str, lexicon: Lexicon) -> Iterator[str | Pronounced]:
    """Plain text as runs and the lexicon words in it (:func:`_cut_pronounced`)."""
    run: list[str] = []
    for token in text.split():
        lead, core, trail = _edges(token)
        entry = lexicon.lookup(token) if lexicon.words else None  # a key with punctuation ("Dr.")
        if entry is not None:
            lead, core, trail = "", token, ""
        elif core and lexicon.words:
            entry = lexicon.lookup(core)
        if entry is None:
            run.append(token)
            continue
        if run:
            yield " ".join(run)
            run = []
        yield lead, core, trail, entry
    if run:
        yield " ".join(run)


def _align(
    phonemes: str,
    words: list[tuple[str, str]],
    vocab: frozenset[str],
    sources: list[tuple[int, int]] | None = None,
) -> tuple[WordSpan, ...] | None:
    """Each word's spoken span in ``phonemes``, matching the words' symbols in order and skipping
    whitespace; ``None`` when the words do not spell the string. ``sources``: each word's range of the
    text (:func:`word_sources`), carried into its span."""
    spans = []
    position = 0
    for index, (word, word_phonemes) in enumerate(words):
        spoken = []
        for symbol in word_phonemes:
            if symbol not in vocab or symbol.isspace():
                continue
            while position < len(phonemes) and phonemes[position].isspace():
                position += 1
            if position >= len(phonemes) or phonemes[position] != symbol:
                return None
            if symbol not in PAUSE_SYMBOLS:
                spoken.append(position)
            position += 1
        if spoken:
            source = sources[index] if sources is not None else None
            spans.append(WordSpan(word, spoken[0], spoken[-1] + 1, source))
    if phonemes[position:].strip():
        return None
    return tuple(spans)


# --- the languages ----------------------------------------------------------------------------------------


class EnglishG2P(G2P):
    """espeak-ng ``en-us``/``en-gb``, word by word, called as ``kokoro-onnx`` 0.6.1 calls it.

    ``preserve_punctuation=True, with_stress=True``: the phonemes the reference has always spoken for
    English. Each whitespace-separated word is phonemized on its own, so its phonemes are known exactly.
    """

    word_per_token = True

    def __init__(self, language: Language, vocab: Iterable[str]) -> None:
        super().__init__(language, vocab)
        from phonemizer.backend import EspeakBackend

        _configure_espeak()
        self._backend = EspeakBackend(
            language=ESPEAK_LANGUAGES[language.code], preserve_punctuation=True, with_stress=True
        )

    def _convert(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        written = text.split()
        if not written:
            return "", []
        spoken = self._backend.phonemize(written)
        words = [
            (word, "".join(s for s in phonemes if s in self.vocab).strip())
            for word, phonemes in zip(written, spoken, strict=True)
        ]
        return " ".join(p for _, p in words if p), words


class EspeakG2P(G2P):
    """misaki's ``EspeakG2P`` (espeak-ng with Kokoro's symbol mapping), as ``kokoro.KPipeline`` uses it for
    es, fr, hi, it and pt-br.

    The sentence is phonemized whole, so sounds that depend on the next word (French liaison, Spanish
    lenition) are as KPipeline speaks them, and espeak-ng's words are the text's words one to one. When
    espeak-ng says a different number of words (it spells out "1500" as several), the sentence is
    phonemized word by word instead, so that each word's phonemes are still known.
    """

    word_per_token = True

    def __init__(self, language: Language, vocab: Iterable[str]) -> None:
        super().__init__(language, vocab)
        _configure_espeak()
        from misaki.espeak import EspeakG2P as MisakiEspeakG2P

        self._g2p = MisakiEspeakG2P(language=ESPEAK_LANGUAGES[language.code])

    def _convert(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        written = text.split()
        phonemes, _ = self._g2p(text)
        spoken = phonemes.split()
        if len(spoken) == len(written):
            return phonemes, list(zip(written, spoken, strict=True))
        words = [(word, self._g2p(word)[0]) for word in written]
        return " ".join(p for _, p in words if p), words


class JapaneseG2P(G2P):
    """misaki's Japanese G2P: ``misaki.cutlet.Cutlet``, which ``misaki.ja.JAG2P()`` (KPipeline's ``'j'``)
    runs by default. MeCab (fugashi) with the unidic-lite dictionary reads the text; the words are its
    word groups, each romanized to Kokoro's symbols."""

    word_joiner = ""

    def __init__(self, language: Language, vocab: Iterable[str]) -> None:
        super().__init__(language, vocab)
        self._cutlet = _recording_cutlet()

    def _convert(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        phonemes, _ = self._cutlet(text)
        if not phonemes:
            return "", []
        surfaces, tokens = self._cutlet.recorded
        # The library writes "(" and ")" as « » in the string (and only there).
        words = [
            (surface, token.surface.replace("(", "«").replace(")", "»"))
            for surface, token in zip(surfaces, tokens, strict=True)
        ]
        return phonemes, words


class ChineseG2P(G2P):
    """misaki's Chinese G2P as KPipeline runs it for Kokoro-82M v1.0 (``misaki.zh.ZHG2P(version=None)``):
    numerals spelled out by cn2an, jieba's words, each word's pinyin (pypinyin) in IPA with tone arrows.
    The words are jieba's; text between Chinese runs (Latin, digits left over) is passed through as the
    library does."""

    word_joiner = ""
    _HANZI = re.compile(r"[\u4E00-\u9FFF]+|[^\u4E00-\u9FFF]+")

    def __init__(self, language: Language, vocab: Iterable[str]) -> None:
        super().__init__(language, vocab)
        import jieba
        from misaki.zh import ZHG2P

        # jieba logs its dictionary loading at DEBUG through a console handler of its own, whatever the
        # process's log level: keep it to warnings, as every other library's lines are (protocol.logs).
        jieba.setLogLevel(logging.WARNING)
        self._g2p = ZHG2P(version=None)
        self._zh = ZHG2P

    def _convert(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        import cn2an
        import jieba

        phonemes, _ = self._g2p(text)
        if not phonemes:
            return "", []
        normalized = self._zh.map_punctuation(cn2an.transform(text, "an2cn"))
        words: list[tuple[str, str]] = []
        for run in self._HANZI.findall(normalized):
            if "\u4e00" <= run[0] <= "\u9fff":
                words += [(word, self._zh.word2ipa(word).replace(chr(815), "")) for word in jieba.lcut(run)]
            else:
                words += [(piece, piece) for piece in run.split()]
        return phonemes, words


_FACTORIES: Mapping[str, Callable[[Language, Iterable[str]], G2P]] = {
    **{code: EnglishG2P for code in "ab"},
    **{code: EspeakG2P for code in "efhip"},
    "j": JapaneseG2P,
    "z": ChineseG2P,
}


def create_g2p(code: str, vocab: Iterable[str]) -> G2P:
    """The G2P of Kokoro language ``code`` (``"a"`` … ``"z"``), ready to run (libraries loaded).

    Raises:
        KeyError: not a Kokoro language.
        G2PUnavailableError: a library it needs is not installed.
    """
    language = LANGUAGES[code]
    missing = [m for m in _REQUIREMENTS[code] if importlib.util.find_spec(m) is None]
    if missing:
        raise G2PUnavailableError(
            f"{language.name} ({code}) needs {', '.join(missing)}: pip install -e '.[server]'"
        )
    return _FACTORIES[code](language, vocab)


def _configure_espeak() -> None:
    """Point phonemizer at the espeak-ng library and data of the ``espeakng-loader`` wheel (once).

    ``PHONEMIZER_ESPEAK_LIBRARY`` (phonemizer's own variable) still wins for the library.
    """
    import os

    import espeakng_loader
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    with _G2P_LOCK:
        EspeakWrapper.set_library(
            os.environ.get("PHONEMIZER_ESPEAK_LIBRARY") or espeakng_loader.get_library_path()
        )
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
        phonemizer_log = logging.getLogger("phonemizer")
        if not any(isinstance(f, _WordsMismatchHandled) for f in phonemizer_log.filters):
            phonemizer_log.addFilter(_WordsMismatchHandled())


class _WordsMismatchHandled(logging.Filter):
    """Drops phonemizer's "words count mismatch" warning: :meth:`EspeakG2P._convert` checks the word count
    itself and phonemizes word by word when it differs, so the warning says nothing a listener hears.

    A filter on the logger, not a level: phonemizer resets the logger's level and handlers each time it
    makes a backend, but keeps its filters."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("words count mismatch")


def _recording_cutlet() -> Any:
    """A ``misaki.cutlet.Cutlet`` that remembers the word groups and tokens of its last call.

    ``Cutlet._romaji_tokens`` groups MeCab's words and romanizes each group with ``_romaji_word``, one
    token per group, in order; recording both keeps each group's text beside its phonemes without
    changing what the library computes.
    """
    from misaki.cutlet import Cutlet

    class RecordingCutlet(Cutlet):  # type: ignore[misc]
        def _romaji_tokens(self, words: Any) -> Any:
            self._surfaces: list[str] = []
            tokens = super()._romaji_tokens(words)
            self.recorded = (self._surfaces, tokens)
            return tokens

        def _romaji_word(self, word: Any) -> Any:
            self._surfaces.append(word.surface)
            return super()._romaji_word(word)

    return RecordingCutlet()


# --- cutting a text into segments ------------------------------------------------------------------------


class Phonemizer:
    """Every language's G2P for one backend, and the cutting of texts into :class:`PhonemeSegment`.

    Args:
        vocab: Kokoro's phoneme vocabulary (symbol → token id).
        languages: the language codes to serve; ``None``: every language whose libraries are installed
            (:func:`available_languages`).
        max_chunk_chars: the sentence chunker's character cap.
        lazy: load each language's G2P when a text first needs it instead of at once. Loading all nine
            takes about 1.2 s of CPU (jieba's dictionary most of it); a server that must answer at once
            in every language loads them at once (the default), a short-lived test server need not.

    Raises:
        G2PUnavailableError: a language named in ``languages`` cannot be loaded (at once, lazy or not:
            its libraries are looked for without importing them).
    """

    def __init__(
        self,
        vocab: Mapping[str, int],
        languages: Iterable[str] | None = None,
        *,
        max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
        lazy: bool = False,
    ) -> None:
        codes = frozenset(available_languages() if languages is None else languages)
        missing = sorted(codes - available_languages())
        if missing:
            create_g2p(missing[0], vocab)  # raises the error that names what is not installed
        self._codes = codes
        self._vocab = dict(vocab)
        self._loading = threading.Lock()
        self.g2p: dict[str, G2P] = {}
        """The G2P of each language loaded so far (all of :attr:`languages` unless ``lazy``)."""
        self.max_chunk_chars = max_chunk_chars
        if not lazy:
            for code in sorted(codes):
                self._g2p(code)

    @property
    def languages(self) -> frozenset[str]:
        """The language codes served (loaded now, or on first use when ``lazy``)."""
        return self._codes

    def _g2p(self, code: str) -> G2P:
        """Language ``code``'s G2P, loaded and run once on its warm-up text the first time (dictionaries load
        on first use: jieba takes about a second).

        Raises:
            KeyError: ``code`` is not served.
        """
        found = self.g2p.get(code)
        if found is not None:
            return found
        if code not in self._codes:
            raise KeyError(code)
        with self._loading:  # two threads asking for one language load it once
            found = self.g2p.get(code)
            if found is None:
                found = create_g2p(code, self._vocab)
                found.phonemize(WARM_UP_TEXTS[code])
                self.g2p[code] = found
        return found

    def segments(self, text: str, voice: str, lexicon: Lexicon | None = None) -> Iterator[PhonemeSegment]:
        """Cut ``text`` for ``voice`` into segments of at most :data:`MAX_TOKENS` tokens, lazily.

        Segments without any phoneme (punctuation only) are skipped. ``lexicon``: the pronunciations the
        text is spoken with (:meth:`G2P.phonemize`, PROTOCOL.md §14.3).

        Raises:
            KeyError: the voice's language is not served (:attr:`languages`).
        """
        g2p = self._g2p(language_of(voice).code)
        chunker = sentence_chunker(g2p.language, self.max_chunk_chars)
        chunks = chunker.feed_chunks(text) + chunker.finish()
        for chunk in chunks:
            phonemized = g2p.phonemize(chunk.text, lexicon)
            if chunk.source is not None:  # the words' ranges, from the sentence's into the text's
                phonemized = _shifted(phonemized, chunk.source)
            for segment in fit(phonemized, g2p.word_joiner):
                if segment.token_count:
                    yield segment


def _shifted(segment: PhonemeSegment, source: SourceMap) -> PhonemeSegment:
    """``segment`` with its words' ranges moved from its sentence (``source.text``) into the text."""
    words = tuple(
        WordSpan(w.text, w.start, w.end, None if w.source is None else source.span(*w.source))
        for w in segment.words
    )
    return PhonemeSegment(segment.text, segment.phonemes, words)


def fit(segment: PhonemeSegment, joiner: str = " ", limit: int = MAX_TOKENS) -> Iterator[PhonemeSegment]:
    """Split ``segment`` into segments of at most ``limit`` tokens (module docstring, token guard).

    A cut at a space between words drops that space; a cut inside a word (no space fits) keeps the
    word's first part, with its text, in the first segment and speaks the rest without a word entry.
    """
    while segment.token_count > limit:
        cut = _cut(segment, limit)
        skip = 1 if segment.phonemes[cut] == " " else 0
        head_words = tuple(
            WordSpan(w.text, w.start, min(w.end, cut), w.source) for w in segment.words if w.start < cut
        )
        tail_words = tuple(
            WordSpan(w.text, w.start - cut - skip, w.end - cut - skip, w.source)
            for w in segment.words
            if w.start >= cut
        )
        yield PhonemeSegment(
            joiner.join(w.text for w in head_words), segment.phonemes[:cut].rstrip(" "), head_words
        )
        segment = PhonemeSegment(
            joiner.join(w.text for w in tail_words), segment.phonemes[cut + skip :], tail_words
        )
    yield segment


def _cut(segment: PhonemeSegment, limit: int) -> int:
    """Where to cut an over-long segment: the index of a space between words, at most ``limit``; the last
    one after a clause mark if any, else the last one; ``limit`` itself when there is no such space."""
    phonemes = segment.phonemes
    inside = [False] * len(phonemes)
    for word in segment.words:
        for i in range(word.start, word.end):
            inside[i] = True
    spaces = [i for i in range(1, min(limit, len(phonemes) - 1) + 1) if phonemes[i] == " " and not inside[i]]
    clauses = [i for i in spaces if phonemes[i - 1] in _CLAUSE_MARKS]
    if clauses:
        return clauses[-1]
    if spaces:
        return spaces[-1]
    return limit

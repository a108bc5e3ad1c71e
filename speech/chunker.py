"""Incremental sentence chunking of streamed text for Kokoro synthesis (PROTOCOL.md §14.2).

The reference server cuts the text of a synthesis request (PROTOCOL.md §4.1) into segments and synthesizes
them one after the other, so the first audio frame (§5.2) can leave before the whole text is phonemized; the
agent does the same with the text deltas of a language model. Both feed text as it arrives to an
:class:`IncrementalSentenceChunker` and synthesize every chunk it returns. The text front-end
(:mod:`speech.frontend`) puts markdown removal before it and normalization for speech after it.

Pipeline: markdown syntax is removed by a streaming :class:`~speech.markdown.MarkdownStripper` (unless
``markdown=False``); whitespace runs are collapsed; the chunker then proposes candidate boundaries itself
and asks sentencex (the best of six segmenters on our 21-case battery, REFERENCE §6) to judge the doubtful
ones on a bounded window. The streaming policy -- when a boundary is certain -- is ours and is described
on :class:`IncrementalSentenceChunker`.

Normalisation (the "no characters lost" contract, tested): let ``clean`` be ``strip_markdown(text)`` (or
``text`` with ``markdown=False``) and ``norm(s)`` be ``s`` with every maximal whitespace run
(``str.isspace``) replaced by one space and the ends stripped. Every chunk equals ``norm`` of a slice of
``clean``; the chunks, in order, cover ``clean`` exactly, and the text between two consecutive chunks is
whitespace (possibly none, e.g. between CJK sentences). Equivalently ``norm(clean) == c1 + s1 + c2 + s2 +
... + ck`` with every ``si`` in ``{"", " "}``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import sentencex

from protocol.voices import LANGUAGES, language_code
from speech.markdown import MAX_LINK_TARGET_CHARS, NEWLINES, MarkdownStripper, strip_markdown
from speech.spans import NonSpaceSources, SourceMap

__all__ = [
    "DEFAULT_MAX_CHUNK_CHARS",
    "LINK_TARGET_MAX_CHARS",
    "Chunk",
    "IncrementalSentenceChunker",
    "MarkdownStripper",
    "sentence_language",
    "strip_markdown",
]

DEFAULT_MAX_CHUNK_CHARS = 120
"""Longest chunk, in characters, so that Kokoro's 510 phoneme tokens are not exceeded (REFERENCE §4).

Measured with kokoro-onnx 0.6.1's own ``Tokenizer.phonemize`` (espeak-ng via espeakng-loader 0.2.4, the
phonemes Kokoro actually receives), en-us and en-gb, on seven English texts (3,834 characters in all):
narrative prose, an assistant answer with commands, dialogue, acronyms and URLs, science figures, a price
list, and a financial report dense with numbers such as ``$1,234,567,890``, ``12.5%``, ``12/31/2023``.

====================  ==========================  ==========================================
text                  phonemes / character        note
====================  ==========================  ==========================================
prose, dialogue       1.01-1.05                   whole text
assistant answer      1.17-1.18 (1.39 worst       whole text
                      sentence)
acronyms / URLs       1.78 (3.0 for ``J.``)       whole text
science figures       2.11-2.15 (2.56)            whole text
financial report      2.35-2.39 (3.10)            whole text
any 80-120 char       max 3.70 (en-gb), 3.58      worst window of every text, cut at word ends
window                (en-us)
====================  ==========================  ==========================================

Largest phoneme count of any chunk of at most N characters (cut at a word end, as the chunker cuts):
N = 100: 357 / 370 (en-us / en-gb); N = 120: 380 / 393; N = 130: 404 / 414; N = 150: 500 / 514 (over).
120 characters keep the worst realistic ratio seen (3.70) at 444 phonemes, 13 % under 510, and the worst
measured chunk at 393 (77 %). A full chunk of prose is about 125 phoneme tokens.

Not covered, on purpose: text built to expand. ``1,234,567`` gives 59 phonemes for 9 characters (6.6 per
character) and a 13-digit number 164 for 13 (12.6), so no character cap both covers such input and lets
ordinary sentences through whole. Where a chunk phonemizes past 510, kokoro-onnx splits the phonemes itself
(``split_phonemes``) and KPipeline does likewise: the chunk is then spoken in two passes, nothing fails.
The torch path (misaki G2P) was not measured here (its English G2P needs a spaCy model not installed).
"""

LINK_TARGET_MAX_CHARS = MAX_LINK_TARGET_CHARS
"""Alias of :data:`speech.markdown.MAX_LINK_TARGET_CHARS` (the name this module used to define)."""

# Terminators that need whitespace and a following character before they can end a sentence, and those
# written without a following space (CJK full stops and marks, the Devanagari dandas), which need only the
# next character (to collect the closing quotes and further marks that belong to them).
_NO_SPACE_TERMINATORS = frozenset("。！？｡।॥")
_TERMINATORS = frozenset(".!?…‼‽⁇⁈⁉؟۔።፧．") | _NO_SPACE_TERMINATORS
_STOPS = _TERMINATORS | {"\n"}
# Quotes written right after a terminator close the sentence they follow: Unicode classes Pe (close) and
# Pf (final quote) -- ) ] } 」 』 ” ’ » -- and the straight quotes. A closer that cannot open (Pe, Pf but
# the apostrophe ’) also closes after one space, as French sets it: « Oui ! ».
_QUOTES = frozenset("\"'’")
# What may stand between a sentence's end and the first letter of the next: opening quotes and brackets
# (Ps, Pi: ( [ « “ ‘ 「), straight quotes, Spanish ¿ ¡ and dialogue dashes.
_EXTRA_OPENERS = frozenset("\"'¿¡—–")
# Japanese quotative particles: 「…。」と言った keeps its speech tag.
_QUOTATIVE = frozenset("とっ")
# Where an over-long sentence may be cut (in order of preference: clause punctuation, then whitespace).
# The "spaced" ones only count when whitespace follows, so "1,234" and "1990–2000" stay whole.
_CLAUSE_SPACED = frozenset(",;:–،؛")
_CLAUSE_UNSPACED = frozenset("，、；：—")
_ZWJ = "\u200d"
_LOOKAHEAD = 8  # most opening quotes / brackets (and spaces between them) read past the cap
_BARE_LIST_NUMBER = re.compile(r"\d{1,9}[.)]")
_WHITESPACE_RUN = re.compile(r"\s+")
# Abbreviations that sentencex 1.0.32 takes for sentence ends before a capital or a digit ("M. Dupont",
# "approx. 3"); after one of these a "." ends no sentence.
_ABBREVIATIONS = {
    "en": frozenset({"approx", "ca", "cf", "incl", "excl", "est"}),
    "es": frozenset({"aprox", "pág", "núm", "tel"}),
    "fr": frozenset({"M", "MM", "Mme", "Mmes", "Mlle", "Mlles", "Mgr", "Me", "Pr", "Dr", "env", "p", "n°"}),
    "it": frozenset({"ca", "pag", "tel"}),
    "pt": frozenset({"aprox", "pág", "tel"}),
}


def sentence_language(language: str) -> str:
    """The ISO 639 code for sentence rules: from a Kokoro code (``"j"``), a BCP 47 tag or an ISO code.

    ``"a"`` and ``"b"`` give ``"en"``, ``"p"`` gives ``"pt"``, ``"pt-BR"`` gives ``"pt"``, ``"cmn"``
    gives ``"zh"``; any other tag gives its primary subtag, lower case (sentencex falls back to generic
    rules for a code it does not know).

    Raises:
        TypeError: ``language`` is not a string.
        ValueError: ``language`` is empty.
    """
    if not isinstance(language, str):
        raise TypeError(f"language must be a str, not {type(language).__name__}")
    primary = language.strip().replace("_", "-").split("-")[0].lower()
    if not primary:
        raise ValueError("language must not be empty")
    code = language_code(language)
    return LANGUAGES[code].primary if code else primary


def _is_closer(char: str) -> bool:
    return char in _QUOTES or unicodedata.category(char) in ("Pe", "Pf")


def _is_spaced_closer(char: str) -> bool:
    return char != "’" and unicodedata.category(char) in ("Pe", "Pf")


def _is_opener(char: str) -> bool:
    return char in _EXTRA_OPENERS or unicodedata.category(char) in ("Ps", "Pi")


def _attaches_to_previous(char: str) -> bool:
    """True for characters a hard cut must not start a chunk with (combining marks, joiners)."""
    return unicodedata.category(char) in ("Mn", "Mc", "Me") or char == _ZWJ


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of text to synthesize.

    Attributes:
        text: the chunk, whitespace-normalized (single spaces, no outer whitespace), never empty.
        hard_break: the chunk ended at a line break (a heading, list item, table row or paragraph end,
            or a terminator followed by a line break), not at a sentence end inside a line, a length cut
            or the end of the text.
    """

    text: str
    hard_break: bool
    source: SourceMap | None = None
    """With ``sourced=True``: where each character of ``text`` is in the text fed (§14.4)."""


class IncrementalSentenceChunker:
    """Split streamed text into speakable chunks: sentences, as soon as each one is certainly complete.

    ``feed(fragment)`` returns the chunks completed so far (often ``[]``); ``finish()`` returns the rest
    and resets, so one chunker can serve many texts in turn. :meth:`feed_chunks` is :meth:`feed` with the
    :class:`Chunk` objects (which say whether a chunk ended at a line break); :meth:`flush` is the older
    spelling of :meth:`finish` that returns one string.

    Args:
        language: whose sentence rules apply: a Kokoro language code (``"a"``, ``"b"``, ``"e"``, ``"f"``,
            ``"h"``, ``"i"``, ``"j"``, ``"p"``, ``"z"``), a BCP 47 tag or an ISO 639 code
            (:func:`sentence_language`). It selects sentencex's abbreviation and sentence-starter lists and
            the Japanese quotative rule below; unknown codes get sentencex's generic rules.
        max_chunk_chars: no chunk is longer (in characters, after normalisation); see
            :data:`DEFAULT_MAX_CHUNK_CHARS` for the phoneme measurement behind the default.
        markdown: remove markdown syntax first (:mod:`speech.markdown`). Turn off for text that is
            already clean, or plain text in which ``*``, ``_``, ``[`` or a line-leading ``#`` are words.
        sourced: each chunk carries its :class:`~speech.spans.SourceMap` into the text fed since the text
            began (all fragments together, code points; :mod:`speech.spans`).

    Raises:
        TypeError: ``language`` is not a string, ``max_chunk_chars`` not an int, or a fragment not a string.
        ValueError: ``language`` is empty or ``max_chunk_chars`` < 1.

    When a boundary is certain. The chunker scans the clean text for candidates and decides each exactly
    once, at a point fixed by the text alone, so the chunks never depend on how the text was fragmented
    (tested with hypothesis). Candidates and their decision points:

    * a line break: at once (a heading, a list item, a table row, a line without end punctuation such as
      a title, a paragraph end). A chunk never consists of a bare list number (``1.``) alone: it joins
      the item that follows.
    * ``。！？｡`` and the dandas ``।॥`` (written without a following space): decided at the next
      character, so that the closing quotes and further marks written after it stay in its chunk
      (``「你好。」``, ``你好？！``). In Japanese a closing quote followed by the quotative particle と or
      っ (``「はい。」と言った``) is no boundary: the speech tag stays with its quote.
    * a terminator run (``.``, ``!``, ``?``, ``…``, ``؟`` ...) followed by its closing quotes and brackets
      (``."``, ``?)``, ``!»``, and French ``! »`` with a space), then one space, then any opening quotes,
      brackets, ``¿ ¡`` or dialogue dashes, then the first other character X. Decided when X arrives:

      - X a lower-case letter: no boundary. The sentence goes on (``e.g. apples``) or a speech tag
        follows its quote (``"Hello!" she said.``, ``¿Vienes? —preguntó``).
      - the terminator is a ``.`` after an abbreviation sentencex does not know (French ``M.``,
        English ``approx.``): no boundary.
      - otherwise sentencex judges the pending chunk up to the terminator, ``…`` read as ``...`` and the
        closers and openers left out, followed by a space and X: the boundary holds if sentencex ends a
        sentence there. So ``Dr. S``, ``U.S. C``, ``e.g. 5`` do not split; ``1980. A``, ``$3.14. T``,
        ``stayed.) T``, ``said. "H``, ``Wait... T``, ``Wait… T`` do.

      The price of deciding at X: a boundary sentencex would only see with the whole next word (an
      abbreviation before a sentence starter, ``etc. The``) is missed, and the two sentences share a chunk.
    * nothing else: a terminator not followed by whitespace (``3.14``, ``e.g.x``, URLs, e-mail addresses)
      never ends a chunk.

    Run-in lists ``1. First item 2. Second`` are indistinguishable from a sentence ending in a number
    (``born in 1980. Another``) and split after ``2.``. A boundary that would leave a chunk without any
    letter or digit (``...``, ``1.``) is not taken; the text joins the next chunk.

    Length cap. When the pending chunk reaches ``max_chunk_chars`` characters with more text behind it and
    no boundary inside, it is cut at the last clause mark within the cap (``, ; : – ، ؛`` followed by
    whitespace, or ``，、；：—``), else at the last whitespace, else -- one "word" longer than the cap --
    at the cap, moved back so a combining mark or joiner stays with its base character.

    Cost. The undecided text stays within ``max_chunk_chars`` + 10 characters (plus what the markdown
    stripper holds, bounded by its limits). Each character is scanned once; a candidate still waiting for
    its lookahead is re-read from its start (inside that bound); sentencex is called at most once per
    candidate, on a window of at most ``max_chunk_chars`` + 4 characters. A whole text, however
    fragmented, costs time linear in its length (tested by counting, not timing).
    """

    def __init__(
        self,
        language: str = "en",
        max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
        *,
        markdown: bool = True,
        sourced: bool = False,
    ) -> None:
        iso = sentence_language(language)
        if not isinstance(max_chunk_chars, int) or isinstance(max_chunk_chars, bool):
            raise TypeError(f"max_chunk_chars must be an int, not {type(max_chunk_chars).__name__}")
        if max_chunk_chars < 1:
            raise ValueError(f"max_chunk_chars must be at least 1, got {max_chunk_chars}")
        self.language = language
        self.max_chunk_chars = max_chunk_chars
        self._iso = iso
        self._quotative = iso == "ja"
        self._abbreviations = _ABBREVIATIONS.get(iso, frozenset())
        self._stripper = MarkdownStripper() if markdown else None
        self._sources = NonSpaceSources() if sourced else None
        self._fed = 0  # characters fed since the text began (the sources of text fed without markdown)
        self._buf = ""  # clean, whitespace-collapsed text; the pending chunk is _buf[_start:]
        self._start = 0  # start of the pending chunk (never a whitespace character)
        self._scan = 0  # every candidate before this index has been decided: no boundary

    @property
    def pending(self) -> int:
        """Characters received and not yet returned (after markdown removal and whitespace collapsing)."""
        return len(self._buf) - self._start + (self._stripper.pending if self._stripper else 0)

    def feed(self, fragment: str) -> list[str]:
        """Add ``fragment``; return the chunks that became certain, in order (``[]`` if none)."""
        return [chunk.text for chunk in self.feed_chunks(fragment)]

    def feed_chunks(self, fragment: str) -> list[Chunk]:
        """Like :meth:`feed`, returning :class:`Chunk` objects."""
        if not isinstance(fragment, str):
            raise TypeError(f"fragment must be a str, not {type(fragment).__name__}")
        if self._sources is None:
            return self._push(self._stripper.feed(fragment) if self._stripper else fragment)
        if self._stripper:
            clean, sources = self._stripper.feed_sourced(fragment)
        else:
            clean, sources = fragment, range(self._fed, self._fed + len(fragment))
        self._fed += len(fragment)
        self._sources.add(clean, sources)
        return self._push(clean)

    def finish(self) -> list[Chunk]:
        """End the text; return the remaining chunks (usually one or none) and reset.

        Text the markdown stripper still held is added first (it may hold the end of a construct that
        turned out to be text); then the pending chunk ends with the text. The last chunk may lack
        letters (a text of punctuation only).
        """
        if self._stripper and self._sources is not None:
            clean, sources = self._stripper.flush_sourced()
            self._sources.add(clean, sources)
            chunks = self._push(clean)
        else:
            chunks = self._push(self._stripper.flush()) if self._stripper else []
        while (end := self._overflow_cut()) is not None:  # the text ended while a boundary was undecided
            chunk = self._cut(end, False)
            if chunk is not None:
                chunks.append(chunk)
        rest = _normalize(self._buf[self._start :])
        self._buf, self._start, self._scan = "", 0, 0
        if rest:
            chunks.append(self._chunk(rest, False))
        if self._sources is not None:
            self._sources.clear()
            self._fed = 0
        return chunks

    def _chunk(self, text: str, hard_break: bool) -> Chunk:
        return Chunk(text, hard_break, None if self._sources is None else self._sources.map(text))

    def flush(self) -> str | None:
        """End the text; return what is left as one string (``None`` if nothing) and reset.

        The older API: :meth:`finish` returns the same text as chunks. They differ only when the markdown
        stripper releases held text at the end that completes a boundary; this joins those chunks.
        """
        rest = " ".join(chunk.text for chunk in self.finish())
        return rest or None

    @property
    def held(self) -> str:
        """The pending chunk: clean text received and not yet returned (markdown removed, whitespace
        collapsed; what the markdown stripper still holds is not in it). Its last word may be unfinished."""
        return self._buf[self._start :]

    def take(self, count: int) -> Chunk:
        """Return the first ``count`` characters of :attr:`held` as a chunk of their own, before its end is
        certain (a server that must speak a sentence still being written, PROTOCOL.md §15.3).

        The cut must fall just after whitespace, so no word is split; the chunk's text is the taken
        characters whitespace-normalized, and the rest of the pending chunk goes on as if it had started
        there (later chunks and boundaries are decided as before).

        Raises:
            ValueError: ``count`` is not inside :attr:`held` or does not end at whitespace.
        """
        held = self.held
        if not 0 < count < len(held) or not held[count - 1].isspace():
            raise ValueError(f"take({count}) must end at whitespace inside the {len(held)} characters held")
        text = _normalize(held[:count])
        start = self._start + count
        while start < len(self._buf) and self._buf[start].isspace():
            start += 1
        self._start = start
        self._scan = max(self._scan, start)
        return self._chunk(text, False)

    def _push(self, clean: str) -> list[Chunk]:
        self._append(clean)
        chunks = []
        while (cut := self._next_cut()) is not None:
            chunk = self._cut(*cut)
            if chunk is not None:
                chunks.append(chunk)
        if self._start > len(self._buf) // 2:  # drop consumed text, amortized O(1) per character
            self._buf = self._buf[self._start :]
            self._scan -= self._start
            self._start = 0
        return chunks

    def _cut(self, end: int, hard: bool) -> Chunk | None:
        """End the pending chunk at ``end`` (the whitespace after it is dropped); ``None`` if it is empty."""
        text = _normalize(self._buf[self._start : end])
        start, buf = end, self._buf
        while start < len(buf) and buf[start].isspace():
            start += 1
        self._start = start
        self._scan = max(self._scan, start)
        return self._chunk(text, hard) if text else None

    def _overflow_cut(self) -> int | None:
        """A forced cut when the pending chunk holds more than ``max_chunk_chars`` characters (a single
        space just past the cap does not count: it is dropped at the cut), else ``None``."""
        buf, n = self._buf, len(self._buf)
        limit = self._start + self.max_chunk_chars
        overflow = n > limit and (n > limit + 1 or not buf[limit].isspace())
        return self._forced_cut() if overflow else None

    def _append(self, text: str) -> None:
        """Append clean text, collapsing each whitespace run to one space, or one newline if it has one.

        A run that continues one ending the pending chunk merges with it; the pending chunk never starts
        with whitespace.
        """
        if not text:
            return
        buf = self._buf
        if len(buf) > self._start and buf[-1].isspace() and text[0].isspace():
            # The trailing whitespace may grow (" " + "\n" -> "\n"): take it back and decide it again.
            text = buf[-1] + text
            buf = buf[:-1]
            self._scan = min(self._scan, len(buf))
        elif len(buf) == self._start:
            text = text.lstrip()
        self._buf = buf + _WHITESPACE_RUN.sub(_collapse, text)

    def _next_cut(self) -> tuple[int, bool] | None:
        """End of the next chunk in ``_buf`` and whether it is a hard break, or ``None`` while undecided."""
        buf, n, start, cap = self._buf, len(self._buf), self._start, self.max_chunk_chars
        limit = start + cap  # a chunk is buf[start:end] with end <= limit
        i = max(self._scan, start)
        while True:
            while i < n and buf[i] not in _STOPS:
                i += 1
            self._scan = i
            if i == n:
                end = self._overflow_cut()
                return None if end is None else (end, False)
            if i > limit:
                return self._forced_cut(), False  # buf[i - 1] is text beyond the cap
            if buf[i] == "\n":
                if _speakable(buf[start:i]):
                    return i, True
                i += 1
                continue
            # A terminator run, then the closing quotes and brackets that belong to it.
            j = i
            while j < n and buf[j] in _TERMINATORS:
                j += 1
            run_end = j
            no_space = any(char in _NO_SPACE_TERMINATORS for char in buf[i:run_end])
            while True:
                if j < n and _is_closer(buf[j]):
                    j += 1
                elif not no_space and j + 1 < n and buf[j] == " " and _is_spaced_closer(buf[j + 1]):
                    j += 2
                else:
                    break
            if j > limit:
                return self._forced_cut(), False
            if j == n:
                return None
            after = buf[j]
            if no_space:
                if after == " " and j + 1 == n:
                    return None  # the space may still grow into a line break (a hard break)
                if not (self._quotative and j > run_end and after in _QUOTATIVE) and _speakable(buf[start:j]):
                    return j, after == "\n"
                i = j
                continue
            if after == "\n":
                if _speakable(buf[start:j]):
                    return j, True
                i = j
                continue
            if after != " ":
                i = j  # 3.14, e.g.x, ?!x: no boundary
                continue
            # One space, then opening quotes / brackets / ¿ ¡ / dashes (spaces between them), then X.
            k = j + 1
            while k < n and (_is_opener(buf[k]) or (buf[k] == " " and k > j + 1)):
                k += 1
            if k > limit + _LOOKAHEAD:
                return self._forced_cut(), False
            if k == n:
                return None
            following = buf[k]
            if following == "\n":
                if _speakable(buf[start:j]):
                    return j, False
            elif (
                unicodedata.category(following) != "Ll"
                and _speakable(buf[start:j])
                and not (buf[i:run_end] == "." and self._abbreviation_before(i))
                and self._sentencex_ends_sentence(buf[start:i], buf[i:run_end], following)
            ):
                return j, False
            i = j

    def _abbreviation_before(self, end: int) -> bool:
        """The word ending at ``end`` is an abbreviation of the language (``M`` in ``M. Dupont``)."""
        if not self._abbreviations:
            return False
        begin = end
        while begin > self._start and self._buf[begin - 1].isalpha():
            begin -= 1
        return (begin == self._start or not self._buf[begin - 1].isalnum()) and self._buf[
            begin:end
        ] in self._abbreviations

    def _sentencex_ends_sentence(self, before: str, terminators: str, following: str) -> bool:
        """True if sentencex ends a sentence after ``before + terminators`` when ``following`` comes next."""
        head = before.replace("…", "...")
        window = head + terminators.replace("…", "...") + " " + following
        start, stop = len(head), len(window) - 1
        for boundary in sentencex.get_sentence_boundaries(self._iso, window):
            if start < boundary["end_index"] <= stop:
                return True
        return False

    def _forced_cut(self) -> int:
        """Cut for a pending chunk with more than ``max_chunk_chars`` characters and no boundary."""
        buf, start = self._buf, self._start
        limit = start + self.max_chunk_chars
        for k in range(limit - 1, start, -1):
            char = buf[k]
            if char in _CLAUSE_UNSPACED or (char in _CLAUSE_SPACED and buf[k + 1].isspace()):
                return k + 1
        for k in range(limit, start, -1):
            if buf[k].isspace():
                return k
        cut = limit
        while cut > start + 1 and (_attaches_to_previous(buf[cut]) or buf[cut - 1] == _ZWJ):
            cut -= 1
        return cut


def _collapse(match: re.Match[str]) -> str:
    return "\n" if any(char in NEWLINES for char in match.group()) else " "


def _speakable(chunk: str) -> bool:
    """A chunk worth its own synthesis: some letter or digit, and not just a list number like ``1.``."""
    return any(char.isalnum() for char in chunk) and not _BARE_LIST_NUMBER.fullmatch(chunk)


def _normalize(text: str) -> str:
    return " ".join(text.split())

"""Incremental sentence chunking of streamed text for Kokoro synthesis.

The reference server cuts the text of a synthesis request (PROTOCOL.md §4.1) into segments and synthesizes
them one after the other, so the first audio frame (§5.2) can leave before the whole text is phonemized; the
agent does the same with the text deltas of a language model. Both feed text as it arrives to an
:class:`IncrementalSentenceChunker` and synthesize every chunk it returns.

Pipeline: markdown markers are removed by a streaming :class:`MarkdownStripper`; whitespace runs are
collapsed; the chunker then proposes candidate boundaries itself and asks sentencex (the best of six
segmenters on our 21-case battery, REFERENCE §6) to judge each one on a bounded window. The streaming policy
-- when a boundary is certain -- is ours and is described on :class:`IncrementalSentenceChunker`.

Normalisation (the "no characters lost" contract, tested): let ``clean`` be ``strip_markdown(text)`` and
``norm(s)`` be ``s`` with every maximal whitespace run (``str.isspace``) replaced by one space and the ends
stripped. Every chunk equals ``norm`` of a slice of ``clean``; the chunks, in order, cover ``clean``
exactly, and the text between two consecutive chunks is whitespace (possibly none, e.g. between CJK
sentences). Equivalently ``norm(clean) == c1 + s1 + c2 + s2 + ... + ck`` with every ``si`` in ``{"", " "}``.
"""

from __future__ import annotations

import re
import unicodedata

import sentencex

__all__ = [
    "DEFAULT_MAX_CHUNK_CHARS",
    "LINK_TARGET_MAX_CHARS",
    "IncrementalSentenceChunker",
    "MarkdownStripper",
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

LINK_TARGET_MAX_CHARS = 2048
"""Longest markdown link target ``(...)`` held back while waiting for its ``)``; longer is kept as text."""

# Terminators that need whitespace and a following character before they can end a sentence (sentencex
# judges them), and those that end a sentence at once: CJK full stops / marks and the Devanagari dandas,
# which are written without a following space.
_NO_SPACE_TERMINATORS = frozenset("。！？｡।॥")
_TERMINATORS = frozenset(".!?…‼‽⁇⁈⁉؟۔።፧．") | _NO_SPACE_TERMINATORS
# Quotes and brackets written right after a terminator close the sentence they follow. Unicode classes Pe
# (close) and Pf (final quote) cover ) ] } 」 』 ” ’ » ...; the rest are quotes that close in some locale.
_EXTRA_CLOSERS = frozenset("\"'“‘«‹")
# Where an over-long sentence may be cut (in order of preference: clause punctuation, then whitespace).
# The "spaced" ones only count when whitespace follows, so "1,234" and "1990–2000" stay whole.
_CLAUSE_SPACED = frozenset(",;:–،؛")
_CLAUSE_UNSPACED = frozenset("，、；：—")
_PARA = "\u2029"  # internal paragraph break: a blank line, a heading or list item edge, a code fence
_NEWLINES = frozenset("\n\u2028\x85")
_ZWJ = "\u200d"
_PIECE_CHARS = 4096  # a longer fragment is segmented piece by piece
_BARE_LIST_NUMBER = re.compile(r"\d{1,9}[.)]")
_WHITESPACE_RUN = re.compile(r"\s+")


def _is_closer(char: str) -> bool:
    return char in _EXTRA_CLOSERS or unicodedata.category(char) in ("Pe", "Pf")


def _attaches_to_previous(char: str) -> bool:
    """True for characters a hard cut must not start a chunk with (combining marks, joiners)."""
    return unicodedata.category(char) in ("Mn", "Mc", "Me") or char == _ZWJ


class MarkdownStripper:
    """Incremental removal of the markdown markers a language model writes, keeping the words.

    ``feed(fragment) -> str`` returns the clean text that is final so far; ``flush()`` ends the text and
    resets. The concatenated output for any fragmentation of a text equals the output for the whole text.

    Removed (the "markers"):

    * emphasis runs of ``*`` or ``_`` (``**bold**``, ``_em_``, ``***``) unless the run is inside a word
      (a letter or digit on both sides: ``snake_case``, ``2*3`` stay);
    * every backtick run, and the info string of a code fence (the rest of a line that starts with three
      or more backticks);
    * ``[`` and ``]`` everywhere, and a link target: ``(`` ... ``)`` right after ``]`` (``[text](url)`` ->
      ``text``). A target that meets whitespace or a line end, or grows past
      :data:`LINK_TARGET_MAX_CHARS`, is kept as text;
    * at the start of a line (after optional indentation): ATX heading hashes (``#`` to ``######`` then a
      space), bullets ``-``, ``*``, ``+`` followed by a space, block quote ``>``, thematic breaks (a line of
      three or more ``-``), empty list items / headings;
    * a backslash before ASCII punctuation (the punctuation is kept as text);
    * markers still undecided when the text ends (a trailing ``**``, ``#``, ``-``, ``\\``, or an unclosed
      link target) are removed, so flushing never produces new text to segment.

    Block edges become paragraph breaks (U+2029, whitespace, so it vanishes in the normalisation): the
    start of a heading, bullet or code fence line, and the end of a heading or fence line. Numbered list
    markers (``1.``) are words and stay; the chunker starts a chunk at a newline followed by a digit.
    Not handled, left as text: ``~~strike~~``, tables, HTML, autolinks ``<url>``, setext ``===``, images'
    ``!`` (``![alt](url)`` gives ``!alt``).

    Lookahead is bounded: an emphasis run waits for the next character, a line-start marker for the end of
    its run, a link target for its ``)`` (at most :data:`LINK_TARGET_MAX_CHARS`).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._out: list[str] = []
        self._held = ""  # undecided characters: an emphasis run, a line-start marker, a link target
        self._mode = "text"  # text | emphasis | line | target | escape | fence_info | after_bracket
        self._line_start = True  # only indentation so far on this line
        self._held_at_line_start = False  # the held emphasis run began a line ("* item" is a bullet)
        self._prev = ""  # last character emitted, for the inside-a-word test of emphasis runs
        self._heading = False  # this line is a heading: its end is a paragraph break
        self._backticks = 0  # length of the backtick run being dropped
        self._backticks_at_line_start = False
        self._target_depth = 0

    def feed(self, fragment: str) -> str:
        """Consume ``fragment``; return the clean text decided so far (possibly ``""``)."""
        for char in fragment:
            self._char(char)
        out = "".join(self._out)
        self._out.clear()
        return out

    def flush(self) -> None:
        """End the text and reset. Undecided markers are dropped, so no text is left to return."""
        self._reset()

    def _emit(self, text: str) -> None:
        self._out.append(text)
        self._prev = text[-1]
        if not text.isspace():
            self._line_start = False

    def _char(self, char: str) -> None:
        mode = self._mode
        if mode == "emphasis":
            if char == self._held[0]:
                self._held += char
                return
            self._end_emphasis(char)
        elif mode == "line":
            if self._line_marker(char):
                return
        elif mode == "target":
            if self._target(char):
                return
        elif mode == "escape":
            self._mode = "text"
            if char.isascii() and not char.isalnum() and not char.isspace():
                self._emit(char)  # escaped punctuation is text, never a marker
                return
            self._emit("\\")
        elif mode == "fence_info":
            if char not in _NEWLINES and char != _PARA:
                return
            self._mode = "text"
            self._heading = True  # the fence line ends with a paragraph break, like a heading
        elif mode == "after_bracket":
            self._mode = "text"
            if char == "(":
                self._mode, self._held, self._target_depth = "target", "(", 0
                return
        if char == "`":
            self._backtick()
            return
        if self._backticks:
            fence = self._backticks >= 3 and self._backticks_at_line_start
            self._backticks = 0
            if fence:
                self._out.append(_PARA)
                if char not in _NEWLINES and char != _PARA:
                    self._mode = "fence_info"
                    return
                self._heading = True
        self._text(char)

    def _text(self, char: str) -> None:
        if char in _NEWLINES or char == _PARA:
            if self._heading:
                self._heading = False
                self._emit(_PARA)
            else:
                self._emit(char)
            self._line_start = True
            return
        if char == "*" or char == "_":
            self._mode, self._held = "emphasis", char
            self._held_at_line_start = self._line_start
            return
        if char == "[":
            self._line_start = False
            return
        if char == "]":
            self._mode = "after_bracket"
            return
        if char == "\\":
            self._mode = "escape"
            return
        if self._line_start:
            if char in "#-+":
                self._mode, self._held = "line", char
                return
            if char == ">":
                return  # block quote marker; the line is still at its start ("> - item")
        self._emit(char)

    def _backtick(self) -> None:
        if not self._backticks:
            self._backticks_at_line_start = self._line_start
        self._backticks += 1

    def _end_emphasis(self, char: str) -> None:
        run, self._held, self._mode = self._held, "", "text"
        if self._prev.isalnum() and char.isalnum():
            self._emit(run)  # inside a word: snake_case, 2*3
        elif run == "*" and self._held_at_line_start and char in " \t":
            self._out.append(_PARA)  # "* item" bullet

    def _line_marker(self, char: str) -> bool:
        """Advance a held line-start marker; True when ``char`` was consumed."""
        held = self._held
        kind = held[0]
        if char == kind and kind != "+" and (kind == "-" or len(held) < 7):
            self._held += char
            return True
        if kind == "-" and len(held.rstrip(" \t")) >= 3 and held.count("-") >= 3 and char in " \t":
            self._held += char  # "--- " may still be a thematic break
            return True
        self._held, self._mode = "", "text"
        if char in _NEWLINES or char == _PARA:
            if held == "--":
                self._emit(held)
            else:
                self._out.append(_PARA)  # thematic break, empty item or heading: a block edge
            return False
        is_heading = kind == "#" and len(held) <= 6 and char in " \t"
        is_bullet = kind in "-+" and held == kind and char in " \t"
        if is_heading or is_bullet:
            self._out.append(_PARA)
            self._heading = is_heading
            return False
        self._emit(held)  # "#hashtag", "-5 degrees", "+1", "-- aside": plain text
        return False

    def _target(self, char: str) -> bool:
        """Advance a held link target; True when ``char`` was consumed."""
        if char == ")" and not self._target_depth:
            self._held, self._mode = "", "text"
            return True
        if char.isspace() or len(self._held) >= LINK_TARGET_MAX_CHARS:
            held, self._held, self._mode = self._held, "", "text"
            self._emit(held)  # not a link target after all: keep it as text
            return False
        self._target_depth += (char == "(") - (char == ")")
        self._held += char
        return True


def strip_markdown(text: str) -> str:
    """Return ``text`` without the markdown markers listed on :class:`MarkdownStripper`."""
    return MarkdownStripper().feed(text)


class IncrementalSentenceChunker:
    """Split streamed text into speakable chunks: sentences, as soon as each one is certainly complete.

    ``feed(fragment)`` returns the chunks completed so far (often ``[]``); ``flush()`` returns what is left
    (``None`` if nothing but whitespace) and resets, so one chunker can serve many texts in turn.

    Args:
        language: ISO 639 code handed to sentencex for its abbreviation and sentence-starter lists;
            unknown codes fall back to sentencex's generic rules.
        max_chunk_chars: no chunk is longer (in characters, after normalisation); see
            :data:`DEFAULT_MAX_CHUNK_CHARS` for the phoneme measurement behind the default.
        markdown: strip markdown markers first (:class:`MarkdownStripper`). Turn off for plain text in
            which ``*``, ``_``, ``[`` or a line-leading ``#`` are words.

    Raises:
        TypeError: ``language`` is not a string, ``max_chunk_chars`` not an int, or a fragment not a string.
        ValueError: ``max_chunk_chars`` < 1.

    When a boundary is certain. The chunker scans the clean text for candidates and decides each exactly
    once, at a point fixed by the text alone, so the chunks never depend on how the text was fragmented
    (tested with hypothesis; one exception below). Candidates and their decision points:

    * a terminator run (``.``, ``!``, ``?``, ``…``, ``؟`` ...) plus any closing quotes / brackets right
      after it, then whitespace, then one more character X. When X arrives, sentencex judges the window
      from the start of the pending chunk up to and including X; the boundary holds if sentencex ends a
      sentence between the terminator and X. One character of lookahead is what sentencex needs for the
      common cases: ``Dr. S``, ``U.S. c``, ``e.g. o`` do not split, ``1980. A`` and ``$3.14. T`` do.
      Because the window stops at X, a decision can never change later; the price is that a boundary
      sentencex would only see with the whole next word (an abbreviation before a sentence starter,
      ``etc. The``) is missed (the two sentences stay in one chunk) and a terminator inside a quotation or
      parenthesis that has not closed by X may be taken as a boundary.
    * ``。！？｡`` and the dandas ``।॥``: written without a following space, so they end a sentence at once,
      with the closing quotes and further terminators already received. When a fragment ends right
      after one, the chunk goes out in that same ``feed`` call; a closer or terminator arriving in a later
      fragment then begins the next chunk (the only fragmentation-dependent behaviour).
    * a paragraph break (blank line; heading, bullet and code-fence edges from the stripper): at once.
    * a single newline followed by a digit (a numbered list item on its own line), decided at the digit.
      Run-in lists ``1. First item 2. Second`` are indistinguishable from a sentence ending in a number
      (``born in 1980. Another``) and split after ``2.``; a chunk never consists of a bare ``1.`` alone.

    A boundary that would leave a chunk without any letter or digit (``...``, ``1.``) is not taken; the
    text joins the next chunk. URLs, e-mail addresses, decimals and ``e.g.`` never split mid-token
    because a terminator must be followed by whitespace.

    Length cap. When the pending chunk reaches ``max_chunk_chars`` characters with more text behind it and
    no boundary inside, it is cut at the last clause mark within the cap (``, ; : – ، ؛`` followed by
    whitespace, or ``，、；：—``), else at the last whitespace, else -- one "word" longer than the cap --
    at the cap, moved back so a combining mark or joiner stays with its base character.

    Cost. The undecided text stays within ``max_chunk_chars`` + 2 characters (plus a held link target,
    at most :data:`LINK_TARGET_MAX_CHARS`). A feed scans each new character once, re-reads a candidate
    still waiting for its lookahead from its start (inside that bound), and calls sentencex at most once
    per candidate, on a window of at most ``max_chunk_chars`` + 2 characters; a long fragment is taken
    in pieces of about 4 k characters. A feed costs O(len(fragment) + max_chunk_chars); a whole text,
    however fragmented, costs time linear in its length (tested by counting sentencex calls and the
    characters they read, not by timing).
    """

    def __init__(
        self, language: str = "en", max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS, *, markdown: bool = True
    ) -> None:
        if not isinstance(language, str):
            raise TypeError(f"language must be a str, not {type(language).__name__}")
        if not isinstance(max_chunk_chars, int) or isinstance(max_chunk_chars, bool):
            raise TypeError(f"max_chunk_chars must be an int, not {type(max_chunk_chars).__name__}")
        if max_chunk_chars < 1:
            raise ValueError(f"max_chunk_chars must be at least 1, got {max_chunk_chars}")
        self.language = language
        self.max_chunk_chars = max_chunk_chars
        self._stripper = MarkdownStripper() if markdown else None
        self._buf = ""  # clean, whitespace-collapsed text not yet returned; never starts with whitespace
        self._scan = 0  # every candidate before this index of _buf has been decided: no boundary

    @property
    def pending(self) -> int:
        """Characters received and not yet returned (after stripping and whitespace collapsing)."""
        return len(self._buf) + (len(self._stripper._held) if self._stripper else 0)

    def feed(self, fragment: str) -> list[str]:
        """Add ``fragment``; return the chunks that became certain, in order (``[]`` if none)."""
        if not isinstance(fragment, str):
            raise TypeError(f"fragment must be a str, not {type(fragment).__name__}")
        clean = self._stripper.feed(fragment) if self._stripper else fragment
        chunks = []
        start = 0
        while start < len(clean):
            # A long fragment goes in pieces so the buffer stays bounded (no quadratic re-slicing). A
            # piece never ends on a terminator or closer, where the CJK rule would emit early.
            end = min(start + _PIECE_CHARS, len(clean))
            while end < len(clean) and (clean[end - 1] in _TERMINATORS or _is_closer(clean[end - 1])):
                end += 1
            self._append(clean[start:end])
            start = end
            while (cut := self._next_cut()) is not None:
                chunk = _normalize(self._buf[:cut])
                rest = self._buf[cut:].lstrip()
                self._scan = max(0, self._scan - (len(self._buf) - len(rest)))
                self._buf = rest
                if chunk:
                    chunks.append(chunk)
        return chunks

    def flush(self) -> str | None:
        """End the text; return the remaining chunk (``None`` if nothing is left) and reset.

        No further boundary can appear here: the stripper drops undecided markers instead of releasing
        them, and a candidate still waiting for its lookahead character simply ends the text. The
        remainder is at most ``max_chunk_chars`` long, because a waiting candidate is followed by nothing
        but one whitespace character. It may lack letters (a lone ``」`` after an early CJK boundary, or a
        text of punctuation only).
        """
        if self._stripper:
            self._stripper.flush()
        rest = _normalize(self._buf)
        self._buf, self._scan = "", 0
        return rest or None

    def _append(self, text: str) -> None:
        """Append clean text, collapsing each whitespace run to one space, newline or paragraph break.

        A run holding two or more newlines (or U+2029) is a paragraph break. A run that continues one
        ending the buffer merges with it; whitespace at the start of the buffer is dropped.
        """
        out = [self._buf]
        tail = self._buf[-1:]
        if tail.isspace():
            # The trailing whitespace may grow (" " + "\n" -> "\n", "\n" + "\n" -> paragraph break):
            # decide it again.
            self._scan = min(self._scan, len(self._buf) - 1)
        pos = 0
        for match in _WHITESPACE_RUN.finditer(text):
            word = text[pos : match.start()]
            pos = match.end()
            if word:
                out.append(word)
                tail = word[-1]
            if not tail:
                continue
            run = match.group()
            newlines = 2 if _PARA in run else sum(char in _NEWLINES for char in run)
            if tail.isspace():
                newlines += 2 if tail == _PARA else int(tail == "\n")
                out[-1] = out[-1][:-1]
            tail = _PARA if newlines >= 2 else "\n" if newlines else " "
            out.append(tail)
        out.append(text[pos:])
        self._buf = "".join(out)

    def _next_cut(self) -> int | None:
        """End of the next chunk in ``_buf``, or ``None`` while no boundary is certain yet."""
        buf, n, cap = self._buf, len(self._buf), self.max_chunk_chars
        i = self._scan
        while True:
            while i < n and buf[i] not in _TERMINATORS and buf[i] != "\n" and buf[i] != _PARA:
                i += 1
            self._scan = i
            if i == n:
                overflow = n > cap and (n > cap + 1 or not buf[cap].isspace())
                return self._forced_cut() if overflow else None
            if i > cap:
                return self._forced_cut()  # buf[i - 1] is text beyond the cap
            if buf[i] == "\n" or buf[i] == _PARA:
                if buf[i] == "\n":
                    if i + 1 == n:
                        return None
                    if not buf[i + 1].isdigit():
                        i += 1
                        continue
                if _speakable(buf[:i]):
                    return i
                i += 1
                continue
            # A terminator run, then the closing quotes and brackets that belong to it.
            j = i
            while j < n and buf[j] in _TERMINATORS:
                j += 1
            no_space = any(char in _NO_SPACE_TERMINATORS for char in buf[i:j])
            while j < n and _is_closer(buf[j]):
                j += 1
            if j > cap:
                return self._forced_cut()
            if no_space:
                if _speakable(buf[:j]):
                    return j
            elif j == n:
                return None
            elif buf[j].isspace() and _speakable(buf[:j]):
                if buf[j] == _PARA:
                    return j
                if j + 1 == n:
                    return None
                if buf[j] == "\n" and buf[j + 1].isdigit():
                    return j
                if self._sentencex_ends_sentence(buf[: j + 2], i, j + 1):
                    return j
            i = j

    def _sentencex_ends_sentence(self, window: str, start: int, stop: int) -> bool:
        """True if sentencex ends a sentence in ``window`` after index ``start`` and at most at ``stop``."""
        for boundary in sentencex.get_sentence_boundaries(self.language, window.replace(_PARA, "\n")):
            if start < boundary["end_index"] <= stop:
                return True
        return False

    def _forced_cut(self) -> int:
        """Cut for a pending chunk with more than ``max_chunk_chars`` characters and no boundary."""
        buf, cap = self._buf, self.max_chunk_chars
        for k in range(cap - 1, 0, -1):
            char = buf[k]
            if char in _CLAUSE_UNSPACED or (char in _CLAUSE_SPACED and buf[k + 1].isspace()):
                return k + 1
        for k in range(cap, 0, -1):
            if buf[k].isspace():
                return k
        cut = cap
        while cut > 1 and (_attaches_to_previous(buf[cut]) or buf[cut - 1] == _ZWJ):
            cut -= 1
        return cut


def _speakable(chunk: str) -> bool:
    """A chunk worth its own synthesis: some letter or digit, and not just a list number like ``1.``."""
    return any(char.isalnum() for char in chunk) and not _BARE_LIST_NUMBER.fullmatch(chunk)


def _normalize(text: str) -> str:
    return " ".join(text.split())

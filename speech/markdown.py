"""Streaming removal of the markdown a language model writes, so it is not read aloud (PROTOCOL.md §14.2).

:class:`MarkdownStripper` takes text in fragments of any size and returns the text to speak: the words
stay, the syntax goes, and block structure (headings, list items, table rows, paragraphs) survives as
line breaks, which the sentence chunker treats as segment ends (:mod:`speech.chunker`). It is a
character-at-a-time state machine, so its output for any fragmentation of a text is the output for the
whole text, and each character costs O(1) amortized: the only characters held back are an undecided
marker or construct, each bounded (see the ``MAX_*`` constants).

The rules (CommonMark and GitHub-flavoured markdown as models write it, simplified where streaming needs
it). "Dropped" means the characters are not in the output.

Line starts (after optional indentation and block-quote ``>`` markers, which are dropped):

* ATX heading ``#`` to ``######`` followed by a space or tab: the hashes are dropped; the heading is a
  line of its own, so it is a segment of its own. Seven hashes, or a hash followed by a letter
  (``#hashtag``), are text.
* Bullet ``-``, ``*`` or ``+`` followed by a space or tab: dropped. A task-list box after it (``[ ]``,
  ``[x]``) is dropped too (see brackets). Ordered-list numbers (``1.``, ``2)``) are kept: they are words,
  and the line break before the item already ends the previous segment.
* A line made only of ``-``, ``*``, ``_`` or ``=`` (three or more of one of them, spaces allowed: thematic
  breaks and setext underlines), or only of ``|``, ``-``, ``:`` and spaces with at least one ``|`` and
  one ``-`` (a table's delimiter row): dropped. A line holding only ``#``, ``-``, ``*`` or ``+`` (an empty
  heading or item) is dropped too.
* Fenced code block: a line starting with three or more backticks or tildes opens it; its info string
  and every line up to the closing fence (the same character, at least as many, alone on its line) are
  **not spoken**, fences included: code read aloud character by character helps no listener, and the
  text is on the listener's screen. An unclosed fence runs to the end of the text.
* Table row: a line starting with ``|``. Its cells are spoken in order, separated by ``", "``; the
  leading and trailing pipes and empty cells add nothing; every row is a line, so a segment.

Inline:

* Emphasis and strikethrough runs of ``*``, ``_`` (any length) and ``~`` (two or more) are dropped,
  except a run inside a word (a letter or digit on both sides: ``snake_case``, ``2*3``) and a run with
  whitespace on both sides (``a * b``), which are text, as in CommonMark; a single ``~`` is text (``~5``).
  A run still undecided when the text ends is dropped.
* Code span: a backtick run opens it and the next run of the same length closes it; the backticks are
  dropped and the content is **spoken as written** (no markdown inside it: ``**kwargs`` stays). A span
  also ends at the end of its line (an unmatched backtick is just dropped).
* Links ``[text](target)`` speak their text; images ``![alt](target)`` speak their alt text (the ``!``
  is dropped). ``[`` and ``]`` are always dropped; a target ``(...)`` right after ``]`` is dropped. A
  target that meets whitespace or a line end, or grows past :data:`MAX_LINK_TARGET_CHARS`, was not a
  target and is kept as text; an unclosed target at the end of the text is dropped.
* Citations and task boxes: a bracket holding only a reference number or list (``[1]``, ``[^2]``,
  ``[3, 4]``, ``[5-7]``) or a task box (``[ ]``, ``[x]``) is dropped with its content, unless a target
  follows (then it is a link and its text is spoken).
* HTML: a tag of a known HTML element (``<br>``, ``<sup>``, ``</b>``, ``<span class="x">``: attributes
  need values) is dropped; ``<br>``, ``<p>``, ``<li>`` and other block elements become a line break.
  An autolink ``<https://...>`` or ``<name@host>`` keeps its address. Anything else in angle brackets
  (``a <b and c> d``, ``x < y``) is text.
* A backslash before ASCII punctuation is dropped and the punctuation is text (never a marker).

What is spoken, precisely: every letter and digit of the input is in the output, in order, except those
inside a dropped construct: a link or image target, a fenced code block (with its info string), a
citation or task box, an HTML tag, a line-start marker. Punctuation and whitespace may be dropped (the
markers) or added (the ``", "`` between table cells, line breaks for block tags).
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_HTML_TAG_CHARS",
    "MAX_LINE_PREFIX_CHARS",
    "MAX_LINK_TARGET_CHARS",
    "MarkdownStripper",
    "strip_markdown",
]

MAX_LINK_TARGET_CHARS = 2048
"""Longest link target ``(...)`` held back while waiting for its ``)``; a longer one is kept as text."""

MAX_LINE_PREFIX_CHARS = 4096
"""Longest run of marker characters held at a line start (a wide table's delimiter row); then text."""

MAX_HTML_TAG_CHARS = 256
"""Longest ``<...>`` held back while waiting for its ``>``; a longer one is text."""

_MAX_BRACKET_CHARS = 32  # longest citation content held while waiting for its "]"

NEWLINES = frozenset("\n\r\u2028\u2029\x85")
"""Characters that end a line (``\\r\\n`` is two line ends: a blank line, which changes nothing)."""

# Characters a line may start with while it can still be a line-start marker: indentation, block quote,
# heading, bullet, rule, table and fence characters.
_PREFIX_CHARS = frozenset(" \t>#*+-_=|:`~")
_EMPHASIS = frozenset("*_~")
_BRACKET_CONTENT = frozenset("0123456789^,- xX\u2013")
_CITATION = re.compile(r"\^?\d{1,4}(?:\s*[,\u2013-]\s*\^?\d{1,4})*|[ xX]")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_HEADING = re.compile(r"#{1,6}[ \t]")
_BULLET = re.compile(r"[-*+][ \t]")
_HTML_BLOCK = frozenset(
    "address article aside blockquote br dd details div dl dt figcaption figure footer h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section summary table tbody td tfoot th thead tr ul".split()
)
_HTML_INLINE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i img ins kbd mark q s samp small span strike "
    "strong sub sup time tt u var wbr".split()
)
_HTML_TAG = re.compile(
    r"</?([A-Za-z][A-Za-z0-9]*)"
    r"(?:\s+[A-Za-z_:][-\w:.]*\s*=\s*(?:\"[^\"<>]*\"|'[^'<>]*'|[^\s\"'=<>`]+))*\s*/?>"
)
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^\s<>]+|mailto:[^\s<>]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")


class MarkdownStripper:
    """Incremental removal of markdown syntax, keeping the words (rules in the module docstring).

    ``feed(fragment) -> str`` returns the text decided so far; ``flush() -> str`` ends the text, returns
    what was still held (text of an unfinished construct that turned out not to be markup, e.g. an
    unclosed ``<abc``; usually ``""``) and resets, so one stripper serves many texts in turn. For any
    fragmentation, the concatenated outputs equal ``strip_markdown`` of the whole text.

    Raises:
        TypeError: a fragment is not a string.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._out: list[str] = []
        self._sources: list[int] = []  # for each character of _out's text, its index in the input
        self._pos = -1  # index in the input of the character being read (or replayed from a held run)
        self._count = 0  # input characters read since the text began
        self._held_at = 0  # index in the input of _held's first character (or of the "[" / "!" / "\\")
        self._prefix_at = 0  # index in the input of _prefix's first character
        self._prev = "\n"  # last character emitted (or seen as text), for the inside-a-word test
        self._line_start = True  # only marker characters so far on this line (held in _prefix)
        self._prefix = ""
        self._mode = "text"  # text|emphasis|ticks|code|bracket|after_bracket|target|bang|escape|tag
        self._held = ""  # the undecided characters of the current mode
        self._droppable = False  # the bracket just closed held a citation or task box
        self._target_depth = 0
        self._code_ticks = 0  # length of the backtick run that opened the code span
        self._close_ticks = 0  # backticks seen inside the code span, not yet known to close it
        self._row = False  # this line is a table row
        self._row_separator = False  # a cell separator is owed before the next text in the row
        self._row_space = False  # a space is owed before the next text in the row
        self._row_text = False  # some text of this row was emitted
        self._fence = ""  # the opening fence run while inside a fenced code block
        self._fence_info = False  # skipping the rest of the opening fence line
        self._fence_line: str | None = None  # the current code line while it may be the closing fence

    @property
    def pending(self) -> int:
        """Characters held back, undecided (bounded by the ``MAX_*`` constants)."""
        return len(self._prefix) + len(self._held)

    def feed(self, fragment: str) -> str:
        """Consume ``fragment``; return the clean text decided so far (possibly ``""``)."""
        return self.feed_sourced(fragment)[0]

    def feed_sourced(self, fragment: str) -> tuple[str, list[int]]:
        """:meth:`feed`, with the source of each character returned: its index in the text read since the
        last :meth:`flush` (all fragments together), in code points (PROTOCOL.md §14.4).

        A character of the input that is kept is sourced at its own index; a character the stripper adds
        (the ``", "`` between table cells, the line break of a block tag or a closing fence) at the index
        of the input character that made it. The sources are carried through every rule, never searched
        for afterwards; they are not increasing where a held construct is replayed (never backwards past
        the text already returned).

        Raises:
            TypeError: ``fragment`` is not a string.
        """
        if not isinstance(fragment, str):
            raise TypeError(f"fragment must be a str, not {type(fragment).__name__}")
        for char in fragment:
            self._pos = self._count
            self._count += 1
            self._char(char)
        return self._take()

    def flush(self) -> str:
        """End the text: return the text still held (see the class docstring) and reset."""
        return self.flush_sourced()[0]

    def flush_sourced(self) -> tuple[str, list[int]]:
        """:meth:`flush`, with each character's source as :meth:`feed_sourced` gives it."""
        self._pos = max(self._count - 1, 0)  # what the end of the text adds is sourced at its last character
        if self._fence:
            pass  # an unclosed code block: nothing of it is spoken
        elif self._line_start:
            if self._prefix:
                self._prefix_line_ends(at_end=True)
        else:
            self._resolve(None)
        out = self._take()
        self._reset()
        return out

    def _take(self) -> tuple[str, list[int]]:
        out, sources = "".join(self._out), self._sources
        self._out, self._sources = [], []
        return out, sources

    # --- output -------------------------------------------------------------------------------------

    def _emit(self, text: str, at: int | None = None) -> None:
        """Output ``text``: input characters from index ``at`` on, or (``None``) text the stripper adds,
        sourced at the character being read."""
        self._out.append(text)
        self._sources.extend(range(at, at + len(text)) if at is not None else [self._pos] * len(text))
        self._prev = text[-1]

    def _replay(self, text: str, at: int) -> None:
        """Read again, inline, held characters that were input from index ``at`` on."""
        pos = self._pos
        for offset, char in enumerate(text):
            self._pos = at + offset
            self._inline(char)
        self._pos = pos

    # --- lines --------------------------------------------------------------------------------------

    def _char(self, char: str) -> None:
        if self._fence:
            self._fenced(char)
            return
        if self._line_start:
            if char in NEWLINES:
                self._prefix_line_ends(at_end=False)
                return
            if char in _PREFIX_CHARS and len(self._prefix) < MAX_LINE_PREFIX_CHARS:
                if not self._prefix:
                    self._prefix_at = self._pos
                self._prefix += char
                return
            if self._line_begins(char):
                return
        self._inline(char)

    def _line_begins(self, char: str) -> bool:
        """Classify the held line prefix now that ``char`` (not a marker character) follows it.

        Returns True when ``char`` was consumed (it belongs to a fence's info string).
        """
        prefix, self._prefix, self._line_start = self._prefix, "", False
        rest = prefix.lstrip(" \t>")
        if fence := _FENCE.match(rest):
            self._open_fence(fence.group(1))
            self._fence_info = True
            return True
        if match := _HEADING.match(rest) or _BULLET.match(rest):
            rest = rest[match.end() :].lstrip(" \t")
        elif rest.startswith("|"):
            self._row = True
            rest = rest[1:]
        self._replay(rest, self._prefix_at + len(prefix) - len(rest))
        return False

    def _prefix_line_ends(self, *, at_end: bool) -> None:
        """A line (or the text) ended while it held only marker characters."""
        prefix, self._prefix = self._prefix, ""
        lead = prefix.lstrip(" \t>")
        rest = lead.rstrip(" \t")
        if not at_end and (fence := _FENCE.fullmatch(rest)):
            self._open_fence(fence.group(1))
            return
        if rest and not (_is_rule(rest) or _is_empty_item(rest) or rest.startswith("|")):
            self._line_start = False
            self._replay(rest, self._prefix_at + len(prefix) - len(lead))
            if at_end:
                self._resolve(None)
                return
            self._inline("\n")
            return
        if not at_end:
            self._emit("\n")

    def _open_fence(self, run: str) -> None:
        self._fence = run
        self._fence_info = False
        self._fence_line = ""

    def _fenced(self, char: str) -> None:
        """Inside a fenced code block: skip everything, watching each line for the closing fence."""
        if char in NEWLINES:
            line, self._fence_line = self._fence_line, ""
            if self._fence_info:
                self._fence_info = False
            elif line is not None and _closes_fence(line, self._fence):
                self._fence = ""
                self._line_start = True
                self._emit("\n")
            return
        if self._fence_info or self._fence_line is None:
            return
        if char in " \t>" or char == self._fence[0]:
            self._fence_line = (
                self._fence_line + char if len(self._fence_line) < MAX_LINE_PREFIX_CHARS else None
            )
        else:
            self._fence_line = None

    def _newline(self, char: str) -> None:
        self._row = self._row_separator = self._row_space = self._row_text = False
        self._emit("\n")
        self._line_start = True

    # --- inline -------------------------------------------------------------------------------------

    def _inline(self, char: str) -> None:
        mode = self._mode
        if mode == "text":
            self._text(char)
        elif mode == "emphasis":
            if char == self._held[0]:
                self._held += char
                return
            self._end_emphasis(char)
            self._text(char)
        elif mode == "ticks":
            if char == "`":
                self._held += char
                return
            self._mode, self._code_ticks, self._close_ticks, self._held = "code", len(self._held), 0, ""
            self._code(char)
        elif mode == "code":
            self._code(char)
        elif mode == "bracket":
            self._bracket(char)
        elif mode == "after_bracket":
            self._after_bracket(char)
        elif mode == "target":
            self._target(char)
        elif mode == "bang":
            self._mode = "text"
            if char == "[":
                self._mode, self._held, self._held_at = "bracket", "", self._pos + 1  # an image: "!" dropped
                return
            self._text_char("!", self._held_at)
            self._text(char)
        elif mode == "escape":
            self._mode = "text"
            if char.isascii() and not char.isalnum() and not char.isspace():
                self._text_char(char, self._pos)  # escaped punctuation is text, never a marker
                return
            self._text_char("\\", self._held_at)
            self._text(char)
        else:
            self._tag(char)

    def _resolve(self, char: str | None) -> None:
        """End the current inline mode at a line end (``char``) or the end of the text (``None``)."""
        mode, held = self._mode, self._held
        self._mode, self._held = "text", ""
        if mode == "emphasis":
            self._held = held
            self._end_emphasis(char)
            self._held = ""
        elif mode == "bracket":
            self._text_chars(held, self._held_at)
        elif mode == "after_bracket":
            pass  # a citation or task box at a line end is dropped with its content
        elif mode == "target":
            if char is not None:
                self._text_chars(held, self._held_at)  # whitespace in a target: it was not one
        elif mode == "bang":
            self._text_char("!", self._held_at)
        elif mode == "escape":
            self._text_char("\\", self._held_at)
        elif mode == "tag":
            self._text_chars(held, self._held_at)
        # ticks: an opening run at a line end opens nothing; code: the line end closes the span

    def _text(self, char: str) -> None:
        if char in NEWLINES:
            self._resolve(char)
            self._newline(char)
            return
        if self._row:
            if char == "|":
                self._row_separator = self._row_text
                self._row_space = False
                self._prev = " "
                return
            if char == " " or char == "\t":
                self._row_space = True
                self._prev = " "
                return
        self._held_at = self._pos + (char == "[")
        if char in _EMPHASIS:
            self._mode, self._held = "emphasis", char
        elif char == "`":
            self._mode, self._held = "ticks", char
        elif char == "[":
            self._mode, self._held = "bracket", ""
        elif char == "]":
            self._mode, self._held, self._droppable = "after_bracket", "", False
        elif char == "!":
            self._mode = "bang"
        elif char == "\\":
            self._mode = "escape"
        elif char == "<":
            self._mode, self._held = "tag", char
        else:
            self._text_char(char, self._pos)

    def _text_char(self, char: str, at: int) -> None:
        """Emit one character of text, input at index ``at``, with the table-row spacing owed before it."""
        if self._row:
            if char == " " or char == "\t":
                self._row_space = True
                self._prev = " "
                return
            if self._row_separator:
                self._emit(", ")
            elif self._row_space:
                self._emit(" ")
            self._row_separator = self._row_space = False
            self._row_text = True
        self._emit(char, at)

    def _text_chars(self, text: str, at: int) -> None:
        for offset, char in enumerate(text):
            self._text_char(char, at + offset)

    def _end_emphasis(self, char: str | None) -> None:
        run, self._held, self._mode = self._held, "", "text"
        before_space = self._prev.isspace()
        if char is not None and (
            (self._prev.isalnum() and char.isalnum())  # inside a word: snake_case, 2*3
            or run == "~"  # a single tilde: ~5
            or (before_space and char.isspace() and char not in NEWLINES)  # a * b
        ):
            self._text_chars(run, self._held_at)
        elif char is None and run == "~":
            self._text_char(run, self._held_at)

    def _code(self, char: str) -> None:
        if char == "`":
            self._close_ticks += 1
            return
        ticks, self._close_ticks = self._close_ticks, 0
        if ticks == self._code_ticks:
            self._mode = "text"
            self._text(char)
            return
        if char in NEWLINES:
            self._mode = "text"  # a span ends with its line; a stray backtick is just dropped
            self._text(char)
            return
        self._text_chars("`" * ticks + char, self._pos - ticks)  # a run of another length is content

    def _bracket(self, char: str) -> None:
        held = self._held
        if char == "]":
            self._droppable = _CITATION.fullmatch(held) is not None
            if not self._droppable:
                self._text_chars(held, self._held_at)
                held = ""
            self._mode, self._held = "after_bracket", held
            return
        if char in _BRACKET_CONTENT and len(held) < _MAX_BRACKET_CHARS:
            self._held += char
            return
        self._mode, self._held = "text", ""
        self._text_chars(held, self._held_at)
        self._text(char)

    def _after_bracket(self, char: str) -> None:
        held, droppable = self._held, self._droppable
        self._mode, self._held, self._droppable = "text", "", False
        if char == "(":
            if droppable:
                self._text_chars(held, self._held_at)  # "[1](url)" is a link whose text is 1
            self._mode, self._held, self._target_depth, self._held_at = "target", "(", 0, self._pos
            return
        self._text(char)  # a citation or task box: dropped with its content

    def _target(self, char: str) -> None:
        if char == ")" and not self._target_depth:
            self._mode, self._held = "text", ""
            return
        if char.isspace() or len(self._held) >= MAX_LINK_TARGET_CHARS:
            held, self._mode, self._held = self._held, "text", ""
            self._text_chars(held, self._held_at)  # not a link target after all: keep it as text
            self._text(char)
            return
        self._target_depth += (char == "(") - (char == ")")
        self._held += char

    def _tag(self, char: str) -> None:
        held = self._held
        if len(held) == 1 and not (char.isascii() and (char.isalpha() or char == "/")):
            self._mode, self._held = "text", ""
            self._text_char("<", self._held_at)  # "x < y", "<=": text
            self._text(char)
            return
        if char == ">":
            self._mode, self._held = "text", ""
            self._end_tag(held + char)
            return
        if char in NEWLINES or char == "<" or len(held) >= MAX_HTML_TAG_CHARS:
            self._mode, self._held = "text", ""
            self._text_chars(held, self._held_at)
            self._text(char)
            return
        self._held += char

    def _end_tag(self, tag: str) -> None:
        if autolink := _AUTOLINK.fullmatch(tag):
            self._text_chars(autolink.group(1), self._held_at + autolink.start(1))
            return
        match = _HTML_TAG.fullmatch(tag)
        name = match.group(1).lower() if match else ""
        if name in _HTML_BLOCK:
            self._emit("\n")
            self._row_separator = self._row_space = self._row_text = False
        elif name not in _HTML_INLINE:
            self._text_chars(tag, self._held_at)


def _is_rule(line: str) -> bool:
    """A thematic break, setext underline or table delimiter row (``line`` has no outer spaces)."""
    marks = line.replace(" ", "").replace("\t", "")
    if len(marks) >= 3 and marks[0] in "-*_=" and marks == marks[0] * len(marks):
        return True
    return "|" in marks and "-" in marks and not marks.strip("|-:")


def _is_empty_item(line: str) -> bool:
    return line in ("-", "*", "+") or (line.startswith("#") and len(line) <= 6 and line == "#" * len(line))


def _closes_fence(line: str, fence: str) -> bool:
    run = line.lstrip(" \t>").rstrip(" \t")
    return len(run) >= len(fence) and run == fence[0] * len(run)


def strip_markdown(text: str) -> str:
    """Return ``text`` without its markdown syntax (rules in the module docstring)."""
    stripper = MarkdownStripper()
    return stripper.feed(text) + stripper.flush()

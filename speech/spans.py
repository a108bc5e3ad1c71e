"""Where spoken text comes from in the text a client wrote (PROTOCOL.md §14.4, text spans).

The front-end rewrites a text before it is spoken: markdown goes (:mod:`speech.markdown`), whitespace is
collapsed (:mod:`speech.chunker`), figures become words (:mod:`speech.normalization`). A
:class:`SourceMap` says, for each character of a spoken text, which characters of the original it reads,
so that a word timing can point into the text the user sees. Each stage carries the map through its own
rewrite:

- the markdown stripper sources every output character at the input character it came from (or, for
  what it adds, the character that made it): :meth:`speech.markdown.MarkdownStripper.feed_sourced`;
- the chunker only collapses whitespace, so the characters that are not whitespace of its chunks are
  those of its input, one to one and in order (:class:`NonSpaceSources` walks them);
- normalization returns ``(written, spoken)`` pairs: a spoken part that equals its written part maps
  character to character, a rewritten one (``$12.50`` → ``twelve dollars and fifty cents``) maps every
  character to the whole written token (:func:`normalized`).

Positions are indices of code points (Python ``str`` indices), half-open ``[start, end)``: an emoji
outside the Basic Multilingual Plane is one position, not two UTF-16 units. Whitespace of a spoken text
reads nothing: its source is empty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["NonSpaceSources", "SourceMap", "normalized"]


@dataclass(frozen=True, slots=True)
class SourceMap:
    """A spoken text and, for each of its characters, the half-open range of the original it reads.

    Attributes:
        text: the spoken text.
        starts, ends: ``len(text)`` indices into the original text (code points); a whitespace character
            reads nothing (``start == end``).

    Raises:
        ValueError: ``starts`` or ``ends`` is not one entry per character, or a range is reversed.
    """

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.starts) != len(self.text) or len(self.ends) != len(self.text):
            raise ValueError(f"{len(self.starts)}/{len(self.ends)} sources for {len(self.text)} characters")
        if any(s > e for s, e in zip(self.starts, self.ends, strict=True)):
            raise ValueError("a source range starts after it ends")

    @classmethod
    def identity(cls, text: str, offset: int = 0) -> SourceMap:
        """``text`` as written, at ``offset`` in the original."""
        starts = tuple(range(offset, offset + len(text)))
        ends = tuple(s if char.isspace() else s + 1 for s, char in zip(starts, text, strict=True))
        return cls(text, starts, ends)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The range of the original that ``text[start:end]`` reads: from the first source of its
        characters that are not whitespace to the last one's end; an empty range at the next source
        when they are all whitespace.

        Where two adjacent characters of ``text`` read characters that are not adjacent in the original,
        something the front-end removed lies between them (markup: ``notes](url)!``, ``bold**,``). The
        span then keeps the runs from the first to the last that reads a letter or digit and leaves out
        runs of punctuation beyond them, so that it holds no markup around the word (PROTOCOL.md §14.4,
        R14.4-4). Characters separated by whitespace of ``text`` (``5 €``) stay in one run.

        Raises:
            ValueError: ``0 <= start <= end <= len(text)`` does not hold.
        """
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"[{start}, {end}) is not inside {len(self.text)} characters")
        read = [i for i in range(start, end) if self.starts[i] < self.ends[i]]
        if not read:
            at = self.starts[start] if start < len(self.text) else (self.ends[-1] if self.text else 0)
            return at, at
        runs: list[list[int]] = []  # [first source, end, reads a letter or digit]
        for previous, i in zip([None, *read], read, strict=False):
            wordy = int(self.text[i].isalnum())
            # Whitespace between two characters here (it reads nothing) is a gap of the text, not markup.
            if runs and (self.starts[i] <= runs[-1][1] or (previous is not None and i > previous + 1)):
                run = runs[-1]
                run[0], run[1] = min(run[0], self.starts[i]), max(run[1], self.ends[i])
                run[2] |= wordy
            else:
                runs.append([self.starts[i], self.ends[i], wordy])
        wordy_runs = [n for n, run in enumerate(runs) if run[2]]
        kept = runs[wordy_runs[0] : wordy_runs[-1] + 1] if wordy_runs else runs
        return min(run[0] for run in kept), max(run[1] for run in kept)

    def shifted(self, offset: int) -> SourceMap:
        """The same map into a text that has ``offset`` more characters in front."""
        if not offset:
            return self
        return SourceMap(
            self.text, tuple(s + offset for s in self.starts), tuple(e + offset for e in self.ends)
        )

    def slice(self, start: int, end: int) -> SourceMap:
        """The map of ``text[start:end]``."""
        return SourceMap(self.text[start:end], self.starts[start:end], self.ends[start:end])

    def strip(self) -> SourceMap:
        """The map of ``text.strip()``."""
        start = len(self.text) - len(self.text.lstrip())
        return self.slice(start, start + len(self.text.strip()))

    def parts(self, parts: Sequence[str]) -> list[SourceMap]:
        """The maps of ``parts``, texts that cover this one's characters that are not whitespace in order,
        whitespace apart (a sentence splitter's sentences, a segmenter's segments).

        Raises:
            ValueError: the parts do not cover the text so.
        """
        maps = []
        position = 0
        for part in parts:
            starts: list[int] = []
            ends: list[int] = []
            for char in part:
                if char.isspace():
                    at = self.starts[position] if position < len(self.text) else self._end()
                    starts.append(at)
                    ends.append(at)
                    continue
                while position < len(self.text) and self.text[position].isspace():
                    position += 1
                if position >= len(self.text) or self.text[position] != char:
                    raise ValueError("the parts do not cover the text in order")
                starts.append(self.starts[position])
                ends.append(self.ends[position])
                position += 1
            maps.append(SourceMap(part, tuple(starts), tuple(ends)))
        return maps

    def _end(self) -> int:
        return max(self.ends) if self.ends else 0


class NonSpaceSources:
    """The sources of a stream of text's characters that are not whitespace, consumed in order.

    A stage that only collapses or cuts at whitespace (the sentence chunker) hands out those characters
    one to one and in order; :meth:`map` gives a chunk of its output their sources.
    """

    def __init__(self) -> None:
        self._sources: deque[int] = deque()
        self._last = 0

    def add(self, text: str, sources: Iterable[int]) -> None:
        """Append ``text``'s characters that are not whitespace, each with its source index."""
        self._sources.extend(source for char, source in zip(text, sources, strict=True) if not char.isspace())

    def map(self, chunk: str) -> SourceMap:
        """The map of ``chunk``: its characters that are not whitespace take the next sources; a
        whitespace character reads nothing. A chunk longer than the sources added (which the stages'
        contract rules out) takes the last source for the rest rather than failing a request."""
        starts: list[int] = []
        ends: list[int] = []
        for char in chunk:
            if char.isspace():
                at = self._sources[0] if self._sources else self._last + 1
                starts.append(at)
                ends.append(at)
                continue
            if self._sources:
                self._last = self._sources.popleft()
            starts.append(self._last)
            ends.append(self._last + 1)
        return SourceMap(chunk, tuple(starts), tuple(ends))

    def clear(self) -> None:
        """Forget what is held (the text ended)."""
        self._sources.clear()
        self._last = 0


def normalized(pairs: Sequence[tuple[str, str]], written: SourceMap) -> SourceMap:
    """The map of the spoken text of normalization's ``(written, spoken)`` pairs, whitespace collapsed
    as :func:`speech.normalization.normalize_text` collapses it.

    ``written`` is the map of the pairs' written parts joined. A pair spoken as written maps character
    to character; a rewritten pair maps every spoken character to the whole written token (the word
    "dollars" of ``$12.50`` reads ``$12.50``, §14.4).

    Raises:
        ValueError: the written parts are not ``written.text``.
    """
    if "".join(w for w, _ in pairs) != written.text:
        raise ValueError("the written parts are not the map's text")
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for text, spoken in pairs:
        if spoken == text:
            chars += spoken
            starts += written.starts[position : position + len(text)]
            ends += written.ends[position : position + len(text)]
        else:
            start, end = written.span(position, position + len(text))
            chars += spoken
            starts += [start] * len(spoken)
            ends += [end] * len(spoken)
        position += len(text)
    # Collapse whitespace: runs to one space, none at the edges (as " ".join(text.split())).
    out_chars: list[str] = []
    out_starts: list[int] = []
    out_ends: list[int] = []
    space = False
    for char, start, end in zip(chars, starts, ends, strict=True):
        if char.isspace():
            space = bool(out_chars)
            continue
        if space:
            out_chars.append(" ")
            out_starts.append(start)
            out_ends.append(start)
            space = False
        out_chars.append(char)
        out_starts.append(start)
        out_ends.append(end)
    return SourceMap("".join(out_chars), tuple(out_starts), tuple(out_ends))

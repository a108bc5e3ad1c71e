"""The text front-end: what a language model writes, turned into what a voice should say (PROTOCOL.md §14.2).

One streaming object, :class:`SpeechFrontend`, chains three stages, each of them sans-I/O and incremental:

1. markdown removal (:mod:`speech.markdown`): syntax dropped, block structure kept as line breaks;
2. sentence chunking (:mod:`speech.chunker`): a chunk goes out as soon as its end is certain, per the
   language's punctuation (``。！？`` in CJK, the danda in Hindi, ``¿ ¡`` and ``« »`` around sentences);
   every line break ends a chunk;
3. normalization for speech (:mod:`speech.normalization`): numbers, currency, dates, times, units,
   symbols, addresses and emoji of each chunk rewritten for the language's G2P.

Text goes in as fragments of any size (an LLM's deltas, or a whole request at once); :class:`Piece`
objects come out, each a chunk ready for G2P. The reference agent runs stages 1-2 (it sends sentences to
the TTS, which normalizes); the reference server runs all three on a request's text.

What is spoken (the contract the tests check as properties): let ``clean`` be the markdown stage's output
for the text (with ``markdown=False``, the text itself). The chunks cover ``clean`` exactly, whitespace
collapsed (:mod:`speech.chunker`); each piece's ``text`` is :func:`~speech.normalization.normalize_text`
of its chunk, and pieces whose text has no letter or digit left (an emoji alone, ``...``) are dropped. So
every letter and digit of ``clean`` is spoken, as written or as part of a normalized figure, address or
abbreviation; and the output does not depend on how the text was cut into fragments.

Cost: linear in the text's length, however fragmented (each stage is; measured in ``bench``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from protocol.voices import language_code
from speech.chunker import DEFAULT_MAX_CHUNK_CHARS, Chunk, IncrementalSentenceChunker
from speech.normalization import normalize_spans, normalize_text
from speech.spans import SourceMap, normalized

__all__ = ["SLICE_CHARS", "Piece", "SpeechFrontend", "speech_pieces", "speech_text"]

SLICE_CHARS = 512
"""Characters :func:`speech_pieces` feeds at a time, so the first piece is ready before a long text is
read through (the pieces do not depend on it: the front-end is fragmentation-invariant)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of speech, in order.

    Attributes:
        text: what to synthesize: the chunk normalized for the language's G2P, single-spaced, with at
            least one letter or digit.
        written: the same chunk as written, markdown removed and whitespace collapsed (for display, logs
            and word alignment).
        hard_break: the piece ends at a line break or block edge (heading, list item, table row,
            paragraph) rather than at a sentence end inside a line, a length cut or the end of the text;
            a synthesizer may pause longer after it.
        source: with ``sourced=True``, where each character of ``text`` is in the text fed since it began
            (code points, :mod:`speech.spans`): carried through markdown, whitespace and normalization.
    """

    text: str
    written: str
    hard_break: bool
    source: SourceMap | None = None


class SpeechFrontend:
    """Streaming LLM text → :class:`Piece` objects to synthesize, for one language.

    ``feed(fragment)`` returns the pieces that became certain (often ``[]``); ``flush()`` ends the text,
    returns the rest and resets, so one front-end serves many texts in turn.

    Args:
        language: a Kokoro language code (``"a"``, ``"b"``, ``"e"``, ``"f"``, ``"h"``, ``"i"``, ``"j"``,
            ``"p"``, ``"z"``: a voice's first letter), or a BCP 47 / ISO 639 tag (``"en-GB"``, ``"fr"``).
            Another language gets generic rules: markdown, sentence chunking by sentencex's generic rules,
            emoji and addresses.
        markdown: remove markdown syntax (:mod:`speech.markdown`). Off for plain text in which ``*``,
            ``_``, ``#`` or ``[`` are words.
        normalize: rewrite figures, symbols and emoji for speech (:mod:`speech.normalization`). Off
            when the synthesizer normalizes itself (the reference agent leaves it to the TTS server).
        max_chunk_chars: the chunker's cap on a chunk as written (:data:`DEFAULT_MAX_CHUNK_CHARS`); a
            normalized piece may be longer (figures expand into words).
        sourced: each piece carries its :class:`~speech.spans.SourceMap` (PROTOCOL.md §14.4).

    Raises:
        TypeError: ``language`` is not a string, ``max_chunk_chars`` not an int, a fragment not a string.
        ValueError: ``language`` is empty or ``max_chunk_chars`` < 1.
    """

    def __init__(
        self,
        language: str = "a",
        *,
        markdown: bool = True,
        normalize: bool = True,
        max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
        sourced: bool = False,
    ) -> None:
        self._chunker = IncrementalSentenceChunker(
            language, max_chunk_chars, markdown=markdown, sourced=sourced
        )
        self.language = language
        self.markdown = markdown
        self.normalize = normalize
        self._normalizer_language = language_code(language)

    @property
    def pending(self) -> int:
        """Characters received and not yet returned in a piece (bounded: see :mod:`speech.chunker`)."""
        return self._chunker.pending

    def feed(self, fragment: str) -> list[Piece]:
        """Add ``fragment`` (any size, even one character); return the pieces now certain, in order."""
        return self._pieces(self._chunker.feed_chunks(fragment))

    def flush(self) -> list[Piece]:
        """End the text; return the remaining pieces (usually one or none) and reset."""
        return self._pieces(self._chunker.finish())

    @property
    def held(self) -> str:
        """Text received and not yet returned in a piece, as the chunker holds it (markdown removed,
        whitespace collapsed, not normalized); its last word may be unfinished."""
        return self._chunker.held

    def take(self, count: int) -> Piece | None:
        """The first ``count`` characters of :attr:`held` as a piece now, before its sentence ends
        (:meth:`speech.chunker.IncrementalSentenceChunker.take`); normalized like any piece, ``None``
        when nothing speakable is left.

        Raises:
            ValueError: ``count`` is not inside :attr:`held` or does not end at whitespace.
        """
        pieces = self._pieces([self._chunker.take(count)])
        return pieces[0] if pieces else None

    def _pieces(self, chunks: list[Chunk]) -> list[Piece]:
        pieces = []
        for chunk in chunks:
            source = chunk.source
            if not self.normalize:
                text = chunk.text
            elif source is None:
                text = normalize_text(chunk.text, self._normalizer_language)
            else:
                source = normalized(normalize_spans(chunk.text, self._normalizer_language), source)
                text = source.text
            if any(char.isalnum() for char in text):
                pieces.append(Piece(text, chunk.text, chunk.hard_break, source))
        return pieces


def speech_pieces(
    text: str, language: str = "a", *, markdown: bool = True, sourced: bool = False
) -> Iterator[Piece]:
    """The pieces of a whole text, lazily: the text is fed :data:`SLICE_CHARS` characters at a time;
    ``sourced``: each with its map into ``text`` (:class:`Piece`).

    Raises:
        TypeError, ValueError: as :class:`SpeechFrontend` (when the generator starts).
    """
    frontend = SpeechFrontend(language, markdown=markdown, sourced=sourced)
    for start in range(0, len(text), SLICE_CHARS):
        yield from frontend.feed(text[start : start + SLICE_CHARS])
    yield from frontend.flush()


def speech_text(text: str, language: str = "a", *, markdown: bool = True, normalize: bool = True) -> str:
    """Everything :class:`SpeechFrontend` would speak for ``text``, the pieces joined by single spaces.

    Raises:
        TypeError, ValueError: as :class:`SpeechFrontend`.
    """
    frontend = SpeechFrontend(language, markdown=markdown, normalize=normalize)
    return " ".join(piece.text for piece in frontend.feed(text) + frontend.flush())

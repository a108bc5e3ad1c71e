"""Text → phoneme segments that Kokoro can speak in one pass (both backends use this).

1. **Sentences.** :class:`protocol.chunker.IncrementalSentenceChunker` cuts the text into sentences of
   at most ``max_chunk_chars`` characters (``feed`` the whole text, then ``flush``). Markdown stripping
   is off: a request's text is plain text, where ``*`` or ``_`` may be words (PROTOCOL.md §4.1).
2. **G2P.** espeak-ng through ``phonemizer``, called exactly as ``kokoro-onnx`` 0.6.1 calls it
   (``preserve_punctuation=True, with_stress=True``, output filtered to the model's vocabulary), but on
   the list of a sentence's words instead of the whole sentence, so each word's phonemes are known:
   that is what word timestamps need (:class:`PhonemeSegment.words`). en-us for American voices,
   en-gb for British ones.
3. **Token guard.** A segment is at most :data:`MAX_TOKENS` phoneme tokens, Kokoro's single-pass limit
   (512 positions less the two boundary tokens; ``kokoro.KModel`` asserts it and ``kokoro-onnx`` raises).
   The chunker's character cap keeps ordinary English far below it; a sentence whose phonemes still
   exceed it (digits expand: "1500" is four words) is re-split at the last clause mark that fits, else
   at the last word boundary, else (one word longer than the limit) inside the word.

espeak-ng keeps process-wide state, so G2P calls are serialized by one lock for the whole process;
synthesis itself runs outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from protocol.chunker import DEFAULT_MAX_CHUNK_CHARS, IncrementalSentenceChunker

__all__ = ["MAX_TOKENS", "EspeakPhonemizer", "PhonemeSegment", "PhonemizedWord", "espeak_language"]

MAX_TOKENS = 510
"""Most phoneme tokens Kokoro-82M takes in one pass (``KModel.context_length`` 512 minus 2 pads)."""

_CLAUSE_MARKS = (",", ";", ":", "—", "–", "…")
# espeak-ng is one process-wide engine; phonemizer drives it through module-level state.
_ESPEAK_LOCK = threading.Lock()


def espeak_language(voice: str) -> str:
    """The espeak-ng language for a Kokoro voice: ``en-gb`` for British (``b…``), else ``en-us``."""
    return "en-gb" if voice.startswith("b") else "en-us"


@dataclass(frozen=True, slots=True)
class PhonemizedWord:
    """One whitespace-separated word as written and its phonemes (vocabulary symbols only; may be empty)."""

    text: str
    phonemes: str


@dataclass(frozen=True, slots=True)
class PhonemeSegment:
    """Text Kokoro speaks in one pass.

    Attributes:
        text: the segment's text (whitespace-normalized).
        words: its words in order with their phonemes.
    """

    text: str
    words: tuple[PhonemizedWord, ...]

    @property
    def phonemes(self) -> str:
        """The model input: the words' phonemes joined by single spaces (each character is one token)."""
        return " ".join(word.phonemes for word in self.words if word.phonemes)

    @property
    def token_count(self) -> int:
        """Number of phoneme tokens; at most :data:`MAX_TOKENS` in segments that ``segments()`` yields."""
        return len(self.phonemes)


class EspeakPhonemizer:
    """espeak-ng G2P for Kokoro, word by word, and the cutting of texts into :class:`PhonemeSegment`.

    Args:
        vocab: Kokoro's phoneme vocabulary (symbol → token id); phonemes outside it are dropped, as
            ``kokoro-onnx`` and ``kokoro.KModel`` both do.
        max_chunk_chars: the sentence chunker's character cap.

    Construction points phonemizer at the espeak-ng library and data that the ``espeakng-loader``
    wheel ships, through ``kokoro_onnx.tokenizer.Tokenizer`` (which also honours
    ``PHONEMIZER_ESPEAK_LIBRARY`` and falls back to a system espeak-ng).
    """

    def __init__(self, vocab: Mapping[str, int], *, max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS) -> None:
        from kokoro_onnx.tokenizer import Tokenizer

        Tokenizer(vocab=dict(vocab))  # configures phonemizer's espeak-ng wrapper (library + data path)
        self.vocab = frozenset(vocab)
        self.max_chunk_chars = max_chunk_chars

    def words(self, text: str, language: str) -> list[PhonemizedWord]:
        """Phonemize each whitespace-separated word of ``text``.

        Raises:
            RuntimeError: espeak-ng failed (phonemizer's errors pass through).
        """
        import phonemizer

        written = text.split()
        if not written:
            return []
        with _ESPEAK_LOCK:
            spoken = phonemizer.phonemize(written, language, preserve_punctuation=True, with_stress=True)
        return [
            PhonemizedWord(word, "".join(symbol for symbol in phonemes if symbol in self.vocab).strip())
            for word, phonemes in zip(written, spoken, strict=True)
        ]

    def segments(self, text: str, language: str) -> Iterator[PhonemeSegment]:
        """Cut ``text`` into segments of at most :data:`MAX_TOKENS` tokens, lazily, sentence by sentence.

        Segments without any phoneme (punctuation only) are skipped.
        """
        chunker = IncrementalSentenceChunker("en", self.max_chunk_chars, markdown=False)
        sentences = chunker.feed(text)
        last = chunker.flush()
        if last is not None:
            sentences.append(last)
        for sentence in sentences:
            words = self.words(sentence, language)
            for part in _fit(words):
                segment = PhonemeSegment(" ".join(word.text for word in part), tuple(part))
                if segment.token_count:
                    yield segment


def _tokens(words: list[PhonemizedWord]) -> int:
    return len(" ".join(word.phonemes for word in words if word.phonemes))


def _fit(words: list[PhonemizedWord]) -> Iterator[list[PhonemizedWord]]:
    """Split a sentence's words into runs of at most :data:`MAX_TOKENS` tokens (module docstring, step 3)."""
    while _tokens(words) > MAX_TOKENS:
        fitting = 0
        while fitting < len(words) and _tokens(words[: fitting + 1]) <= MAX_TOKENS:
            fitting += 1
        if fitting == 0:  # a single word longer than the limit: cut inside its phonemes
            head, rest = words[0], words[1:]
            yield [PhonemizedWord(head.text, head.phonemes[:MAX_TOKENS])]
            words = [PhonemizedWord("", head.phonemes[MAX_TOKENS:]), *rest]
            continue
        clause = [i + 1 for i in range(fitting) if words[i].text.endswith(_CLAUSE_MARKS)]
        cut = clause[-1] if clause else fitting
        yield words[:cut]
        words = words[cut:]
    if words:
        yield words

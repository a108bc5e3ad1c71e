"""What a synthesis backend is: the interface the server's runtime drives (PROTOCOL.md §5.2, §5.3, §14.1).

A backend turns one request's text into a sequence of :class:`Segment`, each the audio of a piece of
text Kokoro speaks in one pass (:mod:`reference_server.backends.g2p`). :meth:`Backend.synthesize`
returns a generator, so the caller can send each segment as soon as it exists and stop between
segments (cancel, disconnect: PROTOCOL.md §4.2, §7.4) by closing it.

Both backends run Kokoro's duration predictor and return each phoneme token's length in frames with the
audio; :func:`word_timings` turns those into each word's start and end, the same way on both.
"""

from __future__ import annotations

import abc
import contextlib
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from protocol.lexicon import Lexicon
from protocol.messages import Word
from protocol.voices import (
    DEFAULT_VOICE,
    KOKORO_VOICES,
    VOICE_LANGUAGE,
    InvalidVoiceError,
    Language,
    Voice,
    is_blend,
    language_of,
)
from reference_server.backends.g2p import WARM_UP_TEXTS, PhonemeSegment, Phonemizer, available_languages

__all__ = [
    "ENGLISH_VOICES",
    "FRAME_SAMPLES",
    "LEAD_IN_ERROR_BOUND",
    "SAMPLE_RATE",
    "AbortSignal",
    "Alignment",
    "Backend",
    "BackendNotLoadedError",
    "PassAborted",
    "Segment",
    "UnknownVoiceError",
    "aborting",
    "current_abort",
    "installed_voices",
    "lead_in_frames",
    "word_timings",
]

SAMPLE_RATE = 24_000
"""Kokoro-82M's output rate in Hz."""

FRAME_SAMPLES = 600
"""Samples per duration frame: a token predicted to last ``d`` frames is ``600 * d`` samples (25 ms each)."""

ENGLISH_VOICES: frozenset[str] = frozenset(voice for voice in KOKORO_VOICES if VOICE_LANGUAGE[voice] in "ab")
"""The 28 American (``a…``) and British (``b…``) voices."""

LEAD_IN_ERROR_BOUND = 0.002
"""Largest magnitude of Kokoro's own samples in a lead-in (:attr:`Alignment.lead_in_samples`), so the
largest difference between the digital silence sent in their place and the one-pass audio: -54 dB below
full scale, 65 in PCM16."""


def lead_in_frames(start_frames: int, speed: float) -> int:
    """Frames at the start of a pass that are silence (to :data:`LEAD_IN_ERROR_BOUND`), from the start
    token's predicted duration ``start_frames`` (frames of :data:`FRAME_SAMPLES` samples).

    The first phoneme's sound starts before the start token's frames end: the F0 and noise predictors
    and the decoder's convolutions smear it back. Measured on the int8 ONNX (4 voices en-US/en-GB,
    11 words, speeds 0.5 to 2), the first sample above 0.002 came at least 59 % of the way into the
    start token's frames at speed >= 0.8 (at least 51 % at 0.8) and at least 37 % at 0.5, so the lead-in
    is taken as 45 % of them (30 % below speed 0.8): 6 to 9 frames (150 to 225 ms) at speed 1.
    """
    share = 0.45 if speed >= 0.8 else 0.3
    return max(0, math.floor(start_frames * share))


MIN_SPEED = 0.5
MAX_SPEED = 2.0


def installed_voices(languages: Iterable[str] | None = None) -> frozenset[str]:
    """The official voices whose language's G2P is installed (all 54 with the ``server`` extra).

    Args:
        languages: language codes to keep; ``None``: those of
            :func:`reference_server.backends.g2p.available_languages`.
    """
    codes = available_languages() if languages is None else frozenset(languages)
    return frozenset(voice for voice in KOKORO_VOICES if VOICE_LANGUAGE[voice] in codes)


class PassAborted(Exception):
    """A model pass stopped before its end because its request's :class:`AbortSignal` was set (a cancel,
    a disconnect: PROTOCOL.md §4.2, §7.4); the pass gives no audio."""


class AbortSignal:
    """Aborts the model pass running for one request, set from any thread (PROTOCOL.md §4.2, §7.4).

    The runtime makes one per request and installs it around each synthesis step with :func:`aborting`;
    a backend reads it with :func:`current_abort` and stops its running pass when it is set: onnxruntime
    through ``RunOptions.terminate`` (a :meth:`hook`), torch between the model's layers (:meth:`check`).
    A backend that reads no signal simply finishes the pass, as before.

    Setting it twice, or before a pass starts, is harmless: the next pass of the request is aborted as it
    starts. :attr:`aborted` counts the passes that stopped this way (for tests and logs).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._hooks: list[Callable[[], None]] = []
        self.aborted = 0

    @property
    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Abort the running pass (if any) and every later one; never blocks on the pass."""
        with self._lock:
            if self._set:
                return
            self._set = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def check(self) -> None:
        """Raise :class:`PassAborted` if the signal is set (a backend calls it between layers).

        Raises:
            PassAborted: :meth:`set` was called.
        """
        if self._set:
            raise self.stopped()

    def stopped(self) -> PassAborted:
        """Count one pass stopped by this signal; the exception for the backend to raise."""
        self.aborted += 1
        return PassAborted("the request was cancelled")

    @contextlib.contextmanager
    def hook(self, action: Callable[[], None]) -> Iterator[None]:
        """Run ``action`` (on the thread that sets the signal) if the signal is set while the block runs;
        at once if it is set already."""
        with self._lock:
            already = self._set
            if not already:
                self._hooks.append(action)
        if already:
            action()
        try:
            yield
        finally:
            with self._lock:
                if action in self._hooks:
                    self._hooks.remove(action)


_current = threading.local()


def current_abort() -> AbortSignal | None:
    """The :class:`AbortSignal` of the request this thread synthesizes now (:func:`aborting`), or
    ``None`` when the pass may not be aborted."""
    return getattr(_current, "signal", None)


@contextlib.contextmanager
def aborting(signal: AbortSignal | None) -> Iterator[None]:
    """Make ``signal`` this thread's :func:`current_abort` while the block runs (``None``: no abort).

    A thread-local rather than an argument, so that every backend method (``synthesize``, ``align``,
    ``decode``) and every stand-in backend keeps its signature; model passes run on the calling thread.
    """
    previous = getattr(_current, "signal", None)
    _current.signal = signal
    try:
        yield
    finally:
        _current.signal = previous


class UnknownVoiceError(ValueError):
    """The voice is not one this backend speaks, nor a valid blend of them; ``voice`` names it."""

    def __init__(self, voice: str, known: frozenset[str], reason: str | None = None) -> None:
        super().__init__(
            reason
            or f"unknown voice {voice!r}; this backend speaks {len(known)} voices (describe lists them)"
        )
        self.voice = voice


class BackendNotLoadedError(RuntimeError):
    """``synthesize`` was called before ``load``."""


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """The audio of one segment of a request's text.

    Attributes:
        text: the text spoken.
        audio: float32 mono samples at :data:`SAMPLE_RATE` Hz, nominally within [-1, 1].
        words: each word's timing in seconds from this segment's first sample, or ``None`` when the
            backend cannot tell (the runtime shifts them onto the request's timeline, §5.3).
        phonemes: the phoneme string the model was given.
    """

    text: str
    audio: np.ndarray
    words: tuple[Word, ...] | None
    phonemes: str


@dataclass(frozen=True, slots=True, eq=False)
class Alignment:
    """One pass whose text side has run (phonemes → each token's duration) and whose audio is not decoded.

    Kokoro-82M is two halves: the text side (ALBERT encoder, duration, F0 and noise predictors) aligns
    the phonemes to frames of :data:`FRAME_SAMPLES` samples; the decoder (iSTFTNet generator) turns the
    aligned features into audio, and costs about 95 % of the pass on a CPU. Once the text side has run,
    the audio's length, the word timings and the length of the lead-in silence are known.

    Attributes:
        segment: the phoneme segment spoken.
        durations: each token's length in frames (``len(segment.phonemes) + 2``); the audio will be
            ``FRAME_SAMPLES * sum(durations)`` samples.
        words: word timings in seconds from the pass's first sample (:func:`word_timings`).
        lead_in_samples: how many samples at the start of the audio are silence (to within
            :data:`LEAD_IN_ERROR_BOUND`): ``FRAME_SAMPLES * lead_in_frames(durations[0], speed)``. They
            may be sent as zeros before :meth:`Backend.decode` has run.
        features: the backend's decoder inputs (opaque).
    """

    segment: PhonemeSegment
    durations: tuple[int, ...]
    words: tuple[Word, ...]
    lead_in_samples: int
    features: Any

    @property
    def samples(self) -> int:
        """The decoded audio's length in samples (at :data:`SAMPLE_RATE`)."""
        return FRAME_SAMPLES * sum(self.durations)

    @classmethod
    def of(cls, segment: PhonemeSegment, durations: Sequence[int], speed: float, features: Any) -> Alignment:
        """An alignment with its word timings and lead-in worked out from ``durations`` (at ``speed``)."""
        durations = tuple(int(d) for d in durations)
        lead_in = FRAME_SAMPLES * lead_in_frames(durations[0], speed) if durations else 0
        return cls(segment, durations, word_timings(segment, durations), lead_in, features)


def word_timings(segment: PhonemeSegment, durations: Sequence[int]) -> tuple[Word, ...]:
    """Each word's start and end, in seconds from the segment's first sample (PROTOCOL.md §5.3, §14.1).

    Args:
        segment: the segment the model spoke; its words carry their spans in ``segment.phonemes``.
        durations: the model's predicted length of each input token in frames of :data:`FRAME_SAMPLES`
            samples: the start token, one per phoneme symbol, the end token (``len(phonemes) + 2``).

    A word starts where its first spoken symbol starts and ends where its last one ends; the pauses of
    punctuation and the spaces between words belong to no word. Times are exact to the frame (25 ms),
    the model's own resolution, and the audio is ``FRAME_SAMPLES * sum(durations)`` samples long.

    Raises:
        ValueError: ``durations`` does not have one entry per token.
    """
    if len(durations) != len(segment.phonemes) + 2:
        raise ValueError(f"{len(durations)} durations for {len(segment.phonemes)} phonemes + 2")
    ends = np.cumsum(np.asarray(durations, dtype=np.int64))  # ends[k]: frames up to the end of token k

    def seconds(frames: int) -> float:
        return (
            int(frames) * FRAME_SAMPLES / SAMPLE_RATE
        )  # one division: 6 frames give 0.15, not 0.15000000000000002

    # Symbol i of the phonemes is token i + 1 (token 0 is the start token).
    return tuple(
        Word(word.text, seconds(ends[word.start]), seconds(ends[word.end]), *(word.source or (None, None)))
        for word in segment.words
    )


class Backend(abc.ABC):
    """A Kokoro-82M synthesizer: ``load()`` once, ``warm_up()`` once, then ``synthesize()`` from any thread.

    Args:
        languages: the language codes to serve; ``None``: every language whose G2P is installed.

    Attributes:
        name: ``"onnx"`` or ``"torch"``.
        sample_rate: always :data:`SAMPLE_RATE`.
        voices: the voice names :meth:`synthesize` accepts: every official voice of the languages served,
            known before loading.
        word_timing_languages: the language codes (PROTOCOL.md §14.1) whose segments carry word timings:
            all of them, since both backends predict durations.
        voice_blends: :meth:`synthesize` also takes a weighted blend of :attr:`voices` (PROTOCOL.md §4.1),
            spoken with the weighted mean of their voice packs (:meth:`resolve_voice`).

    Subclasses implement :meth:`load` and :meth:`_speak`; text cutting, G2P and argument checks are here.
    """

    name: ClassVar[str]
    sample_rate: ClassVar[int] = SAMPLE_RATE
    voice_blends: ClassVar[bool] = True
    aligns: bool = False
    """:meth:`align` and :meth:`decode` work: the text side and the decoder run as two steps (onnx, when
    the ``onnx`` package is installed to split the graph)."""

    def __init__(self, languages: Iterable[str] | None = None) -> None:
        self.languages = available_languages() if languages is None else frozenset(languages)
        self.voices: frozenset[str] = installed_voices(self.languages)
        self.word_timing_languages: frozenset[str] = frozenset(self.languages)
        self._phonemizer: Phonemizer | None = None
        # voice → its pack, [510, 1, 256] float32: a numpy array, or a torch tensor on the device
        self._packs: dict[str, Any] = {}

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model, voices and G2P (seconds; call off the event loop).

        Raises:
            reference_server.assets.AssetError: the verified assets are not in place.
            reference_server.backends.g2p.G2PUnavailableError: a language's G2P cannot load.
        """

    @abc.abstractmethod
    def _speak(self, segment: PhonemeSegment, pack: Any, speed: float) -> tuple[np.ndarray, Sequence[int]]:
        """Run the model on one segment with a voice pack (:meth:`resolve_voice`): float32 samples at
        24 kHz and each token's duration in frames."""

    def resolve_voice(self, voice: str) -> tuple[Any, Language]:
        """The voice pack and language of a voice or a blend of voices (PROTOCOL.md §4.1, §14.1).

        A blend's pack is the weighted mean of its voices' packs, with the canonical weights of
        :meth:`protocol.voices.Voice.parse` (those ``synthesis_start.voice`` states), so a blend sent
        back in its canonical form is the same voice. Its language is its voices' one.

        Args:
            voice: one of :attr:`voices`, or a blend of them (``af_bella(2)+af_sky(1)``).

        Returns:
            ``(pack, language)``: the pack is ``[510, 1, 256]`` float32, a numpy array (onnx) or a tensor
            on the model's device (torch); row ``n - 1`` is the style vector for ``n`` phonemes.

        Raises:
            UnknownVoiceError: ``voice`` is neither a voice of :attr:`voices` nor a valid blend of them.
            BackendNotLoadedError: :meth:`load` has not run.
        """
        blend = self._parse_voice(voice)
        if not self._packs:
            raise BackendNotLoadedError(f"the {self.name} backend is not loaded")
        (first, weight), *rest = blend.parts
        pack = self._packs[first] * float(weight) if rest else self._packs[first]
        for name, weight in rest:
            pack = pack + self._packs[name] * float(weight)
        return pack, language_of(blend)

    def align(
        self, text: str, voice: str, speed: float = 1.0, lexicon: Lexicon | None = None
    ) -> Iterator[Alignment]:
        """Run only the text side of each pass of ``text``: one :class:`Alignment` per pass, in order.

        The same arguments, checks and passes as :meth:`synthesize`; ``decode`` of each alignment gives
        exactly the audio :meth:`synthesize` gives.

        Raises:
            NotImplementedError: :attr:`aligns` is false.
            UnknownVoiceError, ValueError, BackendNotLoadedError: as :meth:`synthesize`.
        """
        if not self.aligns:
            raise NotImplementedError(f"the {self.name} backend does not run the text side alone")
        voice, speed, phonemizer = self._check(voice, speed)
        pack, _ = self.resolve_voice(voice)
        return (self._align(segment, pack, speed) for segment in phonemizer.segments(text, voice, lexicon))

    def _align(self, segment: PhonemeSegment, pack: Any, speed: float) -> Alignment:
        raise NotImplementedError

    def decode(self, alignment: Alignment) -> Segment:
        """Run the decoder on an :class:`Alignment`: the pass's :class:`Segment` (``alignment.samples``
        samples, the word timings of the alignment).

        Raises:
            NotImplementedError: :attr:`aligns` is false.
        """
        raise NotImplementedError(f"the {self.name} backend does not decode alignments")

    def _parse_voice(self, voice: str) -> Voice:
        try:
            return Voice.parse(voice, self.voices)
        except InvalidVoiceError as exc:
            raise UnknownVoiceError(voice, self.voices, str(exc) if is_blend(voice) else None) from None

    def _load_phonemizer(self, config: Path, *, lazy: bool = False) -> None:
        vocab: dict[str, Any] = json.loads(config.read_text(encoding="utf-8"))["vocab"]
        self._phonemizer = Phonemizer(vocab, self.languages, lazy=lazy)

    def warm_up(self) -> None:
        """Synthesize one short sentence, so no client pays for lazy initialisation.

        The model is language-blind; each language's G2P was already run once when it loaded.
        """
        voice = DEFAULT_VOICE if DEFAULT_VOICE in self.voices else min(self.voices)
        for _ in self.synthesize(WARM_UP_TEXTS[Voice.parse(voice).code], voice, 1.0):
            pass

    def synthesize(
        self, text: str, voice: str, speed: float = 1.0, lexicon: Lexicon | None = None
    ) -> Iterator[Segment]:
        """Speak ``text`` in the voice's language: a generator of :class:`Segment`, one per model pass.

        The arguments are checked at once (not on the first ``next``). Closing the generator between
        segments stops the work; a segment already running finishes first, unless the thread runs it
        under :func:`aborting` and the signal is set: then it raises :class:`PassAborted` early.

        Args:
            text: plain text; cut into sentences and then into pieces of at most 510 phoneme tokens.
            voice: one of :attr:`voices`, or a blend of them (§4.1); its first letter is the language
                (§14.1).
            speed: 0.5 to 2.0 (1.0 is the voice's natural rate).
            lexicon: pronunciations of words and the inline forms marked in ``text`` (PROTOCOL.md §14.3,
                :func:`protocol.lexicon.extract_inline`); a pronounced word is one word of the timings,
                with its text as written.

        Raises:
            UnknownVoiceError: ``voice`` is neither in :attr:`voices` nor a valid blend of them.
            ValueError: ``speed`` is not a finite number in [0.5, 2.0].
            BackendNotLoadedError: :meth:`load` has not run.
        """
        voice, speed, phonemizer = self._check(voice, speed)
        return self._segments(phonemizer, text, voice, speed, lexicon)

    def _check(self, voice: str, speed: float) -> tuple[str, float, Phonemizer]:
        voice = str(self._parse_voice(voice))  # canonical: its first letter is its language
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not math.isfinite(speed):
            raise ValueError(f"speed must be a number, not {speed!r}")
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be from {MIN_SPEED} to {MAX_SPEED}, not {speed}")
        phonemizer = self._phonemizer
        if phonemizer is None:
            raise BackendNotLoadedError(f"the {self.name} backend is not loaded")
        return voice, float(speed), phonemizer

    def _segments(
        self, phonemizer: Phonemizer, text: str, voice: str, speed: float, lexicon: Lexicon | None = None
    ) -> Iterator[Segment]:
        pack, _ = self.resolve_voice(voice)
        for segment in phonemizer.segments(text, voice, lexicon):
            audio, durations = self._speak(segment, pack, speed)
            yield Segment(segment.text, audio, word_timings(segment, durations), segment.phonemes)

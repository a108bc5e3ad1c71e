"""The audio of one request, made segment by segment on the runtime's scheduler (PROTOCOL.md §10.1, §14.2).

A :class:`RequestAudio` produces one request's audio, one segment per step of the
:class:`~reference_server.runtime.Runtime`'s :class:`~reference_server.scheduling.DeadlineScheduler`, so
a session can stop between segments (cancel, disconnect) and sessions share the model segment by segment,
the one whose listener runs out of audio first going first (PROTOCOL.md §10.2). A cancel or a disconnect
also aborts the model pass running for the request (:meth:`RequestAudio.close`, ``abort_on_cancel``).

Text (PROTOCOL.md §14.2): the request's text first goes through the text front-end
(:func:`speech.frontend.speech_pieces`, in the voice's language): markdown is not read aloud, figures
and emoji are normalized, and the text comes out in pieces -- sentences, headings, list items, lines --
made as they are asked for. An utterance (:class:`reference_server.utterance.UtteranceAudio`) hands out
the same pieces of its text as they become ready.

Segmentation (§10.1, ``settings.segmentation``):

* ``deadline`` (default): each piece is cut into sentences (:mod:`speech.chunker`; a piece is one
  sentence unless normalization revealed another), and each sentence into segments by
  :class:`speech.segmenter.Segmenter`, one segment per step, as long as the
  step's time budget allows: the audio already queued ahead of the session's listener
  (:class:`~reference_server.scheduling.Listener`), turned into a length by the model-speed estimate
  (:class:`~reference_server.scheduling.ModelSpeed`). A speech's first segment is short so sound
  starts at once; later ones grow as the queue grows. Where a sentence was cut, the silence Kokoro puts
  before and after every pass is trimmed to a pause that fits the boundary (:data:`PAUSE_S`), so the
  sentence sounds as one; word timings are shifted with the audio.
* ``sentence``: the server before §10.1: the backend cuts each piece into sentences itself and each
  sentence is one segment, whatever its length.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from protocol.lexicon import Lexicon, LexiconError, extract_inline, inline_sources, strip_marks
from protocol.logs import log_event
from protocol.messages import SynthesisRequest, Word
from protocol.pcm import StreamResampler, float_to_pcm16
from protocol.voices import LANGUAGES, Voice, language_code
from reference_server.backends.base import AbortSignal, PassAborted, aborting
from reference_server.driver import AudioPiece
from reference_server.runtime import Runtime, piece_sentences
from reference_server.scheduling import Grant, Listener
from speech.frontend import Piece, speech_pieces
from speech.segmenter import Boundary, Segmenter, spoken_units
from speech.spans import SourceMap

__all__ = [
    "FIRST_OVERLOAD",
    "LEAD_S",
    "OVERLOAD",
    "PAUSE_S",
    "WAIT_FOR_TEXT",
    "AudioPiece",
    "OpenText",
    "RequestAudio",
    "SegmentRecord",
    "trim_at_cuts",
]

WAIT_FOR_TEXT = object()
"""What a synthesis step returns when an utterance has spoken all it holds and more text may come."""


@dataclass(frozen=True, slots=True)
class OpenText:
    """The start of a sentence whose rest comes in a later piece: an utterance's text released before its
    sentence ended, because its listener would otherwise run out of audio (PROTOCOL.md §10.1, §15.3).

    Attributes:
        text: the words released (normalized, single-spaced).
        boundary: the kind of cut after them (:meth:`speech.segmenter.Segmenter.early_cut`): the
            segment that ends there keeps the pause of that boundary (:data:`PAUSE_S`), not a sentence's
            trailing silence, and the next piece continues the sentence (no lead-in of a new one).
        source: where each character of ``text`` is in the utterance's text (§14.4), or ``None``.
    """

    text: str
    boundary: Boundary
    source: SourceMap | None = None


logger = logging.getLogger("reference_server")

LEAD_S = 0.04
"""Seconds of Kokoro's lead-in silence kept before a segment that continues a cut sentence (the rest,
about 0.3 s, is trimmed: it would be heard as a pause inside the sentence). Kept, not zero: a soft onset
("f", "h") can sit below the silence threshold."""

PAUSE_S = {
    Boundary.CLAUSE: 0.2,
    Boundary.CONJUNCTION: 0.2,
    Boundary.PREPOSITION: 0.03,
    Boundary.WORD: 0.01,
    Boundary.WEAK: 0.01,
}
"""Seconds of trailing silence kept after a segment that ends where a sentence was cut, by boundary
(Kokoro's own trailing silence, about 0.5 s, is trimmed). With :data:`LEAD_S` this is the gap the listener
hears at the cut. Measured on the int8 ONNX (en-US, af_heart), a whole sentence pauses 120-380 ms at a
comma or before "and", 20-90 ms between other words where it pauses at all, so a cut sounds like the
pause Kokoro itself would make there: about 0.24 s at a clause or a conjunction, 0.05-0.07 s elsewhere."""

OVERLOAD = 0.8
"""Share of the model the waiting listeners need (``ModelSpeed.demand``) from which a segment that cannot
fit is no longer cut short: under overload every cut adds a pass of Kokoro's lead-in and trailing
silence (about 0.8 s of audio to compute) and the listener waits longer in all (simulated with
bench/paced.py: 3 listeners at 2x real time wait 9.4 s cutting short, 8.3 s not)."""

FIRST_OVERLOAD = 1.2
"""The same for a listener with nothing queued that has heard something before (a reply after a pause, or
a listener that ran dry; a session's very first segment is always short, so sound starts at once): a
short first segment buys the segments after it time, so it is given up only when the model plainly
cannot keep up (simulated on bench/paced.py: 3 listeners at 2x real time wait 6.7 s instead of 8.8 s; at
3.45x, where a short first segment still pays, 1.4 s instead of 2.3 s)."""

_SILENCE_RATIO = 0.02
"""A sample is sound when its magnitude is above this share of the segment's peak (-34 dB)."""


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """What one step synthesized, for the ``segment`` log line (DEBUG) and the benchmarks.

    Attributes:
        units: spoken units of the segment (:func:`speech.segmenter.spoken_units`).
        chars: its characters.
        words: its whitespace-separated words.
        boundary: where it ends (:class:`speech.segmenter.Boundary` name; ``END`` at a sentence end).
        first: the step's listener had nothing queued.
        budget_s: the step's time budget (``None`` in ``sentence`` segmentation).
        predicted_s: the model-speed estimate of its synthesis time.
        compute_s: its synthesis time.
        audio_s: seconds of audio kept (after trimming).
        queued_s: audio queued ahead of the listener when the step started.
    """

    units: float
    chars: int
    words: int
    boundary: str
    first: bool
    budget_s: float | None
    predicted_s: float
    compute_s: float
    audio_s: float
    queued_s: float


@dataclass(slots=True)
class _SegmentWork:
    """One segment of ``deadline`` segmentation while it is made; between the two steps of a segment
    whose lead-in went out early, its alignments wait here for the decoder."""

    text: str
    boundary: Boundary
    starts_sentence: bool
    units: float
    predicted: float
    budget_s: float | None
    queued_s: float
    source: SourceMap | None = None  # where the segment's text is in the request's (§14.4)
    alignments: list[Any] = field(default_factory=list)
    sent: int = 0  # samples of its start already sent (the lead-in)
    compute_s: float = 0.0  # seconds of synthesis so far


def _sound_bounds(audio: np.ndarray) -> tuple[int, int]:
    """Index of the first sample of sound and one past the last (``(0, 0)`` for silence)."""
    if not len(audio):
        return 0, 0
    magnitude = np.abs(audio)
    threshold = max(1e-3, _SILENCE_RATIO * float(magnitude.max()))
    loud = np.flatnonzero(magnitude > threshold)
    if not len(loud):
        return 0, 0
    return int(loud[0]), int(loud[-1]) + 1


def trim_at_cuts(
    audio: np.ndarray,
    sample_rate: int,
    *,
    starts_sentence: bool,
    ends_sentence: bool,
    boundary: Boundary,
) -> tuple[np.ndarray, float]:
    """Trim Kokoro's silence where a sentence was cut: returns the audio kept and the seconds removed
    from its start (word timings move back by that much).

    A segment that starts a sentence keeps its lead-in; one that continues a cut sentence keeps
    :data:`LEAD_S`. A segment that ends its sentence keeps its trailing silence; one cut at ``boundary``
    keeps ``PAUSE_S[boundary]``. Audio without sound is kept whole.
    """
    first, last = _sound_bounds(audio)
    if first == last:
        return audio, 0.0
    start = 0 if starts_sentence else max(0, first - round(LEAD_S * sample_rate))
    stop = len(audio) if ends_sentence else min(len(audio), last + round(PAUSE_S[boundary] * sample_rate))
    return audio[start:stop], start / sample_rate


class RequestAudio:
    """Synthesis of one request, one segment per step of the runtime's scheduler (module docstring).

    ``await next()`` returns the next :class:`AudioPiece`, or ``None`` at the end; ``close()`` stops
    synthesis and frees the generator and its buffers. Segments are resampled as one stream
    (:class:`protocol.pcm.StreamResampler`) so that there are no clicks at segment edges. Word times from
    the backend are relative to their segment; they are shifted by the audio before it.

    Args:
        runtime: the process's :class:`Runtime`.
        request: the request to speak.
        listener: the session's listener (one per WebSocket session, shared by its requests, so its
            requests' audio queues up); ``None``: a listener of this request alone (``POST /invocations``).
        whole: nobody plays the audio while it is made (a whole-file answer): sentences are never cut.

    State is only ever touched under a lock, from one thread at a time: a ``close()`` that arrives while a
    worker is inside the backend's generator (``sentence`` segmentation) is handed to a worker, which runs
    it once the segment is done (a running generator cannot be closed).

    ``compute_s`` totals the seconds the workers spent on this request (synthesis and resampling), the
    denominator of its xRT (:mod:`reference_server.telemetry`); ``segments`` records every step.

    The text is taken piece by piece from :meth:`_next_text`: here the text front-end's pieces of the
    request's text (module docstring); an utterance overrides it to hand out its pieces as they come.
    """

    def __init__(
        self,
        runtime: Runtime,
        request: SynthesisRequest,
        listener: Listener | None = None,
        *,
        whole: bool = False,
    ) -> None:
        self._runtime = runtime
        self._whole = whole
        self._request = request
        self.listener = listener if listener is not None else Listener()
        self._lock = threading.Lock()
        self._segments: Iterator[Any] | None = None
        self._resampler = StreamResampler(runtime.backend.sample_rate, request.sample_rate)
        self._offset_s = 0.0
        self._exhausted = False
        self._closed = False
        self._pieces: Iterator[Any] | None = None  # the front-end's pieces of the request's text
        # §14.3: the inline pronunciations of the text (checked when the request was accepted) travel
        # through the front-end marked; the request's lexicon (the session's under its own) with them.
        try:
            self._text, inline = extract_inline(request.text, max_entries=0xFFFE)
        except LexiconError:  # the session does not read inline forms: the text is spoken as written
            self._text, inline = request.text, ()
        # §14.4: where each character of the marked text is in the request's text (an inline form's
        # marks stand for its brackets), the last step of every word's span.
        self._marked_sources = inline_sources(request.text) if inline else None
        self._source_length: int | None = len(request.text)  # None: an utterance's text is still growing
        words = getattr(request, "lexicon", None) or {}
        self.lexicon: Lexicon | None = Lexicon(words, inline) if words or inline else None
        # Passed to the backend only when there is one, so a backend without lexicons still serves the rest.
        self._pronounced = {"lexicon": self.lexicon} if self.lexicon else {}
        # A voice or a canonical blend (§4.1) knows its language (§14.1); American English for a voice
        # of no Kokoro language (the front-end still gets the voice's own code, for its generic rules).
        self._voice = Voice.parse(request.voice)
        self.language = (self._voice.language or LANGUAGES["a"]).code
        # Sentences of the text taken, not yet begun, each with the boundary after it when the sentence
        # goes on in a later piece (OpenText), else None.
        self._sentences: deque[tuple[str, Boundary | None, SourceMap | None]] = deque()
        self._rest = ""  # the rest of a sentence that was cut
        self._rest_source: SourceMap | None = None  # where _rest is in the request's text
        self._segments_source: SourceMap | None = None  # where the text of _segments is
        self._open: Boundary | None = None  # the boundary after _rest when its sentence goes on later
        self._continues = False  # the next sentence begun continues one whose start was spoken (OpenText)
        self._pending: _SegmentWork | None = None  # a segment whose lead-in went out before its decoding
        self._segmenter = Segmenter(language_code(self.language))
        self.compute_s = 0.0
        self.segments: list[SegmentRecord] = []
        self.abort = AbortSignal()
        """Set by :meth:`close`; with ``settings.abort_on_cancel`` it stops the model pass running for this
        request (:class:`~reference_server.backends.base.AbortSignal`); ``abort.aborted`` counts them."""

    def _next_text(self) -> Piece | str | OpenText | object | None:
        """The next text to synthesize (runs on a worker, under the lock): a front-end :class:`Piece`
        (with its map into the request's text, §14.4) or a string; ``None`` when there is no more, or
        :data:`WAIT_FOR_TEXT` when more may come later (utterances), or an :class:`OpenText` (utterances
        whose listener is about to run dry)."""
        if self._pieces is None:
            self._pieces = speech_pieces(self._text, self._voice.code, sourced=True)
        return next(self._pieces, None)

    def _spanned(self, words: tuple[Word, ...] | None, source: SourceMap | None) -> tuple[Word, ...] | None:
        """``words`` with their spans moved from the text the backend was given (``source.text``) into
        the request's text (PROTOCOL.md §14.4), by the ranges the G2P gave each word; a word without
        one, or a text without a map, gets none."""
        if words is None:
            return None
        out = []
        for word in words:
            span = word.span
            if span is None or source is None or span[1] > len(source.text):
                out.append(replace(word, text_start=None, text_end=None))
                continue
            start, end = source.span(*span)
            marked = self._marked_sources
            if marked is not None:  # from the marked text into the text as the client wrote it
                start, end = (
                    (marked[start], marked[end - 1] + 1)
                    if end > start
                    else ((marked[start] if start < len(marked) else len(self._request.text)),) * 2
                )
            if self._source_length is not None:
                end = min(end, self._source_length)
            out.append(replace(word, text_start=min(start, end), text_end=end))
        return tuple(out)

    async def next(self) -> AudioPiece | None:
        """The next segment's audio, or ``None`` when the request is fully spoken (or closed).

        Raises:
            Exception: whatever the backend raised; the request has failed.
            reference_server.scheduling.SchedulerClosed: the server is shutting down.
        """
        if self._closed or self._exhausted:
            return None
        return await self._runtime.scheduler.run(self.listener, self._step)

    def _step(self, grant: Grant) -> AudioPiece | object | None:
        """Synthesize one segment (runs on a scheduler worker); :data:`WAIT_FOR_TEXT` when an utterance
        has spoken all it holds."""
        started = time.perf_counter()
        abortable = getattr(self._runtime.settings, "abort_on_cancel", "yes") == "yes"
        try:
            with self._lock, aborting(self.abort if abortable else None):
                if self._closed or self._exhausted:
                    return None
                if self._runtime.settings.segmentation == "sentence":
                    return self._advance_sentence(grant)
                if self._pending is not None:
                    return self._advance_pending()
                return self._advance_deadline(grant)
        except PassAborted:
            # close() stopped the pass (cancel, disconnect): it gives no audio and the request is over.
            self._exhausted = True
            self._runtime.passes_aborted += 1
            log_event(logger, "pass_aborted", logging.DEBUG, request_id=self._request.request_id)
            return None
        finally:
            self.compute_s += time.perf_counter() - started

    def has_pending(self) -> bool:
        """Text taken and not yet spoken remains (a waiting utterance need not wait for more)."""
        return (
            self._segments is not None
            or self._pending is not None
            or bool(self._rest)
            or bool(self._sentences)
        )

    def _finish(self) -> AudioPiece | None:
        self._exhausted = True
        self._segments = None
        tail = self._resampler.flush()
        return AudioPiece(float_to_pcm16(tail), None) if len(tail) else None

    def _emit(self, audio: np.ndarray, words: tuple[Word, ...] | None, text: str | None) -> AudioPiece:
        """Resample, shift word timings onto the request's timeline, queue the audio for the listener.

        ``text`` is what the segment says; the piece carries it with the segment's span (§5.5).
        ``None``: the piece is the start of a segment whose text and span come with its next piece
        (a lead-in sent before the decoder ran)."""
        runtime = self._runtime
        if text is not None:
            text = strip_marks(text)  # what a marks frame says is the text as written (§5.5, §14.3)
        pcm = float_to_pcm16(self._resampler.feed(audio))
        if words is not None:
            offset = self._offset_s
            words = tuple(
                replace(
                    w, start_s=round(offset + w.start_s, 3), end_s=round(offset + max(w.start_s, w.end_s), 3)
                )
                for w in words
            )
        audio_s = len(audio) / runtime.backend.sample_rate
        start_s = self._offset_s
        self._offset_s += audio_s
        self.listener.add(audio_s, runtime.scheduler.clock())
        return AudioPiece(pcm, words, text, round(start_s, 3), round(self._offset_s, 3))

    def _advance_sentence(self, grant: Grant) -> AudioPiece | object | None:
        """``sentence`` segmentation: the backend's next segment (one sentence)."""
        request, runtime = self._request, self._runtime
        while self._segments is None:
            text = self._next_text()
            if text is WAIT_FOR_TEXT or text is None:
                return text if text is WAIT_FOR_TEXT else self._finish()
            self._segments_source = getattr(text, "source", None)
            if isinstance(text, (OpenText, Piece)):
                text = text.text
            assert isinstance(text, str)
            self._segments = iter(
                runtime.backend.synthesize(text, request.voice, request.speed, **self._pronounced)
            )
        clock = runtime.scheduler.clock
        queued_s = self.listener.queued_s(clock())
        started = clock()
        segment = next(self._segments, None)
        compute_s = clock() - started
        if segment is None:
            self._segments = None
            return self._advance_sentence(grant)  # the next text, if any
        units = spoken_units(segment.text)
        audio_s = len(segment.audio) / runtime.backend.sample_rate
        predicted = runtime.speed.predict_compute(units, self.language, request.speed)
        runtime.speed.observe(units, self.language, request.speed, audio_s, compute_s)
        self._record(
            SegmentRecord(
                units,
                len(segment.text),
                len(segment.text.split()),
                "END",
                grant.first,
                None,
                predicted,
                compute_s,
                audio_s,
                queued_s,
            )
        )
        return self._emit(segment.audio, self._spanned(segment.words, self._segments_source), segment.text)

    def _advance_deadline(self, grant: Grant) -> AudioPiece | None:
        """``deadline`` segmentation: the longest good segment that fits the grant's budget."""
        request, runtime = self._request, self._runtime
        starts_sentence = not self._rest and not self._continues
        if not self._rest:
            while not self._sentences:
                text = self._next_text()
                if text is WAIT_FOR_TEXT or text is None:
                    return text if text is WAIT_FOR_TEXT else self._finish()
                self._take_sentences(text)
            self._rest, self._open, self._rest_source = self._sentences.popleft()
            self._continues = False
        text, source = self._rest, self._rest_source
        budget_s = runtime.settings.first_audio_target_s if grant.first else grant.budget_s
        if self._whole:
            max_units = math.inf
        elif runtime.speed.measured:
            max_units = runtime.speed.max_units(budget_s, self.language, request.speed)
            # A session's very first segment is always short: that is when sound must start at once.
            overload = OVERLOAD if not grant.first else math.inf if self.listener.fresh else FIRST_OVERLOAD
            if max_units < self._segmenter.min_units and runtime.speed.demand(grant.waiting) >= overload:
                # No segment fits and the listeners waiting need more than the model has: a gap is
                # coming whatever is cut, and every cut costs another pass of Kokoro's silence, so
                # the rest of the sentence is spoken whole.
                max_units = math.inf
        else:  # the model's speed is not known yet: a first segment is cut short, nothing else is
            max_units = 0.0 if grant.first else math.inf
        cut = self._segmenter.next_cut(text, max_units, first=grant.first)
        segment_text, self._rest = text[: cut.position].strip(), text[cut.position :]
        segment_source = None if source is None else source.slice(0, cut.position).strip()
        self._rest_source = None if source is None else source.slice(cut.position, len(text))
        boundary = cut.kind
        if not self._rest and self._open is not None:  # the sentence goes on in a later piece
            boundary, self._open, self._continues = self._open, None, True
        units = spoken_units(segment_text)
        predicted = runtime.speed.predict_compute(units, self.language, request.speed)
        clock = runtime.scheduler.clock
        queued_s = self.listener.queued_s(clock())
        work = _SegmentWork(
            segment_text, boundary, starts_sentence, units, predicted, budget_s, queued_s, segment_source
        )
        started = clock()
        if grant.first and self._lead_in_early():
            alignments = list(
                runtime.backend.align(segment_text, request.voice, request.speed, **self._pronounced)
            )
            lead_in = alignments[0].lead_in_samples if alignments else 0
            if lead_in:
                # Step 1 of 2: the lead-in now, as digital silence; the decoder runs in the next step.
                work.alignments, work.sent, work.compute_s = alignments, lead_in, clock() - started
                self._pending = work
                return self._emit(np.zeros(lead_in, dtype=np.float32), None, None)
            audio, words = self._decode(alignments)
        else:
            audio, words = self._synthesize(segment_text)
        work.compute_s = clock() - started
        return self._finish_segment(work, audio, words, grant.first)

    def _lead_in_early(self) -> bool:
        """A speech's first segment may send its lead-in before the decoder runs (``settings.lead_in``):
        the backend can align alone, and the request did not ask for marks (a marks frame comes before
        its segment's audio, §5.5, and the segment's span is known only once it is decoded)."""
        runtime = self._runtime
        return (
            getattr(runtime.settings, "lead_in", "off") == "early"
            and bool(getattr(runtime.backend, "aligns", False))
            and not getattr(self._request, "marks", False)
            and not self._whole
        )

    def _advance_pending(self) -> AudioPiece | None:
        """Step 2 of a segment whose lead-in went out early: decode it and send the rest of its audio."""
        pending, self._pending = self._pending, None
        assert pending is not None
        clock = self._runtime.scheduler.clock
        started = clock()
        audio, words = self._decode(pending.alignments)
        pending.compute_s += clock() - started
        return self._finish_segment(pending, audio, words, True)

    def _decode(self, alignments: list[Any]) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        """Decode a segment's aligned passes and join them as :meth:`_synthesize` does."""
        backend = self._runtime.backend
        return self._join(backend.decode(alignment) for alignment in alignments)

    def _finish_segment(
        self, work: _SegmentWork, audio: np.ndarray, words: tuple[Word, ...] | None, first: bool
    ) -> AudioPiece:
        """Trim a synthesized segment at its cuts, record it and emit it; ``work.sent`` samples of its
        start (a lead-in sent early, all silence) are already out and are left off the piece."""
        segment_text, boundary, sent = work.text, work.boundary, work.sent
        request, runtime = self._request, self._runtime
        sample_rate = runtime.backend.sample_rate
        runtime.speed.observe(
            work.units, self.language, request.speed, len(audio) / sample_rate, work.compute_s
        )
        kept, removed_s = trim_at_cuts(
            audio,
            sample_rate,
            starts_sentence=work.starts_sentence,
            ends_sentence=not self._rest and not self._continues,
            boundary=boundary,
        )
        if words is not None:
            end_s = len(kept) / sample_rate
            words = tuple(
                replace(
                    w,
                    start_s=min(end_s, max(0.0, w.start_s - removed_s)),
                    end_s=min(end_s, max(0.0, w.end_s - removed_s)),
                )
                for w in words
            )
            words = self._spanned(words, work.source)
        self._record(
            SegmentRecord(
                work.units,
                len(segment_text),
                len(segment_text.split()),
                boundary.name,
                first,
                work.budget_s,
                work.predicted,
                work.compute_s,
                len(kept) / sample_rate,
                work.queued_s,
            )
        )
        if sent:
            # The lead-in is silence and a segment that starts a sentence keeps its head (trim_at_cuts).
            assert removed_s == 0.0 and len(kept) >= sent
            shift_s = sent / sample_rate
            start_s = self._offset_s - shift_s
            if words is not None:
                words = tuple(replace(w, start_s=w.start_s - shift_s, end_s=w.end_s - shift_s) for w in words)
            piece = self._emit(kept[sent:], words, segment_text)
            piece = replace(piece, start_s=round(start_s, 3))
        else:
            piece = self._emit(kept, words, segment_text)
        if not self._rest and not self._sentences:
            more = self._next_text()
            if isinstance(more, (str, OpenText, Piece)):
                self._take_sentences(more)
            elif more is None:
                # The request is spoken: end it now rather than in one more turn of the scheduler,
                # which could wait behind another session's segment.
                tail = self._finish()
                if tail is not None:
                    piece = replace(piece, pcm=piece.pcm + tail.pcm)
        return piece

    def _take_sentences(self, text: str | OpenText | Piece | object) -> None:
        """Queue the sentences of a piece of text, each with its map into the request's text (§14.4);
        an :class:`OpenText`'s last one goes on later."""
        source = getattr(text, "source", None)
        if isinstance(text, (OpenText, Piece)):
            plain = text.text
        else:
            assert isinstance(text, str)
            plain = text
        sentences = piece_sentences(plain, self.language)
        try:
            maps: list[SourceMap | None] = (
                list(source.parts(sentences)) if source else [None] * len(sentences)
            )
        except ValueError:  # the sentences do not cover the piece (cannot happen): words get no span
            maps = [None] * len(sentences)
        last = text.boundary if isinstance(text, OpenText) else None
        for index, (sentence, sentence_source) in enumerate(zip(sentences, maps, strict=True)):
            self._sentences.append((sentence, last if index == len(sentences) - 1 else None, sentence_source))

    def _synthesize(self, text: str) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        """Run the backend on one segment's text; its passes (one, unless the text exceeds Kokoro's
        510 tokens) are joined, their word timings shifted onto the joined audio."""
        request, backend = self._request, self._runtime.backend
        return self._join(backend.synthesize(text, request.voice, request.speed, **self._pronounced))

    def _join(self, segments: Iterable[Any]) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        backend = self._runtime.backend
        parts: list[np.ndarray] = []
        words: list[Word] | None = []
        offset = 0.0
        for segment in segments:
            parts.append(np.asarray(segment.audio, dtype=np.float32))
            if segment.words is None or words is None:
                words = None
            else:
                words.extend(
                    replace(w, start_s=offset + w.start_s, end_s=offset + w.end_s) for w in segment.words
                )
            offset += len(segment.audio) / backend.sample_rate
        audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        return audio, None if words is None or not parts else tuple(words)

    def _record(self, record: SegmentRecord) -> None:
        self.segments.append(record)
        log_event(
            logger,
            "segment",
            logging.DEBUG,
            request_id=self._request.request_id,
            units=round(record.units, 1),
            chars=record.chars,
            words=record.words,
            boundary=record.boundary,
            first=record.first,
            budget_s=None if record.budget_s is None else round(record.budget_s, 3),
            predicted_s=round(record.predicted_s, 3),
            compute_s=round(record.compute_s, 3),
            audio_s=round(record.audio_s, 3),
            queued_s=round(record.queued_s, 3),
        )

    def close(self) -> None:
        """Stop synthesis and release the generator; never blocks the event loop, safe to call twice.

        A model pass running for this request is aborted (:attr:`abort`) when ``settings.abort_on_cancel``
        is ``yes``: its step ends at once with no audio, and the model is free for the next request."""
        if self._closed:
            return
        self._closed = True
        self.abort.set()
        if self._lock.acquire(blocking=False):
            try:
                self._close_segments()
            finally:
                self._lock.release()
        else:  # a worker is inside the generator: close it when that segment is done
            try:
                self._runtime.executor.submit(self._close_locked)
            except RuntimeError:  # the executor is shut down; the worker thread ends with the process
                pass

    def _close_locked(self) -> None:
        with self._lock:
            self._close_segments()

    def _close_segments(self) -> None:
        segments, self._segments = self._segments, None
        close = getattr(segments, "close", None)
        if close is not None:
            close()

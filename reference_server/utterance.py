"""Synthesis of an utterance (PROTOCOL.md §15): text that arrives in fragments, spoken as it completes.

The session (:class:`protocol.server_session.ServerSession`) delivers an utterance's text as whole code
points;
:class:`UtteranceAudio` cuts it into segments with the same streaming text front-end a whole request's
text goes through (:class:`speech.frontend.SpeechFrontend` in the voice's language, §14.2), so a text
sent in one piece, per token or per character is cut into the same segments and spoken with the same
words and the same audio as the request would be (§15.3). Each segment is synthesized as soon as
it is certain, so speech starts with the first sentence while the rest is still being written; a
``flush`` ends the segment at the text received so far (§15.3), and ``end`` speaks the rest.

A sentence is certain only once the next one begins, and a model writing at about ten words a second
takes one to two seconds over a long sentence: longer than the audio of a short sentence before it
lasts. So with ``utterance_release`` ``deadline`` (the default, §15.3, §10.1), whenever the utterance
has nothing left to synthesize while its sentence is still being written, and its listener would run
out of audio before even the words already written could be synthesized
(:meth:`UtteranceAudio.release_early`), the start of that sentence is released now, cut at the best
clause or word boundary of the complete words received (:meth:`speech.segmenter.Segmenter.early_cut`,
sized to the audio queued), and the rest of the sentence follows as its continuation (no new lead-in,
the boundary's pause, :class:`reference_server.request_audio.OpenText`). With slack the text waits for its
sentence end, as before, and keeps its prosody. A listener with nothing queued (the utterance's first
words) gets its first segment once a first segment's worth of words is written, at the best break
within it, instead of waiting for the whole first sentence.

Audio and word timings run on one timeline and through one resampler across all segments, exactly as for
a request: word times are seconds from the utterance's first sample (§5.3, §15.3).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import replace

from protocol.messages import SynthesisRequest
from protocol.voices import Voice
from reference_server.request_audio import WAIT_FOR_TEXT, AudioPiece, OpenText, RequestAudio
from reference_server.runtime import Runtime
from reference_server.scheduling import GUARD_S, Listener
from speech.frontend import Piece, SpeechFrontend
from speech.segmenter import spoken_units

__all__ = ["UtteranceAudio", "segment_frontend"]


def segment_frontend(voice: str) -> SpeechFrontend:
    """The front-end that cuts an utterance's text into synthesis segments.

    It is configured as :class:`reference_server.request_audio.RequestAudio` configures its own for a whole
    request (:func:`speech.frontend.speech_pieces`: the voice's language, markdown on, the default cap),
    so both paths cut a text at the same places; ``tests/reference_server/test_utterance.py`` holds them
    to it.
    """
    return SpeechFrontend(Voice.parse(voice).code, sourced=True)


class UtteranceAudio(RequestAudio):
    """The audio of one utterance: :meth:`append`, :meth:`flush` and :meth:`end` feed it text (from the
    event loop), ``await next()`` returns its audio segment by segment, waiting while it has no segment
    ready and the utterance is still open.

    Args:
        runtime: the process's runtime (backend, workers).
        request: the utterance's voice, speed, sample rate and id; its ``text`` is ignored.
        listener: the session's listener (PROTOCOL.md §10.1), shared with its other requests.

    Only the event loop's thread calls :meth:`append`, :meth:`flush`, :meth:`end` and :meth:`next`; the
    ready segments cross to the synthesis worker through a deque (atomic appends and pops).
    """

    def __init__(self, runtime: Runtime, request: SynthesisRequest, listener: Listener | None = None) -> None:
        super().__init__(runtime, request, listener)
        self._frontend = segment_frontend(request.voice)
        self._ready: deque[Piece | OpenText] = deque()  # text certain and not yet synthesized, in order
        self._ended = False
        self._stepping = False  # a synthesis step of this utterance is queued or running
        self.released: list[tuple[float, OpenText]] = []
        """Every early release (:meth:`release_early`): when (the scheduler's clock) and what."""
        self._more = asyncio.Event()  # a segment became ready, the utterance ended, or it was closed
        self.chars = 0
        """Code points received so far (for the request's log line)."""
        self._flushed = 0  # code points before the front-end's current text (it restarts at a flush)
        self._source_length = None  # spans count the fragments' texts joined (§14.4, §15.2): no bound yet

    def append(self, text: str) -> None:
        """Add text; every segment it completes becomes ready to synthesize."""
        self.chars += len(text)
        self._take(self._frontend.feed(text))
        self.release_early()

    def flush(self) -> None:
        """End a segment at the text received so far and make all of it ready (§15.3)."""
        self._take(self._frontend.flush())
        self._flushed = self.chars

    def end(self) -> None:
        """No more text: the rest becomes ready, and :meth:`next` returns ``None`` after it (§15.4)."""
        self.flush()
        self._ended = True
        self._more.set()

    def close(self) -> None:
        """Stop synthesis (cancel, disconnect); a waiting :meth:`next` returns ``None``."""
        super().close()
        self._ready.clear()
        self._more.set()

    def release_early(self) -> OpenText | None:
        """Release the start of the sentence being written if the listener cannot wait for its end
        (module docstring; PROTOCOL.md §15.3). Called after every ``append`` and whenever the utterance
        runs out of text to synthesize.

        Nothing is released when ``utterance_release`` is ``sentence`` or segmentation is not
        ``deadline``; while text is ready or being synthesized (that step decides again when it ends);
        once the utterance has ended or was closed; or while the listener has audio queued for longer
        than the model is predicted to take over all the complete words held (waiting costs nothing
        yet, and more words make a better segment). A listener with nothing queued takes a first segment
        (:meth:`speech.segmenter.Segmenter.early_cut` with ``first``). Before the model's speed is
        measured only such a first segment is released.

        Returns:
            the text released (also queued for synthesis and recorded in :attr:`released`), or ``None``.
        """
        runtime, request = self._runtime, self._request
        settings = runtime.settings
        if (
            getattr(settings, "utterance_release", "sentence") != "deadline"
            or settings.segmentation != "deadline"
            or self._ended
            or self._closed
            or self._ready
            or self._stepping
            or self.has_pending()
        ):
            return None
        held = self._frontend.held
        now = runtime.scheduler.clock()
        queued_s = self.listener.queued_s(now)
        speed = runtime.speed
        first = queued_s <= 0.0
        if first:
            max_units = 0.0  # the segmenter's first-segment length
        else:
            if not speed.measured:
                return None
            words = held if held[-1:].isspace() else held[: held.rfind(" ") + 1]  # complete words
            predicted = speed.predict_compute(spoken_units(words), self.language, request.speed)
            if predicted + GUARD_S < queued_s:
                return None
            max_units = speed.max_units(max(0.0, queued_s - GUARD_S), self.language, request.speed)
        cut = self._segmenter.early_cut(held, max_units, first=first)
        if cut is None:
            return None
        piece = self._frontend.take(cut.position)
        if piece is None:
            return None
        released = OpenText(piece.text, cut.kind, piece.source)
        self.released.append((now, released))
        self._take([released])
        return released

    def _take(self, segments: list[Piece] | list[OpenText]) -> None:
        """Queue segments, their maps moved onto the utterance's whole text (§14.4, §15.2): the front-end
        counts from its last flush."""
        if segments:
            self._ready.extend(
                replace(segment, source=segment.source.shifted(self._flushed)) if segment.source else segment
                for segment in segments
            )
            self._more.set()

    def _next_text(self) -> str | OpenText | object | None:
        if self._ready:
            return self._ready.popleft()
        return None if self._ended else WAIT_FOR_TEXT

    async def next(self) -> AudioPiece | None:
        """The next segment's audio, or ``None`` once the utterance has ended and is fully spoken (or
        was closed). Waits, without holding a worker, while no segment is ready.

        Raises:
            Exception: whatever the backend raised; the utterance has failed.
        """
        while True:
            if self._closed:
                return None
            if not self.has_pending() and not self._ready and not self._ended:
                self.release_early()
                if not self._ready:
                    self._more.clear()
                    await self._more.wait()
                continue
            self._stepping = True
            try:
                piece = await super().next()
            finally:
                self._stepping = False
            if piece is not WAIT_FOR_TEXT:
                return piece  # type: ignore[return-value]

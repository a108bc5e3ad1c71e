"""Synthesis of an utterance (PROTOCOL.md §15): text that arrives in fragments, spoken as it completes.

The session (:class:`protocol.session.ServerSession`) delivers an utterance's text as whole code points;
:class:`UtteranceAudio` cuts it into segments with the same streaming text front-end a whole request's
text goes through (:class:`protocol.frontend.SpeechFrontend` in the voice's language, §14.2), so a text
sent in one piece, per token or per character is cut into the same segments and spoken with the same
words and the same audio as the request would be (§15.3). Each segment is synthesized as soon as
it is certain, so speech starts with the first sentence while the rest is still being written; a
``flush`` ends the segment at the text received so far (§15.3), and ``end`` speaks the rest.

Audio and word timings run on one timeline and through one resampler across all segments, exactly as for
a request: word times are seconds from the utterance's first sample (§5.3, §15.3).
"""

from __future__ import annotations

import asyncio
from collections import deque

from protocol.frontend import SpeechFrontend
from protocol.messages import SynthesisRequest
from reference_server.runtime import WAIT_FOR_TEXT, AudioPiece, RequestAudio, Runtime
from reference_server.scheduling import Listener

__all__ = ["UtteranceAudio", "segment_frontend"]


def segment_frontend(voice: str) -> SpeechFrontend:
    """The front-end that cuts an utterance's text into synthesis segments.

    It is configured as :class:`reference_server.runtime.RequestAudio` configures its own for a whole
    request (:func:`protocol.frontend.speech_pieces`: the voice's language, markdown on, the default cap),
    so both paths cut a text at the same places; ``tests/reference_server/test_utterance.py`` holds them
    to it.
    """
    return SpeechFrontend(voice[:1])


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
        self._ready: deque[str] = deque()  # segments certain and not yet synthesized, in order
        self._ended = False
        self._more = asyncio.Event()  # a segment became ready, the utterance ended, or it was closed
        self.chars = 0
        """Code points received so far (for the request's log line)."""

    def append(self, text: str) -> None:
        """Add text; every segment it completes becomes ready to synthesize."""
        self.chars += len(text)
        self._take([piece.text for piece in self._frontend.feed(text)])

    def flush(self) -> None:
        """End a segment at the text received so far and make all of it ready (§15.3)."""
        self._take([piece.text for piece in self._frontend.flush()])

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

    def _take(self, segments: list[str]) -> None:
        if segments:
            self._ready.extend(segments)
            self._more.set()

    def _next_text(self) -> str | object | None:
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
                self._more.clear()
                await self._more.wait()
                continue
            piece = await super().next()
            if piece is not WAIT_FOR_TEXT:
                return piece  # type: ignore[return-value]

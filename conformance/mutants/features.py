"""Mutants that break a session's life at the limits of the server, or a version 1.1 feature, in a way a hook
on messages cannot: each is :class:`~conformance.mutants.base.ToneServer` with one behaviour of its sessions
changed. :data:`conformance.mutants.MUTANTS` names the cases that must catch each; the one-flag rows of the
same sections are in :mod:`conformance.mutants.defects`.
"""

from __future__ import annotations

import asyncio

from conformance.mutants.base import ToneServer, ToneSession
from protocol.messages import Marks, SynthesisRequest, Word

__all__ = ["CancelWordsAll", "CancelWordsNone", "CancelWordsUnsent", "FinishesAbandoned", "MarksForAll"]


class _MarksForAllSession(ToneSession):
    """Sends every segment's ``marks`` frame, whether its request asked for marks or not."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.unasked: dict[str, int] = {}

    def mark(self, request: SynthesisRequest, segment: str, pcm: bytes) -> None:
        start = self.spoken_s.get(request.request_id or "", 0.0)
        super().mark(request, segment, pcm)
        if request.marks or request.request_id is None:
            return
        # Queued where the session would queue it: before the segment's audio, inside the bracket.
        count = self.unasked.get(request.request_id, 0)
        self.unasked[request.request_id] = count + 1
        text = self.server.synth.spoken(segment, request.voice)
        end = self.spoken_s[request.request_id]
        frame = Marks(request_id=request.request_id, segment=count, text=text, start_s=start, end_s=end)
        # The session itself refuses to make this frame: the defect puts it in the session's outbox.
        self.session._outgoing.append(frame.to_json())


class MarksForAll(ToneServer):
    """Sends ``marks`` to every request, also to those that did not ask for them (§5.5)."""

    name = "marks-for-all"
    session_class = _MarksForAllSession


class _FinishesAbandonedSession(ToneSession):
    """When the client goes away, synthesizes what was accepted to the end (into the void) before the session
    ends and gives its place back."""

    gone = False

    async def receive(self) -> bytes | str | None:
        data = await super().receive()
        self.gone = self.gone or data is None
        return data

    async def read(self) -> None:
        await super().read()
        while self.session.pending_ids:
            await asyncio.sleep(0.05)  # the worker goes on synthesizing the abandoned requests

    async def write(self) -> None:
        try:
            await super().write()
        except Exception:  # a send failed: the connection is gone (the reader may not know yet)
            self.gone = True
            await asyncio.Future()  # the worker goes on until read() ends the session

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        return [] if self.gone else frames  # nowhere to send them


class FinishesAbandoned(ToneServer):
    """Goes on synthesizing a disconnected session's requests to their end, holding its place in
    ``max_sessions`` meanwhile, instead of stopping within a segment (§7.4)."""

    name = "finishes-abandoned"
    session_class = _FinishesAbandonedSession


# --- what a cancel leaves said (§5.3, cancel_words) -------------------------------------------------------


class _CancelWordsNoneSession(ToneSession):
    def complete_words(self, request: SynthesisRequest) -> list[Word] | None:
        if self.session.is_cancelled(request.request_id or ""):
            return None  # as before version 1.1 added cancel_words, which it lists all the same
        return super().complete_words(request)


class CancelWordsNone(ToneServer):
    """Lists cancel_words but sends no words with a cancelled request (§5.3)."""

    name = "cancel-words-none"
    session_class = _CancelWordsNoneSession


class _CancelWordsAllSession(ToneSession):
    def complete_words(self, request: SynthesisRequest) -> list[Word] | None:
        if not self.session.is_cancelled(request.request_id or ""):
            return super().complete_words(request)
        # The words of the whole text, as if every segment had been sent: what the client wrote.
        synth, start, words = self.server.synth, 0.0, []
        for segment in synth.segments(request.text):
            end = start + synth.seconds(segment, request.voice, request.speed)
            words += synth.words(segment, request.voice, start, end) or ()
            start = end
        return words


class CancelWordsAll(ToneServer):
    """With a cancelled request, sends the words of its whole text, also those it never spoke (§5.3)."""

    name = "cancel-words-all"
    session_class = _CancelWordsAllSession


class _CancelWordsUnsentSession(ToneSession):
    def mark(self, request: SynthesisRequest, segment: str, pcm: bytes) -> None:
        super().mark(request, segment, pcm)
        self.sent(request.request_id or "")  # counted when synthesized, before its audio is queued


class CancelWordsUnsent(ToneServer):
    """Counts a segment's words when it is synthesized, not when its audio is sent: a cancelled request
    names the words of a segment it dropped (§5.3)."""

    name = "cancel-words-unsent"
    session_class = _CancelWordsUnsentSession

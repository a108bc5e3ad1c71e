"""Mutants that break a session's life at the limits of the server, or a version 1.1 feature, in a way a hook
on messages cannot: each is :class:`~conformance.mutants.base.ToneServer` with one behaviour of its sessions
changed. :data:`conformance.mutants.MUTANTS` names the cases that must catch each; the one-flag rows of the
same sections are in :mod:`conformance.mutants.defects`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

from conformance.mutants.base import ToneConnection, ToneServer, ToneSynthesizer
from protocol.lexicon import INLINE_PATTERN, PHONEMES, Lexicon, strip_marks
from protocol.messages import Marks, SynthesisRequest, Word
from reference_server.driver import AudioPiece, Job

__all__ = [
    "CancelWordsAll",
    "CancelWordsNone",
    "CancelWordsUnsent",
    "FinishesAbandoned",
    "InlineAsLink",
    "LexiconAnyPhoneme",
    "LexiconIgnored",
    "LexiconInWords",
    "LexiconUnbounded",
    "MarksForAll",
    "SessionLexiconIgnored",
    "WithoutLexicon",
]


class _MarksForAllConnection(ToneConnection):
    """Sends every segment's ``marks`` frame, whether its request asked for marks or not."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.unasked: dict[str, int] = {}

    def mark(self, job: Job, piece: AudioPiece) -> None:
        super().mark(job, piece)
        request = job.request
        if request.marks or request.request_id is None:
            return
        # Queued where the session would queue it: before the segment's audio, inside the bracket.
        count = self.unasked.get(request.request_id, 0)
        self.unasked[request.request_id] = count + 1
        text, start, end = piece.text or "", piece.start_s, piece.end_s
        frame = Marks(request_id=request.request_id, segment=count, text=text, start_s=start, end_s=end)
        # The session itself refuses to make this frame: the defect puts it in the session's outbox.
        self.session._outgoing.append(frame.to_json())


class MarksForAll(ToneServer):
    """Sends ``marks`` to every request, also to those that did not ask for them (§5.5)."""

    name = "marks-for-all"
    connection_class = _MarksForAllConnection


class _FinishesAbandonedConnection(ToneConnection):
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
        while True:
            try:
                await super().write()
                return
            except Exception:  # a send failed: the connection is gone (the reader may not know yet)
                self.gone = True  # the worker goes on (into the void) until read() ends the session

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        return [] if self.gone else frames  # nowhere to send them


class FinishesAbandoned(ToneServer):
    """Goes on synthesizing a disconnected session's requests to their end, holding its place in
    ``max_sessions`` meanwhile, instead of stopping within a segment (§7.4)."""

    name = "finishes-abandoned"
    connection_class = _FinishesAbandonedConnection


# --- what a cancel leaves said (§5.3, cancel_words) -------------------------------------------------------


class _CancelWordsNoneConnection(ToneConnection):
    def complete_words(self, job: Job) -> list[Word] | None:
        if self.session.is_cancelled(job.request_id):
            return None  # as before version 1.1 added cancel_words, which it lists all the same
        return super().complete_words(job)


class CancelWordsNone(ToneServer):
    """Lists cancel_words but sends no words with a cancelled request (§5.3)."""

    name = "cancel-words-none"
    connection_class = _CancelWordsNoneConnection


class _CancelWordsAllConnection(ToneConnection):
    def complete_words(self, job: Job) -> list[Word] | None:
        request = job.request
        if not self.session.is_cancelled(job.request_id):
            return super().complete_words(job)
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
    connection_class = _CancelWordsAllConnection


class _CancelWordsUnsentConnection(ToneConnection):
    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[AudioPiece]:
        synth, job = self.server.synth, self.jobs[request.request_id or ""]
        request, lexicon = self.pronunciations(request)
        async for segment in self.segments(request):
            pcm = synth.render(segment, request.voice, request.speed, request.sample_rate, lexicon)
            piece = self.piece(request, segment, pcm, lexicon)
            super().take_words(job, piece)  # counted when its synthesis starts, before its audio is queued
            await self.work(synth.work_s(pcm, request.sample_rate))
            yield piece

    def take_words(self, job: Job, piece: AudioPiece) -> None:
        pass  # already counted


class CancelWordsUnsent(ToneServer):
    """Counts a segment's words when it is synthesized, not when its audio is sent: a cancelled request
    names the words of a segment it dropped (§5.3)."""

    name = "cancel-words-unsent"
    connection_class = _CancelWordsUnsentConnection


class _LexiconIgnoredConnection(ToneConnection):
    """Lists ``lexicon`` and checks every lexicon, then speaks every request as if it had none."""

    def pronunciations(self, request: SynthesisRequest) -> tuple[SynthesisRequest, Lexicon | None]:
        return request, None


class LexiconIgnored(ToneServer):
    """Lists the feature ``lexicon`` and refuses bad lexicons, but never speaks a pronunciation (§14.3)."""

    name = "lexicon-ignored"
    connection_class = _LexiconIgnoredConnection


class _SubstringSynthesizer(ToneSynthesizer):
    """Applies a lexicon entry to every token that contains its word (``Kokoros`` for ``Kokoro``)."""

    def pronounce(self, token: str, lexicon: Lexicon | None) -> tuple[str, int]:
        for word, entry in (lexicon.words if lexicon else {}).items():
            if word in token and token.strip(".,;:!?") != word:
                return token, len(entry.phonemes or entry.respell or "")
        return super().pronounce(token, lexicon)


class LexiconInWords(ToneServer):
    """Speaks a lexicon word's pronunciation also where the word is part of a longer word (§14.3)."""

    name = "lexicon-in-words"

    def __init__(self) -> None:
        super().__init__()
        self.synth = _SubstringSynthesizer()


class _AnyPhonemeConnection(ToneConnection):
    """Drops the symbols outside Kokoro's alphabet from every lexicon before the session reads it, so a bad
    pronunciation is spoken instead of refused."""

    async def receive(self) -> bytes | str | None:
        data = await super().receive()
        if data is None:
            return None
        try:
            obj = json.loads(data)
        except ValueError:
            return data
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not (
            isinstance(obj.get("lexicon"), dict) or (isinstance(text, str) and "](/" in text)
        ):
            return data  # every other message as the client sent it
        if isinstance(obj.get("lexicon"), dict):
            obj["lexicon"] = {
                word: "".join(c for c in value if c in PHONEMES) or "a" if isinstance(value, str) else value
                for word, value in obj["lexicon"].items()
            }
        if isinstance(obj.get("text"), str):
            obj["text"] = INLINE_PATTERN.sub(
                lambda m: f"[{m.group(1)}](/{''.join(c for c in m.group(2) if c in PHONEMES) or 'a'}/)",
                obj["text"],
            )
        return json.dumps(obj)


class LexiconAnyPhoneme(ToneServer):
    """Accepts a pronunciation with a symbol outside Kokoro's phoneme alphabet, speaking what it can, instead
    of refusing it with ``invalid_lexicon`` (§14.3, §9.1)."""

    name = "lexicon-any-phoneme"
    connection_class = _AnyPhonemeConnection


class _SessionLexiconIgnoredConnection(ToneConnection):
    """Swallows the ``lexicon`` message: the session's lexicon is never set."""

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is None or b'"lexicon"' not in (data.encode() if isinstance(data, str) else data):
                return data
            try:
                obj = json.loads(data)
            except ValueError:
                return data
            if not (isinstance(obj, dict) and obj.get("type") == "lexicon"):
                return data


class SessionLexiconIgnored(ToneServer):
    """Reads a request's lexicon but ignores the session's ``lexicon`` message, without a refusal (§4.5)."""

    name = "session-lexicon-ignored"
    connection_class = _SessionLexiconIgnoredConnection


class _InlineAsLinkConnection(ToneConnection):
    """Reads the inline form as a markdown link: its word is spoken as written, the phonemes dropped."""

    def pronunciations(self, request: SynthesisRequest) -> tuple[SynthesisRequest, Lexicon | None]:
        request, lexicon = super().pronunciations(request)
        if lexicon is None or not lexicon.inline:
            return request, lexicon
        return replace(request, text=strip_marks(request.text)), Lexicon(lexicon.words)


class InlineAsLink(ToneServer):
    """Speaks misaki's inline form ``[word](/phonemes/)`` as a markdown link, without its phonemes (§14.3)."""

    name = "inline-as-link"
    connection_class = _InlineAsLinkConnection


class WithoutLexicon(ToneServer):
    """A version 1.1 server that does not offer ``lexicon``: conforming (UNIMPLEMENTED, §1.7)."""

    name = "no-lexicon"
    lexicon = False


class _UnboundedLexiconConnection(ToneConnection):
    """Cuts every lexicon to the limits before the session reads it (the first ``max_lexicon_entries``
    words, each word to 64 characters), so a lexicon over a limit is spoken instead of refused."""

    async def receive(self) -> bytes | str | None:
        data = await super().receive()
        if data is None:
            return None
        try:
            obj = json.loads(data)
        except ValueError:
            return data
        if isinstance(obj, dict) and isinstance(obj.get("lexicon"), dict):
            most = self.server.limits.max_lexicon_entries
            obj["lexicon"] = {word[:64]: value for word, value in list(obj["lexicon"].items())[:most]}
            return json.dumps(obj)
        return data


class LexiconUnbounded(ToneServer):
    """Accepts a lexicon over ``max_lexicon_entries`` words or a word over 64 characters, cutting it to the
    limits, instead of refusing it with ``invalid_lexicon`` (§10)."""

    name = "lexicon-unbounded"
    connection_class = _UnboundedLexiconConnection

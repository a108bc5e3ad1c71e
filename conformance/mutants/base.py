"""The mutants' common ancestor: a small, spec-correct server with a cheap tone synthesizer.

:class:`ToneServer` serves the three routes of PROTOCOL.md §2 in the shipped server's app
(:func:`reference_server.app.create_app`): ``GET /ping`` and ``POST /invocations`` are the shipped routes on a
runtime of the shipped tone backend (:mod:`reference_server.backends.tone`). Its WebSocket sessions run
the team's sans-I/O :class:`protocol.server_session.ServerSession` (parsing, error codes, brackets, safe audio
cutting, cancel, draining on close) on the reference server's own driver
(:class:`reference_server.driver.SessionDriver`), so the server is correct by construction; each mutant
(:mod:`conformance.mutants.variants`) overrides one hook of :class:`ToneConnection` (the driver's hooks and
the tone's) or sets one flag of :class:`ToneServer` to break one rule. Speech is a deterministic tone
(:class:`ToneSynthesizer`) whose length follows the text, so every case that checks plausibility passes on
the unbroken server: it is the control of the teeth test.
A voice blend's tone lies at the weighted mean of its voices' pitches (§4.1). A mutant injects its defect
through hooks: the driver's and the tone's (:class:`ToneConnection`), and the routes' handlers that
:func:`~reference_server.app.create_app` takes (:meth:`ToneServer.ping` and :meth:`ToneServer.invocations`
wrap the shipped ones, :meth:`ToneServer.websocket` opens the tone sessions). ``python -m
conformance.mutants`` serves it in the shipped uvicorn (:meth:`ToneServer.shipped_server`).

Not yet the shipped code: the WebSocket sessions' speech and pacing (:class:`ToneSynthesizer`, one request at
a time, emulated work) and their admission (:attr:`ToneServer.sessions`), where the shipped server has its
runtime's scheduler and the tone backend's G2P-timed words; many mutants are written against those.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket

from protocol.errors import ErrorCode
from protocol.lexicon import Lexicon, LexiconError, extract_inline, inline_index, strip_marks
from protocol.limits import Limits
from protocol.messages import (
    Capabilities,
    SynthesisRequest,
    Word,
)
from protocol.pcm import float_to_pcm16
from protocol.server_session import ServerEvent, ServerSession, TextAppended
from protocol.voices import KOKORO_VOICES, Voice, is_blend
from reference_server import http as shipped_http
from reference_server import ws
from reference_server.app import create_app, create_server
from reference_server.backends.tone import ToneBackend, voice_pitch
from reference_server.capabilities import server_capabilities
from reference_server.driver import AudioPiece, Job, SessionDriver, StarletteTransport
from reference_server.encoders import MP3_AVAILABLE
from reference_server.runtime import Runtime
from reference_server.settings import Settings
from speech.chunker import IncrementalSentenceChunker
from speech.frontend import speech_pieces, speech_text
from speech.spans import SourceMap

__all__ = ["ToneConnection", "ToneServer", "ToneSynthesizer", "played"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_TOKEN = re.compile(r"\S+")
_EDGE_PUNCTUATION = "\"'()[]{}«»“”‘’.,;:!?¡¿…—-"

WORD_TIMINGS = frozenset({"a", "b", "j", "z"})
"""Languages whose requests the tone server gives word timings (§5.3, §14.1): English, and Japanese and
Chinese (one word per spoken token, whose spans a §14.4 case checks in a script without spaces); the
others are listed with ``word_timings: false``."""


class ToneSynthesizer:
    """A stand-in for Kokoro: a voice-dependent tone, as long as speech of the text would be.

    Attributes:
        seconds_per_char: audio per character at speed 1 (Kokoro: about 0.06).
        syllable_seconds: audio per CJK character (kanji, kana, hanzi: one syllable or more each; Kokoro:
            about 0.25), so Japanese and Chinese texts last as long as speech of them would (§14.1).
        padding_s: audio added per segment (Kokoro pads with breath and silence).
        work_factor: seconds of emulated synthesis work per second of audio (Kokoro on two CPU cores:
            1 to 3.5; kept low so the mutants run fast, high enough that the long text takes seconds).
    """

    seconds_per_char = 0.06
    syllable_seconds = 0.25
    word_timings: frozenset[str] = WORD_TIMINGS
    """Languages :meth:`words` times (the server lists them, :attr:`ToneServer.word_timings`)."""
    padding_s = 0.1
    work_factor = 0.35

    def segments(self, text: str) -> list[str]:
        """The text cut into sentences (one synthesis segment each)."""
        return [s for s in _SENTENCE.split(text.strip()) if s]

    def pitch(self, voice: str) -> float:
        """The tone's pitch in Hz: one per voice; a blend's is the weighted mean of its voices' (§4.1)."""
        if is_blend(voice):
            blend = Voice.parse(voice, KOKORO_VOICES)
            return sum(w * self.pitch(v) for v, w in zip(blend.voices, blend.weights, strict=True))
        return voice_pitch(voice)  # the shipped tone backend's pitch of a plain voice

    def spoken(self, segment: str, voice: str) -> str:
        """What the segment says, as the reference front-end would have it spoken (§14.2: markdown not read
        aloud, figures as words, in the voice's language)."""
        try:
            return speech_text(segment, Voice.parse(voice).code or "a")
        except (TypeError, ValueError):
            return segment

    def pronounce(self, token: str, lexicon: Lexicon | None) -> tuple[str, int]:
        """One spoken token as ``(its word as written, its length in letters)`` (§14.3): a lexicon word or an
        inline form (its marks around it) lasts as many letters as its entry has phonemes, or its
        respelling letters; the match is the whole token, punctuation at its edges aside."""
        if lexicon:
            for char in token:
                index = inline_index(char)
                if index is not None and index < len(lexicon.inline):
                    entry = lexicon.inline[index]
                    return strip_marks(token), len(entry.phonemes or "")
            core = token.strip(_EDGE_PUNCTUATION)
            entry = lexicon.lookup(token) if lexicon.words else None  # a key with punctuation ("Dr.")
            if entry is None and core and lexicon.words:
                entry = lexicon.lookup(core)
            if entry is not None:
                return token, len(entry.phonemes or entry.respell or "")
        return strip_marks(token), len(strip_marks(token))

    def seconds(self, segment: str, voice: str, speed: float, lexicon: Lexicon | None = None) -> float:
        """Seconds of audio for ``segment``: its spoken text's letters and syllables, plus padding; a
        pronounced word (``lexicon``, §14.3) as long as its pronunciation."""
        text = strip_marks(self.spoken(segment, voice))
        syllables = len(_CJK.findall(text))
        letters = len(text) - syllables
        if lexicon:
            tokens = _TOKEN.findall(self.spoken(segment, voice))
            letters += sum(self.pronounce(t, lexicon)[1] - len(strip_marks(t)) for t in tokens)
        spoken = self.seconds_per_char * letters + self.syllable_seconds * syllables
        return (self.padding_s + spoken) / speed

    def render(
        self, segment: str, voice: str, speed: float, sample_rate: int, lexicon: Lexicon | None = None
    ) -> bytes:
        """PCM16LE mono at ``sample_rate``: a tone whose pitch depends on ``voice``, faded in and out."""
        n = max(2, round(self.seconds(segment, voice, speed, lexicon) * sample_rate))
        t = np.arange(n) / sample_rate
        pitch = self.pitch(voice)
        envelope = np.minimum(1.0, np.minimum(t, t[::-1]) * 40.0)
        wave = 0.25 * np.sin(2 * math.pi * pitch * t) + 0.08 * np.sin(2 * math.pi * 2.5 * pitch * t)
        return float_to_pcm16((wave * envelope).astype(np.float32))

    def words(
        self,
        segment: str,
        voice: str,
        start_s: float,
        end_s: float,
        lexicon: Lexicon | None = None,
        source: SourceMap | None = None,
    ) -> tuple[Word, ...] | None:
        """Word timings of a segment spanning ``[start_s, end_s]`` of its request's audio (§5.3): its spoken
        tokens, each as long as its letters (:meth:`pronounce`), between the padding at either end;
        ``None`` for a language without word timings (:data:`WORD_TIMINGS`). ``source``: where each
        character of ``segment`` is in its request's original text (an utterance's: its fragments joined,
        :func:`segment_source`); each word then carries the span of that text it reads (§14.4), as the
        reference front-end maps it (:meth:`word_spans`)."""
        if Voice.parse(voice).code not in self.word_timings:
            return None
        spans = self.word_spans(segment, voice) if source is not None else None
        tokens = [self.pronounce(t, lexicon) for t in _TOKEN.findall(self.spoken(segment, voice))]
        if spans is not None and len(spans) != len(tokens):
            spans = None  # pragma: no cover - the spoken text is the front-end's pieces joined
        if not tokens:
            return ()
        pad = min(self.padding_s / 2, (end_s - start_s) / 4)
        t, step = start_s + pad, (end_s - start_s - 2 * pad) / max(1, sum(n for _, n in tokens))
        out = []
        for index, (token, letters) in enumerate(tokens):
            span = (None, None) if spans is None or source is None else source.span(*spans[index])
            out.append(Word(token, round(t, 3), round(t + step * letters, 3), *span))
            t += step * letters
        return tuple(out)

    def word_spans(self, segment: str, voice: str) -> list[tuple[int, int]] | None:
        """The span of ``segment`` each token of :meth:`spoken` reads (§14.4): the reference front-end's
        map (:mod:`speech.spans`) carried through markdown and normalization; ``None`` when it fails."""
        try:
            pieces = list(speech_pieces(segment, Voice.parse(voice).code or "a", sourced=True))
        except (TypeError, ValueError):
            return None
        out = []
        for piece in pieces:
            assert piece.source is not None
            out += [piece.source.span(*match.span()) for match in _TOKEN.finditer(piece.text)]
        return out

    def work_s(self, pcm: bytes, sample_rate: int) -> float:
        """Seconds of emulated work for ``pcm``."""
        return self.work_factor * len(pcm) / 2 / sample_rate


def segment_source(text: str, segment: str, at: int = 0) -> tuple[SourceMap, int] | None:
    """Where ``segment`` is in ``text`` from index ``at`` on (§14.4): its map and the index after it.

    A segment is a slice of its text with whitespace collapsed (the tone's sentences; an utterance's
    segments, cut by the chunker from its fragments joined), so its characters that are not whitespace are
    the text's next ones, one to one, whitespace between them skipped; a whitespace character of the
    segment reads nothing. ``None`` when the text does not hold the segment so (a mutant's segment that is
    not the text's).
    """
    try:
        (source,) = SourceMap.identity(text[at:], at).parts([segment])
    except ValueError:
        return None
    read = [end for start, end in zip(source.starts, source.ends, strict=True) if end > start]
    return source, max(read, default=at)


@dataclass
class ToneUtterance:
    """An utterance's text on its way to the tone (PROTOCOL.md §15): segments ready to speak, in order.

    Cut by the same streaming chunker as the reference server cuts an utterance (whole sentences as they
    complete; ``flush`` and ``end`` release the rest), so any fragmentation gives the same segments.
    ``text`` is its fragments' texts joined in the order received, as the session delivered them (whole
    code points: a surrogate pair split across two fragments is one character, §15.2): the text its words'
    spans count in (§14.4).
    """

    text: str = ""

    chunker: IncrementalSentenceChunker = field(
        default_factory=lambda: IncrementalSentenceChunker(markdown=False)
    )
    ready: deque[str] = field(default_factory=deque)
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self, segments: list[str]) -> None:
        self.ready.extend(segments)
        self.changed.set()

    def flush(self) -> None:
        rest = self.chunker.flush()
        self.take([rest] if rest else [])


class ToneConnection(SessionDriver):
    """One accepted WebSocket connection of a :class:`ToneServer`: the project's session driver
    (:class:`reference_server.driver.SessionDriver`) with :class:`ToneSynthesizer` as its synthesis hook.

    One request is synthesized at a time (``lookahead`` 0). The hooks a mutant may override are the
    driver's (:meth:`receive`, :meth:`outgoing`, :meth:`on_accepted`, :meth:`on_cancelled`,
    :meth:`on_close_requested`, :meth:`on_text`, :meth:`on_flush`, :meth:`on_utterance_end`,
    :meth:`mark`, :meth:`take_words`, :meth:`before_complete`, :meth:`complete_words`, :meth:`on_done`,
    :meth:`should_close`, :meth:`closing_code`, :meth:`end`, :meth:`watch_idle`) and the tone's own:
    :meth:`on_refused`, :meth:`synthesize` (the request's :class:`AudioPiece` s), :meth:`segments`,
    :meth:`pronunciations` and :meth:`work` (the emulated synthesis work).
    """

    lookahead = 0

    def __init__(self, server: ToneServer, websocket: WebSocket) -> None:
        self.server = server
        self.websocket = websocket
        session = ServerSession(
            server.limits,
            known_voices=server.voices,
            on_reject=lambda _: self.on_refused(),
            utterances=server.utterances,
            capabilities=server.capabilities,
            voice_blends=server.voice_blends,
            marks=server.marks,
            lexicon=server.lexicon,
        )
        super().__init__(session, StarletteTransport(websocket))
        self.utterances: dict[str, ToneUtterance] = {}
        """Accepted utterances not yet answered, by request id (each also its job's ``state``)."""
        self.closing = True
        """Close the WebSocket once the session is finished (§7.1); a mutant may clear it."""
        self.answered = 0
        """Requests answered by the feeder (started, then completed, cancelled or failed)."""
        self.spoken_s: dict[str, float] = {}
        """Seconds of audio synthesized so far, per request: where its next segment starts (§5.5)."""
        self.segment_at: dict[str, int] = {}
        """Where each request's next segment is looked for in its text, an utterance's in its fragments
        joined (:attr:`ToneUtterance.text`): its words' spans (§14.4)."""
        self.slot_released = False
        """The session gave its slot up to a new one (:meth:`evict`)."""

    def idle_for(self, now: float) -> float | None:
        """Seconds the session has been idle (§7.5), ``None`` while it holds requests or is ending."""
        return None if self.slot_released else super().idle_for(now)

    def evict(self, message: str = "idle; the slot was given to a new session") -> None:
        """Give the slot up to a new session (§7.5): the fatal ``session_idle``, then close 1001."""
        self.slot_released = True
        super().evict(message)

    def on_refused(self) -> None:
        """A message was refused (its error frame is queued). The session goes on (§6.3)."""

    # -- utterances (§15) ------------------------------------------------------------------------------

    def act(self, events: list[ServerEvent]) -> None:
        """The driver's, then each utterance's text joined (:attr:`ToneUtterance.text`, §14.4): here rather
        than in :meth:`on_text`, which a mutant may replace, so that its words' spans stay right."""
        super().act(events)
        for event in events:
            utterance = self.utterances.get(event.request_id) if isinstance(event, TextAppended) else None
            if utterance is not None:
                utterance.text += event.text

    def on_accepted(self, job: Job) -> None:
        """A request joined the queue; an utterance gets its :class:`ToneUtterance` (the job's ``state``)."""
        if job.utterance:
            job.state = self.utterances[job.request_id] = ToneUtterance()

    def on_text(self, job: Job, text: str) -> None:
        """Text of an open utterance arrived: every segment it completes is ready to speak (§15.3)."""
        utterance: ToneUtterance = job.state
        utterance.take(utterance.chunker.feed(text))

    def on_flush(self, job: Job) -> None:
        """``flush``: everything held is ready to speak now (§15.3)."""
        job.state.flush()

    def on_utterance_end(self, job: Job, reason: str) -> None:
        """The utterance takes no more text (``end``, ``close`` or the idle timeout): speak the rest."""
        utterance: ToneUtterance = job.state
        utterance.flush()
        utterance.ended = True
        utterance.changed.set()

    def cancel_audio(self, job: Job) -> None:
        """Wake the synthesis of a cancelled utterance waiting for its text."""
        if isinstance(job.state, ToneUtterance):
            job.state.changed.set()

    def on_done(self, job: Job, status: str) -> None:
        """The request is answered: forget what was kept for it."""
        if job.started:
            self.answered += 1
        self.spoken_s.pop(job.request_id, None)
        self.utterances.pop(job.request_id, None)

    # -- synthesis -------------------------------------------------------------------------------------

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        return self.synthesize(job.request)

    async def work(self, seconds: float) -> None:
        """Emulate ``seconds`` of synthesis work: off the event loop's critical path (§8), or on it when the
        server's ``blocking_work`` is set (the loop then serves nothing meanwhile)."""
        if self.server.blocking_work:
            time.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[AudioPiece]:
        """The request's audio, segment by segment (:meth:`piece`), each after its emulated work; with the
        server's ``whole_text_first`` every segment (an utterance's: once it has ended) is synthesized before
        the first is handed on (§10.1)."""
        synth = self.server.synth
        request, lexicon = self.pronunciations(request)
        if self.server.whole_text_first:
            texts = [segment async for segment in self.segments(request)]  # an utterance's, once it ended
            rate = request.sample_rate
            pcms = [synth.render(s, request.voice, request.speed, rate, lexicon) for s in texts]
            await self.work(sum(synth.work_s(p, request.sample_rate) for p in pcms))
            for text, pcm in zip(texts, pcms, strict=True):
                yield self.piece(request, text, pcm, lexicon)
            return
        async for segment in self.segments(request):
            pcm = synth.render(segment, request.voice, request.speed, request.sample_rate, lexicon)
            await self.work(synth.work_s(pcm, request.sample_rate))
            yield self.piece(request, segment, pcm, lexicon)

    def pronunciations(self, request: SynthesisRequest) -> tuple[SynthesisRequest, Lexicon | None]:
        """The request with its inline forms marked, and what it is spoken with (§14.3): its lexicon (the
        session's under its own, :class:`protocol.server_session.ServerSession`) and its inline forms."""
        if not self.server.lexicon:
            return request, None
        try:
            text, inline = extract_inline(request.text, max_entries=self.server.limits.max_lexicon_entries)
        except LexiconError:  # pragma: no cover - the session refused the request
            return request, None
        words = request.lexicon or {}
        if not words and not inline:
            return request, None
        return replace(request, text=text), Lexicon(words, inline)

    def piece(
        self, request: SynthesisRequest, segment: str, pcm: bytes, lexicon: Lexicon | None = None
    ) -> AudioPiece:
        """A segment's audio ``pcm`` with its span in the request's audio and its word timings (§5.3, §5.5):
        the next segment starts where this one ends."""
        request_id = request.request_id
        assert request_id is not None
        synth = self.server.synth
        start = self.spoken_s.get(request_id, 0.0)
        end = start + len(pcm) / 2 / request.sample_rate
        self.spoken_s[request_id] = end
        utterance = self.utterances.get(request_id)
        text = request.text if utterance is None else utterance.text
        found = segment_source(text, segment, self.segment_at.get(request_id, 0))
        self.segment_at[request_id] = found[1] if found else 0
        words = synth.words(segment, request.voice, start, end, lexicon, found[0] if found else None)
        return AudioPiece(pcm, words, strip_marks(synth.spoken(segment, request.voice)), start, end)

    async def segments(self, request: SynthesisRequest) -> AsyncIterator[str]:
        """The request's segments; an utterance's as they become ready, until it has ended (§15.3)."""
        utterance = self.utterances.get(request.request_id)  # type: ignore[arg-type]
        if utterance is None:
            for segment in self.server.synth.segments(request.text):
                yield segment
            return
        while not self.session.is_cancelled(request.request_id):  # type: ignore[arg-type]
            if utterance.ready:
                yield utterance.ready.popleft()
            elif utterance.ended:
                return
            else:
                utterance.changed.clear()
                await utterance.changed.wait()

    # -- closing ---------------------------------------------------------------------------------------

    def should_close(self) -> bool:
        """Whether to close the WebSocket now: the session is finished (drained after close, §7.1)."""
        return self.closing and super().should_close()


async def played(response: Response) -> Response:
    """``response`` played through to the end and held, for an ``http`` hook to read and rewrite (§11).

    The shipped route's streamed answer releases its invocation slot and closes its synthesis only when it
    is sent (:mod:`reference_server.http`); this sends it into memory, so the slot is free again, and gives
    an answer of the same kind (streamed, in the same chunks, or whole) with its status and headers.
    """
    status, headers, chunks = 200, [], []

    async def receive() -> dict[str, Any]:  # pragma: no cover - ASGI 2.4: a response never listens
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], message.get("headers", [])
        elif message.get("body"):
            chunks.append(message["body"])

    await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    kept = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k.lower() != b"content-length"}
    if not isinstance(response, StreamingResponse):
        return Response(b"".join(chunks), status_code=status, headers=kept)

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return StreamingResponse(body(), status_code=status, headers=kept)


IDLE_TIMEOUT_S = 3.0
"""The tone servers' ``utterance_idle_timeout_s`` (§10; advertised by ``describe``): shorter than the default
20 s so that the idle-timeout case takes seconds, far longer than any pause between an utterance's messages in
the suite."""

EVICTION_S = 2.0
"""The tone servers' ``idle_eviction_s`` (§7.5, §10; advertised by ``describe``): shorter than the default
10 s so that the reserve case takes seconds."""


class ToneServer:
    """The unbroken server. ``connection_class`` is the hook most mutants replace."""

    name = "base"
    connection_class: type[ToneConnection] = ToneConnection
    utterances = True
    """Offer the utterances of §15 (a mutant turns them off to be a version 1 server)."""
    voice_blends = True
    """Offer voice blends (§4.1): a blend's tone lies at the weighted mean of its voices' pitches."""
    marks = True
    """Offer the marks of §5.5."""
    lexicon = True
    """Offer pronunciation lexicons and inline pronunciations (§4.5, §14.3)."""
    word_timings: frozenset[str] = WORD_TIMINGS
    """Languages listed with ``word_timings: true`` in ``capabilities`` (§14.1)."""
    whole_text_first = False
    """Synthesize a request's whole text before handing on its first segment (a mutant's defect, §10.1)."""
    blocking_work = False
    """Do the emulated synthesis work on the event loop (``time.sleep``: a mutant's defect, §8)."""

    def __init__(self) -> None:
        self.limits = Limits(utterance_idle_timeout_s=IDLE_TIMEOUT_S, idle_eviction_s=EVICTION_S)
        self.voices = KOKORO_VOICES
        self.synth = ToneSynthesizer()
        self.sessions = 0
        """Sessions open now; ``limits.max_sessions`` at most (§2.3, §9.4)."""
        self.live: set[ToneConnection] = set()
        self.runtime: Runtime | None = None
        """The shipped runtime behind the HTTP routes (:meth:`app` makes it)."""

    @property
    def capabilities(self) -> Capabilities:
        """The answer to ``describe`` (§4.4), made as the shipped server makes its own
        (:func:`reference_server.capabilities.server_capabilities`): its voices in Kokoro's nine languages,
        :attr:`word_timings`, the formats the shipped ``POST /invocations`` encodes here, and the optional
        features this server offers (:attr:`utterances`, :attr:`voice_blends`, :attr:`marks`,
        :attr:`lexicon`)."""
        offer = SimpleNamespace(
            name="tone",
            voices=self.voices,
            word_timing_languages=self.word_timings,
            voice_blends=self.voice_blends,
        )
        shipped = server_capabilities(offer, self.limits, mp3=MP3_AVAILABLE)
        dropped = {
            "utterance": not self.utterances,
            "marks": not self.marks,
            "lexicon": not self.lexicon,
        }
        return replace(shipped, features=tuple(f for f in shipped.features if not dropped.get(f)))

    def settings(self, host: str = "127.0.0.1", port: int = 8080) -> Settings:
        """The shipped server's settings for this server: the tone backend, :attr:`limits`, quiet logs."""
        return Settings(host=host, port=port, backend="tone", limits=self.limits, log_level="warning")

    def app(self, settings: Settings | None = None) -> Starlette:
        """The shipped server's app (:func:`reference_server.app.create_app`: its ``GET /ping``, ``POST
        /invocations``, HTTP error shape, Host and Origin guard, lifespan) on a :class:`Runtime` of the
        shipped tone backend (:class:`~reference_server.backends.tone.ToneBackend`, with this server's
        :attr:`voice_blends`) under ``settings`` (default :meth:`settings`); its three routes are this
        server's :meth:`ping`, :meth:`invocations` and :meth:`websocket`, the hooks through which a mutant
        injects a defect."""
        backend = ToneBackend(lazy_g2p=True)  # a mutant's cases mostly speak one language: start sooner
        backend.voice_blends = self.voice_blends  # type: ignore[misc]  # a version 1 server's HTTP too
        backend.word_timing_languages = self.word_timings  # HTTP's describe and words as the WebSocket's
        endpoints = {"/ping": self.ping, "/invocations": self.invocations, ws.PATH: self.websocket}
        app = create_app(settings or self.settings(), backend, endpoints=endpoints)
        self.runtime = app.state.runtime
        return app

    def shipped_server(self, host: str = "127.0.0.1", port: int = 8080) -> uvicorn.Server:
        """The shipped server process for :meth:`app` on ``host:port``
        (:func:`reference_server.app.create_server`: its WebSocket transport, close timeout, bounded HTTP
        heads, shutdown closing sessions with 1001)."""
        settings = self.settings(host, port)
        return create_server(settings, self.app(settings))

    async def ping(self, request: Request) -> Response:
        """``GET /ping`` (§2.2): the shipped route's answer (503 until the tone backend is ready)."""
        return await shipped_http.ping(request)

    async def invocations(self, request: Request) -> Response:
        """``POST /invocations`` (§11): the shipped route's answer, spoken by the shipped tone backend."""
        return await shipped_http.invocations(request)

    reserve = True
    """Give a new session the slot of one idle ``idle_eviction_s`` when every slot is taken (§7.5)."""

    def evict_idle(self) -> bool:
        """End the session idle longest if idle ``idle_eviction_s`` (§7.5); ``True``: its slot is free."""
        now = time.monotonic()
        idle = [(seconds, s) for s in self.live if (seconds := s.idle_for(now)) is not None]
        if not self.reserve or not idle:
            return False
        seconds, victim = max(idle, key=lambda pair: pair[0])
        if seconds < self.limits.idle_eviction_s:
            return False
        victim.evict()
        self.sessions -= 1
        return True

    async def websocket(self, websocket: WebSocket) -> None:
        """Accept at once (§2.3); past ``max_sessions`` give the new session an idle one's slot (§7.5) or
        refuse it with the fatal ``too_many_sessions`` (§9.4), else serve the session, holding its place
        until it ends."""
        await websocket.accept()
        if self.sessions >= self.limits.max_sessions and not self.evict_idle():
            await self.refuse_session(websocket)
            return
        self.sessions += 1
        session = self.connection_class(self, websocket)
        self.live.add(session)
        try:
            await session.run()
        finally:
            self.live.discard(session)
            if not session.slot_released:
                self.sessions -= 1

    async def refuse_session(self, websocket: WebSocket) -> None:
        """The fatal ``too_many_sessions`` error frame, then the WebSocket Close 1013 (§9.1, §9.4)."""
        session = ServerSession()
        session.abort(ErrorCode.TOO_MANY_SESSIONS, f"{self.limits.max_sessions} sessions are open")
        with contextlib.suppress(Exception):
            for frame in session.data_to_send():
                await websocket.send_text(frame)  # type: ignore[arg-type]
            await websocket.close(session.close_code or 1013)

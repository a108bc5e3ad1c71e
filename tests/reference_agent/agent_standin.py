"""An in-process TTS stand-in for the agent's tests: the real session protocol, cheap audio.

:class:`StandInTts` is a :class:`reference_agent.tts.TtsStream` whose far end is
:class:`protocol.server_session.ServerSession`: requests are parsed, answered in order, bracketed and cut into
audio frames exactly as the reference server does, but the "speech" is a deterministic sawtooth whose
length depends on the text, timed word by word (:func:`words_for`, PROTOCOL.md §5.3). Server messages
come back as PayloadParts, optionally split into small parts (as SageMaker may, PROTOCOL.md §12). Faults:
a ``ModelStreamError`` after N messages, a stall, a refusing endpoint.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from protocol.messages import Word
from protocol.server_session import (
    RequestAccepted,
    ServerSession,
    TextAppended,
    UtteranceEnded,
    UtteranceFlushed,
)
from reference_agent.tts import TtsEndpoint, TtsUnavailable
from reference_server.driver import AudioPiece, Job, SessionDriver, StarletteTransport
from speech.chunker import IncrementalSentenceChunker

SAMPLES_PER_CHAR = 40
"""Audio length per character of text: a 60-character sentence gives 2,400 samples (0.1 s at 24 kHz)."""


def words_for(text: str, sample_rate: int, start_s: float = 0.0) -> list[Word]:
    """The word timings of :func:`speech_for`'s audio for ``text`` at ``sample_rate``, from ``start_s``: each
    whitespace-separated word spans the samples of its characters (:data:`SAMPLES_PER_CHAR` each)."""
    seconds = SAMPLES_PER_CHAR / sample_rate
    return [
        Word(m.group(), round(start_s + m.start() * seconds, 6), round(start_s + m.end() * seconds, 6))
        for m in re.finditer(r"\S+", text)
    ]


def speech_for(text: str) -> bytes:
    """The stand-in's PCM16LE "speech" for ``text``: deterministic, never empty for non-empty text."""
    base = sum(map(ord, text)) % 997
    samples = (((i * 53 + base) % 4000) - 2000 for i in range(SAMPLES_PER_CHAR * max(1, len(text))))
    return b"".join(s.to_bytes(2, "little", signed=True) for s in samples)


@dataclass
class _Utterance:
    """An utterance (PROTOCOL.md §15) the stand-in is answering: its text so far, the sentences ready."""

    sample_rate: int = 24_000
    text: str = ""
    words: list[Word] = field(default_factory=list)
    spoken_s: float = 0.0
    chunker: IncrementalSentenceChunker = field(
        default_factory=lambda: IncrementalSentenceChunker(markdown=False)
    )
    ready: list[str] = field(default_factory=list)
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when text, ``flush``, ``end`` or a cancel arrives (the socket container waits on it)."""

    def flush(self) -> None:
        rest = self.chunker.flush()
        if rest:
            self.ready.append(rest)


class Answerer:
    """The far end of a stand-in session: a :class:`ServerSession` that answers at once, in order.

    :meth:`receive` takes one client message and returns the frames to send (``str`` TEXT control,
    ``bytes`` BINARY audio). Requests are spoken with :func:`speech_for`; utterances (PROTOCOL.md §15)
    like the reference server speaks them: each sentence as soon as the text completes it, the rest at
    ``flush``/``end``.

    Args:
        sample_rate: announce this rate in ``synthesis_start`` instead of the requested one.
        utterances: offer utterances; ``False`` answers them ``unknown_type``, as a version 1 server.
        stall: accept requests but never answer them.
        voices: the voices it speaks (others are refused with ``invalid_voice``); ``None``: any.

    Attributes:
        texts: the text of every request answered, in order (an utterance's whole text).
        messages: every message received, decoded.
    """

    def __init__(
        self,
        *,
        sample_rate: int | None = None,
        utterances: bool = True,
        stall: bool = False,
        voices: frozenset[str] | None = None,
    ) -> None:
        self.server = ServerSession(utterances=utterances, known_voices=voices)
        self.sample_rate = sample_rate
        self.stall = stall
        self.texts: list[str] = []
        self.messages: list[dict] = []
        self._utterances: dict[str, _Utterance] = {}
        self._active: str | None = None

    def receive(self, data: bytes | str) -> list[bytes | str]:
        """Handle one client message; return the frames it makes the server send."""
        try:
            self.messages.append(json.loads(data))
        except ValueError:
            self.messages.append({"undecodable": repr(data[:40])})
        for event in self.server.receive_frame(data):
            if isinstance(event, RequestAccepted) and event.utterance:
                self._utterances[event.request.request_id] = _Utterance(event.request.sample_rate)  # type: ignore[index]
            elif isinstance(event, TextAppended):
                utterance = self._utterances[event.request_id]
                utterance.text += event.text
                utterance.ready += utterance.chunker.feed(event.text)
            elif isinstance(event, UtteranceFlushed):
                self._utterances[event.request_id].flush()
            elif isinstance(event, UtteranceEnded):
                self._utterances[event.request_id].flush()
                self._utterances[event.request_id].ended = True
        if not self.stall:
            self._answer()
        return self.server.data_to_send()

    def _answer(self) -> None:
        server = self.server
        while True:
            if (request := server.next_request()) is not None:
                request_id = request.request_id
                assert request_id is not None
                server.start(request_id, sample_rate=self.sample_rate)
                if request_id not in self._utterances:
                    self.texts.append(request.text)
                    server.audio(request_id, speech_for(request.text))
                    server.complete(
                        request_id, words_for(request.text, self.sample_rate or request.sample_rate)
                    )
                    continue
                self._active = request_id
            if self._active is None:
                break
            utterance = self._utterances[self._active]
            rate = self.sample_rate or utterance.sample_rate
            while utterance.ready:
                sentence = utterance.ready.pop(0)
                if server.audio(self._active, speech_for(sentence)):
                    utterance.words += words_for(sentence, rate, utterance.spoken_s)
                    utterance.spoken_s += SAMPLES_PER_CHAR * max(1, len(sentence)) / rate
            if not (utterance.ended or server.is_cancelled(self._active)):
                break  # the utterance is open: more text may come
            self.texts.append(utterance.text)
            server.complete(self._active, utterance.words)
            del self._utterances[self._active]
            self._active = None


class StandInTts:
    """A TTS session answered in-process by an :class:`Answerer` (a :class:`ServerSession`).

    Args:
        part_size: split every server message into PayloadParts of at most this many bytes.
        fail_after_messages: after this many server messages, end the stream with a
            ``ModelStreamError`` (the official client raises it from ``receive()``).
        stall: accept requests but never answer (to exercise the agent's idle timeout).
        sample_rate: announce this rate in ``synthesis_start`` instead of the requested one.
        utterances: offer utterances (§15); ``False`` answers them ``unknown_type``, as a v1 server.
        voices: the voices it speaks (others are refused with ``invalid_voice``); ``None``: any.

    Attributes:
        texts: the text of every request answered, in order (an utterance's whole text).
        messages: every message received, decoded.
        produced: every audio byte sent, in order.
        input_closed, closed: whether the agent ended its input / released the session.
    """

    def __init__(
        self,
        *,
        part_size: int | None = None,
        fail_after_messages: int | None = None,
        stall: bool = False,
        sample_rate: int | None = None,
        utterances: bool = True,
        voices: frozenset[str] | None = None,
    ) -> None:
        self.part_size = part_size
        self.fail_after_messages = fail_after_messages
        self.answerer = Answerer(sample_rate=sample_rate, utterances=utterances, stall=stall, voices=voices)
        self.server = self.answerer.server
        self.texts = self.answerer.texts
        self.messages = self.answerer.messages
        self.produced = bytearray()
        self.input_closed = False
        self.closed = False
        self._messages = 0
        self._out: asyncio.Queue[tuple[bytes, bool] | BaseException | None] = asyncio.Queue()
        self._ended = False
        self._frames: list[bytes | str] = []

    async def send(self, data: bytes) -> None:
        if self.input_closed:
            raise RuntimeError("send after close_input")
        # The agent sends DataType UTF8, which reaches the container as a TEXT frame (REFERENCE.md §1).
        self._frames = self.answerer.receive(data.decode("utf-8"))
        self._pump()

    def _pump(self) -> None:
        """Send what the answerer made of the last message (a test may override it to misbehave)."""
        frames, self._frames = self._frames, []
        for frame in frames:
            self._emit(
                frame.encode("utf-8") if isinstance(frame, str) else frame, audio=isinstance(frame, bytes)
            )
        if self.server.finished:
            self._end(None)

    def _emit(self, message: bytes, *, audio: bool) -> None:
        if self._ended:
            return
        if self.fail_after_messages is not None and self._messages >= self.fail_after_messages:
            from aws_sdk_sagemaker_runtime_http2.models import ModelStreamError

            self._end(ModelStreamError(message="container closed the stream", error_code="StreamBroken"))
            return
        self._messages += 1
        if audio:
            self.produced += message
        size = self.part_size or len(message)
        for offset in range(0, len(message), size):
            end = offset + size
            self._out.put_nowait((message[offset:end], end >= len(message)))

    def _end(self, error: BaseException | None) -> None:
        if not self._ended:
            self._ended = True
            self._out.put_nowait(error)

    async def receive(self) -> AsyncIterator[tuple[bytes, bool]]:
        while True:
            item = await self._out.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def close_input(self) -> None:
        self.input_closed = True

    async def aclose(self) -> None:
        self.input_closed = True
        self.closed = True


class StandInFactory:
    """A ``tts_connect`` that opens :class:`StandInTts` sessions and keeps them for inspection.

    Args:
        refuse: raise :class:`TtsUnavailable` instead of opening (the endpoint is down).
        **options: passed to every :class:`StandInTts`.
    """

    def __init__(self, *, refuse: bool = False, **options: object) -> None:
        self.refuse = refuse
        self.options = options
        self.sessions: list[StandInTts] = []
        self.endpoints: list[TtsEndpoint] = []

    async def __call__(self, endpoint: TtsEndpoint) -> StandInTts:
        self.endpoints.append(endpoint)
        if self.refuse:
            raise TtsUnavailable(f"cannot open the TTS stream: connection refused ({endpoint.name})")
        session = StandInTts(**self.options)  # type: ignore[arg-type]
        self.sessions.append(session)
        return session


class _StandInDriver(SessionDriver):
    """A socket session of :func:`standin_container`: the project's session driver with the stand-in's
    speech (:func:`speech_for`, :func:`words_for`) as its synthesis hook; utterances spoken sentence by
    sentence as their text completes them (PROTOCOL.md §15). Every answered request's text (an utterance's
    whole text) joins ``texts``; every audio byte sent joins ``produced``."""

    def __init__(self, websocket: Any, texts: list[str], produced: bytearray) -> None:
        super().__init__(ServerSession(utterances=True), StarletteTransport(websocket))
        self.texts = texts
        self.produced = produced

    def on_accepted(self, job: Job) -> None:
        if job.utterance:
            job.state = _Utterance(job.request.sample_rate)

    def on_text(self, job: Job, text: str) -> None:
        utterance: _Utterance = job.state
        utterance.text += text
        utterance.ready += utterance.chunker.feed(text)
        utterance.changed.set()

    def on_flush(self, job: Job) -> None:
        job.state.flush()
        job.state.changed.set()

    def on_utterance_end(self, job: Job, reason: str) -> None:
        job.state.flush()
        job.state.ended = True
        job.state.changed.set()

    def cancel_audio(self, job: Job) -> None:
        if job.state is not None:
            job.state.changed.set()

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        return self._speak(job)

    async def _speak(self, job: Job) -> AsyncIterator[AudioPiece]:
        request = job.request
        if not job.utterance:
            yield AudioPiece(speech_for(request.text), tuple(words_for(request.text, request.sample_rate)))
            return
        utterance: _Utterance = job.state
        while not job.cancelled:
            while utterance.ready:
                sentence = utterance.ready.pop(0)
                words = tuple(words_for(sentence, utterance.sample_rate, utterance.spoken_s))
                utterance.spoken_s += SAMPLES_PER_CHAR * max(1, len(sentence)) / utterance.sample_rate
                yield AudioPiece(speech_for(sentence), words)
            if utterance.ended:
                return
            utterance.changed.clear()
            await utterance.changed.wait()

    def on_done(self, job: Job, status: str) -> None:
        if job.started:
            self.texts.append(job.state.text if job.utterance else job.request.text)

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        for frame in frames:
            if isinstance(frame, bytes):
                self.produced += frame
        return frames


def standin_container():
    """The stand-in as a model container for the simulator: a Starlette app on SageMaker's routes.

    ``GET /ping`` and the WebSocket route ``/invocations-bidirectional-stream`` (PROTOCOL.md §2), each session
    run by the project's session driver (:class:`reference_server.driver.SessionDriver`) with
    :func:`speech_for` as its synthesis. Control frames go out as TEXT, audio as BINARY (§3); both frame types
    are accepted. ``app.state.texts`` and ``app.state.produced`` record what every session was asked and sent.
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket

    async def ping(request):
        return JSONResponse({"status": "ok"})

    async def bidi(websocket: WebSocket) -> None:
        await websocket.accept()
        await _StandInDriver(websocket, app.state.texts, app.state.produced).run()

    app = Starlette(routes=[Route("/ping", ping), WebSocketRoute("/invocations-bidirectional-stream", bidi)])
    app.state.texts = []
    app.state.produced = bytearray()
    return app

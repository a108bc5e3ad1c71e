"""The agent's TTS leg: one persistent bidirectional session, spoken to one sentence at a time.

Two layers:

* :class:`TtsStream` is the transport: whole client messages go out, PayloadParts come back
  (PROTOCOL.md §12). :mod:`reference_agent.sagemaker_tts` implements it over the official
  ``aws-sdk-sagemaker-runtime-http2`` client, which reaches the simulator and a live endpoint alike;
  tests plug in an in-process stand-in.
* :class:`Speaker` runs the session protocol on top with :class:`protocol.client_session.ClientSession`:
  :meth:`Speaker.say` sends one synthesis request per text (§4.1), or :meth:`Speaker.stream` pipes
  text fragments into one utterance (§15) that :meth:`Speaker.end_stream` ends; :meth:`Speaker.audio`
  yields the audio as it arrives and checks every server message (§3, §5, §6) until every request is
  answered after :meth:`Speaker.finish`. Input stays open until then (REFERENCE.md §1, closing: a client that
  ends its input early can lose its last message); ending it ends the session. On a barge-in
  :meth:`Speaker.cancel` cancels every request not yet answered (§4.2); :attr:`Speaker.answers` keeps each
  request's text with its ``synthesis_complete``, whose word timings say what its audio spoke (§5.3).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.client_session import ClientSession, ProtocolViolation
from protocol.messages import SynthesisComplete
from protocol.server_output import AudioReceived, ErrorReceived, SynthesisCompleted, SynthesisStarted
from reference_agent.events import AgentErrorCode, Segment
from speech.spans import SourceMap

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_OUTSTANDING",
    "Speaker",
    "TtsConnect",
    "TtsEndpoint",
    "TtsFailure",
    "TtsStream",
    "TtsUnavailable",
    "close_session",
]

DEFAULT_MAX_OUTSTANDING = 8
"""Requests a speaker keeps unanswered at once before :meth:`Speaker.say` waits.

Well under the server's ``max_queue`` of 32 (PROTOCOL.md §10), so a long reply written faster than it
is spoken is held back here instead of being refused with ``queue_full``.
"""

DEFAULT_IDLE_TIMEOUT_S = 30.0
"""Longest wait for the next server message while an answer is owed, in seconds.

Kokoro speaks one sentence chunk in well under this on a CPU (REFERENCE.md §4); a TTS that stays
silent longer has stalled, and the agent reports it instead of hanging.
"""


class TtsUnavailable(Exception):
    """The TTS session could not be opened (connection refused, TLS, HTTP error before the stream)."""

    code = AgentErrorCode.TTS_UNAVAILABLE


class TtsFailure(Exception):
    """The open TTS session failed: stream error, ``error`` frame, protocol violation, early end.

    Attributes:
        code: :attr:`AgentErrorCode.TTS_ERROR`, or :attr:`AgentErrorCode.TIMEOUT` for a stalled TTS.
    """

    def __init__(self, message: str, code: AgentErrorCode = AgentErrorCode.TTS_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class TtsEndpoint:
    """Where the TTS session goes.

    Attributes:
        name: the SageMaker endpoint name.
        url: endpoint URL override (the simulator's ``https://127.0.0.1:PORT``), or ``None`` for the
            client's default resolution (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2``, then the
            regional endpoint).
        region: AWS region, or ``None`` for the client's default resolution.
    """

    name: str
    url: str | None = None
    region: str | None = None


class TtsStream(Protocol):
    """A bidirectional TTS stream at the PayloadPart level (PROTOCOL.md §12).

    The agent sends only whole messages, so each :meth:`send` is one message with
    ``CompletionState=COMPLETE``. :meth:`receive` yields ``(bytes, complete)`` per PayloadPart and ends
    when the server's stream ends; server exceptions (``ModelStreamError``, ``InternalStreamFailure``)
    are raised from it. A session is used by one task for sending and one for receiving.
    """

    async def send(self, data: bytes) -> None:
        """Send one whole client message (a UTF-8 JSON object, DataType ``UTF8``)."""
        ...

    def receive(self) -> AsyncIterator[tuple[bytes, bool]]:
        """The server's PayloadParts as ``(bytes, complete)``, until the stream ends.

        Raises:
            TtsUnavailable: the stream never opened.
            Exception: whatever the transport raises for a failed stream.
        """
        ...

    async def close_input(self) -> None:
        """End the input stream; the output may still be read."""
        ...

    async def aclose(self) -> None:
        """Release everything; safe to call more than once."""
        ...


TtsConnect = Callable[[TtsEndpoint], Awaitable[TtsStream]]
"""Opens a :class:`TtsStream`; raises :class:`TtsUnavailable` (or any exception) when it cannot."""


class SourcedText(str):
    """A text to say with where it is in the reply (PROTOCOL.md §14.4): the agent's segmenter cleans the
    reply (markdown removed, whitespace collapsed) before the TTS reads it, so the spans the TTS gives of
    the text sent are moved back into the reply by ``source`` (:class:`speech.spans.SourceMap`)."""

    source: SourceMap

    def __new__(cls, text: str, source: SourceMap) -> SourcedText:
        made = super().__new__(cls, text)
        made.source = source
        return made


class Speaker:
    """Speaks texts over one :class:`TtsStream` and yields the audio in order.

    Use from two tasks: one calls :meth:`say` per text and then :meth:`finish`; the other iterates
    :meth:`audio`, then ends the session with :func:`close_session`. :attr:`segments` lists every
    answered request in order.

    Args:
        session: an open TTS session.
        voice, speed, sample_rate: fields of every synthesis request (PROTOCOL.md §4.1).
        max_outstanding: unanswered requests allowed before :meth:`say` waits.
        idle_timeout_s: longest silence from the server while an answer is owed.
    """

    def __init__(
        self,
        session: TtsStream,
        *,
        voice: str,
        speed: float,
        sample_rate: int,
        max_outstanding: int = DEFAULT_MAX_OUTSTANDING,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        if max_outstanding < 1:
            raise ValueError(f"max_outstanding must be >= 1, got {max_outstanding}")
        self.session = session
        self.voice = voice
        self.speed = speed
        self.sample_rate = sample_rate
        self.max_outstanding = max_outstanding
        self.idle_timeout_s = idle_timeout_s
        # Frames may be re-split by SageMaker (REFERENCE.md §1), so only reassembled messages are
        # checked, not the size of each part.
        self._client = ClientSession(check_frames=False)
        self._texts: dict[str, str] = {}
        # Where each request's text is in the reply (§14.4); an utterance's text is the reply itself.
        self._sources: dict[str, SourceMap | None] = {}
        self._replies: set[str] = set()  # utterances of stream(): their spans are the reply's already
        self._utterance: str | None = None  # the open utterance of stream(), if any
        self._answered = asyncio.Condition()
        self._finished = False
        self._cancelled = False
        self._wait_scope: asyncio.Timeout | None = None
        self.segments: list[Segment] = []
        """Answered requests, in order: the text sent and the audio bytes its answer reported."""
        self.answers: list[tuple[str, SynthesisComplete]] = []
        """Answered requests, in order: the text sent and its ``synthesis_complete`` (§5.3: its audio's
        duration and word timings, the audio sent before a cancel for a cancelled one)."""
        self.drained = asyncio.Event()
        """Set once :meth:`audio` has returned or failed: nothing more will be spoken."""

    @property
    def streaming(self) -> bool:
        """Whether an utterance opened by :meth:`stream` is still open."""
        return self._utterance is not None

    @property
    def outstanding(self) -> int:
        """Requests sent and not yet answered with ``synthesis_complete``."""
        return len(self._client.outstanding)

    async def say(self, text: str) -> None:
        """Send one synthesis request for ``text``; waits while ``max_outstanding`` are unanswered.

        Raises:
            RuntimeError: called after :meth:`finish`.
            TtsFailure: the transport refused the message.
        """
        if self._finished:
            raise RuntimeError("say() after finish()")
        async with self._answered:
            await self._answered.wait_for(lambda: self.outstanding < self.max_outstanding)
        request_id, frame = self._client.request(
            text, voice=self.voice, speed=self.speed, sample_rate=self.sample_rate
        )
        self._texts[request_id] = text
        self._sources[request_id] = text.source if isinstance(text, SourcedText) else None
        await self._send(frame)
        self._arm_deadline()

    async def stream(self, text: str) -> None:
        """Pipe ``text`` into the reply's utterance (PROTOCOL.md §15): the first call opens it (with
        ``text`` as its first fragment), later ones append. The TTS decides where to cut; ``""`` only
        keeps the utterance open (§15.5) while the model pauses.

        Raises:
            RuntimeError: called after :meth:`finish`.
            TtsFailure: the transport refused the message.
        """
        if self._finished:
            raise RuntimeError("stream() after finish()")
        if self._utterance is None:
            async with self._answered:
                await self._answered.wait_for(lambda: self.outstanding < self.max_outstanding)
            request_id, frame = self._client.utterance(
                text=text, voice=self.voice, speed=self.speed, sample_rate=self.sample_rate
            )
            self._utterance = request_id
            self._texts[request_id] = text
            self._replies.add(request_id)
        else:
            frame = self._client.append(self._utterance, text)
            self._texts[self._utterance] += text
        await self._send(frame)
        # An open utterance owes audio only for what it was sent: each fragment restarts the wait.
        self._arm_deadline(restart=True)

    async def end_stream(self) -> None:
        """End the utterance :meth:`stream` opened (§15.4): the TTS speaks the rest. No-op if none is open.

        Raises:
            TtsFailure: the transport refused the message.
        """
        if self._utterance is None:
            return
        request_id, self._utterance = self._utterance, None
        await self._send(self._client.end(request_id))
        self._arm_deadline(restart=True)

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    async def cancel(self) -> None:
        """Barge-in: cancel every request not yet answered and take no more text (PROTOCOL.md §4.2).

        Sends one ``cancel`` without ``request_id`` (an open utterance is cancelled with the rest, §15.5),
        then :meth:`finish`: :meth:`audio` returns once every request is answered, the cancelled ones with
        ``status`` ``cancelled`` (audio already on its way still arrives and is yielded). Idempotent.

        Raises:
            TtsFailure: the transport refused the message.
        """
        if self._cancelled:
            return
        self._cancelled = True
        self._utterance = None
        if self.outstanding:
            await self._send(self._client.cancel())
        self.finish()

    def finish(self) -> None:
        """No more texts: :meth:`audio` returns once every request sent so far is answered.

        No ``close`` message is sent: the session ends when the caller ends the input after the last
        answer (SageMaker then closes the container's WebSocket, REFERENCE.md §1), so every request
        is answered first. A ``close`` would make the server end the response on its own, racing the
        client's end of input; the CRT transport fails a write after the response has completed.
        """
        if self._finished:
            return
        self._finished = True
        scope = self._wait_scope
        if scope is not None and self.outstanding == 0:
            # audio() is waiting for a part that will never come: end that wait now.
            scope.reschedule(asyncio.get_running_loop().time())
        else:
            self._arm_deadline()

    def _reply_words(self, frame: SynthesisComplete) -> tuple[dict[str, Any], ...] | None:
        """The answer's words, each span moved from the text sent into the reply (§14.4); a word without
        a span, or of a text whose place in the reply is not known, keeps none."""
        request_id = frame.request_id
        source = self._sources.pop(request_id, None)
        reply = request_id in self._replies
        self._replies.discard(request_id)
        if frame.words is None:
            return None
        out = []
        for word in frame.words:
            entry = {"word": word.word, "start_s": word.start_s, "end_s": word.end_s}
            span = word.span
            if span is not None and source is not None and span[1] <= len(source.text):
                entry["text_start"], entry["text_end"] = source.span(*span)
            elif span is not None and reply:
                entry["text_start"], entry["text_end"] = span
            out.append(entry)
        return tuple(out)

    async def _send(self, frame: bytes) -> None:
        try:
            await self.session.send(frame)
        except (TtsUnavailable, TtsFailure):
            raise
        except Exception as exc:
            raise TtsFailure(f"sending to the TTS failed: {type(exc).__name__}: {exc}") from exc

    def _owed(self) -> bool:
        return self._finished or self.outstanding > 0

    def _arm_deadline(self, *, restart: bool = False) -> None:
        # The receive wait has no deadline while nothing is owed (the model may think for a while);
        # the first request sent during that wait starts the clock. An utterance's fragments restart it.
        scope = self._wait_scope
        if scope is not None and (restart or scope.when() is None):
            scope.reschedule(asyncio.get_running_loop().time() + self.idle_timeout_s)

    async def audio(self) -> AsyncIterator[bytes]:
        """Yield the audio of every request as it arrives: whole PCM16LE samples, never empty.

        Returns once :meth:`finish` was called and every request was answered.

        Raises:
            TtsUnavailable: the stream never opened.
            TtsFailure: a stream exception, an ``error`` frame, a failed request (or one cancelled
                other than by :meth:`cancel`), a different sample rate than asked, a protocol
                violation, the stream ending while answers are owed, or ``idle_timeout_s`` of silence
                while answers are owed.
        """
        try:
            async for pcm in self._audio():
                yield pcm
        finally:
            self.drained.set()

    async def _audio(self) -> AsyncIterator[bytes]:
        parts = aiter(self.session.receive())
        loop = asyncio.get_running_loop()
        while not (self._finished and self.outstanding == 0):
            deadline = loop.time() + self.idle_timeout_s if self._owed() else None
            try:
                async with asyncio.timeout(deadline) as scope:
                    self._wait_scope = scope
                    try:
                        part = await anext(parts, None)
                    finally:
                        self._wait_scope = None
            except TimeoutError:
                if self._finished and self.outstanding == 0:
                    return
                raise TtsFailure(
                    f"no answer from the TTS for {self.idle_timeout_s:g} s "
                    f"with {self.outstanding} request(s) outstanding",
                    AgentErrorCode.TIMEOUT,
                ) from None
            except (TtsUnavailable, TtsFailure):
                raise
            except Exception as exc:
                raise TtsFailure(f"TTS stream failed: {type(exc).__name__}: {exc}") from exc
            if part is None:
                if self._finished and self.outstanding == 0:
                    return
                raise TtsFailure(
                    f"TTS stream ended with {self.outstanding} request(s) unanswered"
                    + ("" if self._finished else " before the reply was complete")
                )
            data, complete = part
            try:
                events = self._client.receive_part(data, complete)
            except ProtocolViolation as exc:
                # The rule's name lets a reader of the error event (the conformance suite) name the clause.
                rule = f" [rule {exc.rule}]" if exc.rule else ""
                raise TtsFailure(f"TTS broke the protocol: {exc}{rule}") from exc
            for event in events:
                pcm = await self._on_event(event)
                if pcm:
                    yield pcm

    async def _on_event(self, event: object) -> bytes | None:
        if isinstance(event, AudioReceived):
            return event.pcm
        if isinstance(event, SynthesisStarted):
            if event.frame.sample_rate != self.sample_rate:
                raise TtsFailure(
                    f"TTS answered at {event.frame.sample_rate} Hz, {self.sample_rate} Hz was asked"
                )
            return None
        if isinstance(event, SynthesisCompleted):
            frame = event.frame
            if frame.status != "completed" and not (self._cancelled and frame.status == "cancelled"):
                raise TtsFailure(f"TTS request {frame.request_id} ended with status {frame.status}")
            text = self._texts.pop(frame.request_id, "")
            self.segments.append(Segment(text, frame.audio_bytes, self._reply_words(frame)))
            self.answers.append((text, frame))
            async with self._answered:
                self._answered.notify_all()
            return None
        if isinstance(event, ErrorReceived):
            frame = event.frame
            refused = frame.code == "unknown_type" and frame.message_type is None
            if refused and frame.request_id in self._texts:
                raise TtsFailure(
                    f"the TTS does not offer utterances (PROTOCOL.md §15; it answered {frame.code}): "
                    "use mode bidi, which chunks the reply itself"
                )
            raise TtsFailure(f"TTS error {frame.code}: {frame.message}")
        raise AssertionError(f"unexpected client event {event!r}")  # ClientSession's contract


async def close_session(session: TtsStream, timeout_s: float = 5.0) -> None:
    """End the input of ``session`` and release it; never raises, never waits more than ``timeout_s``.

    Called only once the output is drained or abandoned (REFERENCE.md §1, closing).
    """
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout_s):
            with contextlib.suppress(Exception):
                await session.close_input()
            await session.aclose()

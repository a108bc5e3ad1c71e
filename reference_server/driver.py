"""The one asyncio driver of :class:`protocol.server_session.ServerSession`: every WebSocket server of the
project (the reference server, the tone server the mutants break, the test containers) runs its sessions
with :class:`SessionDriver`, as python-websockets drives its one sans-I/O protocol from one module.

Every protocol rule (parsing, error codes, ordering, brackets, frame cutting) lives in the sans-I/O session;
the driver moves bytes and runs synthesis. Six tasks share one session (PROTOCOL.md §2, §7, §8):

* the **reader** receives every client message, TEXT or BINARY (§3.1), feeds it to
  :meth:`~ServerSession.receive_frame` and acts on the events at once, so ``cancel`` and ``close`` work
  while audio is being produced and sent;
* the **synthesizer** runs the synthesis hook (:meth:`SessionDriver.open_audio`) for requests in arrival
  order, up to :attr:`SessionDriver.lookahead` requests ahead of the one being sent;
* the **feeder** hands the head request's audio pieces to the session (:meth:`~ServerSession.start`,
  :meth:`~ServerSession.marks`, :meth:`~ServerSession.audio`, :meth:`~ServerSession.complete`) and waits for
  each piece to be written before taking the next, which bounds what a slow client can make the server hold;
* the **writer** is the only task that sends: it writes :meth:`~ServerSession.data_to_send` in order and
  closes the connection once :meth:`SessionDriver.should_close` says so (1000 after ``close``, the fatal
  code after a fatal error, 1001 on server shutdown);
* the **idle watch** ends an active utterance that got no message for ``utterance_idle_timeout_s``
  (:meth:`~ServerSession.deadline`, :meth:`~ServerSession.expire`, §15.5);
* the **limit watch** ends a session idle for ``session_idle_timeout_s`` (``session_idle``, §7.5) and one
  whose client let output wait ``send_timeout_s`` without reading (``client_not_reading``, §10.3).

Bounds against a client that floods (§10.3): the reader stops reading while more than ``max_output_bytes``
of output wait for the client (backpressure), yields to the event loop after every message, and pauses a
session whose parsing exceeds ``max_parse_cpu_share`` of one core (:class:`~protocol.limits.CpuBudget`).

Hooks (override in a subclass; each has a correct default):

* frames in and out: :meth:`~SessionDriver.receive` (the next client message: may rewrite, drop or add
  messages), :meth:`~SessionDriver.outgoing` (the frames about to be sent: may rewrite, drop or add frames);
* synthesis: :meth:`~SessionDriver.open_audio` (the :class:`AudioPiece` s a request yields, with their word
  timings and ``marks`` spans), :meth:`~SessionDriver.cancel_audio` (how a job is stopped),
  :meth:`~SessionDriver.on_text`, :meth:`~SessionDriver.on_flush`, :meth:`~SessionDriver.on_utterance_end`
  (an utterance's text, §15), :meth:`~SessionDriver.wait_ready` (a model still loading);
* the session's life: :meth:`~SessionDriver.on_accepted`, :meth:`~SessionDriver.on_cancelled`,
  :meth:`~SessionDriver.on_close_requested`, :meth:`~SessionDriver.on_done`,
  :meth:`~SessionDriver.should_close`, :meth:`~SessionDriver.closing_code`, :meth:`~SessionDriver.on_closing`,
  :meth:`~SessionDriver.end`;
* the request's answer: :meth:`~SessionDriver.mark`, :meth:`~SessionDriver.take_words`,
  :meth:`~SessionDriver.before_complete`, :meth:`~SessionDriver.complete_words`.

The transport is a :class:`Transport`; :class:`StarletteTransport` adapts a Starlette WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket

from protocol.errors import CLOSE_GOING_AWAY, ErrorCode
from protocol.limits import CpuBudget
from protocol.logs import log_event
from protocol.messages import SynthesisRequest, Word
from protocol.server_session import (
    CloseRequested,
    RequestAccepted,
    RequestCancelled,
    ServerEvent,
    ServerSession,
    TextAppended,
    UtteranceEnded,
    UtteranceFlushed,
)
from protocol.voices import Voice

__all__ = ["SEGMENT_BUFFER", "AudioPiece", "Job", "SessionDriver", "StarletteTransport", "Transport"]

SEGMENT_BUFFER = 2
"""Synthesized pieces a request may hold before the feeder takes them. With one more being written and one
being synthesized this keeps the next audio ready without letting a slow client pile up a long text's audio
in memory."""

logger = logging.getLogger("reference_server")

Frame = bytes | str


@dataclass(frozen=True, slots=True)
class AudioPiece:
    """One segment's audio, ready to send.

    Attributes:
        pcm: PCM16LE mono at the request's sample rate (even length; may be empty when a resampler holds
            everything back).
        words: word timings of this segment in seconds from the start of the request's audio, or ``None``
            when the synthesizer gives none (§5.3).
        text: the text the segment speaks; ``None`` for audio that is no segment of its own (no ``marks``).
        start_s, end_s: the segment's span on the same timeline as ``words`` (its ``marks``, §5.5).
    """

    pcm: bytes
    words: tuple[Word, ...] | None
    text: str | None = None
    start_s: float = 0.0
    end_s: float = 0.0


class Transport:
    """One accepted connection, as the driver sees it. Subclass it for a framework.

    Attributes:
        close_code: the client's close code once it left (``None`` while open, or when it left without one).
    """

    close_code: int | None = None

    async def receive(self) -> bytes | str | None:
        """The next client message, TEXT (``str``) or BINARY (``bytes``); ``None`` once the client left."""
        raise NotImplementedError

    async def send(self, frame: Frame) -> None:
        """Send one frame: ``str`` as TEXT, ``bytes`` as BINARY (§3)."""
        raise NotImplementedError

    async def close(self, code: int) -> None:
        """Send the WebSocket Close frame with ``code`` and end the connection."""
        raise NotImplementedError

    def abort(self) -> bool:
        """Drop the connection at once (no Close frame); ``False`` if the transport cannot."""
        return False


class StarletteTransport(Transport):
    """A :class:`Transport` over an accepted Starlette :class:`~starlette.websockets.WebSocket`.

    A message with neither text nor bytes is skipped. The reference app's ``kokoro.abort_transport`` scope
    entry, where present, drops the TCP connection (:meth:`abort`)."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def receive(self) -> bytes | str | None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                self.close_code = message.get("code")
                return None
            # §3.1: BINARY and TEXT frames carry the same JSON messages; SageMaker delivers a PayloadPart
            # without DataType as BINARY (REFERENCE.md §1).
            data = message.get("bytes")
            if data is None:
                data = message.get("text")
            if data is not None:
                return data

    async def send(self, frame: Frame) -> None:
        if isinstance(frame, str):
            await self.websocket.send_text(frame)
        else:
            await self.websocket.send_bytes(frame)

    async def close(self, code: int) -> None:
        await self.websocket.close(code)

    def abort(self) -> bool:
        abort: Callable[[], None] | None = self.websocket.scope.get("kokoro.abort_transport")
        if abort is None:
            return False
        abort()
        return True


class Job:
    """One accepted request between the synthesizer (producer) and the feeder (consumer).

    A bounded single-producer, single-consumer channel of :class:`AudioPiece`: ``put`` waits while
    :data:`SEGMENT_BUFFER` pieces are waiting; ``finish`` (never blocks) marks the end, with the error if
    synthesis failed; ``cancel`` drops what is buffered and releases both sides.

    Attributes:
        request: the accepted request.
        utterance: whether its text arrives later (§15).
        begun: the synthesizer has taken it; started: the session started it (its ``synthesis_start``).
        audio: what :meth:`SessionDriver.open_audio` returned for it, once opened.
        state: the driver subclass's own bookkeeping for the request (telemetry, an utterance's text).
        words: word timings of the audio queued so far (``None``: none given).
    """

    def __init__(self, request: SynthesisRequest, utterance: bool = False) -> None:
        self.request = request
        self.utterance = utterance
        self.begun = False
        self.started = False
        self.cancelled = False
        self.finished = False
        self.error: BaseException | None = None
        self.audio: Any = None
        self.state: Any = None
        self.words: list[Word] | None = None
        self._pieces: deque[AudioPiece] = deque()
        self._has_piece = asyncio.Event()
        self._has_space = asyncio.Event()

    @property
    def request_id(self) -> str:
        """The request's id (the session has assigned one)."""
        assert self.request.request_id is not None
        return self.request.request_id

    async def put(self, piece: AudioPiece) -> None:
        """Hand a piece to the feeder; waits while :data:`SEGMENT_BUFFER` pieces wait."""
        while len(self._pieces) >= SEGMENT_BUFFER and not self.cancelled:
            self._has_space.clear()
            await self._has_space.wait()
        if not self.cancelled:
            self._pieces.append(piece)
            self._has_piece.set()

    async def get(self) -> AudioPiece | None:
        """The next piece, or ``None`` once synthesis has ended (or the request was cancelled)."""
        while not self._pieces and not self.finished and not self.cancelled:
            self._has_piece.clear()
            await self._has_piece.wait()
        if self.cancelled or not self._pieces:
            return None
        piece = self._pieces.popleft()
        self._has_space.set()
        return piece

    def finish(self, error: BaseException | None = None) -> None:
        """Synthesis has ended (``error``: it failed)."""
        self.finished = True
        self.error = error
        self._has_piece.set()

    def stop(self) -> None:
        """Drop what is buffered and release both sides (the driver then calls its ``cancel_audio``)."""
        self.cancelled = True
        self._pieces.clear()
        self._has_piece.set()
        self._has_space.set()


class SessionDriver:
    """Runs one :class:`ServerSession` over one :class:`Transport` (PROTOCOL.md §7) until it ends.

    Args:
        session: the sans-I/O session (its limits bound the driver: ``lookahead``, ``max_output_bytes``,
            ``max_parse_cpu_share``, ``session_idle_timeout_s``, ``send_timeout_s``, ``close_timeout_s``).
        transport: the accepted connection.
        name: the session's name in log lines.

    :meth:`run` returns when the session has ended for any reason; by then every task has stopped and the
    session holds no synthesis. :attr:`close_code` is the close code the session ended with (the client's
    when it left first, ``None`` when the connection dropped without one).
    """

    lookahead: int | None = None
    """Requests synthesized ahead of the one being sent (``None``: ``limits.lookahead``)."""
    watch_limits = True
    """Run the limit watch (``session_idle``, ``client_not_reading``)."""

    def __init__(self, session: ServerSession, transport: Transport, *, name: str = "s0") -> None:
        self.session = session
        self.transport = transport
        self.limits = session.limits
        self.name = name
        self.close_code: int | None = None
        self.jobs: dict[str, Job] = {}
        """Accepted and not yet completed, in arrival order."""
        self.going_away = False
        self._wake_synthesizer = asyncio.Event()
        self._wake_feeder = asyncio.Event()
        self._outbox = asyncio.Event()  # frames may be waiting in the session
        self._flushed = asyncio.Event()  # the writer has sent everything queued so far
        self._deadline_moved = asyncio.Event()  # a message or a synthesis_start moved the idle deadline
        self._tasks: list[asyncio.Task[None]] = []
        self._writing_bytes = 0  # taken from the session by the writer, not yet written
        self._output_room = asyncio.Event()  # output is back under max_output_bytes (§10.3)
        self._output_room.set()
        self.last_activity = time.monotonic()
        """When the last message was read or the last frame written (§7.5)."""
        self._last_written = time.monotonic()  # last progress of the writer (§10.3)

    # -- limits (§7.5, §10.3) ----------------------------------------------------------------------

    @property
    def output_bytes(self) -> int:
        """Output waiting for the client, bytes: queued in the session plus taken by the writer (§10.3)."""
        return self.session.queued_bytes + self._writing_bytes

    def idle_for(self, now: float) -> float | None:
        """Seconds this session has been idle at monotonic ``now`` (§7.5), ``None`` while it is not: a
        request queued or active, output waiting, or the session already ending."""
        session = self.session
        if session.finished or session.pending_ids or self.jobs or self.output_bytes or self.going_away:
            return None
        if session.close_code is not None:
            return None
        return max(0.0, now - self.last_activity)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the session until ``close`` has drained, a fatal error, disconnect or shutdown."""
        reader = asyncio.create_task(self.read(), name="driver-reader")
        writer = asyncio.create_task(self.write(), name="driver-writer")
        workers = [
            asyncio.create_task(self._synthesize(), name="driver-synthesizer"),
            asyncio.create_task(self._feed(), name="driver-feeder"),
            asyncio.create_task(self.watch_idle(), name="driver-idle-watch"),
        ]
        if self.watch_limits:
            workers.append(asyncio.create_task(self._watch_limits(), name="driver-limit-watch"))
        self._tasks = [reader, writer, *workers]
        try:
            pending: set[asyncio.Task[None]] = set(self._tasks)
            # The writer ends the session (closed, or the client is gone mid-send); the reader ends it
            # when the client disconnects. Workers only end by failing, or cancelled by shutdown().
            while writer in pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                failed = [
                    t for t in done if t is not writer and not t.cancelled() and t.exception() is not None
                ]
                if failed:
                    # A bug in the server, not the client's fault: end the session as §9 says.
                    logger.error("session failed", exc_info=failed[0].exception())
                    for task in (reader, *workers):
                        task.cancel()
                    self.session.abort(ErrorCode.INTERNAL_ERROR, "the server failed; the session ends")
                    self.kick()
                    await asyncio.wait([writer], timeout=self.limits.close_timeout_s)
                    break
                if reader in done:
                    break
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for job in self.jobs.values():
                self._stop(job)
            self.jobs.clear()

    async def shutdown(self) -> None:
        """Server shutdown (§7.3): stop synthesis, send what is queued, close with 1001."""
        self.going_away = True
        for task in self._tasks[2:]:
            task.cancel()
        for job in self.jobs.values():
            self._stop(job)
        self.kick()
        if self._tasks:
            await asyncio.wait(self._tasks[1:2])

    def evict(self, message: str) -> None:
        """End this session so that a new one may take its slot (§7.5): the fatal ``session_idle`` with
        ``message``, then close 1001."""
        self.session.abort(ErrorCode.SESSION_IDLE, message)
        self.kick()

    # -- hooks: frames in and out ------------------------------------------------------------------

    async def receive(self) -> bytes | str | None:
        """The next client message for the session; ``None`` once the client left. A subclass may rewrite,
        drop (read on) or add messages."""
        return await self.transport.receive()

    def outgoing(self, frames: list[Frame]) -> list[Frame]:
        """The frames about to be sent (``str``: TEXT, ``bytes``: BINARY); a subclass may rewrite, drop or
        add frames."""
        return frames

    # -- hooks: synthesis --------------------------------------------------------------------------

    async def wait_ready(self) -> bool:
        """Wait until synthesis can start; ``False``: it never will (the session ends ``internal_error``)."""
        return True

    def not_ready_message(self) -> str:
        """The ``internal_error`` message when :meth:`wait_ready` returned ``False``."""
        return "synthesis is unavailable"

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        """The request's audio, piece by piece, with word timings and ``marks`` spans (§5.3, §5.5).

        Called when the synthesizer reaches the job (an utterance's when it is accepted, so that its text can
        be handed over as it arrives). The default speaks nothing."""
        return _no_audio()

    def cancel_audio(self, job: Job) -> None:
        """Stop the job's synthesis now: it was cancelled, or the session ends (disconnect, shutdown) before
        its synthesis finished. By default the synthesizer stops after the piece being made."""

    def on_text(self, job: Job, text: str) -> None:
        """Text of an open utterance arrived (§15.3)."""

    def on_flush(self, job: Job) -> None:
        """``flush`` of an open utterance (§15.3)."""

    def on_utterance_end(self, job: Job, reason: str) -> None:
        """The utterance takes no more text (``end``, ``close`` or the idle timeout, §15.4, §15.5)."""

    # -- hooks: the session's life -----------------------------------------------------------------

    def on_accepted(self, job: Job) -> None:
        """A request joined the queue (its job is in :attr:`jobs`)."""

    def on_cancelled(self, job: Job, started: bool) -> None:
        """A request was cancelled; ``started``: it was the active one (else the session answered it)."""

    def on_close_requested(self) -> None:
        """``close`` arrived; the writer closes once the accepted requests are answered (§7.1)."""

    def complete_words(self, job: Job) -> list[Word] | None:
        """The ``words`` of the request's ``synthesis_complete``: those of the audio sent, also when it was
        cancelled (§5.3 ``cancel_words``: ``[]`` when a cancel left no word sent in a language with word
        timings); ``None`` when the synthesizer gave none."""
        words = job.words
        if words is None and self.session.is_cancelled(job.request_id):
            if Voice.parse(job.request.voice).code in self.timed_languages():
                return []
        return words

    def timed_languages(self) -> frozenset[str]:
        """The language codes whose requests carry word timings (``capabilities.languages``, §14.1)."""
        capabilities = self.session.capabilities
        if capabilities is None:
            return frozenset()
        return frozenset(info.code for info in capabilities.languages if info.word_timings)

    def on_done(self, job: Job, status: str) -> None:
        """The request is answered: ``status`` is ``completed``, ``cancelled`` or ``failed``."""

    def should_close(self) -> bool:
        """Whether to close the connection now that everything queued is sent: the session is finished
        (drained after ``close``, §7.1; a fatal error, §9.1) or the server goes away."""
        return self.going_away or self.session.finished

    def closing_code(self) -> int:
        """The close code (1000 after ``close``, the fatal error's code, 1001 on shutdown)."""
        if self.going_away:
            return CLOSE_GOING_AWAY
        return self.session.close_code or 1000

    def on_closing(self) -> None:
        """The Close frame is about to go out (a server gives the session's slot back here)."""

    async def end(self, code: int) -> None:
        """Send the Close frame with ``code`` and end the connection (§7.1)."""
        await self.transport.close(code)

    # -- reader ------------------------------------------------------------------------------------

    async def read(self) -> None:
        """Read until the client leaves: each message to the session, its events acted on at once."""
        limits = self.limits
        budget = CpuBudget(limits.max_parse_cpu_share, time.perf_counter())
        while True:
            # §10.3 backpressure: read nothing more while the client leaves too much output unread.
            while self.output_bytes > limits.max_output_bytes:
                self._output_room.clear()
                await self._output_room.wait()
            data = await self.receive()
            if data is None:
                if self.close_code is None:
                    self.close_code = self.transport.close_code
                return
            started = time.perf_counter()
            self.act(self.session.receive_frame(data))
            self.last_activity = time.monotonic()
            self._deadline_moved.set()
            self.kick()
            # §10.3: never hold the event loop for more than one message, nor past the CPU share.
            done = time.perf_counter()
            await asyncio.sleep(budget.charge(done - started, done))

    def act(self, events: list[ServerEvent]) -> None:
        """Act on the session's events (from a message, :meth:`~ServerSession.expire` or a hook)."""
        for event in events:
            if isinstance(event, RequestAccepted):
                job = Job(event.request, event.utterance)
                self.jobs[job.request_id] = job
                self.on_accepted(job)
                if job.utterance:
                    job.audio = self.open_audio(job)
            elif isinstance(event, TextAppended | UtteranceFlushed | UtteranceEnded):
                job = self.jobs.get(event.request_id)
                if job is None:  # pragma: no cover - the session only names open utterances
                    continue
                if isinstance(event, TextAppended):
                    self.on_text(job, event.text)
                elif isinstance(event, UtteranceFlushed):
                    self.on_flush(job)
                else:
                    self.on_utterance_end(job, event.reason)
            elif isinstance(event, RequestCancelled):
                job = self.jobs.get(event.request_id)
                if job is not None:
                    self._stop(job)
                    if not event.started:
                        # The session answers a request cancelled before its turn by itself.
                        del self.jobs[event.request_id]
                    self.on_cancelled(job, event.started)
                    if not event.started:
                        self.on_done(job, "cancelled")
            else:
                assert isinstance(event, CloseRequested)
                self.on_close_requested()
            self._wake_synthesizer.set()
            self._wake_feeder.set()

    def _stop(self, job: Job) -> None:
        if not job.cancelled:
            job.stop()
            if not job.finished:  # its synthesis may still run (or wait for an utterance's text)
                self.cancel_audio(job)

    # -- idle watch (§15.5) ------------------------------------------------------------------------

    async def watch_idle(self) -> None:
        """End an active utterance that got no message for ``utterance_idle_timeout_s`` (§15.5)."""
        session = self.session
        while True:
            self._deadline_moved.clear()
            deadline = session.deadline()
            if deadline is None:
                await self._deadline_moved.wait()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(_loop_time(deadline)):
                    await self._deadline_moved.wait()
                    continue
            self.act(session.expire())
            self.kick()

    # -- limit watch (§7.5, §10.3) -----------------------------------------------------------------

    async def _watch_limits(self) -> None:
        limits = self.limits
        period = min(1.0, limits.session_idle_timeout_s / 4, limits.send_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            idle = self.idle_for(now)
            if idle is not None and idle >= limits.session_idle_timeout_s:
                self.session.abort(ErrorCode.SESSION_IDLE, f"idle for {idle:.0f} s")
                log_event(logger, "session idle", session=self.name, idle_s=round(idle, 1))
                self.kick()
                return
            if self.output_bytes and now - self._last_written >= limits.send_timeout_s:
                await self._end_not_reading(now - self._last_written)
                return

    async def _end_not_reading(self, waited_s: float) -> None:
        """The client read none of the output for ``send_timeout_s`` (§10.3): the fatal
        ``client_not_reading`` and close 1008 are queued behind what waits; if the writer cannot get them
        out within ``close_timeout_s``, the connection is dropped (the reader then sees the disconnect)."""
        self.session.abort(
            ErrorCode.CLIENT_NOT_READING, f"output waited {waited_s:.0f} s without the client reading it"
        )
        self.kick()
        waited = round(waited_s, 1)
        log_event(logger, "session not reading", logging.WARNING, session=self.name, waited_s=waited)
        writer = self._tasks[1]
        done, _ = await asyncio.wait([writer], timeout=self.limits.close_timeout_s)
        if done:
            return
        self.close_code = ErrorCode.CLIENT_NOT_READING.close_code
        if not self.transport.abort():
            # A transport that cannot drop the connection: end the writer; the server closes it.
            writer.cancel()

    # -- synthesizer -------------------------------------------------------------------------------

    def _next_to_synthesize(self) -> Job | None:
        lookahead = self.limits.lookahead if self.lookahead is None else self.lookahead
        in_flight = 0
        for job in self.jobs.values():
            if job.begun:
                in_flight += 1
            elif not job.cancelled:
                # The head request is in flight while it is sent; lookahead more may be synthesized.
                return job if in_flight <= lookahead else None
        return None

    async def _synthesize(self) -> None:
        # The session reads (and answers pings) at once; synthesis may wait for a model (§2.2: SageMaker
        # sends no traffic before GET /ping is healthy, but a direct client may be early).
        if not await self.wait_ready():
            self.session.abort(ErrorCode.INTERNAL_ERROR, self.not_ready_message())
            self.kick()
            return
        while True:
            job = self._next_to_synthesize()
            if job is None:
                self._wake_synthesizer.clear()
                await self._wake_synthesizer.wait()
                continue
            job.begun = True
            if job.audio is None:
                job.audio = self.open_audio(job)
            audio: AsyncIterator[AudioPiece] = job.audio
            error: BaseException | None = None
            try:
                while not job.cancelled:
                    try:
                        piece = await anext(audio)
                    except StopAsyncIteration:
                        break
                    await job.put(piece)
            except Exception as exc:
                logger.exception("synthesis of request %r failed", job.request.request_id)
                error = exc
            finally:
                with contextlib.suppress(Exception):
                    await _aclose(audio)
                job.finish(error)

    # -- feeder ------------------------------------------------------------------------------------

    async def _feed(self) -> None:
        session = self.session
        while True:
            request = session.next_request()
            if request is None:
                self._wake_feeder.clear()
                await self._wake_feeder.wait()
                continue
            request_id = request.request_id
            assert request_id is not None
            job = self.jobs[request_id]
            status = "cancelled"
            try:
                if session.start(request_id):
                    job.started = True
                    self._deadline_moved.set()  # an utterance's idle clock starts now (§15.5)
                    self.kick()
                    status = await self._send_audio(job)
                self.on_done(job, status)
            finally:
                self._stop(job)  # stops synthesis still running for it (feeder cancelled)
                self.jobs.pop(request_id, None)
                self._wake_synthesizer.set()
            self.kick()

    async def _send_audio(self, job: Job) -> str:
        """Send the request's audio and queue its ``synthesis_complete``; returns its status."""
        session = self.session
        request_id = job.request_id
        while (piece := await job.get()) is not None:
            if piece.text is not None:
                self.mark(job, piece)
            if piece.pcm:
                if not session.audio(request_id, piece.pcm):
                    break  # cancelled: the rest of the request is dropped
                self.on_audio_queued(job, piece)
            self.take_words(job, piece)
            # Backpressure: the next piece waits until this one is on the wire.
            await self.flush()
        self.before_complete(job)
        if job.error is not None and not session.is_cancelled(request_id):
            session.fail(request_id, "synthesis failed")
            return "failed"
        cancelled = session.is_cancelled(request_id)
        session.complete(request_id, self.complete_words(job))
        return "cancelled" if cancelled else "completed"

    def mark(self, job: Job, piece: AudioPiece) -> None:
        """Queue the ``marks`` frame of a piece that speaks text, before its audio (§5.5; the session makes
        one only if the request asked)."""
        self.session.marks(job.request_id, piece.text or "", piece.start_s, piece.end_s, piece.words)

    def on_audio_queued(self, job: Job, piece: AudioPiece) -> None:
        """A piece's audio was queued for the client (telemetry counts it here)."""

    def take_words(self, job: Job, piece: AudioPiece) -> None:
        """A piece was handed to the session: its words join the request's. A cancelled request's words are
        those of the audio sent (§4.2, §5.3 ``cancel_words``): a piece's words join only once its audio was
        queued (a cancel breaks off before), and queued audio is always sent."""
        if piece.words is not None:
            job.words = [*(job.words or []), *piece.words]

    def before_complete(self, job: Job) -> None:
        """The started request's audio is all queued (or it was cancelled, or failed); its
        ``synthesis_complete`` is queued next."""

    # -- writer ------------------------------------------------------------------------------------

    def kick(self) -> None:
        """Wake the writer: frames may be waiting in the session."""
        self._flushed.clear()
        self._outbox.set()

    async def flush(self) -> None:
        """Wake the writer and wait until everything queued so far is written."""
        self.kick()
        await self._flushed.wait()

    async def write(self) -> None:
        """The only sender: the session's frames through :meth:`outgoing`, then the Close frame."""
        session = self.session
        transport = self.transport
        while True:
            await self._outbox.wait()
            self._outbox.clear()
            frames = self.outgoing(session.data_to_send())
            if not self._writing_bytes:
                self._last_written = time.monotonic()  # the wait for the client starts now (§10.3)
            self._writing_bytes += sum(len(frame) for frame in frames)
            for frame in frames:
                await transport.send(frame)
                self._writing_bytes -= len(frame)
                self._last_written = self.last_activity = time.monotonic()
                if self.output_bytes <= self.limits.max_output_bytes:
                    self._output_room.set()
            if self._outbox.is_set():
                continue  # more was queued while sending
            if self.should_close():
                self.close_code = self.closing_code()
                self.on_closing()
                await self.end(self.close_code)
                return
            self._flushed.set()


async def _no_audio() -> AsyncIterator[AudioPiece]:
    return
    yield  # pragma: no cover - makes this an async generator


async def _aclose(audio: Any) -> None:
    close = getattr(audio, "aclose", None)
    if close is not None:
        await close()


def _loop_time(monotonic_s: float) -> float:
    """The event loop's time at the :func:`time.monotonic` instant ``monotonic_s`` (the session's clock)."""
    return asyncio.get_running_loop().time() + (monotonic_s - time.monotonic())

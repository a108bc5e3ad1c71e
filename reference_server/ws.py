"""The WebSocket route ``/invocations-bidirectional-stream``: a thin shell over :class:`ServerSession`.

Every protocol rule (parsing, error codes, ordering, brackets, frame cutting) lives in the sans-I/O
:class:`protocol.server_session.ServerSession`; this module only moves bytes and runs synthesis. Four tasks
share one session (PROTOCOL.md §2, §7, §8):

* the **reader** receives every client message, TEXT or BINARY (§3.1), feeds it to
  :meth:`~ServerSession.receive_frame` and acts on the events at once, so ``cancel`` and ``close`` work
  while audio is being produced and sent;
* the **synthesizer** runs the backend on worker threads
  (:class:`~reference_server.request_audio.RequestAudio`) for requests in arrival order, up to
  ``limits.lookahead`` requests ahead of the one being sent, so the next sentence is ready when the
  current one ends;
* the **feeder** hands the head request's segments to the session (:meth:`~ServerSession.start`,
  :meth:`~ServerSession.audio`, :meth:`~ServerSession.complete`) and waits for each segment to be
  written before taking the next, which bounds what a slow client can make the server hold;
* the **writer** is the only task that sends: it writes :meth:`~ServerSession.data_to_send` in order
  and closes the socket once the session is finished (1000 after ``close``, the fatal code after a
  fatal error, 1001 on server shutdown);
* the **idle watch** ends an active utterance that got no message for ``utterance_idle_timeout_s``
  (:meth:`~ServerSession.deadline`, :meth:`~ServerSession.expire`, PROTOCOL.md §15.5);
* the **limit watch** ends a session idle for ``session_idle_timeout_s`` (``session_idle``, §7.5) and one
  whose client let output wait ``send_timeout_s`` without reading (``client_not_reading``, §10.3).

Bounds against a client that floods (§10.3): the reader stops reading while more than
``max_output_bytes`` of output wait for the client (backpressure: the client's own sends then block
in TCP), yields to the event loop after every message, and pauses a session whose parsing exceeds
``max_parse_cpu_share`` of one core (:class:`~protocol.limits.CpuBudget`), so ``GET /ping`` and the
other sessions are served throughout. Input waiting to be read is bounded by the transport: uvicorn
stops reading a socket until the messages of its last read are taken, and one message is at most
``transport_max_message_bytes``.

An utterance (§15) is a job whose text arrives later: the reader hands each piece of text, ``flush`` and
``end`` to its :class:`~reference_server.utterance.UtteranceAudio` at once, and the synthesizer speaks
each segment as soon as it is certain, so speech starts while the client is still writing.

The reader never waits on the writer, and the event loop never waits on the model, so WebSocket pings
are answered throughout synthesis (§8). A client that disconnects stops everything: the tasks are
cancelled, the model pass running for it is aborted (``abort_on_cancel``) and the session's buffers are
dropped (§7.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from starlette.websockets import WebSocket, WebSocketDisconnect

from protocol.errors import CLOSE_GOING_AWAY, ErrorCode, ProtocolError
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
from reference_server.request_audio import AudioPiece, RequestAudio
from reference_server.runtime import Runtime
from reference_server.scheduling import Listener
from reference_server.telemetry import RequestRecord
from reference_server.utterance import UtteranceAudio

__all__ = ["PATH", "SEGMENT_BUFFER", "WebSocketConnection", "bidirectional_stream"]

PATH = "/invocations-bidirectional-stream"
"""The route SageMaker opens for InvokeEndpointWithBidirectionalStream (REFERENCE.md §1, PROTOCOL.md §2)."""

SEGMENT_BUFFER = 2
"""Synthesized segments a request may hold before the feeder takes them. With one more being written
and one being synthesized this keeps the next audio ready without letting a slow client pile up a
long text's audio in memory."""

logger = logging.getLogger("reference_server")


class _Job:
    """One accepted request between the synthesizer (producer) and the feeder (consumer).

    A bounded single-producer, single-consumer channel of :class:`AudioPiece`: ``put`` waits while
    :data:`SEGMENT_BUFFER` pieces are waiting; ``finish`` (never blocks) marks the end, with the error
    if synthesis failed; ``cancel`` drops what is buffered and releases both sides.
    """

    def __init__(
        self, request: SynthesisRequest, session_id: str, utterance: UtteranceAudio | None = None
    ) -> None:
        self.request = request
        self.utterance = utterance
        """The utterance's audio, fed by the reader (§15); ``None`` for a request with its whole text."""
        self.record = RequestRecord("ws", request, session=session_id)
        self.begun = False
        self.cancelled = False
        self.finished = False
        self.error: BaseException | None = None
        self.audio: RequestAudio | None = None
        """The request's synthesis while it runs; ``cancel`` closes it, which aborts a model pass running for
        it (``settings.abort_on_cancel``) instead of waiting for the synthesizer to notice."""
        self._pieces: deque[AudioPiece] = deque()
        self._has_piece = asyncio.Event()
        self._has_space = asyncio.Event()

    async def put(self, piece: AudioPiece) -> None:
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
        self.finished = True
        self.error = error
        self._has_piece.set()

    def cancel(self) -> None:
        self.cancelled = True
        self._pieces.clear()
        self._has_piece.set()
        self._has_space.set()
        if self.utterance is not None:
            self.utterance.close()  # wakes a synthesizer waiting for the utterance's text
        if self.audio is not None:
            self.audio.close()  # aborts the model pass running for it, if any


class WebSocketConnection:
    """One accepted WebSocket connection running one :class:`ServerSession` (PROTOCOL.md §7).

    Args:
        websocket: an accepted Starlette WebSocket.
        runtime: the process's shared :class:`~reference_server.runtime.Runtime` (the model may still be
            loading: requests are read and queued at once and synthesized once it is ready).

    :meth:`run` returns when the session has ended for any reason; by then every task has stopped and
    the session holds no synthesis. Each answered request is logged and counted when its
    ``synthesis_complete`` is queued (:mod:`reference_server.telemetry`); :attr:`close_code` is the
    WebSocket close code the session ended with (the client's when it left first, ``None`` when the
    connection dropped without one).
    """

    def __init__(self, websocket: WebSocket, runtime: Runtime, session_id: str = "s0") -> None:
        self.websocket = websocket
        self.runtime = runtime
        self.session_id = session_id
        self.session = ServerSession(
            runtime.limits,
            known_voices=runtime.voices,
            on_reject=self._refused,
            utterances=True,
            capabilities=runtime.capabilities,
            marks=True,
            voice_blends=runtime.voice_blends,
            admit=self._admit,
            lexicon=True,
        )
        self.requests = 0
        self.refused = 0
        self.close_code: int | None = None
        self._jobs: dict[str, _Job] = {}  # accepted and not yet completed, in arrival order
        # The session's listener: every request's audio queues up for it (§10.1, §10.2).
        self.listener = Listener()
        self._wake_synthesizer = asyncio.Event()
        self._wake_feeder = asyncio.Event()
        self._outbox = asyncio.Event()  # frames may be waiting in the session
        self._flushed = asyncio.Event()  # the writer has sent everything queued so far
        self._deadline_moved = asyncio.Event()  # a message or a synthesis_start moved the idle deadline
        self._going_away = False
        self._tasks: list[asyncio.Task[None]] = []
        self._writing_bytes = 0  # taken from the session by the writer, not yet written
        self._output_room = asyncio.Event()  # output is back under max_output_bytes (§10.3)
        self._output_room.set()
        self._last_activity = time.monotonic()  # last message read or frame written (§7.5)
        self._last_written = time.monotonic()  # last progress of the writer (§10.3)
        self.slot_released = False
        """The session gave its slot up to a new one (:meth:`evict`); the slot is no longer its to free."""

    # -- limits (§7.5, §10.3) ----------------------------------------------------------------------

    @property
    def output_bytes(self) -> int:
        """Output waiting for the client, bytes: queued in the session plus taken by the writer (§10.3)."""
        return self.session.queued_bytes + self._writing_bytes

    def idle_for(self, now: float) -> float | None:
        """Seconds this session has been idle at monotonic ``now`` (§7.5), ``None`` while it is not: a
        request queued or active, output waiting, or the session already ending."""
        session = self.session
        if session.finished or session.pending_ids or self._jobs or self.output_bytes or self._going_away:
            return None
        if session.close_code is not None:
            return None
        return max(0.0, now - self._last_activity)

    def _release_slot(self) -> None:
        """Give the session's slot back (``max_sessions``, §10) before its close frame goes out: a client
        that has seen its session close may open the next one at once, and must not find the slot still
        held by the session it just ended."""
        if not self.slot_released:
            self.slot_released = True
            self.runtime.close_session()

    def evict(self, idle_s: float) -> None:
        """End this idle session so that a new one may take its slot (§7.5): the fatal ``session_idle``,
        then close 1001."""
        self.slot_released = True
        self.session.abort(
            ErrorCode.SESSION_IDLE, f"idle for {idle_s:.0f} s; the slot was given to a new session"
        )
        log_event(logger, "session evicted", session=self.session_id, idle_s=round(idle_s, 1))
        self._kick()

    # -- lifecycle ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the session until ``close`` has drained, a fatal error, disconnect or shutdown."""
        reader = asyncio.create_task(self._read(), name="ws-reader")
        writer = asyncio.create_task(self._write(), name="ws-writer")
        workers = [
            asyncio.create_task(self._synthesize(), name="ws-synthesizer"),
            asyncio.create_task(self._feed(), name="ws-feeder"),
            asyncio.create_task(self._watch_idle(), name="ws-idle-watch"),
            asyncio.create_task(self._watch_limits(), name="ws-limit-watch"),
        ]
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
                    # A bug in this adapter, not the client's fault: end the session as §9 says.
                    logger.error("session failed", exc_info=failed[0].exception())
                    for task in (reader, *workers):
                        task.cancel()
                    self.session.abort(ErrorCode.INTERNAL_ERROR, "the server failed; the session ends")
                    self._kick()
                    await asyncio.wait([writer], timeout=self.runtime.limits.close_timeout_s)
                    break
                if reader in done:
                    break
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for job in self._jobs.values():
                job.cancel()
            self._jobs.clear()

    async def shutdown(self) -> None:
        """Server shutdown (§7.3): stop synthesis, send what is queued, close with 1001."""
        self._going_away = True
        for task in self._tasks[2:]:
            task.cancel()
        for job in self._jobs.values():
            job.cancel()
        self._kick()
        if self._tasks:
            await asyncio.wait(self._tasks[1:2])

    def _admit(self, request: SynthesisRequest) -> str | None:
        """§10.2: refuse a request that begins a speech when its first audio would come too late. The
        session asks only when none of its requests is queued or active; a listener that still has audio
        to play is in the middle of a speech, which a new request continues (never refused busy)."""
        if self.listener.queued_s(self.runtime.scheduler.clock()) > 0.0:
            return None
        return self.runtime.busy(request, self.listener)

    def _refused(self, error: ProtocolError) -> None:
        self.refused += 1
        self.runtime.metrics.refusals.labels(error.code.value).inc()
        log_event(
            logger,
            "refused",
            logging.DEBUG,
            session=self.session_id,
            request_id=error.request_id,
            code=error.code.value,
        )

    # -- reader ------------------------------------------------------------------------------------

    async def _read(self) -> None:
        limits = self.runtime.limits
        budget = CpuBudget(limits.max_parse_cpu_share, time.perf_counter())
        while True:
            # §10.3 backpressure: read nothing more while the client leaves too much output unread.
            while self.output_bytes > limits.max_output_bytes:
                self._output_room.clear()
                await self._output_room.wait()
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                if self.close_code is None:
                    self.close_code = message.get("code")
                return
            # §3.1: BINARY and TEXT frames carry the same JSON messages; SageMaker delivers a
            # PayloadPart without DataType as BINARY (REFERENCE.md §1).
            data = message.get("bytes")
            if data is None:
                data = message.get("text")
            if data is None:
                continue
            started = time.perf_counter()
            self._act(self.session.receive_frame(data))
            self._last_activity = time.monotonic()
            self._deadline_moved.set()
            self._kick()
            # §10.3: never hold the event loop for more than one message, nor past the CPU share.
            done = time.perf_counter()
            await asyncio.sleep(budget.charge(done - started, done))

    def _act(self, events: list[ServerEvent]) -> None:
        for event in events:
            if isinstance(event, RequestAccepted):
                request = event.request
                assert request.request_id is not None
                utterance = UtteranceAudio(self.runtime, request, self.listener) if event.utterance else None
                self._jobs[request.request_id] = _Job(request, self.session_id, utterance)
                self.requests += 1
            elif isinstance(event, TextAppended | UtteranceFlushed | UtteranceEnded):
                job = self._jobs.get(event.request_id)
                utterance = job.utterance if job is not None else None
                if utterance is None:  # pragma: no cover - the session only names open utterances
                    continue
                if isinstance(event, TextAppended):
                    utterance.append(event.text)
                elif isinstance(event, UtteranceFlushed):
                    utterance.flush()
                else:
                    utterance.end()
            elif isinstance(event, RequestCancelled):
                job = self._jobs.get(event.request_id)
                if job is not None:
                    job.cancel()
                    if not event.started:
                        # The session answers a request cancelled before its turn by itself.
                        del self._jobs[event.request_id]
                        self._finish_record(job, "cancelled")
            else:
                assert isinstance(event, CloseRequested)
            self._wake_synthesizer.set()
            self._wake_feeder.set()

    def _finish_record(self, job: _Job, status: str) -> None:
        if job.utterance is not None:
            job.record.chars = job.utterance.chars
        job.record.finish(status, self.runtime.metrics, utterance=job.utterance is not None or None)

    # -- idle watch (§15.5) ------------------------------------------------------------------------

    async def _watch_idle(self) -> None:
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
            self._act(session.expire())
            self._kick()

    # -- limit watch (§7.5, §10.3) -----------------------------------------------------------------

    async def _watch_limits(self) -> None:
        limits = self.runtime.limits
        period = min(1.0, limits.session_idle_timeout_s / 4, limits.send_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            idle = self.idle_for(now)
            if idle is not None and idle >= limits.session_idle_timeout_s:
                self.session.abort(ErrorCode.SESSION_IDLE, f"idle for {idle:.0f} s")
                log_event(logger, "session idle", session=self.session_id, idle_s=round(idle, 1))
                self._kick()
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
        self._kick()
        waited = round(waited_s, 1)
        log_event(logger, "session not reading", logging.WARNING, session=self.session_id, waited_s=waited)
        writer = self._tasks[1]
        done, _ = await asyncio.wait([writer], timeout=self.runtime.limits.close_timeout_s)
        if done:
            return
        self.close_code = ErrorCode.CLIENT_NOT_READING.close_code
        abort = self.websocket.scope.get("kokoro.abort_transport")
        if abort is not None:
            abort()
        else:  # another ASGI server: end the writer; the server closes the connection when the app returns
            writer.cancel()

    # -- synthesizer -------------------------------------------------------------------------------

    def _next_to_synthesize(self) -> _Job | None:
        in_flight = 0
        for job in self._jobs.values():
            if job.begun:
                in_flight += 1
            elif not job.cancelled:
                # The head request is in flight while it is sent; lookahead more may be synthesized.
                return job if in_flight <= self.runtime.limits.lookahead else None
        return None

    async def _synthesize(self) -> None:
        # The session reads (and answers pings) at once; synthesis waits for the model (§2.2: SageMaker
        # sends no traffic before GET /ping is healthy, but a direct client may be early).
        if not await self.runtime.wait_ready():
            self.session.abort(ErrorCode.INTERNAL_ERROR, f"the model failed to load: {self.runtime.failure}")
            self._kick()
            return
        while True:
            job = self._next_to_synthesize()
            if job is None:
                self._wake_synthesizer.clear()
                await self._wake_synthesizer.wait()
                continue
            job.begun = True
            audio = job.utterance or RequestAudio(self.runtime, job.request, self.listener)
            job.audio = audio
            error: BaseException | None = None
            try:
                while not job.cancelled:
                    piece = await audio.next()
                    if piece is None:
                        break
                    await job.put(piece)
            except Exception as exc:
                logger.exception("synthesis of request %r failed", job.request.request_id)
                error = exc
            finally:
                audio.close()
                job.record.compute_s = audio.compute_s
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
            job = self._jobs[request_id]
            status = "cancelled"
            try:
                if session.start(request_id):
                    self._deadline_moved.set()  # an utterance's idle clock starts now (§15.5)
                    self._kick()
                    status = await self._send_audio(job)
                self._finish_record(job, status)
            finally:
                job.cancel()  # stops synthesis still running for it (feeder cancelled)
                self._jobs.pop(request_id, None)
                self._wake_synthesizer.set()
            self._kick()

    async def _send_audio(self, job: _Job) -> str:
        """Send the request's audio and queue its ``synthesis_complete``; returns its status."""
        session = self.session
        request_id = job.request.request_id
        assert request_id is not None
        words: list[Word] | None = None
        while (piece := await job.get()) is not None:
            if piece.text is not None:
                # §5.5: what this segment says, before its audio (only if the request asked).
                session.marks(request_id, piece.text, piece.start_s, piece.end_s, piece.words)
            if piece.pcm:
                if not session.audio(request_id, piece.pcm):
                    break  # cancelled: the rest of the request is dropped
                job.record.audio(len(piece.pcm))
            if piece.words is not None:
                words = words or []
                words.extend(piece.words)
            # Backpressure: the next segment waits until this one is on the wire.
            await self._flush()
        if job.error is not None and not session.is_cancelled(request_id):
            session.fail(request_id, "synthesis failed")
            return "failed"
        cancelled = session.is_cancelled(request_id)
        if cancelled and words is None and Voice.parse(job.request.voice).code in self._timed_languages():
            words = []  # §5.3 cancel_words: the audio sent (a lead-in, or none) spoke no word
        # A cancelled request's words are those of the audio sent (§4.2, §5.3 cancel_words): a segment's
        # words join the list only once its audio was queued, and queued audio is always sent.
        session.complete(request_id, words)
        return "cancelled" if cancelled else "completed"

    def _timed_languages(self) -> frozenset[str]:
        """The language codes whose requests carry word timings (``capabilities.languages``, §14.1)."""
        return frozenset(info.code for info in self.runtime.capabilities.languages if info.word_timings)

    # -- writer ------------------------------------------------------------------------------------

    def _kick(self) -> None:
        self._flushed.clear()
        self._outbox.set()

    async def _flush(self) -> None:
        self._kick()
        await self._flushed.wait()

    async def _write(self) -> None:
        websocket = self.websocket
        session = self.session
        while True:
            await self._outbox.wait()
            self._outbox.clear()
            frames = session.data_to_send()
            if not self._writing_bytes:
                self._last_written = time.monotonic()  # the wait for the client starts now (§10.3)
            self._writing_bytes += sum(len(frame) for frame in frames)
            for frame in frames:
                if isinstance(frame, str):
                    await websocket.send_text(frame)
                else:
                    await websocket.send_bytes(frame)
                self._writing_bytes -= len(frame)
                self._last_written = self._last_activity = time.monotonic()
                if self.output_bytes <= self.runtime.limits.max_output_bytes:
                    self._output_room.set()
            if self._outbox.is_set():
                continue  # more was queued while sending
            if self._going_away:
                self.close_code = CLOSE_GOING_AWAY
                self._release_slot()
                await websocket.close(CLOSE_GOING_AWAY)
                return
            if session.finished:
                self.close_code = session.close_code or 1000
                self._release_slot()
                await websocket.close(self.close_code)
                return
            self._flushed.set()


def _loop_time(monotonic_s: float) -> float:
    """The event loop's time at the :func:`time.monotonic` instant ``monotonic_s`` (the session's clock)."""
    return asyncio.get_running_loop().time() + (monotonic_s - time.monotonic())


async def bidirectional_stream(websocket: WebSocket) -> None:
    """Starlette endpoint for :data:`PATH` (PROTOCOL.md §2, §7).

    Accepts at once (SageMaker allows 250 ms). When ``max_sessions`` are open, the session idle longest,
    if idle at least ``idle_eviction_s``, gives its slot up (``session_idle``, §7.5); if none is, the new
    one is refused with ``too_many_sessions`` (close 1013). A session is refused with the fatal
    ``server_busy`` (close 1013) when the first audio the server could promise is later than
    ``first_audio_budget_s`` (§10.2). A session opened while the model is still loading reads and queues
    requests at once and synthesizes them once it is ready; if loading failed the session ends with a fatal
    ``internal_error`` (1011).
    """
    runtime: Runtime = websocket.app.state.runtime
    await websocket.accept()
    session_id = runtime.new_session_id()
    client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else None
    if not runtime.try_open_session() and not runtime.evict_idle_session():
        if runtime.closing:
            await websocket.close(CLOSE_GOING_AWAY)
            return
        full = f"{runtime.limits.max_sessions} sessions are open; try again later"
        await _refuse(websocket, runtime, ErrorCode.TOO_MANY_SESSIONS, full, session_id, client)
        return
    busy = runtime.busy()
    if busy is not None:  # §10.2: the first audio it could promise is already too late
        runtime.close_session()
        await _refuse(websocket, runtime, ErrorCode.SERVER_BUSY, busy, session_id, client)
        return
    started = time.monotonic()
    connection = WebSocketConnection(websocket, runtime, session_id)
    log_event(logger, "session start", session=session_id, client=client)
    runtime.metrics.sessions_open.inc()
    try:
        runtime.register(connection)
        try:
            await connection.run()
        finally:
            runtime.unregister(connection)
    finally:
        if not connection.slot_released:
            runtime.close_session()
        runtime.release_memory()
        runtime.metrics.sessions_open.dec()
        code = connection.close_code
        runtime.metrics.sessions.labels(str(code) if code is not None else "none").inc()
        log_event(
            logger,
            "session end",
            session=session_id,
            close_code=code if code is not None else "none",
            requests=connection.requests,
            refused=connection.refused,
            duration_s=round(time.monotonic() - started, 3),
        )


async def _refuse(
    websocket: WebSocket, runtime: Runtime, code: ErrorCode, message: str, session_id: str, client: str | None
) -> None:
    """Refuse a session as it opens (§2.3, §10.2): count and log it, send the fatal ``error`` frame of
    ``code`` and close with the code's close code."""
    runtime.metrics.refusals.labels(code.value).inc()
    runtime.metrics.sessions.labels(str(code.close_code)).inc()
    log_event(
        logger,
        "session refused",
        logging.WARNING,
        session=session_id,
        client=client,
        code=code.value,
        open_sessions=runtime.sessions,
    )
    session = ServerSession()
    session.abort(code, message)  # fatal, with the code's close code (1013 for both refusals here)
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        for frame in session.data_to_send():
            assert isinstance(frame, str)  # an aborted session queues only its error frame
            await websocket.send_text(frame)
        await websocket.close(session.close_code or 1011)

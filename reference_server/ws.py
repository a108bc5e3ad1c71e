"""The WebSocket route ``/invocations-bidirectional-stream``: the Starlette adapter of the session driver.

The session runs on :class:`reference_server.driver.SessionDriver` (reader, writer, synthesizer, feeder, idle
and limit watches, PROTOCOL.md §2, §7, §8, §10.3, §15.5), which every server of the project shares; this
module gives it the reference server's hooks: synthesis by the runtime's backend on worker threads
(:class:`~reference_server.request_audio.RequestAudio`, an utterance's by
:class:`~reference_server.utterance.UtteranceAudio` fed as its text arrives), cancel aborting the model pass
running for the request (``abort_on_cancel``), §10.2's admission against the session's listener, the
session's slot given back before its Close frame, and telemetry (a :class:`RequestRecord` per request).

Input waiting to be read is bounded by the transport: uvicorn stops reading a socket until the messages of
its last read are taken, and one message is at most ``transport_max_message_bytes``. A client that
disconnects stops everything: the tasks are cancelled, the model pass running for it is aborted and the
session's buffers are dropped (§7.4).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.websockets import WebSocket, WebSocketDisconnect

from protocol.errors import CLOSE_GOING_AWAY, ErrorCode, ProtocolError
from protocol.logs import log_event
from protocol.messages import SynthesisRequest
from protocol.server_session import ServerSession
from reference_server.driver import SEGMENT_BUFFER, AudioPiece, Job, SessionDriver, StarletteTransport
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Runtime
from reference_server.scheduling import Listener
from reference_server.telemetry import RequestRecord
from reference_server.utterance import UtteranceAudio

__all__ = ["PATH", "SEGMENT_BUFFER", "WebSocketConnection", "bidirectional_stream"]

PATH = "/invocations-bidirectional-stream"
"""The route SageMaker opens for InvokeEndpointWithBidirectionalStream (REFERENCE.md §1, PROTOCOL.md §2)."""

logger = logging.getLogger("reference_server")


@dataclass
class _Books:
    """The reference server's bookkeeping of one request (a driver :class:`~reference_server.driver.Job`'s
    ``state``): its telemetry record and, once opened, its synthesis."""

    record: RequestRecord
    audio: RequestAudio | None = None


class WebSocketConnection(SessionDriver):
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
        session = ServerSession(
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
        super().__init__(session, StarletteTransport(websocket), name=session_id)
        self.requests = 0
        self.refused = 0
        # The session's listener: every request's audio queues up for it (§10.1, §10.2).
        self.listener = Listener()
        self.slot_released = False
        """The session gave its slot up to a new one (:meth:`evict`); the slot is no longer its to free."""

    # -- limits (§7.5, §10.2) ----------------------------------------------------------------------

    def on_closing(self) -> None:
        """Give the session's slot back (``max_sessions``, §10) before its close frame goes out: a client
        that has seen its session close may open the next one at once, and must not find the slot still
        held by the session it just ended."""
        if not self.slot_released:
            self.slot_released = True
            self.runtime.close_session()

    def evict(self, idle_s: float) -> None:  # type: ignore[override]
        """End this idle session so that a new one may take its slot (§7.5): the fatal ``session_idle``,
        then close 1001."""
        self.slot_released = True
        super().evict(f"idle for {idle_s:.0f} s; the slot was given to a new session")
        log_event(logger, "session evicted", session=self.session_id, idle_s=round(idle_s, 1))

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

    # -- synthesis hooks ---------------------------------------------------------------------------

    async def wait_ready(self) -> bool:
        # §2.2: SageMaker sends no traffic before GET /ping is healthy, but a direct client may be early.
        return await self.runtime.wait_ready()

    def not_ready_message(self) -> str:
        return f"the model failed to load: {self.runtime.failure}"

    def on_accepted(self, job: Job) -> None:
        job.state = _Books(RequestRecord("ws", job.request, session=self.session_id))
        self.requests += 1

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        """The backend's audio on worker threads; an utterance's as its text arrives (§15)."""
        books: _Books = job.state
        if job.utterance:
            books.audio = UtteranceAudio(self.runtime, job.request, self.listener)
        else:
            books.audio = RequestAudio(self.runtime, job.request, self.listener)
        return self._pieces(books, books.audio)

    @staticmethod
    async def _pieces(books: _Books, audio: RequestAudio) -> AsyncIterator[AudioPiece]:
        try:
            while (piece := await audio.next()) is not None:
                yield piece
        finally:
            audio.close()
            books.record.compute_s = audio.compute_s

    def cancel_audio(self, job: Job) -> None:
        """Close the request's synthesis: wakes a synthesizer waiting for an utterance's text and aborts the
        model pass running for it (``settings.abort_on_cancel``) instead of waiting for it to notice."""
        books: _Books | None = job.state
        if books is not None and books.audio is not None:
            books.audio.close()

    def _utterance(self, job: Job) -> UtteranceAudio:
        audio = job.state.audio
        assert isinstance(audio, UtteranceAudio)
        return audio

    def on_text(self, job: Job, text: str) -> None:
        self._utterance(job).append(text)

    def on_flush(self, job: Job) -> None:
        self._utterance(job).flush()

    def on_utterance_end(self, job: Job, reason: str) -> None:
        self._utterance(job).end()

    def on_audio_queued(self, job: Job, piece: AudioPiece) -> None:
        job.state.record.audio(len(piece.pcm))

    def on_done(self, job: Job, status: str) -> None:
        books: _Books = job.state
        if job.utterance and books.audio is not None:
            books.record.chars = books.audio.chars  # type: ignore[attr-defined]
        books.record.finish(status, self.runtime.metrics, utterance=job.utterance or None)


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

"""Process-wide state of the reference server: the model, its readiness, synthesis workers, session slots.

Everything sessions share lives here and nothing else does (the issue's isolation rule): one
:class:`Runtime` per process holds the backend, a small thread pool that runs synthesis off the event
loop, and the count of open sessions. Each request's audio is produced by a :class:`RequestAudio`,
which advances the backend's segment generator one segment per worker call, so a session can stop
between segments (cancel, disconnect) and sessions take turns on the workers segment by segment.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.messages import Capabilities, SynthesisRequest, Word
from protocol.pcm import StreamResampler, float_to_pcm16
from reference_server.assets import AssetError
from reference_server.telemetry import Metrics

if TYPE_CHECKING:
    from reference_server.backends import Backend
    from reference_server.settings import Settings

__all__ = ["WAIT_FOR_TEXT", "AudioPiece", "Readiness", "RequestAudio", "Runtime"]

WAIT_FOR_TEXT = object()
"""What a synthesis step returns when an utterance has spoken all it holds and more text may come."""

logger = logging.getLogger("reference_server")


class Readiness(enum.Enum):
    """Where model loading stands; ``GET /ping`` is healthy only in :attr:`READY` (PROTOCOL.md §2)."""

    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AudioPiece:
    """One backend segment's audio, ready to send.

    Attributes:
        pcm: PCM16LE mono at the request's sample rate (even length; may be empty when the resampler
            holds everything back).
        words: word timings of this segment in seconds from the start of the request's audio, or
            ``None`` when the backend gives none.
    """

    pcm: bytes
    words: tuple[Word, ...] | None


class RequestAudio:
    """Synthesis of one request, one backend segment at a time, on the runtime's synthesis workers.

    ``await next()`` returns the next :class:`AudioPiece`, or ``None`` at the end; ``close()`` stops
    synthesis and frees the generator and its buffers. Long texts are split by the backend under
    Kokoro's 510-token limit, so the first piece comes after the first segment, not the whole text.

    Backend segments are resampled as one stream (:class:`protocol.pcm.StreamResampler`) so that there
    are no clicks at segment edges. Word times from the backend are relative to their segment; they
    are shifted by the duration of the segments before it.

    The generator is only ever touched under a lock, from one thread at a time: a ``close()`` that
    arrives while a worker is inside the generator is handed to a worker, which runs it once the
    segment is done (a running generator cannot be closed).

    ``compute_s`` totals the seconds the workers spent on this request (synthesis and resampling), the
    denominator of its xRT (:mod:`reference_server.telemetry`).

    The text is spoken in pieces handed out by :meth:`_next_text`: here the request's whole text once;
    an utterance (:class:`reference_server.utterance.UtteranceAudio`) hands out each segment of its
    text as it becomes ready, on one timeline and through one resampler.
    """

    def __init__(self, runtime: Runtime, request: SynthesisRequest) -> None:
        self._runtime = runtime
        self._request = request
        self._lock = threading.Lock()
        self._segments: Iterator[Any] | None = None
        self._resampler = StreamResampler(runtime.backend.sample_rate, request.sample_rate)
        self._offset_s = 0.0
        self._exhausted = False
        self._closed = False
        self._text_taken = False
        self.compute_s = 0.0

    def _next_text(self) -> str | object | None:
        """The next text to synthesize (runs on a worker, under the lock): ``None`` when there is no
        more, or :data:`WAIT_FOR_TEXT` when more may come later (utterances)."""
        if self._text_taken:
            return None
        self._text_taken = True
        return self._request.text

    async def next(self) -> AudioPiece | None:
        """The next segment's audio, or ``None`` when the request is fully spoken (or closed).

        Raises:
            Exception: whatever the backend raised; the request has failed.
        """
        if self._closed or self._exhausted:
            return None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._runtime.executor, self._step)

    def _step(self) -> AudioPiece | object | None:
        """Advance the generator by one segment (runs on a synthesis worker)."""
        started = time.perf_counter()
        try:
            return self._advance()
        finally:
            self.compute_s += time.perf_counter() - started

    def _advance(self) -> AudioPiece | object | None:
        with self._lock:
            if self._closed or self._exhausted:
                return None
            while True:
                if self._segments is None:
                    text = self._next_text()
                    if text is WAIT_FOR_TEXT:
                        return WAIT_FOR_TEXT
                    if text is None:
                        self._exhausted = True
                        tail = self._resampler.flush()
                        return AudioPiece(float_to_pcm16(tail), None) if len(tail) else None
                    request, backend = self._request, self._runtime.backend
                    self._segments = iter(backend.synthesize(text, request.voice, request.speed))  # type: ignore[arg-type]
                segment = next(self._segments, None)
                if segment is not None:
                    break
                self._segments = None
            pcm = float_to_pcm16(self._resampler.feed(segment.audio))
            words = None
            if segment.words is not None:
                offset = self._offset_s
                words = tuple(
                    Word(w.word, round(offset + w.start_s, 3), round(offset + max(w.start_s, w.end_s), 3))
                    for w in segment.words
                )
            self._offset_s += len(segment.audio) / self._runtime.backend.sample_rate
            return AudioPiece(pcm, words)

    def close(self) -> None:
        """Stop synthesis and release the generator; never blocks the event loop, safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._close_segments()
            finally:
                self._lock.release()
        else:  # a worker is inside the generator: close it when that segment is done
            try:
                self._runtime.executor.submit(self._close_locked)
            except RuntimeError:  # the executor is shut down; the worker thread ends with the process
                pass

    def _close_locked(self) -> None:
        with self._lock:
            self._close_segments()

    def _close_segments(self) -> None:
        segments, self._segments = self._segments, None
        close = getattr(segments, "close", None)
        if close is not None:
            close()


class Runtime:
    """What all sessions of one server process share: the backend, its readiness and the worker pool.

    Args:
        settings: the server settings (limits included).
        backend: a backend whose ``load()``/``warm_up()`` have not necessarily run yet.

    Attributes:
        executor: the synthesis workers (``settings.synthesis_workers`` threads); the only place
            backend code runs, so the event loop never blocks on the model (PROTOCOL.md §8).
        sessions: open WebSocket sessions and in-flight ``POST /invocations`` requests.
        metrics: the Prometheus instruments (:class:`~reference_server.telemetry.Metrics`); served only
            when ``settings.metrics_port`` is set.
    """

    def __init__(self, settings: Settings, backend: Backend) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.backend = backend
        self.executor = ThreadPoolExecutor(settings.synthesis_workers, thread_name_prefix="kokoro-synth")
        self.readiness = Readiness.LOADING
        self.failure: str | None = None
        """Why loading failed, in one line (with the fix when there is one); ``None`` unless FAILED."""
        self.sessions = 0
        self.closing = False
        self._ready = asyncio.Event()
        self._http_ids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._live: set[Any] = set()
        self.metrics = Metrics(self.queue_depth, lambda: self.readiness is Readiness.READY)
        self._capabilities: Capabilities | None = None

    # -- readiness -------------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Load the model and synthesize once, off the event loop; then report ready (or failed).

        The first synthesis on a cold model is slow (graph optimisation, allocator warm-up); running it
        here means no client pays for it, and ``GET /ping`` answers 503 until it is done.
        """
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self.backend.load)
            await loop.run_in_executor(self.executor, self.backend.warm_up)
        except Exception as exc:
            self.readiness = Readiness.FAILED
            name = getattr(self.backend, "name", "?")
            if isinstance(exc, AssetError):  # its message names the file and the fix
                self.failure = str(exc)
            elif isinstance(exc, ImportError):
                extras = ".[server,torch]" if name == "torch" else ".[server]"
                self.failure = f"{exc}: install the {name} backend (pip install -e '{extras}')"
            else:  # not foreseen: the traceback is the report
                self.failure = f"loading the {name} backend failed: {type(exc).__name__}: {exc}"
                logger.exception("loading the %s backend failed", name)
        else:
            self.readiness = Readiness.READY
            logger.info("%s backend ready: %s", self.backend.name, self._voices_loaded())
        finally:
            self._ready.set()

    def _voices_loaded(self) -> str:
        """``54 voices in 9 languages: a af_alloy af_aoede ...; b ...`` (the start-up log line)."""
        capabilities = self.capabilities
        by_language = {
            language.code: [voice.id for voice in capabilities.voices if voice.language == language.code]
            for language in capabilities.languages
        }
        listed = "; ".join(f"{code} {' '.join(voices)}" for code, voices in by_language.items())
        return f"{len(capabilities.voices)} voices in {len(by_language)} languages: {listed}"

    async def wait_ready(self) -> bool:
        """Wait until loading has finished; ``True`` if the model is ready, ``False`` if it failed."""
        await self._ready.wait()
        return self.readiness is Readiness.READY

    @property
    def voices(self) -> frozenset[str]:
        """The voices requests may name (the backend's; meaningful once ready)."""
        return frozenset(self.backend.voices)

    @property
    def capabilities(self) -> Capabilities:
        """The answer to ``describe`` (PROTOCOL.md §4.4), built once from the backend and the limits."""
        if self._capabilities is None:
            from reference_server.capabilities import server_capabilities
            from reference_server.http import MP3_AVAILABLE

            self._capabilities = server_capabilities(self.backend, self.limits, mp3=MP3_AVAILABLE)
        return self._capabilities

    # -- sessions --------------------------------------------------------------------------------

    def try_open_session(self) -> bool:
        """Take a session slot; ``False`` when ``max_sessions`` are open or the server is shutting down."""
        if self.closing or self.sessions >= self.limits.max_sessions:
            return False
        self.sessions += 1
        return True

    def close_session(self) -> None:
        """Give back a slot taken by :meth:`try_open_session`."""
        self.sessions -= 1

    def register(self, session: Any) -> None:
        """Track a live WebSocket session so that :meth:`shutdown` can close it with 1001 (§7.3)."""
        self._live.add(session)

    def unregister(self, session: Any) -> None:
        """Forget a session that has ended."""
        self._live.discard(session)

    def new_session_id(self) -> str:
        """A name for a WebSocket session in log lines (``s1``, ``s2``, ...)."""
        return f"s{next(self._session_ids)}"

    def queue_depth(self) -> int:
        """Requests accepted and not yet completed: every live session's, plus in-flight HTTP invocations."""
        # Read from the metrics thread while the event loop changes the sessions: a set or dict that
        # changes under iteration raises, and the next scrape reads it again.
        for _ in range(3):
            try:
                live = list(self._live)
                pending = sum(len(session.session.pending_ids) for session in live)
                return pending + max(0, self.sessions - len(live))
            except RuntimeError:
                continue
        return 0

    def new_http_request_id(self) -> str:
        """A request id for a ``POST /invocations`` body that named none (``h1``, ``h2``, ...)."""
        return f"h{next(self._http_ids)}"

    async def shutdown(self, timeout_s: float) -> None:
        """Stop taking sessions, close every live one with 1001 (§7.3) and stop the workers.

        Sessions get ``timeout_s`` seconds to send their close frame; whatever is left after that is cut
        by the HTTP server's own shutdown.
        """
        self.closing = True
        live = list(self._live)
        if live:
            await asyncio.wait([asyncio.ensure_future(s.shutdown()) for s in live], timeout=timeout_s)
        self.executor.shutdown(wait=False, cancel_futures=True)

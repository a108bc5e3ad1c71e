"""Process-wide state of the reference server: the model, its readiness, the synthesis scheduler, sessions.

Everything sessions share lives here and nothing else does (the issue's isolation rule): one
:class:`Runtime` per process holds the backend, the :class:`~reference_server.scheduling.DeadlineScheduler`
whose worker threads run synthesis off the event loop, the model-speed estimate, the count of open
sessions and invocations, and admission by latency (§10.2: :meth:`Runtime.busy`). Each request's audio is
produced by a :class:`~reference_server.request_audio.RequestAudio` on the runtime's scheduler, one
segment per step (:mod:`reference_server.request_audio`, which says how text is cut into segments).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import enum
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from protocol.messages import Capabilities, SynthesisRequest
from protocol.voices import LANGUAGE_TAGS, LANGUAGES, Voice, language_code
from reference_server.assets import AssetError
from reference_server.scheduling import GUARD_S, DeadlineScheduler, Listener, ModelSpeed
from reference_server.telemetry import Metrics
from speech.chunker import IncrementalSentenceChunker
from speech.segmenter import DEFAULT_FIRST_UNITS, DEFAULT_MIN_UNITS, Segmenter, spoken_units

if TYPE_CHECKING:
    from reference_server.backends import Backend
    from reference_server.settings import Settings

__all__ = ["TRIM_INTERVAL_S", "Readiness", "Runtime", "piece_sentences"]

TRIM_INTERVAL_S = 10.0
"""Least time between two ``malloc_trim`` calls (:meth:`Runtime.release_memory`)."""


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_MALLOC_TRIM = _malloc_trim()

logger = logging.getLogger("reference_server")


class Readiness(enum.Enum):
    """Where model loading stands; ``GET /ping`` is healthy only in :attr:`READY` (PROTOCOL.md §2)."""

    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


def piece_sentences(text: str, language: str) -> list[str]:
    """The sentences of one front-end piece, as the backend's G2P would cut them (``speech.chunker``).

    ``language`` is a Kokoro language code (``"a"``); another gets the chunker's English rules.
    """
    tag = LANGUAGE_TAGS.get(language, "en").split("-")[0]
    chunker = IncrementalSentenceChunker(tag, markdown=False)
    sentences = chunker.feed(text)
    last = chunker.flush()
    if last is not None:
        sentences.append(last)
    return sentences


class Runtime:
    """What all sessions of one server process share: the backend, its readiness and the worker pool.

    Args:
        settings: the server settings (limits included).
        backend: a backend whose ``load()``/``warm_up()`` have not necessarily run yet.
        clock: monotonic seconds for the listeners' clocks and the model-speed estimate; tests pass a
            fake one that a fake backend advances by its synthesis time.
        lockstep: with such a fake clock, the scheduler lets the event loop answer each step before it
            chooses the next (:class:`~reference_server.scheduling.DeadlineScheduler`); never in a server.

    Attributes:
        scheduler: runs every synthesis step on ``settings.synthesis_workers`` threads, earliest deadline
            first (``settings.scheduling``, §10.2); with :attr:`executor` the only places backend code
            runs, so the event loop never blocks on the model (PROTOCOL.md §8).
        executor: one thread for loading and warming up the model, and for closing a generator a
            worker was inside.
        speed: the model-speed estimate of this backend on this device (§10.1).
        sessions: open WebSocket sessions (at most ``max_sessions``).
        invocations: ``POST /invocations`` requests being answered (at most ``max_invocations``, counted
            apart so that neither route locks the other out, §10).
        passes_aborted: model passes stopped early because their request was cancelled or its client
            left (``settings.abort_on_cancel``, issue #26).
        metrics: the Prometheus instruments (:class:`~reference_server.telemetry.Metrics`); served only
            when ``settings.metrics_port`` is set.
    """

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        *,
        clock: Callable[[], float] = time.monotonic,
        lockstep: bool = False,
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.backend = backend
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="kokoro-load")
        device = getattr(backend, "device", None) or "cpu"
        self.speed = ModelSpeed(f"{getattr(backend, 'name', 'model')}:{device}")
        self.scheduler = DeadlineScheduler(
            settings.synthesis_workers,
            policy=settings.scheduling,
            clock=clock,
            min_segment_s=lambda: self.speed.predict_compute(DEFAULT_MIN_UNITS, "a"),
            lockstep=lockstep,
        )
        self.readiness = Readiness.LOADING
        self.failure: str | None = None
        """Why loading failed, in one line (with the fix when there is one); ``None`` unless FAILED."""
        self.sessions = 0
        self.invocations = 0
        self.passes_aborted = 0
        """Model passes stopped by a cancel or a disconnect (``settings.abort_on_cancel``)."""
        self.busy_refusals = 0
        """Requests and sessions refused with ``server_busy`` (:meth:`busy`, §10.2)."""
        self.closing = False
        self._ready = asyncio.Event()
        self._http_ids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._live: set[Any] = set()
        self._trimmed_at = -TRIM_INTERVAL_S
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
    def voice_blends(self) -> bool:
        """Requests may name a blend of :attr:`voices` (§4.1): the backend mixes voice packs."""
        return bool(getattr(self.backend, "voice_blends", False))

    @property
    def capabilities(self) -> Capabilities:
        """The answer to ``describe`` (PROTOCOL.md §4.4), built once from the backend and the limits."""
        if self._capabilities is None:
            from reference_server.capabilities import server_capabilities
            from reference_server.encoders import MP3_AVAILABLE

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

    def release_memory(self) -> None:
        """Hand freed heap memory back to the system after a session ends (PROTOCOL.md §10.3, R10.3-5).

        CPython frees a flood's buffers, but glibc keeps the pages in its arenas, so the process stayed at
        its peak after the client left. ``malloc_trim`` returns them; it runs on :attr:`executor` (ctypes
        releases the GIL, so the event loop goes on) and at most once per :data:`TRIM_INTERVAL_S`. A no-op
        where the C library has no ``malloc_trim`` (not glibc).
        """
        now = time.monotonic()
        if _MALLOC_TRIM is None or now - self._trimmed_at < TRIM_INTERVAL_S:
            return
        self._trimmed_at = now
        with contextlib.suppress(RuntimeError):  # the executor is shut down: the server is stopping
            self.executor.submit(_MALLOC_TRIM, 0)

    def evict_idle_session(self) -> bool:
        """Make room for a new session when every slot is taken (PROTOCOL.md §7.5, the reserve).

        The live session idle longest, if idle at least ``idle_eviction_s``, is ended with
        ``session_idle`` and its slot passes at once to the caller. Returns ``True`` when the caller now
        holds a slot (as after :meth:`try_open_session`), ``False`` when no session is idle long enough
        or the server is shutting down.
        """
        if self.closing:
            return False
        now = time.monotonic()
        idle = [(session.idle_for(now), session) for session in self._live if not session.slot_released]
        candidates = [(seconds, session) for seconds, session in idle if seconds is not None]
        if not candidates:
            return False
        seconds, victim = max(candidates, key=lambda pair: pair[0])
        if seconds < self.limits.idle_eviction_s:
            return False
        victim.evict(seconds)  # its slot is the caller's from now on
        return True

    def try_open_invocation(self) -> bool:
        """Take an invocation slot (``POST /invocations``); ``False`` when ``max_invocations`` are being
        answered or the server is shutting down."""
        if self.closing or self.invocations >= self.limits.max_invocations:
            return False
        self.invocations += 1
        return True

    def close_invocation(self) -> None:
        """Give back a slot taken by :meth:`try_open_invocation`."""
        self.invocations -= 1

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
                return pending + self.invocations
            except RuntimeError:
                continue
        return 0

    # -- admission by latency (§10.2) -------------------------------------------------------------------

    def promised_first_audio_s(self, request: SynthesisRequest | None = None) -> float:
        """When a speech that begins now would hear its first audio, in seconds from now (§10.2).

        The wait for a worker (:meth:`_first_turn_s`) plus the expected synthesis time of the speech's own
        first segment (:meth:`_first_segment_s`) plus :data:`~reference_server.scheduling.GUARD_S`.
        ``request``: the request that would begin it; ``None``: a session that opens.
        """
        return self._first_turn_s() + self._first_segment_s(request) + GUARD_S

    def _first_turn_s(self) -> float:
        """The wait for a worker of a speech that begins now (:meth:`DeadlineScheduler.first_turn_s`: the
        steps running and those that go before a listener with nothing queued), each step timed by the
        scheduler's measurements (:attr:`DeadlineScheduler.step_s`, :attr:`DeadlineScheduler.first_step_s`),
        or the model-speed estimate's expectation before it has them; times the estimate's safety margin
        (:attr:`ModelSpeed.margin`, from how far its recent predictions were off): the steps ahead are
        timed from the past, and a burst that loads the machine makes them slower than they were, so on
        a machine whose speed wanders the line is judged longer."""
        speed = self.speed
        first_step_s = speed.predict_compute(DEFAULT_MIN_UNITS, "a", margin=False)
        step_s = speed.predict_compute(DEFAULT_FIRST_UNITS, "a", margin=False)
        return speed.margin * self.scheduler.first_turn_s(step_s, first_step_s)

    def _first_segment_s(self, request: SynthesisRequest | None) -> float:
        """The expected synthesis time of the first segment of ``request``, cut as
        :meth:`reference_server.request_audio.RequestAudio._advance_deadline` cuts it (the whole first
        sentence with ``sentence`` segmentation), without the estimate's safety margin: the judgement is
        of what is likely, and the margin is for the cuts. ``None`` (a session that opens) or no text yet
        (an utterance): the measured time of a new speech's first step
        (:attr:`DeadlineScheduler.first_step_s`)."""
        speed = self.speed
        language, pace, text = "a", 1.0, ""
        if request is not None:
            language = (Voice.parse(request.voice).language or LANGUAGES["a"]).code
            pace, text = request.speed, request.text[:600]  # a first segment is never longer than this
        sentences = piece_sentences(text, language) if text.strip() else []
        if not sentences:
            measured = self.scheduler.first_step_s
            return (
                measured
                if measured is not None
                else speed.predict_compute(DEFAULT_FIRST_UNITS, "a", margin=False)
            )
        if self.settings.segmentation == "deadline":
            fits = (
                speed.max_units(self.settings.first_audio_target_s, language, pace) if speed.measured else 0.0
            )
            cut = Segmenter(language_code(language)).next_cut(sentences[0], fits, first=True)
            units = spoken_units(sentences[0][: cut.position])
        else:
            units = spoken_units(sentences[0])
        return speed.predict_compute(units, language, pace, margin=False)

    def busy(self, request: SynthesisRequest | None = None, listener: Listener | None = None) -> str | None:
        """Why ``request`` (``None``: a session that opens) is refused with ``server_busy`` (§10.2): its
        first audio (:meth:`promised_first_audio_s`) would come later than ``first_audio_budget_s`` because
        of the work ahead of it; or ``None`` to accept it, and then ``listener``, the one that will hear it,
        holds its place in the line until its first step is submitted (:meth:`DeadlineScheduler.reserve`),
        so that requests arriving together are judged each behind the others.

        Never busy with nothing ahead in line (a model slower than the budget serves one speech at a time
        rather than none; refusing would make no caller faster); before the model is ready (a session that
        opens then waits for the model, as §2.2 allows); nor before its speed has been measured
        (:attr:`ModelSpeed.measured` and a step's time): the prior cannot tell a fast GPU from a slow CPU,
        and refusing on a guess would turn away the first callers of a fast server."""
        if self.readiness is not Readiness.READY or not self.speed.measured or self.scheduler.step_s is None:
            return None
        budget = self.limits.first_audio_budget_s
        turn_s = self._first_turn_s()
        promised = turn_s + self._first_segment_s(request) + GUARD_S
        if turn_s <= 0.0 or promised <= budget:
            if listener is not None:
                self.scheduler.reserve(listener)
            return None
        self.busy_refusals += 1
        return (
            f"the server is busy: first audio would come in about {promised:.1f} s, over its "
            f"first_audio_budget_s of {budget:g} s; try again later"
        )

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
        self.scheduler.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

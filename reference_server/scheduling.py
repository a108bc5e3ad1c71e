"""Who synthesizes next, and how much: the model-speed estimate, the listener's clock, the deadline scheduler.

PROTOCOL.md §10.1 (segmentation) and §10.2 (scheduling across sessions) are SHOULDs of server behaviour
with no wire change; this module is how the reference server meets them.

* :class:`ModelSpeed` learns, online, how long the model takes to synthesize a segment of a given length
  on this backend and device, and answers the inverse question: how long a segment fits in a time budget.
* :class:`Listener` models one session's listener: audio is played in real time from the moment it is
  produced, so the audio queued ahead of the listener is what was produced minus what has been played.
  When the queue runs dry the listener hears silence (an underrun); its *deadline* is the moment it runs
  dry.
* :func:`first_turn_s` and :meth:`DeadlineScheduler.first_turn_s` answer the admission question of §10.2:
  how long a step submitted now for a listener with nothing queued would wait for a worker, given the
  steps running and waiting and the measured time a step takes (:attr:`DeadlineScheduler.step_s`).
* :class:`DeadlineScheduler` runs synthesis steps on its worker threads (never on the event loop,
  PROTOCOL.md §8). When several sessions wait for the model it takes the step whose listener runs dry
  first (earliest deadline first), a listener that has nothing queued (a new session's first segment,
  or one that has run dry) before all others, and grants it a time budget: what its own listener has
  queued, less what the listeners behind it need to get a minimal segment of their own in time
  (:func:`choose`). The step turns the budget into a segment length with :class:`ModelSpeed` and
  :class:`speech.segmenter.Segmenter`.

Time is injected (``clock``) everywhere, so tests decide orders and budgets with a fake clock and a fake
backend of known speed, never by timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "GUARD_S",
    "TRUSTED_SAMPLES",
    "DeadlineScheduler",
    "Grant",
    "Listener",
    "ModelSpeed",
    "Policy",
    "SchedulerClosed",
    "Waiting",
    "choose",
    "first_turn_s",
]

TRUSTED_SAMPLES = 3
"""Passes of the model measured before its speed estimate replaces the prior (:attr:`ModelSpeed.measured`)."""

GUARD_S = 0.05
"""Seconds kept in reserve from every budget: the time from the end of synthesis to the listener's ear
(resampling, framing, the socket) and scheduling jitter."""


class Policy(enum.StrEnum):
    """The order in which waiting synthesis steps get the model.

    ``deadline``: earliest deadline first, listeners with nothing queued first (§10.2).
    ``fifo``: in the order the steps were submitted (the server before §10.2: sessions take turns).
    """

    DEADLINE = "deadline"
    FIFO = "fifo"


# --- the listener's clock ------------------------------------------------------------------------------


class Listener:
    """The audio queued ahead of one listener, assuming real-time playback from the first sample (§10.1).

    A player starts when audio arrives and plays it at its sample rate; when it has played everything it
    waits (silence) until more arrives, then plays on. ``add`` records produced audio; ``queued_s`` is
    what is left to play at ``now``. The model ignores the network (a loopback or a fast link delivers a
    segment in milliseconds, and :data:`GUARD_S` is kept for it) and assumes the client plays at once.
    """

    def __init__(self) -> None:
        self._dry_at: float | None = None  # when the queued audio runs out; None: nothing yet

    @property
    def fresh(self) -> bool:
        """Nothing was ever produced for this listener: its first audio is still to come."""
        return self._dry_at is None

    def queued_s(self, now: float) -> float:
        """Seconds of audio queued ahead of the listener at ``now`` (0 when dry)."""
        return 0.0 if self._dry_at is None else max(0.0, self._dry_at - now)

    def deadline(self, now: float) -> float:
        """When the listener runs dry: ``now`` if it is dry already."""
        return now + self.queued_s(now)

    def add(self, audio_s: float, now: float) -> None:
        """Record ``audio_s`` seconds of audio produced at ``now`` (played after what is queued)."""
        start = now if self._dry_at is None else max(self._dry_at, now)
        self._dry_at = start + max(0.0, audio_s)


# --- the model-speed estimate ---------------------------------------------------------------------------


class _Line:
    """A least-squares line ``y = intercept + slope * x`` with exponential forgetting.

    Until ``trusted`` samples have been seen the line is the prior; from then on it is fitted to the
    samples alone (a prior far from the data would bend a fit on a narrow range of ``x``). Every new
    sample multiplies the old sums by ``decay``, so the fit follows a machine whose speed changes.
    """

    def __init__(self, intercept: float, slope: float, *, decay: float, trusted: int) -> None:
        self.prior = (intercept, slope)
        self.decay = decay
        self.trusted = trusted
        self.samples = 0
        self._s = [0.0] * 5  # sum w, sum wx, sum wy, sum wxx, sum wxy
        self._min_slope = slope / 100.0

    def observe(self, x: float, y: float) -> None:
        s = [value * self.decay for value in self._s]
        s[0] += 1.0
        s[1] += x
        s[2] += y
        s[3] += x * x
        s[4] += x * y
        self._s = s
        self.samples += 1

    @property
    def params(self) -> tuple[float, float]:
        """``(intercept, slope)``: the prior, or the fit with a positive slope and no negative intercept."""
        if self.samples < self.trusted:
            return self.prior
        w, sx, sy, sxx, sxy = self._s
        spread = w * sxx - sx * sx
        if spread > 1e-9 * max(1.0, w * sxx):
            slope = (w * sxy - sx * sy) / spread
            intercept = (sy - slope * sx) / w
            if slope >= self._min_slope and intercept >= 0.0:
                return intercept, slope
        # x barely varies, or the fit is implausible: a line through the origin
        return 0.0, max(sxy / max(sxx, 1e-12), self._min_slope)

    def __call__(self, x: float) -> float:
        intercept, slope = self.params
        return intercept + slope * x


@dataclass(frozen=True, slots=True)
class SpeedSample:
    """One observed synthesis: ``units`` spoken units (:func:`speech.segmenter.spoken_units`) of
    ``language`` at ``speed`` became ``audio_s`` seconds of audio in ``compute_s`` seconds."""

    units: float
    language: str
    speed: float
    audio_s: float
    compute_s: float


class ModelSpeed:
    """How long this backend on this device takes to synthesize a segment, learned online (§10.1).

    Two lines, both fitted by least squares with exponential forgetting:

    * audio: ``audio_s * speed = lead_s + s_per_unit * units``, one line per language (Kokoro adds a
      lead-in and trailing silence of about 0.8 s to every pass, the intercept; speech takes about 60 ms
      per letter in English, the slope);
    * compute: ``compute_s = fixed_s + audio_s / xrt``, one line for the process: on a CPU, Kokoro's
      time grows with the audio it makes (its decoder), and ``xrt`` is how many times faster than real
      time it runs.

    Until :data:`TRUSTED_SAMPLES` passes have been measured the lines are the prior (:attr:`measured` is
    false). Predictions are multiplied by a safety margin learned from how far recent predictions were
    off (1 + two root-mean-square relative errors, from 1.1 to 2.0; 1.5 until there are errors to
    learn from), because a segment that takes longer than predicted is heard as silence.

    Args:
        name: what is measured (``"onnx:cpu"``), for logs and metrics.
        xrt: prior speed (times real time); 2.0 is a slow two-core CPU, so a new server errs short.
        fixed_s: prior fixed cost per pass, seconds.
        lead_s, s_per_unit: prior audio line for every language.
        decay: forgetting factor per sample (0.9: a sample's weight halves after about 7 more).

    Thread-safe: ``observe`` may run on any worker thread while others predict.
    """

    def __init__(
        self,
        name: str = "model",
        *,
        xrt: float = 2.0,
        fixed_s: float = 0.02,
        lead_s: float = 0.8,
        s_per_unit: float = 0.06,
        decay: float = 0.9,
    ) -> None:
        if xrt <= 0 or fixed_s < 0 or lead_s < 0 or s_per_unit <= 0 or not 0 < decay <= 1:
            raise ValueError(
                "xrt and s_per_unit must be positive, fixed_s and lead_s not negative, decay in (0, 1]"
            )
        self.name = name
        self._lock = threading.Lock()
        self._decay = decay
        self._prior_audio = (lead_s, s_per_unit)
        self._audio: dict[str, _Line] = {}
        self._compute = _Line(fixed_s, 1.0 / xrt, decay=decay, trusted=TRUSTED_SAMPLES)
        self._square_error = 0.0
        self._errors = 0
        self.last: SpeedSample | None = None

    def _audio_line(self, language: str) -> _Line:
        line = self._audio.get(language)
        if line is None:
            lead_s, s_per_unit = self._prior_audio
            line = _Line(lead_s, s_per_unit, decay=self._decay, trusted=TRUSTED_SAMPLES)
            self._audio[language] = line
        return line

    @property
    def measured(self) -> bool:
        """At least :data:`TRUSTED_SAMPLES` passes have been measured: predictions are the model's own.

        Before that the server cannot know whether it runs on a fast GPU or a slow CPU, and cuts only a
        speech's first segment short (reference_server.request_audio).
        """
        with self._lock:
            return self._compute.samples >= TRUSTED_SAMPLES

    @property
    def margin(self) -> float:
        """The factor predictions are multiplied by (see the class docstring)."""
        with self._lock:
            return self._margin()

    def _margin(self) -> float:
        if not self._errors:
            return 1.5
        return min(2.0, max(1.1, 1.0 + 2.0 * math.sqrt(self._square_error)))

    def demand(self, listeners: int) -> float:
        """The share of the model that ``listeners`` real-time listeners need: ``listeners / xrt`` (1 or
        more: the model cannot keep them all fed, whatever the segments)."""
        with self._lock:
            return listeners * self._compute.params[1]

    def predict_audio(self, units: float, language: str, speed: float = 1.0) -> float:
        """Expected seconds of audio (silences included) for ``units`` spoken units at ``speed``."""
        with self._lock:
            return self._audio_line(language)(units) / speed

    def predict_compute(
        self, units: float, language: str, speed: float = 1.0, *, margin: bool = True
    ) -> float:
        """Seconds the model will take, with the safety margin (``margin=False``: the expected time, without
        it), for ``units`` spoken units at ``speed``."""
        with self._lock:
            audio_s = self._audio_line(language)(units) / speed
            return (self._margin() if margin else 1.0) * self._compute(audio_s)

    def max_units(self, budget_s: float, language: str, speed: float = 1.0) -> float:
        """The longest segment, in spoken units, whose :meth:`predict_compute` fits in ``budget_s``
        (0 when not even an empty pass fits)."""
        with self._lock:
            fixed_s, per_audio_s = self._compute.params
            lead_s, s_per_unit = self._audio_line(language).params
            audio_s = (budget_s / self._margin() - fixed_s) / per_audio_s
            return max(0.0, (audio_s * speed - lead_s) / s_per_unit)

    def observe(self, units: float, language: str, speed: float, audio_s: float, compute_s: float) -> None:
        """Learn from one synthesis pass: ``units`` spoken units became ``audio_s`` s of audio (untrimmed,
        as the model made it) in ``compute_s`` s of wall time on the synthesis worker."""
        if audio_s <= 0 or compute_s <= 0 or speed <= 0:
            return
        with self._lock:
            predicted = self._compute(audio_s)
            if predicted > 0 and self._compute.samples >= TRUSTED_SAMPLES:  # the prior's errors say nothing
                error = (compute_s - predicted) / predicted
                weight = 1.0 - self._decay if self._errors else 1.0
                self._square_error += weight * (error * error - self._square_error)
                self._errors += 1
            self._compute.observe(audio_s, compute_s)
            if units > 0:
                self._audio_line(language).observe(units, audio_s * speed)
            self.last = SpeedSample(units, language, speed, audio_s, compute_s)

    def snapshot(self) -> dict[str, Any]:
        """The current fit, JSON-ready: ``xrt``, ``fixed_s``, ``margin``, ``samples`` and per language
        ``lead_s`` and ``s_per_unit``."""
        with self._lock:
            fixed_s, per_audio_s = self._compute.params
            return {
                "name": self.name,
                "xrt": round(1.0 / per_audio_s, 3),
                "fixed_s": round(fixed_s, 4),
                "margin": round(self._margin(), 3),
                "samples": self._compute.samples,
                "languages": {
                    language: dict(
                        zip(("lead_s", "s_per_unit"), (round(v, 4) for v in line.params), strict=True)
                    )
                    for language, line in sorted(self._audio.items())
                },
            }


# --- choosing the next step ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Grant:
    """What the scheduler gives the step it runs next.

    Attributes:
        budget_s: seconds the step's synthesis may take before its listener would run dry (less the
            reserve for the listeners behind it and :data:`GUARD_S`); 0 when the listener is dry.
        first: the listener has nothing queued: this is the first segment of a speech (a new session,
            a new reply after a pause, or a listener that ran dry), to be kept short.
        waiting: steps that were waiting when this one was chosen (this one included).
    """

    budget_s: float
    first: bool
    waiting: int = 1


@dataclass(frozen=True, slots=True)
class Waiting:
    """A waiting step as :func:`choose` sees it: its submission number and its listener's queued audio."""

    seq: int
    queued_s: float


def choose(
    waiting: Sequence[Waiting],
    policy: Policy = Policy.DEADLINE,
    *,
    min_segment_s: float = 0.0,
    guard_s: float = GUARD_S,
) -> tuple[int, Grant]:
    """The index of the step to run next and its :class:`Grant` (§10.2). Pure: no clock, no state.

    Order (``deadline``): steps whose listener has nothing queued first, in submission order; then by
    queued audio, least first (earliest deadline), ties in submission order. ``fifo``: submission order.

    Budget: the chosen listener's queued audio, less ``guard_s``; and, so that a long segment cannot
    starve the listeners behind it, at most ``queued_k - rank_k * min_segment_s - guard_s`` for every
    other waiting listener ``k`` with something queued, ``rank_k`` being its place in line behind the
    chosen one (1 for the next). ``min_segment_s`` is the predicted time of a minimal segment.

    Raises:
        ValueError: nothing is waiting.
    """
    if not waiting:
        raise ValueError("no step is waiting")
    if policy is Policy.FIFO:
        order = sorted(range(len(waiting)), key=lambda i: waiting[i].seq)
    else:
        order = sorted(
            range(len(waiting)),
            key=lambda i: (waiting[i].queued_s > 0.0, waiting[i].queued_s, waiting[i].seq),
        )
    chosen = order[0]
    queued = waiting[chosen].queued_s
    first = queued <= 0.0
    budget = 0.0 if first else queued - guard_s
    if not first:
        behind = sorted((w.queued_s for i, w in enumerate(waiting) if i != chosen and w.queued_s > 0.0))
        for rank, other in enumerate(behind, start=1):
            budget = min(budget, other - rank * min_segment_s - guard_s)
    return chosen, Grant(max(0.0, budget), first, len(waiting))


def first_turn_s(
    running_left_s: Sequence[float],
    waiting: Sequence[tuple[float, float]],
    workers: int,
    policy: Policy = Policy.DEADLINE,
) -> float:
    """Seconds until a step submitted now, for a listener with nothing queued, gets a worker (§10.2).
    Pure: no clock, no state.

    Args:
        running_left_s: for each step running, the seconds it is expected to run on (0 when overdue).
        waiting: for each step waiting, ``(queued_s, takes_s)``: the seconds of audio queued ahead of its
            listener and the seconds the step is expected to take.
        workers: worker threads (a worker not running a step is free now).
        policy: ``fifo``: every waiting step goes first. ``deadline`` (:func:`choose`): the waiting steps
            whose listener has nothing queued go first (they were submitted earlier), then every one whose
            listener runs dry before a worker would come free for the new step (it is then dry and earlier).

    Raises:
        ValueError: ``workers`` is below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    free = sorted(max(0.0, left) for left in running_left_s)[:workers]
    free += [0.0] * (workers - len(free))
    heapq.heapify(free)

    def one_ahead(takes_s: float) -> None:
        heapq.heappush(free, heapq.heappop(free) + max(0.0, takes_s))

    if Policy(policy) is Policy.FIFO:
        for _, takes_s in waiting:
            one_ahead(takes_s)
        return free[0]
    for _, takes_s in (w for w in waiting if w[0] <= 0.0):
        one_ahead(takes_s)
    for queued, takes_s in sorted(w for w in waiting if w[0] > 0.0):
        if queued > free[0]:
            break  # this listener (and every one with more queued) still has audio when our turn comes
        one_ahead(takes_s)
    return free[0]


def _moving_mean(mean: float | None, sample: float) -> float:
    return sample if mean is None else STEP_DECAY * mean + (1.0 - STEP_DECAY) * sample


RESERVATION_S = 2.0
"""Longest a reservation (:meth:`DeadlineScheduler.reserve`) counts while its step is not submitted."""

STEP_DECAY = 0.5
"""Weight the mean of the older steps keeps in :attr:`DeadlineScheduler.step_s` at each new step: the last
three or so count most, so the mean follows the replies of the moment and a machine whose speed changes."""


# --- the scheduler -------------------------------------------------------------------------------------


class SchedulerClosed(RuntimeError):
    """The scheduler was closed (server shutdown) before the step could run."""


LOCKSTEP_TURNS = 20
"""Event-loop turns a ``lockstep`` worker lets pass after each step (see :class:`DeadlineScheduler`)."""

LOCKSTEP_WAIT_S = 1.0
"""Longest a ``lockstep`` worker waits for those turns (a loop that stopped never runs them)."""


@dataclass(eq=False)
class _Step:
    listener: Listener
    work: Callable[[Grant], Any]
    seq: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    taken: bool = False
    grant: Grant | None = field(default=None)


class DeadlineScheduler:
    """Runs synthesis steps on ``workers`` threads in the order of :func:`choose` (§10.2).

    A step is a function ``work(grant) -> result`` that synthesizes one segment for one listener; the
    event loop awaits :meth:`run`. Cancelling that await (the request was cancelled, the client left)
    removes a waiting step at once; a step already running finishes its segment and its result is
    dropped, so cancel and disconnect take effect within one segment (PROTOCOL.md §4.2, §7.4).

    Args:
        workers: threads that run steps (``synthesis_workers``; 1 on a CPU, where one synthesis uses
            every core).
        policy: :class:`Policy` (``deadline`` or ``fifo``).
        clock: monotonic seconds; tests pass a fake.
        min_segment_s: returns the predicted time of a minimal segment (for :func:`choose`).
        guard_s: reserve kept from every budget.
        name: thread name prefix.
        lockstep: for tests on a fake clock, which moves only while a step runs. After each step a worker
            lets the event loop that submitted it run what is ready (:data:`LOCKSTEP_TURNS` turns) before it
            chooses the next, so the choice sees the steps that loop submits in reply, as a real-time loop
            does within the step's real compute time. Without it, a step that takes no real time can be
            followed by another listener's while the first listener's reply is still on its way.
    """

    def __init__(
        self,
        workers: int = 1,
        *,
        policy: Policy | str = Policy.DEADLINE,
        clock: Callable[[], float] = time.monotonic,
        min_segment_s: Callable[[], float] = lambda: 0.0,
        guard_s: float = GUARD_S,
        name: str = "kokoro-synth",
        lockstep: bool = False,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.policy = Policy(policy)
        self.clock = clock
        self._lockstep = lockstep
        self._min_segment_s = min_segment_s
        self._guard_s = guard_s
        self._cond = threading.Condition()
        self._waiting: list[_Step] = []
        self._seq = itertools.count()
        self._closed = False
        self.running = 0
        # seq -> (clock() when a worker took it, its listener had never heard anything), for running steps
        self._started: dict[int, tuple[float, bool]] = {}
        self._step_s: float | None = None
        self._first_step_s: float | None = None
        # Listeners admitted to begin a speech whose first step is not submitted yet (reserve()), with
        # when the reservation lapses.
        self._reserved: dict[Listener, float] = {}
        self.history: list[tuple[int, Grant]] = []  # (seq, grant) of the last steps taken, for tests
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def waiting(self) -> int:
        """Steps submitted and not yet taken by a worker."""
        with self._cond:
            return len(self._waiting)

    @property
    def first_step_s(self) -> float | None:
        """The time the first step of a listener that never heard anything takes, seconds (a moving mean
        like :attr:`step_s`, of those steps only); ``None`` before the first such step ends."""
        with self._cond:
            return self._first_step_s

    @property
    def step_s(self) -> float | None:
        """The time a step takes, seconds: a moving mean of the last steps' durations on this machine
        (:data:`STEP_DECAY`); ``None`` before the first step ends."""
        with self._cond:
            return self._step_s

    def first_turn_s(self, step_s: float, first_step_s: float) -> float:
        """Seconds until a step submitted now for a listener with nothing queued would get a worker
        (:func:`first_turn_s` on the steps running and waiting now).

        Args:
            step_s: the time a step takes while none has been measured (:attr:`step_s` once one has).
            first_step_s: the time the first step of a listener that never heard anything takes (a new
                speech's first segment is short, §10.1), while none has been measured
                (:attr:`first_step_s` once one has): such steps, waiting or running, count this long.
        """
        with self._cond:
            now = self.clock()
            mean = self._step_s if self._step_s is not None else step_s
            if self._first_step_s is not None:
                first_step_s = self._first_step_s
            running = [
                (first_step_s if first else mean) - (now - started)
                for started, first in self._started.values()
            ]
            waiting = [
                (step.listener.queued_s(now), first_step_s if step.listener.fresh else mean)
                for step in self._waiting
            ]
            waiting += [(0.0, first_step_s) for until in self._reserved.values() if until > now]
            workers = len(self._threads)
        return first_turn_s(running, waiting, workers, self.policy)

    def reserve(self, listener: Listener, hold_s: float = RESERVATION_S) -> None:
        """Count ``listener``'s first step as waiting from now, before it is submitted (§10.2).

        A session admitted to begin a speech submits its first step a moment later (its synthesis task
        runs after the reader); requests that arrive together would otherwise each be judged on a line
        without the others. The reservation ends when the listener's step is submitted (:meth:`run`) or
        after ``hold_s`` seconds (an utterance whose text has not come yet)."""
        with self._cond:
            now = self.clock()
            self._reserved = {held: until for held, until in self._reserved.items() if until > now}
            self._reserved[listener] = now + hold_s

    def is_waiting(self, listener: Listener) -> bool:
        """A step of ``listener`` is submitted and not yet taken by a worker."""
        with self._cond:
            return any(step.listener is listener for step in self._waiting)

    async def run(self, listener: Listener, work: Callable[[Grant], Any]) -> Any:
        """Run ``work`` on a worker thread when its turn comes; return its result.

        Raises:
            SchedulerClosed: the scheduler closed first.
            asyncio.CancelledError: the caller was cancelled (the step is withdrawn if still waiting).
            Exception: whatever ``work`` raised.
        """
        loop = asyncio.get_running_loop()
        step = _Step(listener, work, next(self._seq), loop, loop.create_future())
        with self._cond:
            if self._closed:
                raise SchedulerClosed("the synthesis scheduler is closed")
            self._waiting.append(step)
            self._reserved.pop(listener, None)
            self._cond.notify()
        try:
            return await step.future
        except asyncio.CancelledError:
            with self._cond:
                if not step.taken:
                    self._waiting.remove(step)
            raise

    def _take(self) -> _Step | None:
        """The next step to run (under the lock), or ``None`` once closed and drained."""
        while not self._waiting:
            if self._closed:
                return None
            self._cond.wait()
        now = self.clock()
        entries = [Waiting(step.seq, step.listener.queued_s(now)) for step in self._waiting]
        index, grant = choose(
            entries, self.policy, min_segment_s=self._min_segment_s(), guard_s=self._guard_s
        )
        step = self._waiting.pop(index)
        step.taken, step.grant = True, grant
        self.history.append((step.seq, grant))
        del self.history[:-256]
        self.running += 1
        self._started[step.seq] = (now, step.listener.fresh)
        return step

    def _work(self) -> None:
        while True:
            with self._cond:
                step = self._take()
            if step is None:
                return
            try:
                assert step.grant is not None
                result = step.work(step.grant)
            except BaseException as exc:  # handed to the awaiting coroutine, never lost in the thread
                self._settle(step, None, exc)
            else:
                self._settle(step, result, None)
            finally:
                with self._cond:
                    self.running -= 1
                    taken = self._started.pop(step.seq, None)
                    if taken is not None:
                        took = max(0.0, self.clock() - taken[0])
                        self._step_s = _moving_mean(self._step_s, took)
                        if taken[1]:
                            self._first_step_s = _moving_mean(self._first_step_s, took)
            if self._lockstep:
                self._let_loop_run(step.loop)

    @staticmethod
    def _let_loop_run(loop: asyncio.AbstractEventLoop) -> None:
        async def turns() -> None:
            for _ in range(LOCKSTEP_TURNS):
                await asyncio.sleep(0)

        if loop.is_closed() or not loop.is_running():
            return  # the caller's loop ended: nobody will submit more
        coroutine = turns()
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except RuntimeError:  # it closed meanwhile
            coroutine.close()
            return
        with contextlib.suppress(Exception):  # it stopped before the turns ran
            future.result(LOCKSTEP_WAIT_S)

    @staticmethod
    def _settle(step: _Step, result: Any, error: BaseException | None) -> None:
        def settle() -> None:
            if step.future.done():  # the caller was cancelled meanwhile: the result is dropped
                return
            if error is not None:
                step.future.set_exception(error)
            else:
                step.future.set_result(result)

        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            step.loop.call_soon_threadsafe(settle)

    def close(self) -> None:
        """Stop taking steps: waiting ones fail with :class:`SchedulerClosed`; running ones finish."""
        with self._cond:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            self._cond.notify_all()
        for step in waiting:
            self._settle(step, None, SchedulerClosed("the synthesis scheduler is closed"))

"""Deadline-aware segmentation and scheduling (PROTOCOL.md §10.1, §10.2), decided by fakes, never by timing.

* :class:`ModelSpeed` is fed samples of a known speed and must find it, follow a change, and invert it;
* :func:`choose` and :class:`DeadlineScheduler` order steps by their listeners' deadlines (a gate holds
  the single worker while steps queue up, so the order is decided by the queue alone);
* the runtime, on :class:`bench.paced.PacedBackend` and a fake clock, speaks replies whose audio and
  synthesis times are known exactly: with deadline segmentation the modelled listener never waits, with
  the old one it does; word timings still point at the words after the cuts and trims.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import numpy as np
import pytest

from bench.paced import SAMPLE_RATE, FakeClock, PacedBackend
from bench.playback import underrun
from protocol.messages import SynthesisRequest
from reference_server.request_audio import LEAD_S, PAUSE_S, RequestAudio
from reference_server.runtime import Runtime
from reference_server.scheduling import (
    GUARD_S,
    DeadlineScheduler,
    Grant,
    Listener,
    ModelSpeed,
    Policy,
    SchedulerClosed,
    Waiting,
    choose,
)
from reference_server.settings import Settings
from speech.segmenter import DEFAULT_FIRST_UNITS, Boundary, spoken_units

GUARD = 30.0
"""Seconds: only guards against hangs; nothing is timed."""

BENCH_REPLY = (
    "Happy to help.",
    "Your order shipped this morning from our Denver warehouse and should reach you by Thursday afternoon.",
)
LONG_REPLIES = (
    (
        "Sure thing.",
        "The technician will arrive at your house between nine and eleven tomorrow to replace the heater.",
        "Please make sure that someone is at home to let him in and show him where the old unit is.",
    ),
    (
        "Good news.",
        "Your refund for the damaged headphones was approved today and will be back on your card soon.",
    ),
)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, GUARD))


# --- the listener -------------------------------------------------------------------------------------


def test_listener_plays_in_real_time_and_waits_when_dry():
    listener = Listener()
    assert listener.queued_s(0.0) == 0.0 and listener.deadline(5.0) == 5.0
    listener.add(2.0, now=10.0)
    assert listener.queued_s(10.5) == pytest.approx(1.5)
    listener.add(1.0, now=11.0)  # queued behind what is playing
    assert listener.deadline(11.0) == pytest.approx(13.0)
    assert listener.queued_s(20.0) == 0.0
    listener.add(1.0, now=20.0)  # after running dry, playback resumes at once
    assert listener.deadline(20.0) == pytest.approx(21.0)


# --- the model-speed estimate ---------------------------------------------------------------------------


def _feed(speed: ModelSpeed, xrt: float, n: int, *, lead_s=0.8, s_per_unit=0.06, language="a") -> None:
    for i in range(n):
        units = 10 + (i * 37) % 90
        audio_s = lead_s + s_per_unit * units
        speed.observe(units, language, 1.0, audio_s, 0.01 + audio_s / xrt)


def test_model_speed_learns_the_speed_and_the_audio_per_unit():
    speed = ModelSpeed("fake:cpu")
    _feed(speed, xrt=3.45, n=30, lead_s=0.7, s_per_unit=0.05)
    snapshot = speed.snapshot()
    assert snapshot["xrt"] == pytest.approx(3.45, rel=0.02)
    assert snapshot["fixed_s"] == pytest.approx(0.01, abs=0.03)
    assert snapshot["languages"]["a"] == {
        "lead_s": pytest.approx(0.7, abs=0.01),
        "s_per_unit": pytest.approx(0.05, rel=0.02),
    }
    assert speed.margin < 1.3  # the prior's errors fade ...
    _feed(speed, xrt=3.45, n=30, lead_s=0.7, s_per_unit=0.05)
    assert speed.margin == pytest.approx(1.1, abs=0.01)  # ... and exact samples earn the smallest margin
    assert speed.predict_audio(40, "a") == pytest.approx(0.7 + 40 * 0.05, rel=0.01)
    assert speed.predict_audio(40, "a", speed=2.0) == pytest.approx((0.7 + 40 * 0.05) / 2, rel=0.01)
    assert speed.predict_compute(40, "a") == pytest.approx(1.1 * (0.01 + 2.7 / 3.45), rel=0.02)


def test_model_speed_follows_a_change_of_speed():
    speed = ModelSpeed()
    _feed(speed, xrt=4.0, n=30)
    _feed(speed, xrt=1.5, n=30)  # the machine got busy
    assert speed.snapshot()["xrt"] == pytest.approx(1.5, rel=0.05)


def test_max_units_inverts_the_prediction():
    speed = ModelSpeed()
    _feed(speed, xrt=3.0, n=20)
    for budget in (0.5, 1.0, 2.5):
        units = speed.max_units(budget, "a")
        assert speed.predict_compute(units, "a") == pytest.approx(budget, rel=1e-6)
    assert speed.max_units(0.0, "a") == 0.0


def test_noisy_speed_widens_the_margin_and_unknown_languages_use_the_prior():
    speed = ModelSpeed()
    assert speed.margin == 1.5  # no sample yet
    for i in range(40):
        audio_s = 0.8 + 0.06 * 50
        speed.observe(50, "a", 1.0, audio_s, audio_s / 3.0 * (1.6 if i % 2 else 0.6))
    assert speed.margin > 1.5
    assert speed.predict_audio(50, "z") == pytest.approx(0.8 + 50 * 0.06)


def test_until_measured_the_prior_is_used_then_the_samples_alone():
    speed = ModelSpeed(xrt=2.0)
    assert not speed.measured and speed.snapshot()["xrt"] == 2.0
    for _ in range(3):  # a fast model on a narrow range of lengths: the prior must not bend the fit
        speed.observe(20, "a", 1.0, 2.0, 0.02)
    assert speed.measured and speed.snapshot()["xrt"] == pytest.approx(100.0)


def test_model_speed_ignores_empty_samples_and_refuses_bad_priors():
    speed = ModelSpeed()
    speed.observe(10, "a", 1.0, 0.0, 0.5)
    assert speed.snapshot()["samples"] == 0
    with pytest.raises(ValueError):
        ModelSpeed(xrt=0)


# --- choosing the next step -----------------------------------------------------------------------------


def test_earliest_deadline_first_and_dry_listeners_before_all():
    waiting = [Waiting(0, 3.0), Waiting(1, 1.0), Waiting(2, 0.0), Waiting(3, 2.0), Waiting(4, 0.0)]
    index, grant = choose(waiting)
    assert index == 2 and grant.first and grant.budget_s == 0.0 and grant.waiting == 5
    rest = [w for i, w in enumerate(waiting) if i != 2]
    assert rest[choose(rest)[0]].seq == 4  # the other dry one, next
    rest = [w for w in rest if w.seq != 4]
    assert rest[choose(rest)[0]].seq == 1  # then the earliest deadline


def test_fifo_takes_steps_in_submission_order():
    waiting = [Waiting(5, 0.0), Waiting(2, 9.0), Waiting(7, 1.0)]
    index, grant = choose(waiting, Policy.FIFO)
    assert waiting[index].seq == 2 and not grant.first


def test_the_budget_leaves_the_listeners_behind_time_for_a_minimal_segment():
    _, grant = choose([Waiting(0, 2.0)], min_segment_s=0.3)
    assert grant.budget_s == pytest.approx(2.0 - GUARD_S)
    # Next in line has 2.1 s queued: our segment may take at most 2.1 - 0.3 - guard (it still gets a
    # minimal segment in time); the third, 3.0 s, at most 3.0 - 2 * 0.3 - guard.
    _, grant = choose([Waiting(0, 2.0), Waiting(1, 2.1), Waiting(2, 3.0)], min_segment_s=0.3)
    assert grant.budget_s == pytest.approx(2.1 - 0.3 - GUARD_S)
    _, grant = choose([Waiting(0, 2.0), Waiting(1, 2.1), Waiting(2, 2.2)], min_segment_s=0.6)
    assert grant.budget_s == pytest.approx(2.2 - 1.2 - GUARD_S)
    _, grant = choose([Waiting(0, 0.5), Waiting(1, 0.6)], min_segment_s=0.6)
    assert grant.budget_s == 0.0 and not grant.first  # nothing fits: the segmenter takes a short one
    with pytest.raises(ValueError):
        choose([])


# --- the scheduler ----------------------------------------------------------------------------------------


def _queued(seconds: float, clock: FakeClock) -> Listener:
    listener = Listener()
    if seconds:
        listener.add(seconds, clock())
    return listener


@pytest.mark.parametrize("policy", [Policy.DEADLINE, Policy.FIFO])
def test_scheduler_runs_waiting_steps_by_deadline(policy):
    clock = FakeClock()

    async def scenario():
        scheduler = DeadlineScheduler(1, policy=policy, clock=clock)
        gate = threading.Event()
        order: list[str] = []

        def step(name):
            def work(grant: Grant) -> str:
                if name == "gate":
                    gate.wait(GUARD)
                order.append(name)
                return name

            return work

        holding = asyncio.create_task(scheduler.run(Listener(), step("gate")))
        while scheduler.running == 0:
            await asyncio.sleep(0.001)
        tasks = []
        for name, queued in (("late", 3.0), ("soon", 1.0), ("new", 0.0), ("middle", 2.0)):
            tasks.append(asyncio.create_task(scheduler.run(_queued(queued, clock), step(name))))
            while scheduler.waiting < len(tasks):
                await asyncio.sleep(0.001)
        gate.set()
        assert await asyncio.gather(holding, *tasks) == ["gate", "late", "soon", "new", "middle"]
        scheduler.close()
        return order

    order = run(scenario())
    if policy is Policy.DEADLINE:
        assert order == ["gate", "new", "soon", "middle", "late"]
    else:
        assert order == ["gate", "late", "soon", "new", "middle"]


def test_a_cancelled_waiting_step_never_runs_and_a_running_one_is_dropped_at_once():
    async def scenario():
        scheduler = DeadlineScheduler(1)
        gate, entered = threading.Event(), threading.Event()
        ran: list[str] = []

        def held(grant):
            entered.set()
            gate.wait(GUARD)
            ran.append("held")
            return "held"

        running = asyncio.create_task(scheduler.run(Listener(), held))
        await asyncio.to_thread(entered.wait, GUARD)
        waiting = asyncio.create_task(scheduler.run(Listener(), lambda grant: ran.append("waiting")))
        while scheduler.waiting < 1:
            await asyncio.sleep(0.001)
        waiting.cancel()
        running.cancel()  # the client left while its segment was being synthesized
        for task in (waiting, running):
            with pytest.raises(asyncio.CancelledError):
                await task  # at once: neither waits for the held segment
        assert scheduler.waiting == 0 and ran == []
        gate.set()
        after = await scheduler.run(Listener(), lambda grant: "after")
        scheduler.close()
        return ran, after

    ran, after = run(scenario())
    assert ran == ["held"] and after == "after"  # the running segment finished; its result was dropped


def test_errors_reach_the_caller_and_closing_fails_waiting_steps():
    async def scenario():
        scheduler = DeadlineScheduler(1)

        def boom(grant):
            raise RuntimeError("model failed")

        with pytest.raises(RuntimeError, match="model failed"):
            await scheduler.run(Listener(), boom)
        gate, entered = threading.Event(), threading.Event()
        holding = asyncio.create_task(scheduler.run(Listener(), lambda g: (entered.set(), gate.wait(GUARD))))
        await asyncio.to_thread(entered.wait, GUARD)
        waiting = asyncio.create_task(scheduler.run(Listener(), lambda grant: "never"))
        while scheduler.waiting < 1:
            await asyncio.sleep(0.001)
        scheduler.close()
        with pytest.raises(SchedulerClosed):
            await waiting
        gate.set()
        await holding
        with pytest.raises(SchedulerClosed):
            await scheduler.run(Listener(), lambda grant: "too late")

    run(scenario())


# --- the runtime on a paced backend --------------------------------------------------------------------


def _runtime(clock: FakeClock, segmentation: str = "deadline", **options) -> tuple[Runtime, PacedBackend]:
    backend = PacedBackend(clock, **options)
    settings = replace(Settings(), segmentation=segmentation)
    return Runtime(settings, backend, clock=clock, lockstep=True), backend


class RecordingListener(Listener):
    """A :class:`Listener` that keeps when each piece was produced: the runtime's clock when it queued the
    piece for the listener, in the model's thread."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list[float] = []

    def add(self, audio_s: float, now: float) -> None:
        self.added.append(now)
        super().add(audio_s, now)


async def _speak(runtime: Runtime, texts, listener: RecordingListener, clock: FakeClock, voice="af_heart"):
    """Synthesize ``texts`` one request after another for one listener; returns (produced at, seconds of
    audio, piece) per piece, and the requests' RequestAudio.

    A piece was produced when the runtime queued it for the listener (each piece is queued once, in order),
    not when this loop got to it: the model's thread may synthesize the next segment first, moving the fake
    clock by its compute time, and reading the clock here would then count that as a wait."""
    produced, audios = [], []
    for number, text in enumerate(texts):
        request = SynthesisRequest(text=text, voice=voice, request_id=f"r{number}")
        audio = RequestAudio(runtime, request, listener)
        audios.append(audio)
        while (piece := await audio.next()) is not None:
            produced.append((listener.added[len(produced)], len(piece.pcm) / 2 / SAMPLE_RATE, piece))
        audio.close()
    return produced, audios


def underrun_s(produced) -> float:
    """Silence a real-time player inserts after the first piece (:func:`bench.playback.underrun`)."""
    return underrun([(at, len(piece.pcm)) for at, _, piece in produced], 2 * SAMPLE_RATE)[0]


def _warm(runtime: Runtime, clock: FakeClock) -> None:
    """Let the estimate learn the backend's speed, as a server does from its first requests."""
    run(
        _speak(
            runtime,
            ["One two three four five six seven eight nine ten eleven twelve."] * 6,
            RecordingListener(),
            clock,
        )
    )


@pytest.mark.parametrize("texts", [BENCH_REPLY, *LONG_REPLIES])
def test_deadline_segmentation_never_lets_the_listener_wait_where_sentences_do(texts):
    """The bench reply and long comma-less sentences at 3.45x real time: one segment per sentence
    leaves the listener waiting for the long sentence; deadline segmentation never does."""
    results = {}
    for segmentation in ("sentence", "deadline"):
        clock = FakeClock()
        runtime, _ = _runtime(clock, segmentation)
        _warm(runtime, clock)
        produced, audios = run(_speak(runtime, texts, RecordingListener(), clock))
        results[segmentation] = underrun_s(produced), [s for a in audios for s in a.segments]
        runtime.scheduler.close()
    old, _ = results["sentence"]
    new, segments = results["deadline"]
    assert old > 0.2
    assert new == 0.0
    assert segments[0].first and segments[0].units <= DEFAULT_FIRST_UNITS
    assert len(segments) > len(texts)  # something was cut
    assert all(not s.first for s in segments[1:])
    later = [s.units for s in segments[1:]]
    assert max(later) > segments[0].units  # segments grow as the queue grows


def test_a_speechs_first_segment_is_short_and_first_audio_comes_sooner():
    text = LONG_REPLIES[0][1]
    first_audio = {}
    for segmentation in ("sentence", "deadline"):
        clock = FakeClock()
        runtime, _ = _runtime(clock, segmentation)
        _warm(runtime, clock)
        start = clock()
        produced, _ = run(_speak(runtime, [text], RecordingListener(), clock))
        first_audio[segmentation] = produced[0][0] - start
        runtime.scheduler.close()
    assert first_audio["deadline"] < 0.6 * first_audio["sentence"]


def test_word_timings_point_at_the_words_after_cuts_and_trims():
    clock = FakeClock()
    runtime, backend = _runtime(clock)
    _warm(runtime, clock)
    produced, audios = run(_speak(runtime, [" ".join(BENCH_REPLY)], RecordingListener(), clock))
    runtime.scheduler.close()
    pcm = b"".join(piece.pcm for _, _, piece in produced)
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768
    words = [w for _, _, piece in produced for w in (piece.words or ())]
    assert [w.word for w in words] == " ".join(BENCH_REPLY).split()
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)
    for word in words:  # the tone of each word is where its timing says, and loud throughout
        inside = samples[round(word.start_s * SAMPLE_RATE) + 5 : round(word.end_s * SAMPLE_RATE) - 5]
        assert len(inside) and float(np.abs(inside).min()) > 0.05, word
    # The sentence was cut, and each cut left a short pause (LEAD_S plus the boundary's pause) where the
    # unsegmented sentence has its gap between words, not Kokoro's whole lead-in and trailing silence.
    segments = audios[0].segments
    assert len(segments) > len(BENCH_REPLY)
    unsegmented = sum(len(backend.speak(s)[0]) for s in BENCH_REPLY) / SAMPLE_RATE
    added = sum(
        LEAD_S + PAUSE_S[Boundary[s.boundary]] - backend.gap_s for s in segments if s.boundary != "END"
    )
    assert len(samples) / SAMPLE_RATE == pytest.approx(unsegmented + added, abs=2e-3)


def test_two_listeners_share_the_model_new_speech_first():
    """A session that starts while another speaks gets a short first segment within one segment of the
    other's, and both go on without waiting at 3.45x real time."""
    clock = FakeClock()
    runtime, _ = _runtime(clock)
    _warm(runtime, clock)

    async def scenario():
        one, two = RecordingListener(), RecordingListener()
        history = runtime.scheduler.history
        before = history[-1][0] if history else -1  # the warm-up's steps
        first = asyncio.create_task(_speak(runtime, BENCH_REPLY, one, clock))
        # Until the first session's first segment is out. Not "the last step is a first one": the model
        # thread may take the next step before this loop looks, and then that never holds again.
        while not (any(grant.first for seq, grant in history if seq > before) and one.queued_s(clock())):
            await asyncio.sleep(0.001)
        second = asyncio.create_task(_speak(runtime, LONG_REPLIES[1][1:], two, clock))
        while not runtime.scheduler.is_waiting(two) and not two.queued_s(clock()):
            await asyncio.sleep(0.001)
        started = clock()  # the newcomer's first step is waiting (or already taken)
        return started, await first, await second

    started, (produced_one, _), (produced_two, audios_two) = run(scenario())
    runtime.scheduler.close()
    assert audios_two[0].segments[0].first and audios_two[0].segments[0].units <= DEFAULT_FIRST_UNITS
    # Once waiting, the newcomer waited for at most the speaking session's segment being synthesized
    # then: never for one that was merely waiting (test_scheduler_runs_waiting_steps_by_deadline).
    assert sum(1 for at, _, _ in produced_one if started < at < produced_two[0][0]) <= 1
    assert underrun_s(produced_one) == 0.0 and underrun_s(produced_two) == 0.0


def test_settings_refuse_unknown_modes():
    from reference_server.settings import SettingsError

    with pytest.raises(SettingsError):
        Settings(segmentation="words")
    with pytest.raises(SettingsError):
        Settings(scheduling="random")
    with pytest.raises(SettingsError):
        Settings(first_audio_target_s=-1)
    assert spoken_units("abc") == 3


def test_overload_is_measured_as_the_share_of_the_model_the_listeners_need():
    speed = ModelSpeed()
    _feed(speed, xrt=2.0, n=10)
    assert speed.demand(1) == pytest.approx(0.5, rel=0.02)
    assert speed.demand(3) == pytest.approx(1.5, rel=0.02)


@pytest.mark.parametrize(("waiting", "whole"), [(1, False), (2, True)])
def test_a_segment_that_cannot_fit_is_cut_short_unless_the_model_is_overloaded(waiting, whole):
    """At 2x real time one listener is fed with a short segment when the budget is tight; two listeners
    need the whole model (demand 1.0 >= OVERLOAD), so cutting would only add Kokoro's silences."""
    clock = FakeClock()
    runtime, _ = _runtime(clock, xrt=2.0)
    _warm(runtime, clock)
    text = LONG_REPLIES[0][1]
    audio = RequestAudio(runtime, SynthesisRequest(text=text, voice="af_heart", request_id="o"), Listener())
    audio._step(Grant(budget_s=0.1, first=False, waiting=waiting))  # the scheduler's grant, by hand
    (segment,) = audio.segments
    assert (segment.boundary == "END") is whole
    assert (segment.units == spoken_units(text)) is whole
    runtime.scheduler.close()


def test_a_whole_file_answer_is_never_cut():
    """POST /invocations with stream false: nobody listens while it is made, so sentences stay whole."""
    clock = FakeClock()
    runtime, _ = _runtime(clock)
    _warm(runtime, clock)
    text = LONG_REPLIES[0][1]
    request = SynthesisRequest(text=text, voice="af_heart", request_id="w")
    for whole, cut in ((True, False), (False, True)):
        audio = RequestAudio(runtime, request, Listener(), whole=whole)
        run(audio.next())
        assert (audio.segments[0].boundary != "END") is cut
    runtime.scheduler.close()


def test_a_sessions_first_segment_stays_short_even_when_the_model_is_overloaded():
    """Sound must start at once: a fresh listener's first segment is cut short however slow the model;
    a listener that ran dry mid-speech is not (every cut would add Kokoro's silence to make)."""
    clock = FakeClock()
    runtime, _ = _runtime(clock, xrt=0.5)
    _warm(runtime, clock)
    text = LONG_REPLIES[0][1]
    fresh, spoken = Listener(), Listener()
    spoken.add(1.0, clock() - 5.0)  # heard a second of audio five seconds ago: dry now
    for listener, cut in ((fresh, True), (spoken, False)):
        audio = RequestAudio(runtime, SynthesisRequest(text=text, request_id="x"), listener)
        audio._step(Grant(budget_s=0.0, first=True, waiting=1))
        assert (audio.segments[0].boundary != "END") is cut
    runtime.scheduler.close()

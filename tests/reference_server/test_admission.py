"""Admission by latency (PROTOCOL.md §10.2, issue #25 point 3): the busy judgement and ``server_busy``.

The wait for a worker (:func:`reference_server.scheduling.first_turn_s`) is checked on numbers; the runtime's
promise against what a newcomer then waits, on the paced stand-in of known speed and a fake clock; the
session's hook and the three routes (a request, a session as it opens, ``POST /invocations``; ``/ping`` stays
200) on the tone backend with a budget no promise can meet.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from server_harness import run, wait_for
from tone_backend import ToneBackend
from ws_conversation import GUARD_S, open_session

from bench.paced import FakeClock, PacedBackend
from protocol.errors import CLOSE_TRY_AGAIN_LATER, ErrorCode
from protocol.limits import Limits
from protocol.messages import SynthesisRequest
from protocol.server_session import RequestAccepted, ServerSession
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Readiness, Runtime
from reference_server.scheduling import GUARD_S as SCHEDULER_GUARD_S
from reference_server.scheduling import RESERVATION_S, DeadlineScheduler, Listener, Policy, first_turn_s
from reference_server.settings import Settings

# --- the wait for a worker -----------------------------------------------------------------------------


def test_an_idle_model_takes_a_new_speech_at_once():
    assert first_turn_s([], [], 1) == 0.0
    assert first_turn_s([0.3], [], 2) == 0.0  # one worker is free


def test_a_new_speech_waits_for_the_running_step_and_every_dry_listener_before_it():
    dry = (0.0, 0.4)
    assert first_turn_s([0.3], [], 1) == pytest.approx(0.3)
    assert first_turn_s([0.3], [dry, dry, (0.0, 0.1)], 1) == pytest.approx(0.3 + 0.4 + 0.4 + 0.1)
    # Two workers share the line.
    assert first_turn_s([0.1, 0.3], [dry, dry, dry], 2) == pytest.approx(0.7)
    # An overdue step is expected to end now, not in negative time.
    assert first_turn_s([-2.0], [dry], 1) == pytest.approx(0.4)


def test_a_listener_with_audio_queued_goes_first_only_if_it_runs_dry_before_the_turn():
    # 0.2 s queued: dry before the running step ends, so it goes first; 5 s queued: still playing.
    assert first_turn_s([0.3], [(0.2, 0.4), (5.0, 0.4)], 1) == pytest.approx(0.7)
    # Each one that goes first pushes the turn later, which can let the next run dry too.
    assert first_turn_s([0.3], [(0.2, 0.4), (0.6, 0.4), (5.0, 0.4)], 1) == pytest.approx(1.1)
    # fifo: every waiting step is ahead, whatever its listener holds.
    assert first_turn_s([0.3], [(0.2, 0.4), (0.6, 0.4), (5.0, 0.4)], 1, Policy.FIFO) == pytest.approx(1.5)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        first_turn_s([], [], 0)


# --- the session's hook ---------------------------------------------------------------------------------


def test_the_session_asks_only_for_a_request_that_may_begin_a_speech():
    asked: list[str] = []

    def admit(request: SynthesisRequest) -> str | None:
        asked.append(request.text)
        return "the server is busy" if request.text.startswith("busy") else None

    session = ServerSession(admit=admit, utterances=True)
    assert session.receive_frame('{"text": "busy one", "request_id": "a"}') == []
    (frame,) = session.data_to_send()
    assert '"code":"server_busy"' in frame.replace(" ", "") and '"fatal":false' in frame.replace(" ", "")
    assert '"request_id":"a"' in frame.replace(" ", "")
    (accepted,) = session.receive_frame('{"text": "fine", "request_id": "b"}')
    assert isinstance(accepted, RequestAccepted)
    # Queued behind b: it continues the speech, and the session does not ask.
    (queued,) = session.receive_frame('{"text": "busy behind", "request_id": "c"}')
    assert isinstance(queued, RequestAccepted)
    assert asked == ["busy one", "fine"]
    # The checks of §9.2 come first: a duplicate id is refused as such, without asking.
    session.receive_frame('{"text": "busy again", "request_id": "b"}')
    assert '"duplicate_request_id"' in session.data_to_send()[-1]
    assert asked == ["busy one", "fine"]


def test_an_utterance_that_would_begin_a_speech_is_judged_too():
    session = ServerSession(admit=lambda request: "busy", utterances=True)
    assert session.receive_frame('{"type": "utterance", "request_id": "u1"}') == []
    assert '"server_busy"' in session.data_to_send()[0]
    assert session.pending_ids == []


# --- the promise on a model of known speed --------------------------------------------------------------

REPLY = (
    "Happy to help.",
    "Your order shipped this morning from our Denver warehouse and should reach you by Thursday afternoon.",
)


WARM_UP = ("One two three four five six seven eight nine ten eleven twelve.",) * 4


async def _warm(runtime: Runtime, clock: FakeClock) -> None:
    """Let the runtime measure the model and a few replies' first segments, as a server's first callers do."""
    await _speak(runtime, WARM_UP, Listener(), clock)
    for _ in range(3):
        await _speak(runtime, REPLY, Listener(), clock)


def _runtime(clock: FakeClock, budget_s: float = 2.5) -> Runtime:
    settings = replace(Settings(), limits=Limits(first_audio_budget_s=budget_s))
    runtime = Runtime(settings, PacedBackend(clock, xrt=3.45), clock=clock, lockstep=True)
    runtime.readiness = Readiness.READY  # what prepare() does once the model is loaded
    return runtime


async def _speak(runtime: Runtime, texts, listener: Listener, clock: FakeClock) -> float | None:
    """Speak ``texts`` one request after another; returns the clock when the first audio was produced."""
    first = None
    for number, text in enumerate(texts):
        audio = RequestAudio(runtime, SynthesisRequest(text=text, request_id=f"r{number}"), listener)
        try:
            while (piece := await audio.next()) is not None:
                if first is None and piece.pcm:
                    first = clock()
        finally:
            audio.close()
    return first


def test_the_runtime_is_never_busy_before_it_has_measured_its_model():
    clock = FakeClock()
    runtime = _runtime(clock, budget_s=1e-6)
    try:
        assert runtime.busy(SynthesisRequest(text="Hello there.")) is None
        runtime.readiness = Readiness.LOADING
        assert runtime.busy() is None
    finally:
        runtime.scheduler.close()


@pytest.mark.parametrize("sessions", [0, 3, 8])
def test_the_promise_matches_what_a_newcomer_then_waits(sessions):
    """With ``sessions`` speaking at 3.45x real time, the promise for a newcomer's first audio is close to
    the wait it then has: never far under it (a broken promise), and not so far over it that the server
    refuses work it could have done in time."""
    clock = FakeClock()
    runtime = _runtime(clock)

    async def scenario() -> tuple[float, float]:
        await _warm(runtime, clock)
        speaking = [asyncio.create_task(_speak(runtime, REPLY, Listener(), clock)) for _ in range(sessions)]
        while runtime.scheduler.waiting + runtime.scheduler.running < sessions:
            await asyncio.sleep(0)
        request = SynthesisRequest(text=REPLY[1], request_id="new")
        promised, asked = runtime.promised_first_audio_s(request), clock()
        newcomer = RequestAudio(runtime, request, Listener())
        try:
            while not (await newcomer.next()).pcm:
                pass
            waited = clock() - asked
        finally:
            newcomer.close()
        await asyncio.gather(*speaking)
        return promised, waited

    try:
        promised, waited = run(scenario())
    finally:
        runtime.scheduler.close()
    assert promised >= SCHEDULER_GUARD_S
    assert waited <= promised * 1.25 + 0.1, (promised, waited)
    assert promised <= waited * 1.6 + 0.3, (promised, waited)


def test_an_overloaded_runtime_is_busy_and_says_why():
    clock = FakeClock()
    runtime = _runtime(clock, budget_s=1.0)

    async def scenario() -> str | None:
        await _warm(runtime, clock)
        assert runtime.busy(SynthesisRequest(text=REPLY[0])) is None  # idle: well within a second
        speaking = [asyncio.create_task(_speak(runtime, REPLY, Listener(), clock)) for _ in range(12)]
        while runtime.scheduler.waiting + runtime.scheduler.running < 12:
            await asyncio.sleep(0)
        why = runtime.busy(SynthesisRequest(text=REPLY[0]))
        await asyncio.gather(*speaking)
        return why

    try:
        why = run(scenario())
    finally:
        runtime.scheduler.close()
    assert why is not None and "first_audio_budget_s of 1 s" in why
    assert runtime.busy_refusals == 1


# --- the routes ------------------------------------------------------------------------------------------


def test_busy_is_answered_on_every_route_and_ping_stays_healthy(serve):
    """With a budget no promise can meet, once the model is measured and work waits for it: a request that
    would begin a speech gets the per-message ``server_busy`` and its session lives on; a request that
    continues a speech is served; a new session gets the fatal ``server_busy`` and 1013; ``POST
    /invocations`` and ``POST /v1/audio/speech`` 503; ``/ping`` 200. With nothing ahead in line a request is
    served, however slow."""
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(first_audio_budget_s=1e-6))
    permits = backend.segment_permits
    assert permits is not None

    async def scenario() -> None:
        async with (
            open_session(server.ws_url) as speaker,
            open_session(server.ws_url) as blocker,
            open_session(server.ws_url) as waiter,
            open_session(server.ws_url) as refused,
        ):
            permits.release(3)
            for text in ("One, measured.", "Two, measured.", "Three, measured."):
                done = await speaker.until_complete(await speaker.request(text))
                assert done.complete.status == "completed"
            wait_for(lambda: server.runtime.speed.measured, what="the model's speed to be measured")
            while backend.entered.acquire(blocking=False):  # the speaker's segments entered too
                pass
            # Nothing ahead in line: served (its step now holds the model, waiting for a permit).
            blocked = await blocker.request("Holding the model.")
            await asyncio.to_thread(backend.entered.acquire, timeout=GUARD_S)
            # Once the step running is overdue (the tone backend's steps take milliseconds), it is expected
            # to end now: still nothing ahead.
            await asyncio.sleep(0.3)
            waiting = await waiter.request("Waiting for the model.")
            scheduler = server.runtime.scheduler
            wait_for(lambda: scheduler.waiting == 1, what=f"a step waiting ({scheduler.running} running)")
            # Now a step waits: a request that would begin a speech is refused, and its session goes on.
            refused_id = await refused.request("Would begin a speech.")
            error = await refused.until_error()
            assert (error.code, error.request_id, error.fatal) == (ErrorCode.SERVER_BUSY, refused_id, False)
            assert "first_audio_budget_s" in error.message
            # The speaker's listener still has its audio to play: its next request continues the speech.
            continued = await speaker.request("Four, still speaking.")
            async with open_session(server.ws_url) as late:
                error = await late.until_error()
                assert (error.code, error.fatal) == (ErrorCode.SERVER_BUSY, True)
                assert await late.until_closed() == CLOSE_TRY_AGAIN_LATER
            async with httpx.AsyncClient(timeout=GUARD_S) as client:
                answer = await client.post(f"{server.http_url}/invocations", json={"text": "Hello."})
                assert (answer.status_code, answer.json()["error"]["code"]) == (503, "server_busy")
                # The OpenAI-compatible route admits as /invocations does (reference_server.http.admit).
                speech = {"model": "tts-1", "input": "Hello.", "voice": "af_heart"}
                answer = await client.post(f"{server.http_url}/v1/audio/speech", json=speech)
                assert (answer.status_code, answer.json()["error"]["code"]) == (503, "server_busy")
                assert (await client.get(f"{server.http_url}/ping")).status_code == 200
            permits.release(100)
            for conversation, request_id in ((blocker, blocked), (waiter, waiting), (speaker, continued)):
                done = await conversation.until_complete(request_id)
                assert done.complete.status == "completed"
            assert server.runtime.busy_refusals == 4
        wait_for(lambda: server.runtime.sessions == 0, what="session slots to be released")

    run(scenario())


def test_a_reservation_holds_a_place_in_line_until_its_step_is_submitted_or_lapses():
    """Requests that arrive together are judged each behind the others admitted before it."""
    clock = FakeClock()
    scheduler = DeadlineScheduler(clock=clock)
    try:
        first, second = Listener(), Listener()
        assert scheduler.first_turn_s(1.0, 0.5) == 0.0
        scheduler.reserve(first)
        scheduler.reserve(second)
        assert scheduler.first_turn_s(1.0, 0.5) == pytest.approx(1.0)  # two first steps of 0.5 s ahead

        def speak(grant):
            clock.advance(0.3)  # the step takes 0.3 s: the measured first step from now on
            return "spoken"

        async def submit() -> str:
            return await scheduler.run(first, speak)

        assert run(submit()) == "spoken"  # submitted (and run): its reservation is over
        assert scheduler.first_turn_s(1.0, 0.5) == pytest.approx(0.3)
        clock.advance(RESERVATION_S + 0.1)
        assert scheduler.first_turn_s(1.0, 0.5) == 0.0  # the other lapsed
    finally:
        scheduler.close()

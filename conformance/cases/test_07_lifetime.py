"""§7 session lifetime: long sessions, close, disconnects; §6.1 concurrent sessions without cross-talk."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from conformance.engine import deadline, expect
from conformance.engine.case import Level, case
from conformance.engine.describe import DEFAULT_LIMITS, ask
from conformance.engine.probe import Probe
from conformance.engine.recordings import CROWD_BATCH, CROWD_SETTINGS, MAX_CROWD
from conformance.engine.stream import Answer, StreamEnded, open_stream
from conformance.engine.texts import FAST, SENTENCES, SHORT, TWO_SENTENCES

DISCONNECTS = 20


@case(
    "7.0.1",
    "§7",
    Level.MUST,
    requirements=("R7-1",),
    requirement="**Only** a client's `close` (§7.1), a fatal error (§9.4), server shutdown (§7.3) or the "
    "loss of the connection (§7.4) end it: a server MUST NOT end a session otherwise.",
    description="on one session, send three requests one after another, each after the previous one's "
    "synthesis_complete, with 2 s of silence before the third; then close",
    expectation="all three complete on the same session; it ends only after close",
)
def test_session_carries_many_requests(conf: Probe) -> None:
    async def scenario() -> list[Answer]:
        answers = []
        async with conf.session("many") as s:
            for n in range(3):
                if n == 2:
                    await asyncio.sleep(2.0)  # an idle session stays open (§7: no idle timeout)
                answers.append(await s.answer(await s.request(SHORT, speed=FAST)))
            assert not s.ended, "the session ended before close"
            await s.close()
            await s.drain()
        return answers

    for answer in conf.run(scenario()):
        expect.spoken(answer, SHORT, speed=FAST)


@case(
    "7.1.3",
    "§7.1",
    Level.MUST,
    requirements=("R7.1-1a", "R7.1-1b", "R7.1-1c"),
    requirement="On `close` the session stops reading requests: every later message, `cancel` and `close` "
    "included, MUST be ignored without an answer.",
    description="send a request, then close, then another request, a malformed message, a cancel naming "
    "the first request and a second close",
    expectation="the first request completes (not cancelled); nothing answers the later messages (no "
    "bracket, no error frame); the session ends",
)
def test_messages_after_close_are_ignored(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("after-close") as s:
            await s.request(SHORT, request_id="ac1", speed=FAST)
            await s.close()
            await s.send(json.dumps({"text": SHORT, "request_id": "ac2"}).encode())
            await s.send(b"this is not JSON")
            await s.cancel("ac1")
            await s.send(json.dumps({"type": "close"}).encode())
            await s.drain_after_close(["ac1"])
            return s.answers["ac1"], s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    assert not errors, f"messages after close were answered: {[(e.code, e.request_id) for e in errors]}"
    expect.spoken(answer, SHORT, speed=FAST)


@case(
    "7.1.4",
    "§7.1",
    Level.MUST,
    requirements=("R7.1-2",),
    requirement="Every request accepted before `close` MUST still be answered in full, in order (§6), "
    "exactly as if `close` had not been sent; queued requests are **not** dropped.",
    description="send a two-sentence request; at its first audio frame send close",
    expectation="the request completes with status completed and plausible speech of both sentences; then "
    "the session ends",
)
def test_close_while_audio_streams(conf: Probe) -> None:
    async def scenario() -> Answer:
        async with conf.session("close-streaming") as s:
            await s.request(TWO_SENTENCES, request_id="cs1", speed=FAST)
            await s.began("cs1", or_complete=False)
            await s.close()
            await s.drain_after_close(["cs1"])
            return s.answers["cs1"]

    expect.spoken(conf.run(scenario()), TWO_SENTENCES, speed=FAST)


@case(
    "7.4.1",
    "§7.4",
    Level.MUST,
    requirements=("R7.4-1b",),
    requirement="the server MUST stop synthesis for that session promptly (within one synthesis segment) and "
    "free everything the session held",
    description=f"{DISCONNECTS} times: open a session, send a request, and end the input as soon as its "
    "synthesis_start arrives (SageMaker then tears the WebSocket down mid-synthesis); then open one more "
    "session",
    expectation="the last session's request completes; the container still answers GET /ping with 200 (when "
    "the suite can reach it)",
)
def test_disconnect_mid_synthesis(conf: Probe) -> None:
    async def once(n: int) -> None:
        async with open_stream(conf.target, f"gone-{n}") as session:
            conf.attach(session)
            request_id = await session.request(SENTENCES[1], speed=FAST)
            await session.started(request_id)
        # Leaving the block ends the input: the simulator drops the container's WebSocket (REFERENCE.md §1).

    async def scenario() -> Answer:
        for n in range(DISCONNECTS):
            await once(n)
        async with conf.session("after-disconnects") as s:
            answer = await s.answer(await s.request(SHORT, speed=FAST))
            await s.close()
            await s.drain()
            return answer

    expect.spoken(conf.run(scenario()), SHORT, speed=FAST)
    if conf.target.container_url is not None:
        url = f"{conf.target.container_url}/ping"
        status = conf.blocking(lambda: httpx.get(url, timeout=deadline.bound(10.0)).status_code, "GET /ping")
        assert status == 200, f"after {DISCONNECTS} disconnects GET /ping answered {status}"


@case(
    "6.1.2",
    "§6.1",
    Level.MUST,
    requirements=("R6.1-2",),
    requirement="Audio frames MUST appear only between a `synthesis_start` and the matching "
    "`synthesis_complete`.",
    description="open three sessions at once; each sends one of the three REFERENCE.md sentences with its "
    "own request id and sample rate (8000, 16000, 24000 Hz), at speed 2",
    expectation="each session sees only its own bracket, at its own rate, with plausible speech of its own "
    "text",
)
def test_concurrent_sessions_do_not_cross_talk(conf: Probe) -> None:
    rates = (8000, 16000, 24000)

    async def one(n: int) -> Answer:
        async with conf.session(f"concurrent-{n}") as s:
            request = await s.request(SENTENCES[n], request_id=f"x{n}", sample_rate=rates[n], speed=FAST)
            answer = await s.answer(request)
            await s.close()
            await s.drain()
            assert list(s.answers) == [f"x{n}"], f"session {n} saw brackets {list(s.answers)}"
            return answer

    async def scenario() -> list[Answer]:
        return list(await asyncio.gather(*(one(n) for n in range(3))))

    for n, answer in enumerate(conf.run(scenario())):
        assert answer.start.sample_rate == rates[n], f"session {n}: {answer.start.sample_rate} Hz"
        expect.spoken(answer, SENTENCES[n], speed=FAST)


RESERVE_WAIT_LIMIT_S = 30.0
"""Longest ``idle_eviction_s`` the reserve case waits out; a server listing a longer one is not judged."""


@case(
    "7.5.1",
    "§7.5",
    Level.MUST,
    requirements=("R7.5-3",),
    requirement="The reserve: when a new session arrives while `max_sessions` sessions are open, a server "
    "MUST give it the slot of the session idle longest, if that session has been idle for at least "
    "`idle_eviction_s` (§10), instead of refusing the new one with `too_many_sessions`.",
    description=f"fill the server to max_sessions (at most {MAX_CROWD}) with sessions that send nothing "
    "after "
    f"the first one's describe, wait idle_eviction_s (both from capabilities.limits, at most "
    f"{RESERVE_WAIT_LIMIT_S:g} s), then open one more and send describe",
    expectation="the new session is answered (capabilities), not refused with too_many_sessions; an idle "
    "session it displaced ends with session_idle (SKIPPED when the server lists no idle_eviction_s)",
)
def test_idle_sessions_give_their_slot_to_a_new_one(conf: Probe) -> None:
    async def scenario() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with contextlib.AsyncExitStack() as crowd:
            first = await crowd.enter_async_context(conf.session("first"))
            offer = await ask(first, "reserve-limits")
            limit = DEFAULT_LIMITS.max_sessions if offer is None else offer.limit("max_sessions")
            eviction = None if offer is None else offer.limit("idle_eviction_s")
            found.update(max_sessions=limit, idle_eviction_s=eviction)
            if limit is None or limit > MAX_CROWD or eviction is None or eviction > RESERVE_WAIT_LIMIT_S:
                found["skip"] = (
                    f"max_sessions {limit}, idle_eviction_s {eviction}: the suite fills servers of at most "
                    f"{MAX_CROWD} sessions and waits at most {RESERVE_WAIT_LIMIT_S:g} s"
                )
                return found

            async def open_idle() -> None:
                session = await crowd.enter_async_context(conf.target.bidi())
                await session.opened()

            opened = 1
            while opened < limit:
                batch = min(CROWD_BATCH, int(limit) - opened)
                await asyncio.gather(*(open_idle() for _ in range(batch)))
                opened += batch
            await asyncio.sleep(eviction + 0.5)
            async with conf.session("newcomer") as newcomer:
                answer = await ask(newcomer, "newcomer")
                found["newcomer"] = "capabilities" if answer is not None else "describe refused"
                await newcomer.close()
                await newcomer.drain()
            if not first.ended:
                await first.close()
                await first.drain()
            found["displaced"] = sorted({e.code for _, e in first.observer.errors if e.fatal})
        return found

    with conf.configure(**CROWD_SETTINGS) if conf.simulated else contextlib.nullcontext():
        try:
            found = conf.run(scenario())
        except StreamEnded as ended:
            raise AssertionError(
                f"the session past max_sessions, opened after every other had been idle for idle_eviction_s, "
                f"was not served: {ended}"
            ) from None
    conf.observe(**{k: v for k, v in found.items() if k != "skip"})
    if "skip" in found:
        pytest.skip(found["skip"])
    assert found.get("newcomer") == "capabilities", found

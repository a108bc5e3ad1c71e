"""Bounds under abuse (issue #25, PROTOCOL.md §7.5, §10, §10.3) on the real server with the tone backend.

A client that floods without reading makes the server stop reading it (the queued output stays under
``max_output_bytes``) and, past ``send_timeout_s``, loses its session; parsing is held to
``max_parse_cpu_share``; an idle session ends after ``session_idle_timeout_s`` and, when every slot is
taken, gives its slot to a new session after ``idle_eviction_s``; ``POST /invocations`` has slots of its
own (``max_invocations``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
from server_harness import run, wait_for
from tone_backend import ToneBackend
from websockets.asyncio.client import connect
from ws_conversation import GUARD_S, open_session

from protocol.errors import ErrorCode
from protocol.limits import Limits

DESCRIBE = json.dumps({"type": "describe"})


async def _not_reading(url: str) -> object:
    """A WebSocket client that reads nothing: a 4 KiB receive buffer and one message queued at most."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    sock.connect((host, int(port)))
    return await connect(url, sock=sock, max_queue=1, max_size=None, open_timeout=GUARD_S)


async def _send_for(ws: object, message: str, count: int, seconds: float) -> int:
    """Send ``message`` up to ``count`` times for at most ``seconds``; return how many were sent."""
    sent = 0
    try:
        async with asyncio.timeout(seconds):
            for _ in range(count):
                await ws.send(message)  # type: ignore[attr-defined]
                sent += 1
    except TimeoutError:
        pass
    return sent


def _live(server) -> list:
    return list(server.runtime._live)


def test_flood_without_reading_keeps_output_bounded_and_stops_reading(serve):
    limit = 16_384
    server = serve(ToneBackend(), limits=Limits(max_output_bytes=limit))
    answer = len(server.runtime.capabilities.answering(None).to_json())
    seen: list[int] = []

    async def scenario():
        ws = await _not_reading(server.ws_url)
        sampling = True

        async def sample() -> None:
            while sampling:
                seen.extend(session.output_bytes for session in _live(server))
                await asyncio.sleep(0.005)

        sampler = asyncio.create_task(sample())
        try:
            sent = await _send_for(ws, DESCRIBE, 20_000, 3.0)
            await asyncio.sleep(0.3)
            (session,) = _live(server)
            assert session.output_bytes > 0 and not session.session.finished  # waiting for the client
            async with httpx.AsyncClient(timeout=GUARD_S) as client:
                started = time.perf_counter()
                assert (await client.get(f"{server.http_url}/ping")).status_code == 200
                assert time.perf_counter() - started < 1.0
        finally:
            sampling = False
            await sampler
            ws.transport.abort()
        return sent

    sent = run(scenario())
    assert sent > 100
    # One message's answers may land on top of the budget before the reader stops (§10.3).
    assert max(seen) <= limit + answer, (max(seen), limit, answer)
    wait_for(lambda: server.runtime.sessions == 0, what="the flooding session to end")


def test_output_never_read_ends_the_session_with_client_not_reading(serve):
    server = serve(
        ToneBackend(), limits=Limits(max_output_bytes=16_384, send_timeout_s=1.0, close_timeout_s=1.0)
    )

    async def scenario():
        ws = await _not_reading(server.ws_url)
        await _send_for(ws, DESCRIBE, 5_000, 2.0)
        started = time.monotonic()
        while server.runtime.sessions and time.monotonic() - started < 10:
            await asyncio.sleep(0.05)
        ended_s = time.monotonic() - started
        ws.transport.abort()
        return ended_s

    ended_s = run(scenario())
    assert server.runtime.sessions == 0
    assert ended_s < 5.0, ended_s  # send_timeout_s (1) + close_timeout_s (1) + the watch's period


def test_a_reading_client_is_never_cut_off_by_the_output_budget(serve):
    server = serve(ToneBackend(), limits=Limits(max_output_bytes=1024, send_timeout_s=1.0))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            ids = [await conv.request(f"Sentence number {n}. And one more.") for n in range(5)]
            for request_id in ids:
                assert (await conv.until_complete(request_id)).complete.status == "completed"
            for _ in range(3):
                await conv.describe()

    run(scenario())


def test_parsing_is_held_to_its_cpu_share(serve):
    slow = serve(ToneBackend(), limits=Limits(max_parse_cpu_share=0.001))
    fast = serve(ToneBackend())

    async def refused_in(server, seconds: float) -> int:
        async with open_session(server.ws_url) as conv:
            await _send_for(conv.ws, "not json", 3_000, seconds)
            await asyncio.sleep(seconds)
            (session,) = _live(server)
            return session.refused

    async def scenario():
        return await refused_in(slow, 1.0), await refused_in(fast, 1.0)

    throttled, free = run(scenario())
    # 1 ms of parsing per second reads a few dozen messages; an unthrottled session reads all 3,000.
    assert free == 3_000
    assert throttled < 1_000, throttled


def test_idle_session_ends_with_session_idle_and_1001(serve):
    server = serve(ToneBackend(), limits=Limits(session_idle_timeout_s=0.5))

    async def scenario():
        async with open_session(server.ws_url) as idle, open_session(server.ws_url) as talking:
            started = time.monotonic()
            while time.monotonic() - started < 1.5:  # a message every 0.2 s keeps a session alive
                await talking.describe()
                await asyncio.sleep(0.2)
            error = await idle.until_error(timeout=5)
            assert (error.code, error.fatal, error.request_id) == (ErrorCode.SESSION_IDLE, True, None)
            assert await idle.until_closed(timeout=5) == 1001
            await talking.describe()

    run(scenario())


def test_busy_session_is_never_idle(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(session_idle_timeout_s=0.3))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            request_id = await conv.request("Held for a while. Then done.")
            await asyncio.sleep(1.0)  # its request is queued or active: not idle (§7.5)
            assert server.runtime.sessions == 1
            backend.segment_permits.release(10)
            assert (await conv.until_complete(request_id)).complete.status == "completed"

    run(scenario())


def test_idle_session_gives_its_slot_to_a_new_one(serve):
    server = serve(ToneBackend(), limits=Limits(max_sessions=1, idle_eviction_s=0.3))

    async def scenario():
        async with open_session(server.ws_url) as first:
            await first.describe()
            async with open_session(server.ws_url) as early:  # first is idle for less than 0.3 s
                assert (await early.until_error(timeout=5)).code == ErrorCode.TOO_MANY_SESSIONS
            await asyncio.sleep(0.5)
            async with open_session(server.ws_url) as second:
                await second.describe(timeout=5)
                error = await first.until_error(timeout=5)
                assert (error.code, error.fatal) == (ErrorCode.SESSION_IDLE, True)
                assert await first.until_closed(timeout=5) == 1001
                assert server.runtime.sessions == 1
        wait_for(lambda: server.runtime.sessions == 0, what="the slots to be released")

    run(scenario())


def test_a_busy_session_keeps_its_slot(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(max_sessions=1, idle_eviction_s=0.1))

    async def scenario():
        async with open_session(server.ws_url) as first:
            request_id = await first.request("Held. Until released.")
            await asyncio.sleep(0.3)
            async with open_session(server.ws_url) as second:
                assert (await second.until_error(timeout=5)).code == ErrorCode.TOO_MANY_SESSIONS
            backend.segment_permits.release(10)
            assert (await first.until_complete(request_id)).complete.status == "completed"

    run(scenario())


def test_invocations_have_slots_apart_from_sessions(serve):
    server = serve(ToneBackend(), limits=Limits(max_sessions=1, max_invocations=1))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.describe()
            async with httpx.AsyncClient(timeout=GUARD_S) as client:
                response = await client.post(f"{server.http_url}/invocations", json={"text": "Hello."})
                assert response.status_code == 200
            await conv.describe()

    run(scenario())
    assert server.runtime.invocations == 0


def test_describe_reports_the_new_limits(serve):
    server = serve(ToneBackend())
    limits = server.runtime.capabilities.limits or {}
    assert limits["session_idle_timeout_s"] == 300.0
    assert limits["idle_eviction_s"] == 10.0
    assert limits["max_output_bytes"] == 1_048_576
    assert limits["send_timeout_s"] == 60.0
    assert limits["max_parse_cpu_share"] == 0.25
    assert limits["max_invocations"] == 64

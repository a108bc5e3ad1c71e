"""Soak tests with real Kokoro-82M (ONNX) through ``python -m reference_server``: keepalive during a long
synthesis, concurrent sessions, repeated disconnects and 200 requests in one session.

Memory is measured as the server process's resident set size (``VmRSS`` in /proc/<pid>/status), never
time. The RSS criteria and their reasons are next to each assertion; the figures measured are printed
(``pytest -s``) so a report can quote them.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
from server_harness import KOKORO_MAX_SESSIONS, run, wait_for
from ws_conversation import GUARD_S, open_session

from protocol.errors import ErrorCode

MIB = 1024

LONG_TEXT = (
    "Keepalive matters most when a reply is long. While the server turns this paragraph into speech, "
    "segment by segment, the client keeps sending WebSocket pings every half second, and every one of them "
    "must come back, because a proxy that hears nothing for too long will close the connection. "
    "The synthesis runs on a worker thread, so the event loop stays free to answer. "
    "That is the whole point of this test, and this is its final sentence."
)
"""About twenty seconds of speech, five segments."""

PONG_GUARD_S = 5.0
"""How long a pong may take. A hang guard, not a measurement: on loopback a pong takes about a
millisecond; a server whose event loop is blocked by a segment's synthesis would hold it for seconds."""


def test_pings_every_half_second_during_a_long_synthesis_are_all_answered(kokoro_server):
    async def scenario():
        async with open_session(kokoro_server.ws_url) as conv:
            rid = await conv.request(LONG_TEXT)
            answer = asyncio.ensure_future(conv.until_complete(rid, timeout=GUARD_S * 5))
            latencies = []
            while not answer.done():
                sent = asyncio.get_running_loop().time()
                await asyncio.wait_for(await conv.ws.ping(), PONG_GUARD_S)
                latencies.append(asyncio.get_running_loop().time() - sent)
                await asyncio.wait([answer], timeout=0.5)
            result = await answer
            seconds = len(result.pcm) / 2 / 24000
            slowest_ms = max(latencies) * 1000
            print(f"\n{len(latencies)} pongs in {seconds:.1f} s of speech; slowest {slowest_ms:.1f} ms")
            assert result.complete.status == "completed"
            # Spoken to its last sentence: Kokoro reads about 15 characters a second (REFERENCE.md §3's
            # figures); a request cut after its first segments would be far shorter than this bound.
            assert seconds >= len(LONG_TEXT) / 22
            assert len(latencies) >= 2

    run(scenario())


def test_four_concurrent_sessions_with_four_voices_get_their_own_audio(kokoro_server):
    """No cross-talk: each session's audio equals what its request gives when synthesized alone."""
    jobs = {
        "af_heart": "Hello there.",
        "am_adam": "Good morning.",
        "bf_emma": "How are you?",
        "bm_george": "See you soon.",
    }

    async def alone() -> dict[str, np.ndarray]:
        async with open_session(kokoro_server.ws_url) as conv:
            ids = {voice: await conv.request(text, voice=voice) for voice, text in jobs.items()}
            return {voice: _samples((await conv.until_complete(rid)).pcm) for voice, rid in ids.items()}

    async def concurrently() -> dict[str, np.ndarray]:
        async def one(voice: str, text: str) -> tuple[str, np.ndarray]:
            async with open_session(kokoro_server.ws_url) as conv:
                # the same request_id everywhere: ids are per session (§4.1)
                answer = await conv.until_complete(await conv.request(text, voice=voice, request_id="same"))
                assert answer.complete.status == "completed"
                return voice, _samples(answer.pcm)

        return dict(await asyncio.gather(*(one(v, t) for v, t in jobs.items())))

    reference = run(alone())
    together = run(concurrently())
    for voice in jobs:
        own = together[voice]
        assert len(own) > 0 and np.abs(own).max() > 0.1, voice
        assert abs(len(own) - len(reference[voice])) <= 0.02 * len(reference[voice]), voice
        assert _similarity(own, reference[voice]) > 0.9, voice
        for other in jobs:
            if other != voice:  # the check can tell requests apart
                assert _similarity(own, reference[other]) < 0.5, (voice, other)


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, "<i2").astype(np.float32) / 32768


def _similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Normalized correlation of the common part: 1.0 for the same audio, about 0 for unrelated speech."""
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def test_twenty_disconnects_after_the_first_audio_leave_the_server_healthy(kokoro_server):
    """§7.4: a client that leaves mid-request stops its synthesis and frees its session.

    The server runs with max_sessions 5 (conftest), so a session slot leaked per disconnect would lock
    everyone out long before the 20th round; memory must stay flat.
    """
    text = "Hi. This part is still being spoken."
    rss = []

    async def rounds():
        for n in range(20):
            async with open_session(kokoro_server.ws_url) as conv:
                rid = await conv.request(text)
                await conv.until_audio(rid)
                if n % 2:
                    conv.ws.transport.abort()  # vanish without a close frame
                # else: leave with a normal close frame
            rss.append(kokoro_server.rss_kib())

    run(rounds())
    print(f"\nRSS after each disconnect (MiB): {[round(r / MIB, 1) for r in rss]}")

    async def still_serving():
        async with open_session(kokoro_server.ws_url) as conv:
            answer = await conv.until_complete(await conv.request("Hello there."))
            assert answer.complete.status == "completed" and len(answer.pcm) > 24000

    assert httpx.get(f"{kokoro_server.http_url}/ping").json()["status"] == "Healthy"
    run(still_serving())
    wait_for(
        lambda: run(_all_slots_free(kokoro_server.ws_url, KOKORO_MAX_SESSIONS)),
        what="all session slots to be free",
    )
    # Flat: after the first rounds (allocator and onnxruntime arenas warm up), ten more disconnects add
    # no more than 8 MiB; keeping one disconnected request's audio and buffers would add more than that.
    assert max(rss[10:]) - rss[9] <= 8 * MIB, rss


async def _all_slots_free(url: str, slots: int) -> bool:
    """Whether ``slots`` sessions can be open at once (none refused with too_many_sessions)."""
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        conversations = [await stack.enter_async_context(open_session(url)) for _ in range(slots)]
        for conv in conversations:
            await conv.send({"type": "close"})
        for conv in conversations:
            if await conv.until_closed() != 1000:
                return False
            if any(e.code == ErrorCode.TOO_MANY_SESSIONS for e in conv.errors):
                return False
    return True


def test_two_hundred_requests_in_one_session_memory_plateaus(kokoro_server):
    """200 short requests, pipelined 16 at a time in one session; RSS sampled every 25 requests."""
    samples: list[int] = []

    async def scenario():
        async with open_session(kokoro_server.ws_url) as conv:
            done = 0
            while done < 200:
                ids = [
                    await conv.request("Hi.", speed=2.0)
                    for _ in range(16 if done + 16 <= 200 else 200 - done)
                ]
                for rid in ids:
                    answer = await conv.until_complete(rid)
                    assert answer.complete.status == "completed" and answer.pcm
                    done += 1
                    if done % 25 == 0:
                        samples.append(kokoro_server.rss_kib())

    run(scenario())
    print(f"\nRSS every 25 requests (MiB): {[round(s / MIB, 1) for s in samples]}")
    # Plateau: over the last 100 requests RSS grows by at most 2 MiB, i.e. about 20 KiB a request, less
    # than the 16-bit audio of one reply (0.65 s at 24 kHz = 31 KiB): a server that kept every
    # request's audio, or its session state with it, would exceed it.
    assert max(samples[3:]) - samples[3] <= 2 * MIB, samples

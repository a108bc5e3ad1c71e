"""Sessions recorded once per run and judged by several cases (see :class:`conformance.probe.Recording`).

* :func:`pipelined`: the three REFERENCE.md §3 sentences sent back to back, then ``close``: framing
  (§3.2, §3.3), frame contents (§5), ordering (§6) and draining on close (§7.1).
* :func:`variations`: one sentence with each of voice, speed and sample_rate changed (§4.1, §5.1).
* :func:`long_segment`: :data:`conformance.texts.LONG_SENTENCE` and :data:`conformance.texts.LOUD` at
  speed 1, then ``close``: audio frame sizes for the longest segment a server makes (§3.3.1) and clipping
  of loud audio (§3.3.1).
* :func:`refusals`: five messages the server must refuse, four carrying :data:`MARKER_TEXT`, then
  ``close``: error frames (§5.4), their content (§9.3) and the ids they name (§9.2).
* :func:`blends`: ``describe``, then one sentence in two voices, in blends of them with opposite weights
  (one of them twice, spelled differently) and in four invalid blends, then ``close``: voice blends
  (§4.1, version 1.1).
* :func:`long_text`: :data:`conformance.texts.LONG` at speed 2 while the simulator pings the container
  every 0.25 s, ``GET /ping`` is polled and a second session opens: keepalive (§8), health checks while
  busy (§2.2), handshakes while busy (§2.3) and text beyond Kokoro's single-pass limit (§4.1).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from conformance import deadline
from conformance.loop import LoopThread
from conformance.probe import Recording, record
from conformance.session import Session
from conformance.target import Target
from conformance.texts import FAST, LONG, LONG_SENTENCE, LOUD, SENTENCES, SHORT
from protocol.messages import Describe, SynthesisRequest

__all__ = [
    "BLENDED",
    "BLEND_CANONICAL",
    "BLEND_REFUSALS",
    "ENCODED",
    "KEEPALIVE_SETTINGS",
    "LONG_SEGMENT",
    "MARKER_TEXT",
    "PIPELINED",
    "REFUSED",
    "VARIATIONS",
    "blends",
    "encodings",
    "long_segment",
    "long_text",
    "pipelined",
    "refusals",
    "variations",
]

PIPELINED = (
    SynthesisRequest(SENTENCES[0], request_id="p1"),
    SynthesisRequest(SENTENCES[1], request_id="p2", sample_rate=16000),
    SynthesisRequest(SENTENCES[2], request_id="p3"),
)
"""The pipelined session's requests (the second at 16 kHz, so brackets differ in rate)."""

VARIATIONS = {
    "base": SynthesisRequest(SENTENCES[0], request_id="v-base"),
    "8000": SynthesisRequest(SENTENCES[0], request_id="v-8000", sample_rate=8000),
    "22050": SynthesisRequest(SENTENCES[0], request_id="v-22050", sample_rate=22050),
    "speed": SynthesisRequest(SENTENCES[0], request_id="v-speed", speed=2.0),
    "voice": SynthesisRequest(SENTENCES[0], request_id="v-voice", voice="am_michael"),
}
"""The variations session's requests: the same sentence with one parameter changed each."""

MARKER_TEXT = "Zebra quartz marker seventy one."
"""Words an error message has no reason to quote unless it quotes the request's text (§9.3, §13)."""

REFUSED = (
    ({"text": MARKER_TEXT, "voice": "zz_nobody", "request_id": "m1"}, "invalid_voice"),
    ({"text": MARKER_TEXT, "speed": 9, "request_id": "m2"}, "invalid_speed"),
    ({"text": MARKER_TEXT, "sample_rate": 5, "request_id": "m3"}, "invalid_sample_rate"),
    ({"type": "start", "text": MARKER_TEXT, "request_id": "m4"}, "unknown_type"),
    ({"text": "  ", "request_id": "m5"}, "text_required"),
)
"""The refusals session's messages and the code each must be refused with; every one names a valid id."""

KEEPALIVE_SETTINGS = {"ping_interval_s": 0.25, "ping_timeout_s": 5.0}
"""Simulator pings for the long session: frequent, so even a fast server's synthesis is pinged, and a
server that blocks its event loop for 5 s while it synthesizes misses one."""

PING_POLL_S = 0.25


async def _send_all(session: Session, recording: Recording, requests: tuple[SynthesisRequest, ...]) -> None:
    for request in requests:
        recording.expect.append(request.request_id)
        session.expect(request.request_id, request.to_dict())
        await session.send(request.to_json().encode(), data_type="BINARY")


def pipelined(target: Target, loop: LoopThread) -> Recording:
    """Three requests sent at once, then ``close``; the session is read to its end."""

    async def scenario(session: Session, recording: Recording) -> None:
        await _send_all(session, recording, PIPELINED)
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "pipelined", scenario)


def variations(target: Target, loop: LoopThread) -> Recording:
    """:data:`VARIATIONS` sent at once, then ``close``."""

    async def scenario(session: Session, recording: Recording) -> None:
        await _send_all(session, recording, tuple(VARIATIONS.values()))
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "variations", scenario)


ENCODED = {
    "pcm": SynthesisRequest(SENTENCES[0], request_id="g-pcm", sample_rate=8000),
    "pcm_mulaw": SynthesisRequest(SENTENCES[0], request_id="g-mulaw", sample_rate=8000, encoding="pcm_mulaw"),
    "pcm_alaw": SynthesisRequest(SENTENCES[0], request_id="g-alaw", sample_rate=8000, encoding="pcm_alaw"),
    "unknown": SynthesisRequest(SENTENCES[0], request_id="g-unknown", sample_rate=8000, encoding="pcm_s24le"),
}
"""The encodings session's requests (§3.3.1, §4.1): one sentence at 8 kHz as PCM16, G.711 μ-law and A-law,
and in an encoding no version defines (it must be refused, or, by a server that offers no encoding but
PCM16, ignored as a version 1 server does)."""


def encodings(target: Target, loop: LoopThread) -> Recording:
    """:data:`ENCODED` sent at once, then ``close``."""

    async def scenario(session: Session, recording: Recording) -> None:
        await _send_all(session, recording, tuple(ENCODED.values()))
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "encodings", scenario)


_BLEND_TEXT = SENTENCES[1]

BLENDED = {
    "a": SynthesisRequest(_BLEND_TEXT, request_id="bl-a", voice="af_bella", speed=FAST),
    "b": SynthesisRequest(_BLEND_TEXT, request_id="bl-b", voice="af_sky", speed=FAST),
    "ab": SynthesisRequest(_BLEND_TEXT, request_id="bl-ab", voice="af_bella(3)+af_sky(1)", speed=FAST),
    "ba": SynthesisRequest(_BLEND_TEXT, request_id="bl-ba", voice="af_bella+af_sky(3)", speed=FAST),
    "ab-again": SynthesisRequest(_BLEND_TEXT, request_id="bl-ab2", voice="af_sky(2)+af_bella(6)", speed=FAST),
}
"""The blends session's answered requests (§4.1): one sentence at speed 2 in af_bella, in af_sky, in 3:1
and 1:3 blends of them, and the 3:1 blend again written another way (the same canonical form)."""

BLEND_CANONICAL = {
    "a": "af_bella",
    "b": "af_sky",
    "ab": "af_bella(0.75)+af_sky(0.25)",
    "ba": "af_bella(0.25)+af_sky(0.75)",
    "ab-again": "af_bella(0.75)+af_sky(0.25)",
}
"""What ``synthesis_start.voice`` must say for each of :data:`BLENDED` (§4.1's canonical form)."""

BLEND_REFUSALS = {
    "languages": ("af_bella+jf_alpha", "jf_alpha"),
    "unknown": ("af_bella+zz_nobody", "zz_nobody"),
    "weight": ("af_bella(0)+af_sky", "af_bella(0)"),
    "form": ("af_bella(2+af_sky", "af_bella(2"),
}
"""Invalid blends (§4.1): name → (``voice``, the part an ``invalid_voice`` message should name): voices of
two languages, a voice the server lacks, a weight of 0, a part that is neither ``voice`` nor
``voice(weight)``. Each request's id is ``bl-x-<name>``."""


def blends(target: Target, loop: LoopThread) -> Recording:
    """``describe``, then :data:`BLENDED` with :data:`BLEND_REFUSALS` between them, then ``close``.

    ``recording.extra["features"]`` is ``capabilities.features``, or ``None`` when ``describe`` was refused
    (a server without it). A server whose ``features`` lack ``voice_blend`` is sent nothing more: its blend
    cases are UNIMPLEMENTED.
    """

    async def scenario(session: Session, recording: Recording) -> None:
        session.observer.reader.expect_describe()
        await session.send(Describe(request_id="bl-describe").to_json().encode())
        found: list[dict[str, Any]] = []

        def described() -> bool:
            for message in session.messages:
                if message.is_control and (obj := json.loads(message.data)).get("type") == "capabilities":
                    found[:] = [obj]
                    return True
            return any(error.request_id == "bl-describe" for _, error in session.observer.errors)

        await session.wait(described, "the answer to describe")
        features = found[0].get("features") if found else None
        recording.extra["features"] = features
        if features is None or "voice_blend" in features:
            refusals = iter(BLEND_REFUSALS.items())
            for request in BLENDED.values():
                session.expect(request.request_id, request.to_dict())
                await session.send(request.to_json().encode())
                name, (voice, _) = next(refusals, (None, (None, None)))
                if name is not None:
                    refused = {
                        "text": _BLEND_TEXT,
                        "voice": voice,
                        "speed": FAST,
                        "request_id": f"bl-x-{name}",
                    }
                    await session.send(json.dumps(refused).encode())
            ids = [request.request_id for request in BLENDED.values()]

            def settled() -> bool:
                refused = {error.request_id for _, error in session.observer.errors}
                return all(rid in refused or rid in session.completes_seen() for rid in ids)

            await session.wait(settled, "every blend request answered or refused")
        await session.close()
        await session.drain()

    return record(target, loop, "blends", scenario)


LONG_SEGMENT = (
    SynthesisRequest(LONG_SENTENCE, request_id="seg-1"),
    SynthesisRequest(LOUD, request_id="loud-1"),
)
"""The long-segment session's requests: both at speed 1, 24 kHz (the largest frames a server makes)."""


def long_segment(target: Target, loop: LoopThread) -> Recording:
    """:data:`LONG_SEGMENT` sent at once, then ``close``."""

    async def scenario(session: Session, recording: Recording) -> None:
        await _send_all(session, recording, LONG_SEGMENT)
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "long-segment", scenario)


def refusals(target: Target, loop: LoopThread) -> Recording:
    """:data:`REFUSED` sent at once, then ``close``; the session is read to its end."""

    async def scenario(session: Session, recording: Recording) -> None:
        for message, _ in REFUSED:
            await session.send(json.dumps(message).encode())
        await session.close()
        await session.drain_after_close([])

    return record(target, loop, "refusals", scenario)


async def _poll_ping(url: str, stop: asyncio.Event, checks: list[tuple[float, Any]]) -> None:
    async with httpx.AsyncClient(timeout=deadline.bound(30.0)) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                status: Any = (await client.get(f"{url}/ping")).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            checks.append((round(time.monotonic() - started, 4), status))
            try:
                await asyncio.wait_for(stop.wait(), PING_POLL_S)
            except TimeoutError:
                pass


async def _second_session(target: Target, extra: dict[str, Any]) -> None:
    started = time.monotonic()
    try:
        async with target.bidi() as bidi:
            session = Session(bidi, faithful_data_types=target.faithful_data_types, name="second")
            await asyncio.wait_for(bidi.opened(), deadline.bound(60.0))
            extra["second_opened_s"] = round(time.monotonic() - started, 3)
            answer = await session.answer(await session.request(SHORT, speed=FAST))
            extra["second_completed"] = answer.complete is not None
            extra["second_status"] = answer.complete.status if answer.complete else None
            extra["second_findings"] = [str(f) for f in session.observer.findings[:5]]
            extra["second_audio_bytes"] = len(answer.audio)
            await session.close()
            await session.drain()
    except Exception as exc:
        extra["second_error"] = f"{type(exc).__name__}: {exc}"


def long_text(target: Target, loop: LoopThread) -> Recording:
    """:data:`~conformance.texts.LONG` at speed 2, with pings, ``/ping`` polling and a second session."""
    request = SynthesisRequest(LONG, request_id="long-1", speed=FAST)

    async def scenario(session: Session, recording: Recording) -> None:
        extra = recording.extra
        checks: list[tuple[float, Any]] = extra.setdefault("ping_checks", [])
        stop = asyncio.Event()
        side: list[asyncio.Task[None]] = []
        if target.container_url is not None:
            side.append(asyncio.create_task(_poll_ping(target.container_url, stop, checks)))
        sent = time.monotonic()
        await _send_all(session, recording, (request,))
        try:
            # The second session opens once synthesis is under way: after the first audio message.
            while not any(not m.is_control for m in session.messages):
                if await session.receive() is None:
                    break
            extra["first_audio_s"] = round(time.monotonic() - sent, 3)
            side.append(asyncio.create_task(_second_session(target, extra)))
            await session.wait(lambda: "long-1" in session.completes_seen(), "long-1 was completed")
            extra["synthesis_s"] = round(time.monotonic() - sent, 3)
            await session.close()
            await session.drain_after_close(recording.expect)
        finally:
            stop.set()
            await asyncio.gather(*side, return_exceptions=True)

    return record(target, loop, "long", scenario, settings=KEEPALIVE_SETTINGS)

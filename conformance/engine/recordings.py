"""Sessions recorded once per run and judged by several cases (see
:class:`conformance.engine.probe.Recording`).

* :func:`pipelined`: the three REFERENCE.md §3 sentences sent back to back, then ``close``: framing
  (§3.2, §3.3), frame contents (§5), ordering (§6) and draining on close (§7.1).
* :func:`variations`: one sentence with each of voice, speed and sample_rate changed (§4.1, §5.1).
* :func:`long_segment`: :data:`conformance.engine.texts.LONG_SENTENCE` and
  :data:`conformance.engine.texts.LOUD` at
  speed 1, then ``close``: audio frame sizes for the longest segment a server makes (§3.3.1) and clipping
  of loud audio (§3.3.1).
* :func:`refusals`: five messages the server must refuse, four carrying :data:`MARKER_TEXT`, then
  ``close``: error frames (§5.4), their content (§9.3) and the ids they name (§9.2).
* :func:`blends`: ``describe``, then one sentence in two voices, in blends of them with opposite weights
  (one of them twice, spelled differently) and in four invalid blends, then ``close``: voice blends
  (§4.1, version 1.1).
* :func:`long_text`: :data:`conformance.engine.texts.LONG` at speed 2 while the simulator pings the container
  every 0.25 s, ``GET /ping`` is polled and a second session opens: keepalive (§8), health checks while
  busy (§2.2), handshakes while busy (§2.3) and text beyond Kokoro's single-pass limit (§4.1).
* :func:`described`: two requests, and two ``describe`` messages sent while the first is active: the
  answer to describe (§4.4).
* :func:`marked`: a request asking for marks, the same text without, and two bad ``marks`` members
  (§5.5), on a server that lists ``marks``.
* :func:`normalized`: :data:`NORMALIZED`, texts in pairs that differ only in markdown, figures or
  escapes (§14.2).
* :func:`crowded`: ``max_sessions`` sessions, one more, then one dropped mid-synthesis and one more again:
  refusing a session (§2.3, §9.4) and freeing a dropped one's place (§7.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from conformance.engine import deadline
from conformance.engine.describe import DEFAULT_LIMITS, ask
from conformance.engine.loop import LoopThread
from conformance.engine.probe import Recording, record
from conformance.engine.stream import ObservedStream, request_message
from conformance.engine.target import Target
from conformance.engine.texts import (
    FAST,
    LONG,
    LONG_SENTENCE,
    LOUD,
    SENTENCES,
    SHORT,
    STREAMED,
    TWO_SENTENCES,
)
from protocol.messages import Describe, SynthesisRequest

__all__ = [
    "AFTER_DROP_GRACE",
    "BAD_MARKS",
    "BLENDED",
    "BLEND_CANONICAL",
    "BLEND_REFUSALS",
    "BUSY_REFUSAL_S",
    "BUSY_SESSIONS",
    "DESCRIBED",
    "DESCRIBES",
    "ENCODED",
    "KEEPALIVE_SETTINGS",
    "LONG_SEGMENT",
    "MARKED",
    "MARKER_TEXT",
    "MAX_CROWD",
    "NORMALIZED",
    "PIPELINED",
    "REFUSED",
    "VARIATIONS",
    "blends",
    "busy_burst",
    "busy_served_within",
    "crowded",
    "described",
    "encodings",
    "long_segment",
    "long_text",
    "marked",
    "normalized",
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
    "base": SynthesisRequest(SENTENCES[0], request_id="v-base", speed=FAST),
    "8000": SynthesisRequest(SENTENCES[0], request_id="v-8000", sample_rate=8000, speed=FAST),
    "22050": SynthesisRequest(SENTENCES[0], request_id="v-22050", sample_rate=22050, speed=FAST),
    "speed": SynthesisRequest(SENTENCES[0], request_id="v-speed", speed=1.0),
    "voice": SynthesisRequest(SENTENCES[0], request_id="v-voice", voice="am_michael", speed=FAST),
}
"""The variations session's requests: the same sentence with one parameter changed each. The base is at
speed 2 (half the synthesis work); the speed variation is speed 1."""

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


async def _send_all(
    session: ObservedStream, recording: Recording, requests: tuple[SynthesisRequest, ...]
) -> None:
    for request in requests:
        recording.expect.append(request.request_id)
        session.expect(request.request_id, request.to_dict())
        await session.send(request_message(request), data_type="BINARY")


def _sent_at_once(
    target: Target, loop: LoopThread, name: str, requests: tuple[SynthesisRequest, ...]
) -> Recording:
    """The session ``name``: ``requests`` sent at once, then ``close``; read to its end."""

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        await _send_all(session, recording, requests)
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, name, scenario)


def pipelined(target: Target, loop: LoopThread) -> Recording:
    """Three requests sent at once, then ``close``; the session is read to its end."""
    return _sent_at_once(target, loop, "pipelined", PIPELINED)


def variations(target: Target, loop: LoopThread) -> Recording:
    """:data:`VARIATIONS` sent at once, then ``close``."""
    return _sent_at_once(target, loop, "variations", tuple(VARIATIONS.values()))


ENCODED = {
    "pcm": SynthesisRequest(SENTENCES[0], request_id="g-pcm", speed=FAST, sample_rate=8000),
    "pcm_mulaw": SynthesisRequest(
        SENTENCES[0], request_id="g-mulaw", speed=FAST, sample_rate=8000, encoding="pcm_mulaw"
    ),
    "pcm_alaw": SynthesisRequest(
        SENTENCES[0], request_id="g-alaw", speed=FAST, sample_rate=8000, encoding="pcm_alaw"
    ),
    "unknown": SynthesisRequest(
        SENTENCES[0], request_id="g-unknown", speed=FAST, sample_rate=8000, encoding="pcm_s24le"
    ),
}
"""The encodings session's requests (§3.3.1, §4.1): one sentence at speed 2 and 8 kHz as PCM16, G.711 μ-law
and A-law, and in an encoding no version defines (it must be refused, or, by a server that offers no
encoding but PCM16, ignored as a version 1 server does)."""


def encodings(target: Target, loop: LoopThread) -> Recording:
    """:data:`ENCODED` sent at once, then ``close``."""

    async def scenario(session: ObservedStream, recording: Recording) -> None:
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

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        session.observer.reader.expect_describe("bl-describe")
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
                await session.send(request_message(request))
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
    SynthesisRequest(LOUD, request_id="loud-1", speed=FAST),
)
"""The long-segment session's requests: the long sentence at speed 1, 24 kHz (the largest frames a server
makes), the shouted one at speed 2 (as loud, in half the audio)."""


def long_segment(target: Target, loop: LoopThread) -> Recording:
    """:data:`LONG_SEGMENT` sent at once, then ``close``."""
    return _sent_at_once(target, loop, "long-segment", LONG_SEGMENT)


def refusals(target: Target, loop: LoopThread) -> Recording:
    """:data:`REFUSED` sent at once, then ``close``; the session is read to its end."""

    async def scenario(session: ObservedStream, recording: Recording) -> None:
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


async def _second_session(target: Target, recording: Recording) -> None:
    extra = recording.extra
    started = time.monotonic()
    try:
        async with target.bidi() as bidi:
            session = ObservedStream(bidi, faithful_data_types=target.faithful_data_types, name="second")
            recording.others.append(session)  # its findings are the recording's (issue 30)
            await asyncio.wait_for(bidi.opened(), deadline.bound(60.0))
            extra["second_opened_s"] = round(time.monotonic() - started, 3)
            # A server may answer a busy moment with server_busy (§10.2): the session asks again.
            answer = await session.answer_when_admitted(SHORT, speed=FAST)
            extra["second_completed"] = answer.complete is not None
            extra["second_status"] = answer.complete.status if answer.complete else None
            extra["second_audio_bytes"] = len(answer.audio)
            await session.close()
            await session.drain()
    except Exception as exc:
        extra["second_error"] = f"{type(exc).__name__}: {exc}"


def long_text(target: Target, loop: LoopThread) -> Recording:
    """:data:`~conformance.engine.texts.LONG` at speed 2, with pings, ``/ping`` polling and a second
    session."""
    request = SynthesisRequest(LONG, request_id="long-1", speed=FAST)

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        extra = recording.extra
        checks: list[tuple[float, Any]] = extra.setdefault("ping_checks", [])
        stop = asyncio.Event()
        side: list[asyncio.Task[None]] = []
        if target.container_url is not None:
            side.append(asyncio.create_task(_poll_ping(target.container_url, stop, checks)))
        sent = time.monotonic()
        await _send_all(session, recording, (request,))

        def refused() -> bool:  # an error frame refused it before its bracket opened (§6.3)
            return "long-1" not in session.answers and session.refusal("long-1") is not None

        try:
            # The second session opens once synthesis is under way: after the first audio message.
            while not any(not m.is_control for m in session.messages) and not refused():
                if await session.receive() is None:
                    break
            extra["first_audio_s"] = round(time.monotonic() - sent, 3)
            side.append(asyncio.create_task(_second_session(target, recording)))
            await session.answer("long-1")  # raises if it was refused
            extra["synthesis_s"] = round(time.monotonic() - sent, 3)
            await session.close()
            await session.drain_after_close(recording.expect)
        finally:
            stop.set()
            await asyncio.gather(*side, return_exceptions=True)

    return record(target, loop, "long", scenario, settings=KEEPALIVE_SETTINGS)


DESCRIBED = (
    SynthesisRequest(TWO_SENTENCES, request_id="dr1", speed=FAST),
    SynthesisRequest(SHORT, request_id="dr2", speed=FAST),
)
"""The describe session's requests: the describes go out while the first is active and the second queued
(the first is long enough to be still active; the second only has to be waiting)."""

DESCRIBES = ("d1", None)
"""The ``request_id`` of each ``describe`` sent (``None``: the member is left out)."""


def described(target: Target, loop: LoopThread) -> Recording:
    """:data:`DESCRIBED` sent at once; at the first one's ``synthesis_start``, the :data:`DESCRIBES`; then
    ``close``. ``extra`` keeps the message index and time at which the describes went out and the requests
    not yet completed then."""

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        await _send_all(session, recording, DESCRIBED)
        await session.wait(lambda: "dr1" in session.answers, "dr1's synthesis_start")
        recording.extra["pending"] = [r for r in recording.expect if r not in session.completes_seen()]
        recording.extra["describe_index"] = len(session.messages)
        recording.extra["describe_t"] = session.clock()
        for request_id in DESCRIBES:
            session.observer.reader.expect_describe(request_id)
            await session.send(Describe(request_id=request_id).to_json().encode())
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "describe", scenario)


_MARKED_TEXT = f"{SENTENCES[0]} {SENTENCES[1]}"

MARKED = (
    SynthesisRequest(SHORT, request_id="mk0", speed=FAST),
    SynthesisRequest(_MARKED_TEXT, request_id="mk1", speed=FAST, marks=True),
    SynthesisRequest(_MARKED_TEXT, request_id="mk2", speed=FAST),
)
"""The marks session's requests: one without marks first (so neither of the pair is a session's first
request), then the same two short sentences (two segments) with and without marks."""

BAD_MARKS = (
    ({"text": SHORT, "request_id": "mk3", "marks": "yes"}, "invalid_field"),
    ({"text": SHORT, "request_id": "mk4", "speed": 5, "marks": "yes"}, "invalid_speed"),
)
"""Requests with a ``marks`` member that is not a boolean, and the code each must get (§5.5, §9.2: ``speed``
is checked before ``marks``)."""


def marked(target: Target, loop: LoopThread) -> Recording:
    """``describe``; on a server that lists ``marks``, :data:`MARKED` and :data:`BAD_MARKS`; then ``close``.

    ``extra["features"]`` is the list of features offered (``None``: describe is not offered).
    """

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        offer = await ask(session, "marks-features")
        recording.extra["features"] = None if offer is None else sorted(offer.features)
        if offer is not None and "marks" in offer.features:
            await _send_all(session, recording, MARKED)
            for message, _ in BAD_MARKS:
                recording.expect.append(message["request_id"])
                session.expect(message["request_id"], message)
                await session.send(json.dumps(message).encode())
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "marks", scenario)


NORMALIZED = {
    "markdown": "## Plan\n- **Buy** the _milk_, call `Bob`.",
    "plain": "Plan. Buy the milk, call Bob.",
    "digits": "Call 4 8 1 5 1 6 2 3 4 2 now.",
    "escaped": "Call \\[12\\] \\[34\\] \\[56\\] \\[78\\] now.",
    "bare": "Call now.",
}
"""The normalization session's texts (§14.2): markdown and the same words plain; ten figures, and four
numbers in escaped brackets (which a server reading markdown must speak: unescaped they would be citations,
dropped), each beside the bare sentence without them. Five short requests: the session is cheap."""


def normalized(target: Target, loop: LoopThread) -> Recording:
    """:data:`NORMALIZED` at speed 2, sent at once, then ``close``."""
    requests = tuple(
        SynthesisRequest(text, request_id=f"n-{name}", speed=FAST) for name, text in NORMALIZED.items()
    )

    async def scenario(session: ObservedStream, recording: Recording) -> None:
        await _send_all(session, recording, requests)
        await session.close()
        await session.drain_after_close(recording.expect)

    return record(target, loop, "normalization", scenario)


MAX_CROWD = 128
"""Most sessions the crowd recording opens: a server whose ``max_sessions`` is larger is not crowded (its
cases are SKIPPED with the reason), since each session costs the suite a TLS connection."""

CROWD_BATCH = 8
"""Sessions opened at once while crowding the server."""

CROWD_SETTINGS = {"accept_timeout_s": 3.0}
"""Simulator settings while crowding: a server busy accepting a batch of sessions on a loaded machine may take
longer than SageMaker's 250 ms to accept one (2.3.1 holds it to that); here only a refusal counts."""

AFTER_DROP_GRACE = (10.0, 6.0)
"""How long a dropped session may keep its place in ``max_sessions``: the larger of these seconds and this
many times the held request's time to first audio (the server finishes the segment in flight, §7.4)."""


async def _too_many(target: Target, recording: Recording) -> ObservedStream | None:
    """Open the session one past the limit and read what the server does with it (§2.3, §9.4)."""
    extra = recording.extra
    mark = target.wire_mark()
    async with target.bidi() as bidi:
        session = ObservedStream(bidi, faithful_data_types=target.faithful_data_types, name="one-too-many")
        try:
            await bidi.opened()
        except Exception as exc:  # the service's 424: the container refused the handshake
            extra["refused_handshake"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None
        # A request, so that a server that admits the session answers something instead of nothing.
        try:
            await session.request(SHORT, request_id="crowd-extra", speed=FAST)
        except Exception as exc:  # the stream already ended: what arrived before is read below
            extra["extra_send_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        fatal_at: list[int] = []

        def settled() -> bool:
            # The refusal, even without its ``fatal`` member (a schema defect, judged by 3.2.1).
            refused = any(e.fatal or e.code == "too_many_sessions" for _, e in session.observer.errors)
            if refused:
                fatal_at[:] = fatal_at or [len(session.messages) - 1]
                return True
            return session.observer.completed("crowd-extra")

        try:
            await session.wait(settled, "too_many_sessions or an answer")
        except AssertionError as exc:  # the stream ended first
            extra["extra_ended"] = str(exc)[:300]
        extra["extra_served"] = session.observer.completed("crowd-extra")
        if fatal_at:
            try:
                await asyncio.wait_for(session.drain(), deadline.bound(3.0))
                extra["closed_after_fatal"] = True
            except TimeoutError:
                extra["closed_after_fatal"] = False
            extra["after_fatal"] = [
                f"{'control ' + m.data[:80].decode('utf-8', 'replace') if m.is_control else 'audio'}"
                for m in session.messages[fatal_at[0] + 1 :]
            ]
    for _ in range(20):  # the simulator records how the container closed once the session is over
        logs = [
            log for log in target.wire_since(mark) if log["session_id"] not in mark and log["api"] == "bidi"
        ]
        if logs and logs[0]["outcome"]:
            extra["extra_outcome"] = logs[0]["outcome"]
            break
        await asyncio.sleep(0.1)
    return session


async def _admitted(
    target: Target, grace_s: float, recording: Recording, crowd: Sequence[Any] = (), ping: bytes = b""
) -> None:
    """Open sessions until one is admitted and answers a request, for up to ``grace_s`` (§7.4); each is one
    of the recording's :attr:`~conformance.engine.probe.Recording.others`.

    Meanwhile each of ``crowd`` sends ``ping`` every 0.5 s, so that none becomes idle long enough to give
    its slot up (§7.5): only the dropped session's place may let a newcomer in."""
    stop = asyncio.Event()

    async def keep_busy() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a crowd session that ended cannot be kept busy
                await asyncio.gather(*(session.send(ping, data_type="BINARY") for session in crowd))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    busy = asyncio.create_task(keep_busy()) if crowd and ping else None
    try:
        await _admit_one(target, grace_s, recording)
    finally:
        stop.set()
        if busy is not None:
            await busy


async def _admit_one(target: Target, grace_s: float, recording: Recording) -> None:
    extra = recording.extra
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        async with target.bidi() as bidi:
            session = ObservedStream(
                bidi, faithful_data_types=target.faithful_data_types, name=f"after-{attempts}"
            )
            recording.others.append(session)
            await session.request(SHORT, request_id="crowd-after", speed=FAST)
            observer = session.observer

            def answered(
                o: Any = observer, s: ObservedStream = session
            ) -> bool:  # server_busy is an answer (§10.2)
                return o.fatal or o.completed("crowd-after") or s.refusal("crowd-after") is not None

            try:
                await session.wait(answered, "an answer")
            except AssertionError as exc:  # the session ended (or never opened) without an answer
                extra["refusal"] = str(exc)[:300]
            if observer.completed("crowd-after"):
                extra["admitted_after_s"] = round(time.monotonic() - started, 3)
                extra["admitted_attempts"] = attempts
                await session.close()
                await session.drain()
                return
            if observer.errors:
                extra["refusal"] = [e.code for _, e in observer.errors]
        if time.monotonic() - started > grace_s:
            extra["admitted_after_s"] = None
            extra["admitted_attempts"] = attempts
            return
        await asyncio.sleep(0.5)


def crowded(target: Target, loop: LoopThread) -> Recording:
    """Fill the server to ``max_sessions`` and go one past it; then drop a session mid-synthesis and open
    another (§2.3, §7.4, §9.4).

    The limit is ``capabilities.limits.max_sessions`` (§4.4), or the protocol's default (64) from a server
    without ``describe``. One session (the holder) asks, and the rest of the limit opens idle; the holder then
    speaks :data:`~conformance.engine.texts.STREAMED` at speed 1, and at its first audio the session one too
    many opens and sends a request (its messages, log and findings are the recording's). Then the holder's
    input ends without ``close`` (SageMaker drops the container's WebSocket) and sessions open until one is
    admitted and answers, for up to :data:`AFTER_DROP_GRACE`. ``extra`` keeps what happened; the holder and
    the sessions opened after the drop are the recording's ``others`` (their findings are judged like its
    own).
    """
    recording = Recording("crowd", faithful_data_types=target.faithful_data_types)
    mark = target.wire_mark()
    extra = recording.extra

    async def main() -> None:
        async with contextlib.AsyncExitStack() as idle, contextlib.AsyncExitStack() as held:
            bidi = await held.enter_async_context(target.bidi())
            holder = ObservedStream(bidi, faithful_data_types=target.faithful_data_types, name="holder")
            recording.others.append(holder)
            offer = await ask(holder, "limits")
            limit = DEFAULT_LIMITS.max_sessions if offer is None else offer.limit("max_sessions")
            extra["max_sessions"] = limit
            if limit is None:
                extra["skip"] = (
                    "the server lists no max_sessions in capabilities.limits: it bounds no sessions"
                )
                return
            if limit > MAX_CROWD:
                extra["skip"] = f"max_sessions is {limit:g}: the suite crowds servers of at most {MAX_CROWD}"
                return

            crowd: list[Any] = []

            async def open_idle() -> None:
                session = await idle.enter_async_context(target.bidi())
                await session.opened()
                crowd.append(session)

            opened = 1
            while opened < limit:
                batch = min(CROWD_BATCH, int(limit) - opened)
                await asyncio.gather(*(open_idle() for _ in range(batch)))
                opened += batch
            extra["opened"] = opened
            sent = time.monotonic()
            await holder.request(STREAMED, request_id="crowd-held")
            await holder.wait(
                lambda: "crowd-held" in holder.answers and bool(holder.answers["crowd-held"].frames),
                "the held request's first audio",
            )
            first_audio_s = time.monotonic() - sent
            extra["held_first_audio_s"] = round(first_audio_s, 3)
            # Each idle session speaks once, so that none has been idle for idle_eviction_s: the session
            # one too many must be refused, not given an idle one's slot (§7.5).
            ping = Describe(request_id="crowd-ping").to_json().encode()
            await asyncio.gather(*(session.send(ping, data_type="BINARY") for session in crowd))
            session = await _too_many(target, recording)
            if session is not None:
                recording.messages, recording.log = session.messages, session.log
                recording.observer, recording.ended = session.observer, session.ended
            await held.aclose()  # the holder's input ends mid-synthesis: a disconnect (§7.4)
            grace = max(AFTER_DROP_GRACE[0], AFTER_DROP_GRACE[1] * first_audio_s)
            extra["grace_s"] = round(grace, 3)
            await _admitted(target, grace, recording, crowd, ping)

    configure = target.configure(**CROWD_SETTINGS) if target.simulated else contextlib.nullcontext()
    try:
        with configure:
            loop.run(main(), deadline.remaining())
    except Exception as exc:
        recording.error = f"{type(exc).__name__}: {exc}"
    recording.wire = target.wire_since(mark)
    return recording


# --- a burst of new speeches: served in time or refused at once (§10.2) -----------------------------------

BUSY_SESSIONS = 12
"""Sessions that each begin a speech at the same moment (fewer when ``max_sessions`` is lower): on two CPU
cores the reference server makes a first segment in 0.3-0.8 s, so the last of twelve would wait 4-10 s."""

BUSY_REPLY = "Sure, I can help with that. Let me look up your order."
"""What each session of the burst asks for: the opening of a voice agent's reply."""

BUSY_WARM_UP = "One moment please. I am checking that now. Here it is."
"""A reply spoken alone before the burst, so that a server that learns its model's speed from its first
requests (§10.1) has measured it."""

BUSY_REFUSAL_S = 1.5
"""Longest a refusal may take, seconds from the request (or from the open, for a session refused as it
opens): §10.2 asks for one at once; the rest is a loaded machine's and the simulator's hops."""


def busy_served_within(budget_s: float) -> float:
    """Latest first audio the burst case accepts for a server whose ``first_audio_budget_s`` is ``budget_s``:
    half as much again plus a second, for a promise that is an estimate and a loaded machine's jitter."""
    return 1.5 * budget_s + 1.0


async def _busy_one(target: Target, recording: Recording, number: int, wait_s: float) -> dict[str, Any]:
    """One session of the burst: open, ask for :data:`BUSY_REPLY`, note what came first and when."""
    request_id = f"busy-{number}"
    outcome: dict[str, Any] = {"session": number}
    async with target.bidi() as bidi:
        session = ObservedStream(bidi, faithful_data_types=target.faithful_data_types, name=request_id)
        recording.others.append(session)
        opened = time.monotonic()
        try:
            await bidi.opened()
        except Exception as exc:  # the service's 424: judged by 2.3.3, not here
            return {
                **outcome,
                "kind": "handshake refused",
                "error": f"{type(exc).__name__}: {str(exc)[:200]}",
            }
        sent = time.monotonic()
        outcome["open_s"] = round(sent - opened, 3)
        with contextlib.suppress(Exception):  # a session refused as it opens may be gone already
            await session.request(BUSY_REPLY, request_id=request_id)
        observer = session.observer

        def settled() -> bool:
            answer = session.answers.get(request_id)
            return bool(answer and answer.frames) or session.refusal(request_id) is not None or observer.fatal

        try:
            await asyncio.wait_for(session.wait(settled, "first audio or a refusal"), deadline.bound(wait_s))
        except TimeoutError:
            return {**outcome, "kind": "silent", "after_s": round(time.monotonic() - sent, 3)}
        except AssertionError as exc:  # the session ended before either
            if not observer.fatal:
                return {
                    **outcome,
                    "kind": "ended",
                    "after_s": round(time.monotonic() - sent, 3),
                    "error": str(exc)[:200],
                }
        after_s = round(time.monotonic() - sent, 3)
        refusal = session.refusal(request_id)
        fatal = next((e for _, e in observer.errors if e.fatal), None)
        answer = session.answers.get(request_id)
        if answer and answer.frames:
            outcome.update(kind="audio", after_s=after_s)
            with contextlib.suppress(Exception):  # the rest of the reply, so the load lasts as speech does
                await asyncio.wait_for(session.answer(request_id), deadline.bound(wait_s))
                await session.close()
                await session.drain()
        elif refusal is not None:
            outcome.update(kind="refused", code=refusal.code, after_s=after_s)
        else:
            assert fatal is not None
            outcome.update(kind="fatal", code=fatal.code, after_s=round(time.monotonic() - opened, 3))
    return outcome


def busy_burst(target: Target, loop: LoopThread) -> Recording:
    """A reply spoken alone (:data:`BUSY_WARM_UP`), then :data:`BUSY_SESSIONS` sessions that open together
    and each begin a speech (§10.2).

    ``extra["outcomes"]``: per session, what came first (``audio``, a per-message ``refused`` with its code,
    a ``fatal`` error with its code, ``silent`` within the wait, ``ended``) and after how many seconds;
    ``extra["budget_s"]``: the server's ``first_audio_budget_s`` (``describe``, else the protocol's
    default); ``extra["pings"]``: ``GET /ping`` statuses polled during the burst (the container only).
    While the burst opens, the simulator gives the container 3 s to accept a WebSocket (as for the crowd:
    only a refusal counts; 2.3.1 holds a busy server to 250 ms)."""
    recording = Recording("busy", faithful_data_types=target.faithful_data_types)
    mark = target.wire_mark()
    extra = recording.extra

    async def main() -> None:
        async with target.bidi() as bidi:
            warm = ObservedStream(bidi, faithful_data_types=target.faithful_data_types, name="warm-up")
            recording.others.append(warm)
            offer = await ask(warm, "limits")
            budget = None if offer is None else offer.limit("first_audio_budget_s")
            extra["budget_s"] = budget = DEFAULT_LIMITS.first_audio_budget_s if budget is None else budget
            limit = None if offer is None else offer.limit("max_sessions")
            sessions = BUSY_SESSIONS if limit is None else max(1, min(BUSY_SESSIONS, int(limit) - 1))
            extra["sessions"] = sessions
            await warm.answer(await warm.request(BUSY_WARM_UP, request_id="warm-up"))
            await warm.close()
            await warm.drain()
        wait_s = 2.0 * busy_served_within(budget) + 5.0  # a silent wait is judged long before this ends
        stop = asyncio.Event()
        pings: list[tuple[float, Any]] = []
        poll = None
        if target.container_url is not None:
            poll = asyncio.create_task(_poll_ping(target.container_url, stop, pings))
        try:
            extra["outcomes"] = list(
                await asyncio.gather(*(_busy_one(target, recording, n, wait_s) for n in range(sessions)))
            )
        finally:
            stop.set()
            if poll is not None:
                await asyncio.gather(poll, return_exceptions=True)
        extra["pings"] = [status for _, status in pings]

    configure = target.configure(**CROWD_SETTINGS) if target.simulated else contextlib.nullcontext()
    try:
        with configure:
            loop.run(main(), deadline.remaining())
    except Exception as exc:
        recording.error = f"{type(exc).__name__}: {exc}"
    recording.wire = target.wire_since(mark)
    return recording

"""WebSocket route behaviour (PROTOCOL.md §3–§10) on the real server, with the tone TEST DOUBLE backend.

The double (tone_backend.py) makes these tests fast and decided by events: gates hold synthesis at a
known segment, so "pings are answered during synthesis", "cancel stops within one segment" and
"look-ahead synthesizes the next request while this one is sent" are checked without any timing.
Real Kokoro synthesis through the same routes is in test_kokoro_e2e.py and test_soak.py.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from server_harness import run, wait_for
from tone_backend import FAIL_MARKER, SAMPLE_RATE, ToneBackend, expected_samples, voice_frequency
from ws_conversation import GUARD_S, open_session

from protocol.errors import ErrorCode
from protocol.limits import Limits
from protocol.messages import SynthesisRequest
from protocol.server_output import AudioReceived, ErrorReceived, SynthesisCompleted, SynthesisStarted
from reference_server import ws
from reference_server.runtime import Runtime
from reference_server.settings import Settings


def acquire(semaphore, what: str = "backend to enter a segment") -> None:
    assert semaphore.acquire(timeout=GUARD_S), f"timed out waiting for the {what}"


async def in_thread(func, *args):
    return await asyncio.get_running_loop().run_in_executor(None, func, *args)


# --- frames and requests ---------------------------------------------------------------------------------


def test_binary_and_text_frames_carry_the_same_requests(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            a = await conv.request("Hello there. How are you?")  # BINARY, as SageMaker's default DataType
            b = await conv.request("Second request.", as_text=True)
            first, second = await conv.until_complete(a), await conv.until_complete(b)
            assert first.complete.status == second.complete.status == "completed"
            assert len(first.pcm) == 2 * expected_samples("Hello there. How are you?")
            assert len(second.pcm) == 2 * expected_samples("Second request.")
            assert first.start.sample_rate == SAMPLE_RATE and first.start.encoding == "pcm_s16le"
            assert first.frames == 2  # one frame per segment (each under max_audio_frame_bytes)

    run(scenario())


def test_describe_lists_the_backend_voices_at_once_even_mid_bracket(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request("One two three. Four five.")
            await in_thread(acquire, backend.entered)  # the first segment is being synthesized
            capabilities = await conv.describe("d1")  # answered while the request is held
            assert capabilities.request_id == "d1" and capabilities.server.backend == "tone"
            assert capabilities.voice_ids == backend.voices
            assert [lang.code for lang in capabilities.languages] == ["a", "b"]
            assert not any(lang.word_timings for lang in capabilities.languages)
            assert "describe" in capabilities.features and "cancel" in capabilities.features
            backend.segment_permits.release(10)
            assert (await conv.until_complete(rid)).complete.status == "completed"
            refused = await conv.request("Hi.", voice="bf_nobody")
            error = await conv.until_error()
            assert (error.code, error.request_id) == (ErrorCode.INVALID_VOICE, refused)
            assert '{"type":"describe"}' in error.message

    run(scenario())


def test_every_bad_message_gets_one_coded_error_and_the_session_lives_on(serve):
    server = serve(ToneBackend())
    bad = [
        (b"\xff\xfe", ErrorCode.INVALID_UTF8),
        (b"not json", ErrorCode.INVALID_JSON),
        ("[1, 2]", ErrorCode.NOT_AN_OBJECT),
        ({"type": "dance"}, ErrorCode.UNKNOWN_TYPE),
        ({"text": "   ", "request_id": "blank"}, ErrorCode.TEXT_REQUIRED),
        ({"text": "Hi.", "voice": "zz_nobody"}, ErrorCode.INVALID_VOICE),
        ({"text": "Hi.", "speed": 3}, ErrorCode.INVALID_SPEED),
        ({"text": "Hi.", "sample_rate": 44100}, ErrorCode.INVALID_SAMPLE_RATE),
        ({"text": "Hi.", "voice": 3}, ErrorCode.INVALID_FIELD),
        ({"text": "x" * 10_001}, ErrorCode.TEXT_TOO_LONG),
        (
            {"text": "x" * 70_000},
            ErrorCode.MESSAGE_TOO_LARGE,
        ),  # above max_message_bytes, below the transport's
        ({"text": "Hi.", "request_timestamp": time.time() - 120}, ErrorCode.REQUEST_STALE),
        ({"type": "cancel", "request_id": "nothing"}, ErrorCode.UNKNOWN_REQUEST),
    ]

    async def scenario():
        async with open_session(server.ws_url) as conv:
            for message, code in bad:
                await conv.send(message)
                error = await conv.until_error()
                assert error.code == code, (
                    message if not isinstance(message, dict) else list(message),
                    error,
                )
                assert not error.fatal
            assert error.request_id == "nothing"
            answer = await conv.until_complete(await conv.request("Still here."))
            assert answer.complete.status == "completed"
            assert len(conv.errors) == len(bad)

    run(scenario())


def test_message_above_the_transport_ceiling_closes_with_1009(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.send(b"x" * (server.settings.ws_max_size + 1))
            assert await conv.until_closed() == 1009

    run(scenario())


def test_aws_sample_message_shapes_work_unmodified(serve):
    """REFERENCE.md §3: the sample's client sends {text, voice, request_timestamp[, speed, sample_rate]}
    as a BINARY frame, classifies a chunk as control iff it starts with '{' and decodes, and ends with
    {"type": "close"}."""
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            ws_ = conv.ws
            sent = {
                "text": "Hello there.",
                "voice": "af_heart",
                "request_timestamp": time.time(),
                "speed": 1.0,
            }
            await ws_.send(json.dumps(sent).encode("utf-8"))
            await ws_.send(
                json.dumps({"text": "", "voice": "af_heart", "request_timestamp": time.time()}).encode()
            )
            await ws_.send(json.dumps({"type": "close"}).encode("utf-8"))
            controls, pcm = [], bytearray()
            async for chunk in ws_:
                chunk = chunk.encode() if isinstance(chunk, str) else chunk
                decoded = None
                if chunk[:1] == b"{":
                    try:
                        decoded = json.loads(chunk.decode("utf-8"))
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        decoded = None
                if isinstance(decoded, dict):
                    controls.append(decoded)
                else:
                    pcm += chunk
            assert ws_.close_code == 1000
            kinds = [c["type"] for c in controls]
            assert kinds == ["error", "synthesis_start", "synthesis_complete"] or kinds == [
                "synthesis_start",
                "error",
                "synthesis_complete",
            ]
            error = next(c for c in controls if c["type"] == "error")
            # The sample matched substrings of `message`; from protocol 1.1 a client reads `code`, or
            # searches the whole frame's text, which holds the code (PROTOCOL.md §1.7, §5.4).
            assert error["code"] == "text_required" and "text_required" in json.dumps(error)
            assert not error["message"].startswith("text_required")
            complete = controls[-1]
            assert complete["total_duration_s"] == pytest.approx(len(pcm) / 2 / 24000)
            assert complete["elapsed_s"] >= 0 and complete["request_id"]
            assert len(pcm) == 2 * expected_samples("Hello there.")

    run(scenario())


def test_sample_rate_is_resampled_and_speed_applies(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            for rate in (8000, 16000, 22050, 24000):
                answer = await conv.until_complete(
                    await conv.request("One two three four.", sample_rate=rate)
                )
                assert answer.start.sample_rate == rate
                expected = expected_samples("One two three four.") * rate / SAMPLE_RATE
                assert abs(len(answer.pcm) / 2 - expected) <= 2
            fast = await conv.until_complete(await conv.request("One two three four.", speed=2.0))
            assert len(fast.pcm) == 2 * expected_samples("One two three four.", speed=2.0)

    run(scenario())


def test_word_timestamps_run_across_segments(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            answer = await conv.until_complete(await conv.request("One two. Three four five."))
            words = answer.complete.words
            assert [w.word for w in words] == ["One", "two.", "Three", "four", "five."]
            starts = [w.start_s for w in words]
            assert starts == sorted(starts) and starts[2] == pytest.approx(0.2)
            assert words[-1].end_s == pytest.approx(answer.complete.total_duration_s)

    run(scenario())


def test_backend_failure_fails_that_request_only(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            bad = await conv.request(f"First part. Then {FAIL_MARKER} here.")
            good = await conv.request("After the failure.")
            failed = await conv.until_complete(bad)
            assert failed.complete.status == "failed"
            assert len(failed.pcm) == 2 * expected_samples("First part.")  # the segment before the failure
            assert [(e.code, e.request_id) for e in conv.errors] == [(ErrorCode.INTERNAL_ERROR, bad)]
            assert (await conv.until_complete(good)).complete.status == "completed"

    run(scenario())


# --- full duplex: keepalive, cancel, close ---------------------------------------------------------------


def test_pings_are_answered_while_synthesis_is_held(serve):
    """§8: the backend is held inside a segment (in its worker thread) until the pings are answered; if
    synthesis ran on the event loop, no pong could come back and the test would time out."""
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request("Held here. Then released.")
            await in_thread(acquire, backend.entered)
            for _ in range(5):
                pong = await conv.ws.ping()
                await asyncio.wait_for(pong, GUARD_S)
            backend.segment_permits.release(2)
            assert (await conv.until_complete(rid)).complete.status == "completed"

    run(scenario())


def test_cancel_of_the_active_request_stops_within_one_segment(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)
    text = "One. Two. Three. Four. Five."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(text)
            await in_thread(acquire, backend.entered)
            backend.segment_permits.release(1)  # segment 1 only
            assert isinstance(await conv.next_event(), SynthesisStarted)
            assert isinstance(await conv.next_event(), AudioReceived)
            await in_thread(acquire, backend.entered)  # segment 2 is being synthesized (held)
            await conv.send({"type": "cancel", "request_id": rid})
            # complete arrives while the backend is still held inside segment 2
            answer = await conv.until_complete(rid)
            assert answer.complete.status == "cancelled"
            assert len(answer.pcm) == 2 * expected_samples("One.")
            backend.segment_permits.release(10)
            after = await conv.until_complete(await conv.request("Next."))
            assert after.complete.status == "completed"
        wait_for(lambda: backend.open_generators == 0, what="the cancelled generator to be closed")

    run(scenario())


def test_a_cancelled_request_says_the_words_of_the_audio_it_sent(serve):
    """§5.3 cancel_words: the cancelled complete carries the words of segment 1, whose audio was sent, and
    none of segment 2, which was being synthesized when the cancel came; the same words and timings as
    the request uncancelled."""
    backend = ToneBackend(gated=True)
    server = serve(backend)
    text = "One two. Three four. Five."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(text)
            await in_thread(acquire, backend.entered)
            backend.segment_permits.release(1)  # segment 1 only
            assert isinstance(await conv.next_event(), SynthesisStarted)
            assert isinstance(await conv.next_event(), AudioReceived)
            await in_thread(acquire, backend.entered)  # segment 2 is being synthesized (held)
            await conv.send({"type": "cancel", "request_id": rid})
            cut = await conv.until_complete(rid)
            backend.segment_permits.release(10)
            whole = await conv.until_complete(await conv.request(text))
            return cut, whole

    cut, whole = run(scenario())
    assert (cut.complete.status, whole.complete.status) == ("cancelled", "completed")
    assert len(cut.pcm) == 2 * expected_samples("One two.") == cut.complete.audio_bytes
    sent = tuple(w for w in whole.complete.words if w.end_s <= cut.complete.total_duration_s)
    assert cut.complete.words == sent and [w.word for w in sent] == ["One", "two."]
    assert whole.pcm[: len(cut.pcm)] == cut.pcm


def test_cancel_of_queued_requests_answers_them_in_turn(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(lookahead=0))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            a = await conv.request("Active one.")
            b = await conv.request("Queued one.")
            c = await conv.request("Queued two.")
            await in_thread(acquire, backend.entered)
            await conv.send({"type": "cancel", "request_id": b})
            backend.segment_permits.release(10)
            answers = [await conv.until_complete() for _ in range(3)]
            assert [x.complete.request_id for x in answers] == [a, b, c]
            assert [x.complete.status for x in answers] == ["completed", "cancelled", "completed"]
            assert answers[1].complete.audio_bytes == 0
            assert [call[0] for call in backend.calls] == ["Active one.", "Queued two."]

    run(scenario())


def test_cancel_without_id_cancels_everything(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            ids = [await conv.request(f"Request {n}. More.") for n in range(3)]
            await in_thread(acquire, backend.entered)
            await conv.send({"type": "cancel"})
            answers = [await conv.until_complete() for _ in ids]
            assert [a.complete.status for a in answers] == ["cancelled"] * 3
            assert [a.complete.request_id for a in answers] == ids
            backend.segment_permits.release(10)
        wait_for(lambda: backend.open_generators == 0, what="generators to close")

    run(scenario())


def test_close_drains_accepted_requests_then_closes_1000(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            a = await conv.request("First.")
            b = await conv.request("Second.")
            await conv.send({"type": "close"})
            await conv.send({"text": "After close: ignored."})
            assert await conv.until_closed() == 1000
            assert set(conv.answers) == {a, b}
            assert not conv.errors

    run(scenario())


def test_requests_are_answered_in_order_never_interleaved(serve):
    server = serve(ToneBackend())
    texts = [f"Sentence {n} has some words. And a second part." for n in range(8)]

    async def scenario():
        async with open_session(server.ws_url) as conv:
            ids = [
                await conv.request(t, voice=v)
                for t, v in zip(texts, ["af_heart", "am_adam"] * 4, strict=True)
            ]
            done = [await conv.until_complete() for _ in ids]  # ClientSession raises on interleaving
            assert [d.complete.request_id for d in done] == ids

    run(scenario())


def test_queue_full_beyond_max_queue(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(max_queue=2))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            a = await conv.request("One.")
            b = await conv.request("Two.")
            c = await conv.request("Three.")
            error = await conv.until_error()
            assert (error.code, error.request_id, error.fatal) == (ErrorCode.QUEUE_FULL, c, False)
            backend.segment_permits.release(10)
            assert [(await conv.until_complete()).complete.request_id for _ in "ab"] == [a, b]

    run(scenario())


def test_too_many_sessions_is_fatal_with_1013(serve):
    server = serve(ToneBackend(), limits=Limits(max_sessions=1))

    async def scenario():
        async with open_session(server.ws_url) as first:
            async with open_session(server.ws_url) as second:
                error = await second.until_error()
                assert (error.code, error.fatal) == (ErrorCode.TOO_MANY_SESSIONS, True)
                assert await second.until_closed() == 1013
            assert (
                await first.until_complete(await first.request("Still served."))
            ).complete.status == "completed"
        wait_for(lambda: server.runtime.sessions == 0, what="session slots to be released")
        async with open_session(server.ws_url) as third:
            assert (
                await third.until_complete(await third.request("Slot free."))
            ).complete.status == "completed"

    run(scenario())


def test_a_session_whose_close_was_seen_has_given_its_slot_back(serve):
    """A client that saw its session close (1000) can open the next one at once, even where that one slot
    is the server's last: the slot is given back before the close frame is sent, not after the socket
    is gone (a soak test once opened its session in that gap and got too_many_sessions)."""
    server = serve(ToneBackend(), limits=Limits(max_sessions=1))

    async def scenario():
        for n in range(30):
            async with open_session(server.ws_url) as conv:
                answer = await conv.until_complete(await conv.request(f"Round {n}."))
                assert answer.complete.status == "completed", conv.errors
                await conv.send({"type": "close"})
                assert await conv.until_closed() == 1000
                assert not conv.errors

    run(scenario())


def test_concurrent_sessions_are_isolated(serve):
    backend = ToneBackend()
    server = serve(backend, synthesis_workers=2)
    voices = ["af_heart", "am_adam", "bf_emma", "bm_george"]

    async def one(voice: str) -> tuple[str, bytes]:
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(
                "Shared text for all. It has two segments.", voice=voice, request_id="same"
            )
            return voice, (await conv.until_complete(rid)).pcm

    async def scenario():
        results = await asyncio.gather(*(one(v) for v in voices))
        for voice, pcm in results:
            samples = np.frombuffer(pcm, "<i2").astype(np.float32)
            spectrum = np.abs(np.fft.rfft(samples))
            peak_hz = np.argmax(spectrum) * SAMPLE_RATE / len(samples)
            assert peak_hz == pytest.approx(voice_frequency(voice), abs=15), voice

    run(scenario())


# --- disconnect and shutdown -----------------------------------------------------------------------------


def test_disconnect_mid_synthesis_stops_it_and_frees_the_session(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.request("Held. Never finished. At all.")
            await in_thread(acquire, backend.entered)
        # the client is gone while the backend is held inside a segment
        wait_for(lambda: server.runtime.sessions == 0, what="the session to end")
        backend.segment_permits.release(1)
        wait_for(lambda: backend.open_generators == 0, what="the generator to be closed")
        assert not server.runtime._live

    run(scenario())


def test_ping_is_unhealthy_until_the_model_is_ready_and_sessions_wait(serve):
    import threading

    import httpx

    backend = ToneBackend()
    backend.load_gate = threading.Event()
    server = serve(backend, wait_ready=False)
    response = httpx.get(f"{server.http_url}/ping")
    assert (response.status_code, response.json()["status"]) == (503, "Unhealthy")

    async def scenario():
        async with open_session(server.ws_url) as conv:  # accepted at once, even while loading
            rid = await conv.request("Waits for the model.")
            await asyncio.wait_for(await conv.ws.ping(), GUARD_S)  # and read: pings are answered
            backend.load_gate.set()
            assert (await conv.until_complete(rid)).complete.status == "completed"

    run(scenario())
    assert httpx.get(f"{server.http_url}/ping").json()["status"] == "Healthy"
    assert backend.warmed_up


class _BrokenBackend(ToneBackend):
    def load(self) -> None:
        raise OSError("weights are missing")


def test_a_model_that_fails_to_load_stops_the_server(serve, caplog):
    """PROTOCOL.md §2.2: a server that cannot serve exits rather than answer 503 until SageMaker gives up."""
    import logging

    caplog.set_level(logging.ERROR, logger="reference_server")
    server = serve(_BrokenBackend(), wait_ready=False)
    server._thread.join(GUARD_S)
    assert not server._thread.is_alive(), "the server kept running with no model"
    assert server.server.load_failed
    stopping = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cannot serve")]
    assert stopping == [
        "cannot serve, stopping: loading the tone backend failed: OSError: weights are missing"
    ]


def test_until_it_exits_every_route_says_why(caplog):
    """The window between a failed load and the exit: each route answers with the reason (§2.2)."""
    from starlette.testclient import TestClient

    from reference_server.app import create_app

    # A loopback server answers loopback Host names only (§13): not TestClient's default "testserver".
    app = create_app(Settings(), backend=_BrokenBackend())
    with TestClient(app, base_url="http://127.0.0.1") as client:
        wait_for(lambda: client.app.state.runtime.failure is not None, what="the load to fail")
        reason = "loading the tone backend failed: OSError: weights are missing"
        response = client.get("/ping")
        assert (response.status_code, response.json()) == (
            503,
            {"status": "Unhealthy", "reason": "failed", "error": reason},
        )
        response = client.post("/invocations", json={"text": "Hello."})
        assert response.status_code == 500
        assert response.json()["error"] == {
            "code": "internal_error",
            "message": f"the model failed to load: {reason}",
        }
        with client.websocket_connect(f"ws://127.0.0.1{ws.PATH}") as socket:
            frame = json.loads(socket.receive_text())
            assert (frame["code"], frame["fatal"]) == ("internal_error", True)
            assert reason in frame["message"]


def test_shutdown_closes_live_sessions_with_1001(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.request("Held while the server stops.")
            await in_thread(acquire, backend.entered)
            stopping = asyncio.get_running_loop().run_in_executor(None, server.stop)
            code = await conv.until_closed()
            backend.segment_permits.release(10)
            await stopping
            assert code == 1001

    run(scenario())


# --- look-ahead, at the adapter level with a socket double -----------------------------------------------


class _SocketDouble:
    """Stands in for a Starlette WebSocket whose client reads nothing until ``reading`` is set.

    Each sent message is recorded with the number of ``synthesize`` calls the backend had seen then.
    """

    def __init__(self, messages: list[str], backend: ToneBackend) -> None:
        self.incoming: asyncio.Queue = asyncio.Queue()
        for message in messages:
            self.incoming.put_nowait({"type": "websocket.receive", "text": message})
        self.backend = backend
        self.reading = asyncio.Event()
        self.sent: list[tuple[str | bytes, int]] = []
        self.closed: int | None = None

    async def receive(self):
        return await self.incoming.get()

    async def send_text(self, data: str) -> None:
        await self.reading.wait()
        self.sent.append((data, len(self.backend.calls)))

    async def send_bytes(self, data: bytes) -> None:
        await self.reading.wait()
        self.sent.append((data, len(self.backend.calls)))

    async def close(self, code: int = 1000) -> None:
        self.closed = code
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


@pytest.mark.parametrize("lookahead", [0, 1])
def test_lookahead_synthesizes_the_next_request_while_this_one_is_sent(lookahead):
    """Look-ahead 1: request B is synthesized while nothing of A can be written yet. Look-ahead 0: B's
    synthesis starts only after A's audio is out. Decided by events: the socket double holds sends."""
    backend = ToneBackend()
    settings = Settings(limits=Limits(lookahead=lookahead))
    requests = [
        SynthesisRequest(text=t, request_id=r).to_json() for t, r in (("Alpha.", "A"), ("Beta.", "B"))
    ]
    requests.append(json.dumps({"type": "close"}))

    async def scenario():
        runtime = Runtime(settings, backend)
        await runtime.prepare()
        socket = _SocketDouble(requests, backend)
        running = asyncio.create_task(ws.WebSocketConnection(socket, runtime).run())
        if lookahead:
            await asyncio.wait_for(_until(lambda: len(backend.calls) == 2), GUARD_S)
            assert socket.sent == []  # B is being synthesized; A's start is not even written
        socket.reading.set()
        await asyncio.wait_for(running, GUARD_S)
        runtime.executor.shutdown()
        assert socket.closed == 1000
        a_audio = next(calls for message, calls in socket.sent if isinstance(message, bytes))
        assert a_audio == (2 if lookahead else 1)
        kinds = [json.loads(m)["type"] for m, _ in socket.sent if isinstance(m, str)]
        assert kinds == ["synthesis_start", "synthesis_complete"] * 2

    run(scenario())
    assert [c[0] for c in backend.calls] == ["Alpha.", "Beta."]


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.005)


def test_session_task_failure_ends_the_session_with_internal_error(serve, monkeypatch):
    """§9: if the adapter itself fails, the client gets a fatal internal_error and close 1011."""
    server = serve(ToneBackend())

    async def broken(self):
        raise RuntimeError("adapter bug")

    monkeypatch.setattr(ws.WebSocketConnection, "_feed", broken)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            error = await conv.until_error()
            assert (error.code, error.fatal) == (ErrorCode.INTERNAL_ERROR, True)
            assert await conv.until_closed() == 1011

    run(scenario())


def test_events_are_checked_by_the_client_session(serve):
    """Sanity check of the harness: ClientSession sees every start/complete pair."""
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request("Check.")
            kinds = []
            while not kinds or kinds[-1] is not SynthesisCompleted:
                kinds.append(type(await conv.next_event()))
            assert kinds[0] is SynthesisStarted and ErrorReceived not in kinds
            assert conv.client.outstanding == [] and rid in conv.answers

    run(scenario())


@pytest.mark.parametrize("name", ["pcm_mulaw", "pcm_alaw"])
def test_g711_at_8khz_decodes_to_the_same_requests_pcm16_within_g711_error(serve, name):
    """PROTOCOL.md §3.3.1, §4.1: the G.711 stream is the PCM16 answer, companded; decoding it gives that
    answer back within half a quantization step per sample (the tone backend is deterministic)."""
    from protocol.encodings import decode_to_pcm16

    server = serve(ToneBackend())
    text = "One two three. Four five six."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            capabilities = await conv.describe()
            assert set(capabilities.encodings) == {"pcm_s16le", "pcm_mulaw", "pcm_alaw"}
            linear = await conv.until_complete(await conv.request(text, sample_rate=8000))
            g711 = await conv.until_complete(await conv.request(text, sample_rate=8000, encoding=name))
            return linear, g711

    linear, g711 = run(scenario())
    assert (linear.start.encoding, g711.start.encoding) == ("pcm_s16le", name)
    assert len(g711.pcm) == len(linear.pcm) // 2 == g711.complete.audio_bytes
    assert g711.complete.total_duration_s == linear.complete.total_duration_s
    x = np.frombuffer(linear.pcm, "<i2").astype(np.int64)
    y = np.frombuffer(decode_to_pcm16(g711.pcm, name), "<i2").astype(np.int64)
    bound = (np.abs(x) + 132) / 32 + 4 if name == "pcm_mulaw" else np.maximum(np.abs(x) / 32, 8) + 8
    assert np.all(np.abs(y - x) <= bound)
    snr_db = 10 * np.log10(np.sum(x * x) / np.sum((y - x) ** 2))
    assert snr_db > 30  # G.711 keeps about 38 dB on a loud signal


def test_an_unsupported_encoding_is_refused_and_the_session_lives_on(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.send({"text": "Hi.", "encoding": "opus", "request_id": "x1"})
            error = await conv.until_error()
            answer = await conv.until_complete(await conv.request("Hi."))
            return error, answer

    error, answer = run(scenario())
    assert (error.code, error.request_id, error.fatal) == ("unsupported_encoding", "x1", False)
    assert answer.start.encoding == "pcm_s16le" and answer.pcm


def test_a_voice_blend_is_echoed_in_canonical_form_and_mixes_the_voices(serve):
    """PROTOCOL.md §4.1, §5.1, §11.4: a backend that mixes voices lists voice_blend; a blend is echoed in
    canonical form on the session and over SSE, and its tone lies at the weighted mean of its voices'."""
    import httpx

    server = serve(ToneBackend(blends=True))
    text = "One two three four."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            assert "voice_blend" in (await conv.describe()).features
            blend = await conv.until_complete(await conv.request(text, voice="am_michael+am_adam(3)"))
            await conv.request(text, voice="af_heart+bf_emma")  # two languages
            error = await conv.until_error()
            after = await conv.until_complete(await conv.request(text, voice="af_heart"))
            return blend, error, after

    blend, error, after = run(scenario())
    assert blend.start.voice == "am_adam(0.75)+am_michael(0.25)" and after.complete.status == "completed"
    assert error.code == ErrorCode.INVALID_VOICE and "bf_emma" in error.message
    samples = np.frombuffer(blend.pcm, "<i2").astype(np.float64)
    peak_hz = np.argmax(np.abs(np.fft.rfft(samples))) * SAMPLE_RATE / len(samples)
    expected = 0.75 * voice_frequency("am_adam") + 0.25 * voice_frequency("am_michael")
    assert abs(peak_hz - expected) < 2 and abs(peak_hz - voice_frequency("am_adam")) > 20
    sse = httpx.post(
        f"{server.http_url}/invocations",
        json={"text": text, "voice": "am_adam(2)+am_michael", "transport": "sse"},
        timeout=GUARD_S,
    )
    start = json.loads(sse.text.split("\n")[1].removeprefix("data: "))
    assert start["voice"] == "am_adam(0.6667)+am_michael(0.3333)"


def test_a_backend_that_cannot_mix_voices_refuses_blends(serve):
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            assert "voice_blend" not in (await conv.describe()).features
            await conv.request("Hi.", voice="af_heart+af_bella")
            return await conv.until_error()

    assert run(scenario()).code == ErrorCode.INVALID_VOICE

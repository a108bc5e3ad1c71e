"""``GET /ping`` and ``POST /invocations`` (PROTOCOL.md §2, §11) on the real server, tone TEST DOUBLE backend.

Every body shape is decoded by an independent reader (Python's ``wave`` module for WAV, the protocol's
SSE decoder plus strict base64 per event, PyAV for MP3 where it is installed) and every SSE event and
error body is validated against its JSON Schema in spec/schemas.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import wave

import httpx
import numpy as np
import pytest
from server_harness import GUARD_S, run, wait_for
from tone_backend import FAIL_MARKER, SAMPLE_RATE, VOICES, ToneBackend, expected_samples

from protocol import schemas
from protocol.limits import Limits
from protocol.pcm import parse_wav_header
from protocol.sse import SSEDecoder, decode_base64_strict

TEXT = "Hello there. This is a test."


def post(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/invocations", json=body, timeout=GUARD_S)


def test_ping_healthy_once_ready(serve):
    server = serve(ToneBackend())
    response = httpx.get(f"{server.http_url}/ping")
    assert response.status_code == 200
    assert response.json() == {"status": "Healthy", "backend": "tone", "voices": 6, "languages": ["a", "b"]}


def test_describe_on_invocations_answers_the_capabilities_as_json(serve):
    server = serve(ToneBackend())
    response = post(server, type="describe", request_id="d9")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    obj = response.json()
    schemas.validate("capabilities", obj)
    assert (obj["type"], obj["request_id"], obj["protocol"]) == ("capabilities", "d9", "1.1")
    assert sorted(v["id"] for v in obj["voices"]) == sorted(VOICES)
    assert obj["formats"] == ["wav", "pcm", "mp3", "opus", "flac", "aac"] and obj["sample_rates"] == [
        8000,
        16000,
        22050,
        24000,
    ]
    assert server.runtime.invocations == 0  # no synthesis slot was taken
    refused = post(server, type="describe", request_id="")
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_field")
    # Another type is ignored, as in version 1: a body with text is a synthesis request.
    spoken = post(server, type="anything", text="Hello.")
    assert spoken.status_code == 200 and spoken.headers["content-type"] == "audio/wav"


def test_ping_unhealthy_while_shutting_down(serve):
    server = serve(ToneBackend())
    server.runtime.closing = True  # what Runtime.shutdown() sets first (§7.3)
    response = httpx.get(f"{server.http_url}/ping")
    assert (response.status_code, response.json()["status"]) == (503, "Unhealthy")


def test_streamed_wav_has_unknown_sizes_then_pcm(serve):
    server = serve(ToneBackend())
    response = post(server, text=TEXT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    assert "content-length" not in response.headers  # chunked: streamed as synthesized
    header = parse_wav_header(response.content)
    assert (header.sample_rate, header.channels, header.bits_per_sample) == (SAMPLE_RATE, 1, 16)
    assert header.data_bytes is None and header.header_bytes == 44
    assert response.content[4:8] == b"\xff\xff\xff\xff"
    assert len(response.content) - 44 == 2 * expected_samples(TEXT)


def test_whole_wav_has_exact_sizes(serve):
    server = serve(ToneBackend())
    response = post(server, text=TEXT, stream=False, sample_rate=16000)
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    with wave.open(io.BytesIO(response.content)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
        assert abs(wav.getnframes() - expected_samples(TEXT) * 2 / 3) <= 2


def test_raw_pcm_body_and_media_type(serve):
    server = serve(ToneBackend())
    response = post(server, text=TEXT, format="pcm", sample_rate=8000)
    assert response.headers["content-type"] == "audio/pcm;rate=8000;encoding=s16le;channels=1"
    assert abs(len(response.content) / 2 - expected_samples(TEXT) / 3) <= 2
    samples = np.frombuffer(response.content, "<i2")
    assert np.abs(samples).max() > 1000  # not silent


@pytest.mark.parametrize("fmt", ["pcm", "wav", "mp3"])
def test_sse_events_follow_the_schemas(serve, fmt):
    server = serve(ToneBackend())
    response = post(server, text=TEXT, transport="sse", format=fmt, request_id="sse-1")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    body = response.content.decode("utf-8")
    assert body.endswith("\n\n") and "\r" not in body and not body.startswith("\ufeff")
    for block in body[:-2].split("\n\n"):  # every event is exactly "event: T\ndata: JSON" (§11.4)
        event_line, data_line = block.split("\n")
        assert event_line.startswith("event: ") and data_line.startswith("data: {")
    decoder = SSEDecoder()
    events = decoder.feed(response.content) + decoder.close()
    names = [e.event for e in events]
    assert names[0] == "synthesis_start" and names[-1] == "synthesis_complete"
    assert set(names[1:-1]) == {"audio_chunk"}
    objects = [json.loads(e.data) for e in events]
    for event, obj in zip(events, objects, strict=True):
        schemas.validate(f"sse_{event.event}", obj)
        assert obj["type"] == event.event
        assert "\n" not in event.data  # one data line per event (§11.4)
    start, chunks, complete = objects[0], objects[1:-1], objects[-1]
    assert start["request_id"] == complete["request_id"] == "sse-1"
    assert [c["seq"] for c in chunks] == list(range(len(chunks))) == list(range(complete["chunks"]))
    audio = b"".join(decode_base64_strict(c["data"]) for c in chunks)  # each event decoded on its own
    assert len(audio) == complete["audio_bytes"]
    assert complete["total_duration_s"] == pytest.approx(expected_samples(TEXT) / SAMPLE_RATE)
    if fmt == "pcm":
        assert start["encoding"] == "pcm_s16le" and len(audio) == 2 * expected_samples(TEXT)
    elif fmt == "wav":
        assert parse_wav_header(audio).data_bytes is None and len(audio) == 44 + 2 * expected_samples(TEXT)
        # The first chunk says the header rides at its front; no other chunk says anything (§11.4).
        assert chunks[0]["header_bytes"] == 44 and all("header_bytes" not in c for c in chunks[1:])
        assert len(decode_base64_strict(chunks[0]["data"])) > 44  # header and PCM share the chunk
    else:
        assert start["encoding"] == "mp3"
        assert_mp3(audio, SAMPLE_RATE, expected_samples(TEXT))
    assert [w["word"] for w in complete["words"]][:2] == ["Hello", "there."]
    if fmt != "wav":
        assert all("header_bytes" not in c for c in chunks)
    assert complete["elapsed_s"] == round(complete["elapsed_s"], 3)  # to the millisecond (§5.3)


def assert_mp3(data: bytes, sample_rate: int, samples: int) -> None:
    """An MPEG audio stream of about ``samples`` samples (decoded with PyAV when it is installed)."""
    assert data[0] == 0xFF and data[1] & 0xE0 == 0xE0, "starts with an MPEG frame sync (§11.5: no ID3 tag)"
    av = pytest.importorskip("av")
    with av.open(io.BytesIO(data), format="mp3") as container:
        decoded = sum(frame.samples for frame in container.decode(audio=0))
        assert container.streams.audio[0].rate == sample_rate
    assert samples <= decoded <= samples + sample_rate  # LAME adds encoder delay and padding


def test_mp3_stream(serve):
    server = serve(ToneBackend())
    response = post(server, text=TEXT, format="mp3", sample_rate=22050)
    assert (response.status_code, response.headers["content-type"]) == (200, "audio/mpeg")
    assert_mp3(response.content, 22050, round(expected_samples(TEXT) * 22050 / SAMPLE_RATE))


def test_aws_sample_body_shape(serve):
    """REFERENCE.md §3: {text, voice, speed, stream} and request_timestamp; stale → 408 request_stale."""
    server = serve(ToneBackend())
    ok = post(
        server, text="Hello there.", voice="af_heart", speed=1.0, stream=True, request_timestamp=time.time()
    )
    assert ok.status_code == 200 and ok.content[:4] == b"RIFF"
    stale = post(server, text="Hello there.", request_timestamp=time.time() - 120)
    assert stale.status_code == 408 and stale.json()["error"]["code"] == "request_stale"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": ""}, 400, "text_required"),
        ({"voice": "af_heart"}, 400, "text_required"),
        ({"text": "Hi.", "voice": "xx_unknown"}, 400, "invalid_voice"),
        ({"text": "Hi.", "speed": 0.1}, 400, "invalid_speed"),
        ({"text": "Hi.", "sample_rate": 11025}, 400, "invalid_sample_rate"),
        ({"text": "Hi.", "format": "ogg"}, 400, "unsupported_format"),
        ({"text": "Hi.", "transport": "carrier-pigeon"}, 400, "invalid_field"),
        ({"text": "Hi.", "stream": "yes"}, 400, "invalid_field"),
        ({"text": "x" * 10_001}, 413, "text_too_long"),
        ({"text": "x" * 70_000}, 413, "message_too_large"),
    ],
)
def test_errors_before_streaming(serve, body, status, code):
    server = serve(ToneBackend())
    response = post(server, **body)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    schemas.validate("http_error", response.json())
    assert response.json()["error"]["code"] == code


def test_malformed_bodies(serve):
    server = serve(ToneBackend())
    for content, code in (
        (b"{not json", "invalid_json"),
        (b"[]", "not_an_object"),
        (b"\xff", "invalid_utf8"),
    ):
        response = httpx.post(f"{server.http_url}/invocations", content=content, timeout=GUARD_S)
        assert (response.status_code, response.json()["error"]["code"]) == (400, code)


def test_busy_server_answers_503(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, limits=Limits(max_invocations=1))

    async def scenario():
        async with httpx.AsyncClient(timeout=GUARD_S) as client:
            async with client.stream(
                "POST", f"{server.http_url}/invocations", json={"text": "Held."}
            ) as held:
                assert held.status_code == 200
                busy = await client.post(f"{server.http_url}/invocations", json={"text": "Second."})
                assert (busy.status_code, busy.json()["error"]["code"]) == (503, "queue_full")
                backend.segment_permits.release(1)
                assert len(await held.aread()) == 44 + 2 * expected_samples("Held.")
        wait_for(lambda: server.runtime.invocations == 0, what="the slot to be released")
        backend.segment_permits.release(1)
        async with httpx.AsyncClient(timeout=GUARD_S) as client:
            again = await client.post(f"{server.http_url}/invocations", json={"text": "Free."})
            assert again.status_code == 200

    run(scenario())


def test_failure_mid_stream(serve):
    server = serve(ToneBackend())
    sse = post(server, text=f"Fine. Then {FAIL_MARKER} now.", transport="sse")
    decoder = SSEDecoder()
    events = decoder.feed(sse.content) + decoder.close()
    assert [e.event for e in events] == ["synthesis_start", "audio_chunk", "error"]
    error = json.loads(events[-1].data)
    schemas.validate("sse_error", error)
    assert error["code"] == "internal_error"
    # A binary body is cut short: the client sees an incomplete chunked response.
    with pytest.raises(httpx.RemoteProtocolError):
        post(server, text=f"Fine. Then {FAIL_MARKER} now.")


def test_client_disconnect_mid_stream_stops_synthesis(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend)

    async def scenario():
        loop = asyncio.get_running_loop()
        body = {"text": "One. Two. Three. Four.", "format": "pcm"}
        async with httpx.AsyncClient(timeout=GUARD_S) as client:
            async with client.stream("POST", f"{server.http_url}/invocations", json=body) as response:
                assert await loop.run_in_executor(None, backend.entered.acquire, True, GUARD_S)
                backend.segment_permits.release(1)  # segment 1 only
                async for _ in response.aiter_bytes():
                    break  # its audio arrived: hang up
        await loop.run_in_executor(None, _release_and_wait, backend, server)

    run(scenario())
    # Segment 1, plus at most the one that was running when the client left: never all four.
    assert 1 <= backend.segments_produced <= 2


def _release_and_wait(backend: ToneBackend, server) -> None:
    wait_for(lambda: server.runtime.invocations == 0, what="the response's slot to be released")
    backend.segment_permits.release(1)  # let a segment held at the disconnect finish
    wait_for(lambda: backend.open_generators == 0, what="the generator to be closed")


def test_http_layer_errors_have_the_one_error_shape(serve):
    """PROTOCOL.md §11.6: a path or method the server does not serve answers in the one error shape."""
    server = serve(ToneBackend())
    missing = httpx.get(f"{server.http_url}/nowhere", timeout=GUARD_S)
    wrong_method = httpx.get(f"{server.http_url}/invocations", timeout=GUARD_S)
    for response, status, code in ((missing, 404, "not_found"), (wrong_method, 405, "method_not_allowed")):
        assert response.status_code == status
        assert response.headers["content-type"] == "application/json"
        schemas.validate("http_error", response.json())
        error = response.json()["error"]
        assert error["code"] == code and not error["message"].startswith(code)
    assert missing.json()["error"]["message"] == "no route serves GET /nowhere"
    assert "allow" in {k.lower() for k in wrong_method.headers}  # RFC 9110 §15.5.6


def test_refusals_never_repeat_the_code_in_the_message(serve):
    server = serve(ToneBackend())
    response = post(server, text="Hi.", voice="nobody")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_voice"
    assert not response.json()["error"]["message"].startswith("invalid_voice")

"""OpenAI-compatible speech (reference_server/openai_speech.py): the official ``openai`` client speaks through
the real server, and every refusal on ``/v1`` is OpenAI's error shape.

The client tests run the official Python client against the real entry command with real Kokoro
(``kokoro_server``: ``python -m reference_server`` on a loopback port, where the routes are on by default)
and decode what it streamed to a file. The refusals and the setting are tested against the tone double
(fast and deterministic); the routes' code is the same.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import wave

import av
import httpx
import numpy as np
import openai
import pytest
from tone_backend import ToneBackend, expected_samples

from reference_server import openai_speech
from reference_server.settings import Settings, SettingsError, load_settings

TEXT = "Hello there. This is a test of the speech route. It has three sentences."


def _client(base_url: str) -> openai.OpenAI:
    # Any key: the routes check none (they are for the user's own machine). No retries: a refusal is final.
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="local", max_retries=0, timeout=120)


def _decode(path) -> tuple[np.ndarray, int]:
    """The file's audio as float samples in [-1, 1] and its rate (FFmpeg's demuxers and decoders)."""
    with av.open(str(path)) as container:
        frames = [f.to_ndarray().astype(np.float64).reshape(-1) for f in container.decode(audio=0)]
        rate = container.streams.audio[0].codec_context.sample_rate
    samples = np.concatenate(frames)
    if np.abs(samples).max() > 1.5:  # integer sample formats
        samples = samples / 32768.0
    return samples, rate


def _assert_speech(samples: np.ndarray, rate: int, text: str) -> None:
    """Plausible speech of ``text``: 24 kHz, a duration of 8-25 characters a second (people speak about
    15), loud enough in most 50 ms windows, with the pauses speech has."""
    assert rate == openai_speech.SAMPLE_RATE
    seconds = len(samples) / rate
    assert len(text) / 25 < seconds < len(text) / 8, seconds
    windows = samples[: len(samples) // 1200 * 1200].reshape(-1, 1200)
    rms = np.sqrt((windows**2).mean(axis=1))
    voiced = rms > 0.02
    assert voiced.mean() > 0.4, f"only {voiced.mean():.0%} of 50 ms windows are voiced"
    assert (~voiced).any(), "no pause at all: not speech"


# --- the official client against the real server (done-when of issue #28) -------------------------------


def test_the_openai_client_streams_speech_to_a_file(kokoro_server, tmp_path):
    client = _client(kokoro_server.http_url)
    target = tmp_path / "speech.mp3"
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="mp3"
    ) as response:
        assert response.http_response.headers["content-type"] == "audio/mpeg"
        # Streamed: chunked, no length known up front.
        assert response.http_response.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.http_response.headers
        response.stream_to_file(target)
    assert target.stat().st_size > 5_000
    samples, rate = _decode(target)
    _assert_speech(samples, rate, TEXT)


def test_audio_arrives_in_pieces_before_the_whole_text_is_spoken(kokoro_server):
    client = _client(kokoro_server.http_url)
    with client.audio.speech.with_streaming_response.create(
        model="kokoro", voice="af_heart", input=TEXT, response_format="pcm"
    ) as response:
        pieces = [chunk for chunk in response.iter_bytes() if chunk]
    pcm = b"".join(pieces)
    assert len(pieces) > 1, "one piece: the body was not streamed"
    assert len(pcm) % 2 == 0
    samples = np.frombuffer(pcm, "<i2").astype(np.float64) / 32768.0
    _assert_speech(samples, 24_000, TEXT)


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("wav", "wav"), ("opus", "ogg"), ("flac", "flac"), ("aac", "aac")]
)
def test_every_format_decodes_to_the_same_speech(kokoro_server, tmp_path, fmt, suffix):
    client = _client(kokoro_server.http_url)
    target = tmp_path / f"speech.{suffix}"
    text = "Every format carries the same voice."
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="af_heart", input=text, response_format=fmt, instructions="Cheerful."
    ) as response:
        response.stream_to_file(target)
    if fmt == "wav":  # the streamed WAV's sizes are 0xFFFFFFFF (PROTOCOL.md §11.2)
        data = target.read_bytes()
        assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff"
        with wave.open(io.BytesIO(data[:40] + (len(data) - 44).to_bytes(4, "little") + data[44:])) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
    samples, rate = _decode(target)
    if fmt == "opus":  # Opus decodes at 48 kHz; compare the duration at 24 kHz
        samples, rate = samples[::2], 24_000
    _assert_speech(samples, rate, text)


def test_a_speed_is_spoken_faster_and_clamped_to_kokoros_range(kokoro_server):
    client = _client(kokoro_server.http_url)
    text = "Speed changes how long this sentence takes."
    lengths = {}
    for speed in (1.0, 2.0, 4.0):
        response = client.audio.speech.create(
            model="tts-1", voice="af_heart", input=text, response_format="pcm", speed=speed
        )
        assert response.response.headers["x-kokoro-speed"] == f"{min(speed, 2.0):g}"
        lengths[speed] = len(response.content)
    assert lengths[2.0] < 0.75 * lengths[1.0]
    assert lengths[4.0] == lengths[2.0]  # clamped: the same speed, the same audio (deterministic model)


def test_the_models_and_the_voices(kokoro_server):
    client = _client(kokoro_server.http_url)
    assert [m.id for m in client.models.list()] == list(openai_speech.MODELS)
    assert client.models.retrieve("tts-1").owned_by == "kokoro-bidi-tts"
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("whisper-1")
    assert caught.value.body["code"] == "model_not_found"
    voices = httpx.get(f"{kokoro_server.http_url}/v1/audio/voices", timeout=10).json()
    assert len(voices["voices"]) == 54 and "af_heart" in voices["voices"]
    assert voices["openai_voices"] == openai_speech.OPENAI_VOICES  # every mapped voice exists in Kokoro


# --- refusals: OpenAI's error shape, each parameter named ----------------------------------------------


def _error(response: httpx.Response, status: int, param: str | None, code: str | None) -> str:
    assert response.status_code == status, response.text[:300]
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    assert (error["param"], error["code"]) == (param, code)
    assert error["message"]
    return error["message"]


GOOD = {"model": "tts-1", "input": "Hello there.", "voice": "af_heart", "response_format": "wav"}


@pytest.mark.parametrize(
    ("change", "status", "param", "code"),
    [
        ({"model": "tts-2"}, 404, "model", "model_not_found"),
        ({"model": None}, 400, "model", "missing_required_parameter"),
        ({"model": ["tts-1"]}, 400, "model", "invalid_type"),
        ({"input": None}, 400, "input", "missing_required_parameter"),
        ({"input": 3}, 400, "input", "invalid_type"),
        ({"input": "   "}, 400, "input", "text_required"),
        ({"input": "word " * 2001}, 413, "input", "text_too_long"),
        ({"voice": None}, 400, "voice", "missing_required_parameter"),
        ({"voice": "zz_nobody"}, 400, "voice", "invalid_voice"),
        ({"voice": "alloy"}, 400, "voice", "invalid_voice"),  # af_alloy: not a voice of the tone double
        ({"voice": 7}, 400, "voice", "invalid_type"),
        ({"response_format": "ogg"}, 400, "response_format", "invalid_value"),
        ({"speed": 0.2}, 400, "speed", "invalid_value"),
        ({"speed": 4.5}, 400, "speed", "invalid_value"),
        ({"speed": "fast"}, 400, "speed", "invalid_type"),
        ({"stream_format": "sse"}, 400, "stream_format", "invalid_value"),
    ],
)
def test_each_bad_parameter_is_refused_by_name(serve, change, status, param, code):
    server = serve(ToneBackend())
    body = {**GOOD, **change}
    body = {k: v for k, v in body.items() if v is not None}
    message = _error(
        httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=10), status, param, code
    )
    assert "word word" not in message  # never the request's text (PROTOCOL.md §13)
    if code == "invalid_voice":  # this API's own voice list, not the bidi session's describe
        assert "GET /v1/audio/voices lists them" in message and "describe" not in message, message


def test_a_body_that_is_not_json_or_too_large_is_refused(serve):
    server = serve(ToneBackend())
    url = f"{server.http_url}/v1/audio/speech"
    _error(httpx.post(url, content=b"{not json", timeout=10), 400, None, "invalid_json")
    _error(httpx.post(url, content=b"[1]", timeout=10), 400, None, "not_an_object")
    _error(httpx.post(url, content=b" " * 70_000, timeout=10), 413, None, "message_too_large")


def test_unknown_paths_and_methods_under_v1_answer_in_openais_shape_and_elsewhere_in_the_protocols(serve):
    server = serve(ToneBackend())
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        _error(client.get("/v1/audio/speech"), 405, None, "method_not_allowed")
        _error(client.get("/v1/embeddings"), 404, None, "not_found")
        protocol_shape = client.get("/nowhere").json()
        assert protocol_shape == {"error": {"code": "not_found", "message": "no route serves GET /nowhere"}}


def test_a_busy_server_refuses_with_503(serve):
    server = serve(ToneBackend())
    runtime = server.runtime
    taken = 0
    while runtime.try_open_invocation():  # every HTTP response slot taken (max_invocations, §10)
        taken += 1
    try:
        response = httpx.post(f"{server.http_url}/v1/audio/speech", json=GOOD, timeout=10)
        _error(response, 503, None, "queue_full")
    finally:
        for _ in range(taken):
            runtime.close_invocation()


def test_the_tone_double_speaks_through_the_client_with_a_blend_and_the_right_length(serve, tmp_path):
    server = serve(ToneBackend(blends=True))
    client = _client(server.http_url)
    target = tmp_path / "tone.wav"
    with client.audio.speech.with_streaming_response.create(
        model="kokoro",
        voice="af_heart(2)+af_bella(1)",
        input="One two three.",
        response_format="pcm",
        speed=1.0,
    ) as response:
        response.stream_to_file(target)
    assert len(target.read_bytes()) == 2 * expected_samples("One two three.")


def test_the_openai_client_raises_the_servers_refusal(serve):
    server = serve(ToneBackend())
    client = _client(server.http_url)
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="tts-1", voice="zz_nobody", input="Hi.")
    assert caught.value.body["param"] == "voice"
    assert caught.value.body["code"] == "invalid_voice"


# --- the setting --------------------------------------------------------------------------------------


def test_served_by_default_on_loopback_only():
    assert Settings().serves_openai
    assert Settings(host="::1").serves_openai
    assert not Settings(host="0.0.0.0").serves_openai  # the containers


@pytest.mark.parametrize(
    ("argv", "environ", "served"),
    [
        (["--host", "0.0.0.0"], {"KOKORO_OPENAI": "1"}, True),
        (["--host", "0.0.0.0", "--openai", "on"], {}, True),
        (["--openai", "off"], {}, False),
        ([], {"KOKORO_OPENAI": "no"}, False),
        (["--openai", "auto"], {"KOKORO_OPENAI": "0"}, True),  # a flag wins over the environment
    ],
)
def test_the_setting_turns_it_on_and_off(argv, environ, served):
    assert load_settings(argv, environ=environ).serves_openai is served


def test_a_bad_value_is_refused_by_name():
    with pytest.raises(SettingsError, match="KOKORO_OPENAI"):
        load_settings([], environ={"KOKORO_OPENAI": "sometimes"})
    with pytest.raises(SettingsError, match="openai"):
        Settings(openai="maybe")


@pytest.mark.parametrize(("argv", "environ"), [(["--openai", "maybe"], {}), ([], {"KOKORO_OPENAI": "maybe"})])
def test_the_command_line_says_one_line_and_exits_2(argv, environ):
    done = subprocess.run(
        [sys.executable, "-m", "reference_server", *argv],
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "openai" in last.lower() and "maybe" in last


def test_off_means_no_routes(serve):
    server = serve(ToneBackend(), openai="off")
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=GOOD, timeout=10)
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": "no route serves POST /v1/audio/speech",
    }

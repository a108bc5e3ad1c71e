"""POST /invocations formats beyond WAV/PCM (PROTOCOL.md §11.3, §11.4, §11.7): each streams chunk by chunk
and decodes with FFmpeg's decoders (through PyAV) after any split of the body.

The encoder tests need no server; the route tests use the tone TEST DOUBLE backend (the model is not the
point here).
"""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import GUARD_S
from tone_backend import SAMPLE_RATE, ToneBackend, expected_samples

from conformance.engine.bodies import PartsReader  # the reader the suite feeds FFmpeg with
from protocol.encodings import encode_pcm16
from protocol.sse import SSEDecoder, decode_base64_strict
from reference_server.encoders import AV_FORMATS, MEDIA_TYPES, FormatEncoder, available_formats

av = pytest.importorskip("av")

DEMUXERS = {"opus": "ogg", "flac": "flac", "aac": "aac", "mp3": "mp3"}
CODECS = {"opus": "opus", "flac": "flac", "aac": "aac", "mp3": "mp3float"}  # FFmpeg decoder names
FORMATS = ["opus", "flac", "aac", "mp3"]


def decode(parts: list[bytes], fmt: str) -> tuple[np.ndarray, int]:
    """Decode a body given as parts with FFmpeg's demuxer and decoder: (mono float samples, rate)."""
    with av.open(PartsReader(parts), mode="r", format=DEMUXERS[fmt]) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name == CODECS[fmt]
        frames = [
            f.to_ndarray().astype(np.float64).reshape(f.layout.nb_channels, -1)[0]
            for f in container.decode(stream)
        ]
        rate = stream.codec_context.sample_rate
    if not frames:
        return np.zeros(0), rate
    samples = np.concatenate(frames)
    if np.issubdtype(frames[0].dtype, np.integer) or np.abs(samples).max() > 2:
        samples = samples / 32768.0
    return samples, rate


def parse_and_decode(parts: list[bytes], fmt: str) -> np.ndarray:
    """Decode a bare frame stream (MP3) as an incremental client does: FFmpeg's parser finds the frames in
    whatever pieces arrive, the decoder decodes each. (FFmpeg's MP3 *demuxer* checks several frames ahead
    when it opens, and a first read of a few bytes makes it skip the first frame; the parser has no such
    look-ahead.)"""
    context = av.CodecContext.create(CODECS[fmt], "r")
    frames = []
    for part in [*parts, None]:
        for packet in context.parse(part):
            frames += [f.to_ndarray().astype(np.float64).reshape(-1) for f in context.decode(packet)]
    frames += [f.to_ndarray().astype(np.float64).reshape(-1) for f in context.decode(None)]
    return np.concatenate(frames) if frames else np.zeros(0)


def tone(seconds: float, rate: int) -> bytes:
    t = np.arange(round(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 330 * t) * 0.3 * 32767).astype("<i2").tobytes()


def encode(fmt: str, rate: int, pieces: list[bytes], *, stream: bool = True) -> list[bytes]:
    encoder = FormatEncoder(fmt, rate, stream=stream)
    return [*(encoder.encode(p) for p in pieces), encoder.flush()]


def test_this_install_offers_every_format():
    assert set(AV_FORMATS) == {"opus", "flac", "aac"}
    assert available_formats() == ("wav", "pcm", "mp3", "opus", "flac", "aac")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rate", [8000, 22050, 24000])
def test_each_format_streams_and_decodes_to_the_audio(fmt, rate):
    pcm = tone(1.5, rate)
    step = rate // 4 * 2  # 0.25 s of whole samples
    pieces = [pcm[i : i + step] for i in range(0, len(pcm), step)]
    out = encode(fmt, rate, pieces)
    # Streaming: bytes leave with the first pieces, long before the end, and that prefix decodes alone.
    assert sum(map(len, out[:3])) > 0
    early, _ = decode(out[:3], fmt)
    assert len(early) > 0
    samples, decoded_rate = decode(out, fmt)
    if fmt == "opus":
        assert decoded_rate == 48000  # Opus decodes at 48 kHz whatever it was fed
    else:
        assert decoded_rate == rate
    seconds = len(samples) / decoded_rate
    # Encoder delay and padding at most: AAC primes 1,024 samples and pads its last 1,024-sample frame.
    assert 1.45 <= seconds <= 1.5 + max(0.15, 2048 / rate + 0.01)
    original = np.frombuffer(pcm, "<i2") / 32768.0
    level = np.sqrt(np.mean(samples**2)) / np.sqrt(np.mean(original**2))
    assert 0.8 < level < 1.25
    if fmt == "flac":
        assert np.array_equal(np.round(samples * 32768).astype(np.int64), (original * 32768).astype(np.int64))


_BODIES: dict[str, bytes] = {}


def body(fmt: str) -> bytes:
    if fmt not in _BODIES:
        pcm = tone(0.6, SAMPLE_RATE)
        _BODIES[fmt] = b"".join(encode(fmt, SAMPLE_RATE, [pcm[:9600], pcm[9600:]]))
    return _BODIES[fmt]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FORMATS), st.lists(st.integers(0, 10**6), max_size=12))
def test_every_format_decodes_the_same_after_any_split_of_the_body(fmt, cuts):
    data = body(fmt)
    points = sorted({c % (len(data) + 1) for c in cuts})
    parts = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    if fmt == "mp3":
        whole, split = parse_and_decode([data], fmt), parse_and_decode(parts, fmt)
    else:  # the container's demuxer, fed the parts with short reads
        whole, split = decode([data], fmt)[0], decode(parts, fmt)[0]
    assert len(whole) > 0
    assert np.array_equal(whole, split)


def test_a_non_streamed_flac_states_its_length():
    pcm = tone(0.5, 16000)
    data = b"".join(encode("flac", 16000, [pcm], stream=False))
    streamed = b"".join(encode("flac", 16000, [pcm]))

    # STREAMINFO (after "fLaC" and the 4-byte block header): total samples in bits 108-143.
    def total_samples(flac: bytes) -> int:
        info = flac[8:42]
        return int.from_bytes(info[13:18], "big") & ((1 << 36) - 1)

    assert (total_samples(data), total_samples(streamed)) == (8000, 0)  # 0: unknown, as a stream may say


def test_a_streamed_flac_header_carries_no_padding_block(capfd):
    """The header is STREAMINFO and a VORBIS_COMMENT, then audio: no 8 KiB PADDING block (type 1) before
    the first frame, and no option the muxer left unused (FFmpeg prints "Some options were not used")."""
    data = b"".join(encode("flac", 24000, [tone(0.25, 24000)]))
    assert data[:4] == b"fLaC"
    at, kinds = 4, []
    while True:
        head = data[at]
        kinds.append(head & 0x7F)
        at += 4 + int.from_bytes(data[at + 1 : at + 4], "big")
        if head & 0x80:
            break
    assert 1 not in kinds and at < 200, (kinds, at)
    assert "not used" not in capfd.readouterr().err


# --- the route --------------------------------------------------------------------------------------------


def post(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/invocations", json=body, timeout=GUARD_S)


TEXT = "One two three. Four five."


@pytest.mark.parametrize("fmt", ["opus", "flac", "aac"])
def test_invocations_answer_each_format_streamed_and_whole(serve, fmt):
    server = serve(ToneBackend())
    expected_s = expected_samples(TEXT) / SAMPLE_RATE
    with httpx.stream(
        "POST", f"{server.http_url}/invocations", json={"text": TEXT, "format": fmt}, timeout=GUARD_S
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == MEDIA_TYPES[fmt]
        assert response.headers.get("transfer-encoding") == "chunked"
        parts = list(response.iter_raw())
    samples, rate = decode(parts, fmt)
    assert abs(len(samples) / rate - expected_s) < 0.15
    whole = post(server, text=TEXT, format=fmt, stream=False)
    assert whole.status_code == 200 and int(whole.headers["content-length"]) == len(whole.content)
    samples, rate = decode([whole.content], fmt)
    assert abs(len(samples) / rate - expected_s) < 0.15


@pytest.mark.parametrize("fmt", ["opus", "flac", "aac"])
def test_sse_carries_the_format_in_base64_chunks(serve, fmt):
    server = serve(ToneBackend())
    response = post(server, text=TEXT, format=fmt, transport="sse", sample_rate=16000)
    decoder = SSEDecoder()
    events = [(e.event, json.loads(e.data)) for e in decoder.feed(response.content)]
    start, *chunks, complete = (obj for _, obj in events)
    assert (start["format"], start["encoding"], start["sample_rate"]) == (fmt, fmt, 16000)
    assert [c["seq"] for c in chunks] == list(range(len(chunks))) and chunks
    assert all("header_bytes" not in c for c in chunks)
    data = [decode_base64_strict(c["data"]) for c in chunks]
    assert complete["audio_bytes"] == sum(map(len, data)) and complete["chunks"] == len(chunks)
    samples, rate = decode(data, fmt)
    assert abs(len(samples) / rate - expected_samples(TEXT) / SAMPLE_RATE) < 0.15


@pytest.mark.parametrize("name", ["pcm_mulaw", "pcm_alaw"])
def test_raw_g711_over_http(serve, name):
    server = serve(ToneBackend())
    linear = post(server, text=TEXT, format="pcm", sample_rate=8000)
    g711 = post(server, text=TEXT, format="pcm", sample_rate=8000, encoding=name)
    assert g711.status_code == 200
    kind = "PCMU" if name == "pcm_mulaw" else "PCMA"
    assert g711.headers["content-type"] == f"audio/{kind};rate=8000"
    assert g711.content == encode_pcm16(linear.content, name)
    sse = post(server, text=TEXT, format="pcm", sample_rate=8000, encoding=name, transport="sse")
    events = [json.loads(e.data) for e in SSEDecoder().feed(sse.content)]
    assert events[0]["encoding"] == name
    assert b"".join(base64.b64decode(e["data"]) for e in events[1:-1]) == g711.content


def test_refusals(serve):
    server = serve(ToneBackend())
    for body_, code in [
        ({"text": TEXT, "format": "ogg"}, "unsupported_format"),
        ({"text": TEXT, "format": "wav", "encoding": "pcm_mulaw"}, "unsupported_encoding"),
        ({"text": TEXT, "format": "opus", "encoding": "pcm_alaw"}, "unsupported_encoding"),
        ({"text": TEXT, "format": "pcm", "encoding": "g722"}, "unsupported_encoding"),
    ]:
        response = post(server, **body_)
        assert (response.status_code, response.json()["error"]["code"]) == (400, code)

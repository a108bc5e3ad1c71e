"""The body decoders (conformance.engine.bodies) and audio checks (conformance.engine.audio): good bodies
pass, bad ones are caught, whatever the split."""

from __future__ import annotations

import base64
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.engine.audio import check_speech, duration_bounds, roughness
from conformance.engine.bodies import decode_pcm, decode_sse, decode_wav
from conformance.mutants.base import ToneSynthesizer
from protocol.pcm import wav_header
from protocol.sse import encode_event

TEXT = "Hello there."
PCM = ToneSynthesizer().render(TEXT, "af_heart", 1.0, 8000)


def sse_body(pcm: bytes = PCM, *, chunk: int = 3000, **overrides: object) -> bytes:
    data = wav_header(8000, data_bytes=None) + pcm
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    start = {
        "type": "synthesis_start",
        "request_id": "h1",
        "sample_rate": 8000,
        "encoding": "pcm_s16le",
        "channels": 1,
        "format": "wav",
    }
    body = encode_event(start, event="synthesis_start")
    for seq, piece in enumerate(pieces):
        event = {
            "type": "audio_chunk",
            "seq": overrides.get("seq_offset", 0) + seq,  # type: ignore[operator]
            "data": base64.b64encode(piece).decode(),
        }
        body += encode_event(event, event="audio_chunk")
    complete = {
        "type": "synthesis_complete",
        "request_id": "h1",
        "status": "completed",
        "audio_bytes": overrides.get("audio_bytes", len(data)),
        "chunks": len(pieces),
        "total_duration_s": len(pcm) / 16000,
        "elapsed_s": 0.1,
    }
    return body + encode_event(complete, event="synthesis_complete")


@settings(max_examples=60, derandomize=True, database=None)
@given(st.lists(st.integers(0, 20_000), max_size=30))
def test_sse_decodes_the_same_under_any_split(points: list[int]) -> None:
    body = sse_body()
    bounds = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    decoded = decode_sse(body[a:b] for a, b in itertools.pairwise(bounds))
    assert decoded.types[0] == "synthesis_start" and decoded.types[-1] == "synthesis_complete"
    assert decode_wav([decoded.audio], sample_rate=8000, streamed=True) == PCM


@pytest.mark.parametrize(
    "body",
    [
        sse_body().replace(b"\n", b"\r\n"),  # CRLF: a WHATWG decoder reads it, §11.4 forbids it
        sse_body(seq_offset=1),  # seq does not start at 0
        sse_body(audio_bytes=5),  # synthesis_complete disagrees with the chunks
        sse_body()[:-1],  # ends inside the last event
        b": comment\n\n" + sse_body(),  # a comment line
    ],
    ids=["crlf", "seq", "audio-bytes", "truncated", "comment"],
)
def test_bad_sse_bodies_are_caught(body: bytes) -> None:
    with pytest.raises(AssertionError):
        decode_sse([body])


def test_wav_headers_streamed_and_exact() -> None:
    assert decode_wav([wav_header(8000, data_bytes=None) + PCM], sample_rate=8000, streamed=True) == PCM
    assert decode_wav([wav_header(8000, data_bytes=len(PCM)) + PCM], sample_rate=8000, streamed=False) == PCM
    with pytest.raises(AssertionError):  # exact sizes where a stream must announce 0xFFFFFFFF
        decode_wav([wav_header(8000, data_bytes=len(PCM)) + PCM], sample_rate=8000, streamed=True)
    with pytest.raises(AssertionError):  # the wrong rate in the header
        decode_wav([wav_header(16000, data_bytes=None) + PCM], sample_rate=8000, streamed=True)


def test_pcm_must_end_on_a_whole_sample() -> None:
    assert decode_pcm([PCM[:3], PCM[3:]]) == PCM
    with pytest.raises(AssertionError):
        decode_pcm([PCM + b"\x00"])


def test_speech_checks_catch_byte_order_silence_and_length() -> None:
    assert check_speech(PCM, 8000, TEXT) == []
    swapped = np.frombuffer(PCM, dtype="<i2").byteswap().tobytes()
    assert roughness(swapped) > 1.0 and check_speech(swapped, 8000, TEXT)
    assert check_speech(b"\x00\x00" * 8000, 8000, TEXT)
    low, high = duration_bounds(TEXT)
    assert check_speech(PCM[: int(low * 8000)], 8000, TEXT)  # cut well short of the text
    assert check_speech(PCM * 10, 8000, TEXT) and high < 10 * len(PCM) / 16000

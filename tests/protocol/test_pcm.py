"""Tests for protocol.pcm: conversion, resampling, sample alignment, WAV headers."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.pcm import (
    SampleAligner,
    StreamResampler,
    WavHeader,
    duration_s,
    float_to_pcm16,
    parse_wav_header,
    pcm16_to_float,
    resample,
    resample_pcm16,
    wav_header,
)

PROPERTY = settings(max_examples=200, deadline=None)

# --- float <-> PCM16 ---------------------------------------------------------------------------------


def test_float_to_pcm16_scaling_clipping_and_byte_order() -> None:
    x = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, np.nan, np.inf, -np.inf, 258 / 32768], np.float32)
    expected = [0, 32767, -32768, 16384, -16384, 32767, -32768, 0, 32767, -32768, 258]
    out = float_to_pcm16(x)
    assert out == struct.pack(f"<{len(expected)}h", *expected)
    assert out[-2:] == b"\x02\x01"  # little-endian on every host


def test_float_to_pcm16_ignores_input_byte_order_and_rounds_to_nearest() -> None:
    big_endian = np.array([0.25, -0.75], dtype=">f4")
    assert float_to_pcm16(big_endian) == float_to_pcm16(np.array([0.25, -0.75], dtype="<f4"))
    assert float_to_pcm16([0.4 / 32768, 0.6 / 32768, -0.6 / 32768]) == struct.pack("<3h", 0, 1, -1)


def test_multichannel_is_interleaved() -> None:
    stereo = np.array([[0.5, -0.5], [0.25, -0.25]], np.float32)
    assert float_to_pcm16(stereo) == struct.pack("<4h", 16384, -16384, 8192, -8192)


@PROPERTY
@given(st.lists(st.integers(-32768, 32767), max_size=64))
def test_pcm_float_pcm_is_exact(values: list[int]) -> None:
    data = struct.pack(f"<{len(values)}h", *values)
    floats = pcm16_to_float(data)
    assert floats.dtype == np.float32
    assert np.all(floats >= -1.0) and np.all(floats < 1.0)
    assert float_to_pcm16(floats) == data


@PROPERTY
@given(st.lists(st.floats(-1.0, 32767 / 32768, width=32), max_size=64))
def test_float_pcm_float_error_is_half_a_step(values: list[float]) -> None:
    x = np.array(values, np.float32)
    back = pcm16_to_float(float_to_pcm16(x))
    assert np.all(np.abs(back - x) <= 0.5 / 32768 + 1e-9)


def test_pcm16_to_float_rejects_partial_samples() -> None:
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        pcm16_to_float(b"\x00\x01\x02")


# --- resampling --------------------------------------------------------------------------------------


def _sine(freq: float, rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.mark.parametrize("to_rate", [8000, 16000, 22050])
def test_resample_keeps_a_tone(to_rate: int) -> None:
    x = _sine(440.0, 24000, 1.0)
    y = resample(x, 24000, to_rate)
    assert y.dtype == np.float32
    assert abs(len(y) - to_rate) <= 1
    reference = _sine(440.0, to_rate, 1.0)[: len(y)]
    middle = slice(to_rate // 10, -to_rate // 10)  # away from the filter's start-up and tail
    assert np.max(np.abs(y[middle] - reference[middle])) < 1e-3


def test_resample_same_rate_copies_and_bad_rates_fail() -> None:
    x = _sine(100.0, 24000, 0.01)
    y = resample(x, 24000, 24000)
    assert np.array_equal(x, y) and y is not x
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            resample(x, bad, 16000)
        with pytest.raises(ValueError):
            resample(x, 24000, bad)


def test_resample_pcm16() -> None:
    pcm = float_to_pcm16(_sine(440.0, 24000, 0.5))
    out = resample_pcm16(pcm, 24000, 16000)
    assert abs(len(out) // 2 - 8000) <= 1
    expected = float_to_pcm16(_sine(440.0, 16000, 0.5))[: len(out)]
    got = np.frombuffer(out, "<i2").astype(int)[1000:-1000]
    want = np.frombuffer(expected, "<i2").astype(int)[1000:-1000]
    assert np.max(np.abs(got - want)) < 40  # about 1e-3 of full scale
    assert resample_pcm16(pcm, 24000, 24000) == pcm
    with pytest.raises(ValueError):
        resample_pcm16(b"\x00", 24000, 16000)


@pytest.mark.parametrize("to_rate", [16000, 24000])
def test_stream_resampler_matches_one_shot(to_rate: int) -> None:
    x = np.random.default_rng(7).standard_normal(24000).astype(np.float32) * 0.1
    stream = StreamResampler(24000, to_rate)
    pieces = [stream.feed(x[i : i + 1234]) for i in range(0, len(x), 1234)]
    pieces.append(stream.flush())
    y = np.concatenate(pieces)
    assert np.allclose(y, resample(x, 24000, to_rate), atol=1e-5)
    with pytest.raises(RuntimeError):
        stream.feed(x)
    with pytest.raises(RuntimeError):
        stream.flush()


# --- sample alignment --------------------------------------------------------------------------------


@st.composite
def split_stream(draw, sample_width: int = 2):
    data = draw(st.binary(max_size=200))
    data = data[: len(data) - len(data) % sample_width]
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return data, pieces


@PROPERTY
@given(split_stream())
def test_any_split_reassembles_whole_samples(case: tuple[bytes, list[bytes]]) -> None:
    data, pieces = case
    aligner = SampleAligner()
    out = []
    for piece in pieces:
        whole = aligner.feed(piece)
        assert len(whole) % 2 == 0
        assert aligner.pending in (0, 1)
        out.append(whole)
    assert aligner.flush() == b""
    assert b"".join(out) == data


@PROPERTY
@given(split_stream(sample_width=4))
def test_any_split_reassembles_whole_stereo_frames(case: tuple[bytes, list[bytes]]) -> None:
    data, pieces = case
    aligner = SampleAligner(sample_width=4)
    out = [aligner.feed(piece) for piece in pieces]
    assert all(len(whole) % 4 == 0 for whole in out)
    assert aligner.flush() == b""
    assert b"".join(out) == data


def test_aligner_reports_a_stream_ending_inside_a_sample() -> None:
    aligner = SampleAligner()
    assert aligner.feed(b"\x01\x02\x03") == b"\x01\x02"
    assert aligner.pending == 1
    assert aligner.feed(b"") == b""
    with pytest.raises(ValueError, match="inside a sample: 1 byte"):
        aligner.flush()
    assert aligner.pending == 0  # ready for the next stream
    assert aligner.feed(bytearray(b"\x04\x05")) == b"\x04\x05"
    with pytest.raises(ValueError):
        SampleAligner(0)


# --- WAV ---------------------------------------------------------------------------------------------


def _wave_module_file(rate: int, channels: int, width: int, frames: bytes) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(frames)
    return buf.getvalue()


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100])
@pytest.mark.parametrize(("channels", "width"), [(1, 2), (2, 2), (1, 1), (1, 3), (2, 4)])
@pytest.mark.parametrize("n_frames", [0, 1, 1000])
def test_wav_header_matches_the_wave_module(rate: int, channels: int, width: int, n_frames: int) -> None:
    data = bytes(range(256)) * (n_frames * channels * width // 256 + 1)
    data = data[: n_frames * channels * width]
    reference = _wave_module_file(rate, channels, width, data)
    header = wav_header(rate, channels, width * 8, len(data))
    assert len(header) == 44
    assert header == reference[:44]
    assert header + data == reference
    parsed = parse_wav_header(reference)
    assert parsed == WavHeader(rate, channels, width * 8, len(data), 44)


def test_streaming_wav_header() -> None:
    header = wav_header(24000)
    assert len(header) == 44
    assert header[4:8] == b"\xff\xff\xff\xff"  # RIFF size
    assert header[40:44] == b"\xff\xff\xff\xff"  # data size
    assert parse_wav_header(header + b"\x00\x01") == WavHeader(24000, 1, 16, None, 44)
    # Python's wave module can still read the format of a streamed header.
    with wave.open(io.BytesIO(header + b"\x00\x00" * 10)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)


def test_parse_wav_header_skips_other_chunks() -> None:
    fmt = wav_header(16000, data_bytes=4)[12:36]
    list_chunk = b"LIST" + struct.pack("<I", 5) + b"INFOx" + b"\x00"  # odd size, padded
    data = b"data" + struct.pack("<I", 4) + b"\x01\x02\x03\x04"
    body = b"WAVE" + list_chunk + fmt + data
    file = b"RIFF" + struct.pack("<I", len(body)) + body
    parsed = parse_wav_header(file)
    assert parsed.sample_rate == 16000 and parsed.data_bytes == 4
    assert file[parsed.header_bytes :] == b"\x01\x02\x03\x04"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"RIFF\x00\x00", "truncated"),
        (b"RIFX" + b"\x00" * 40, "not a RIFF/WAVE"),
        (b"RIFF\x00\x00\x00\x00WAVEdata\x00\x00\x00\x00", "before the fmt"),
        (wav_header(24000)[:40], "truncated"),
        (wav_header(24000)[:20], "fmt chunk truncated"),
        (wav_header(24000)[:20] + b"\x03\x00" + wav_header(24000)[22:], "not integer PCM"),
    ],
)
def test_parse_wav_header_errors(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_wav_header(data)


def test_wav_header_argument_checks() -> None:
    with pytest.raises(ValueError):
        wav_header(0)
    with pytest.raises(ValueError):
        wav_header(24000, channels=0)
    with pytest.raises(ValueError):
        wav_header(24000, bits_per_sample=12)
    with pytest.raises(ValueError):
        wav_header(24000, data_bytes=3)  # not whole samples
    with pytest.raises(ValueError):
        wav_header(24000, data_bytes=-2)
    with pytest.raises(ValueError):
        wav_header(24000, data_bytes=0xFFFFFFFE)


def test_duration_matches_the_sample_figures() -> None:
    # REFERENCE.md §3, three-sentence check at 24 kHz.
    assert duration_s(73_200, 24000) == pytest.approx(1.525)
    assert duration_s(108_000, 24000) == pytest.approx(2.25)
    assert duration_s(98_400, 24000) == pytest.approx(2.05)
    assert duration_s(64_000, 16000, channels=2) == 1.0
    with pytest.raises(ValueError):
        duration_s(10, 0)
    with pytest.raises(ValueError):
        duration_s(-2, 24000)

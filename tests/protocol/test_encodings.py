"""protocol.encodings: the G.711 codec held to ITU-T G.711's tables and to FFmpeg (PROTOCOL.md §3.3.1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.encodings import (
    ENCODINGS,
    PCM_ALAW,
    PCM_MULAW,
    PCM_S16LE,
    decode_to_pcm16,
    encode_pcm16,
    encoding,
    sample_width,
)

# ITU-T G.711 (11/88), Table 2a (μ-law) and Table 1a (A-law): per segment, the decoder output value of
# the first step and the step between outputs, in the uniform PCM the standard uses (14-bit for
# μ-law, full scale 8159; 13-bit for A-law, full scale 4096). Sixteen steps per segment.
MULAW_SEGMENTS = [(0, 2), (33, 4), (99, 8), (231, 16), (495, 32), (1023, 64), (2079, 128), (4191, 256)]
ALAW_SEGMENTS = [(1, 2), (33, 2), (66, 4), (132, 8), (264, 16), (528, 32), (1056, 64), (2112, 128)]


def g711_table(name: str) -> dict[int, int]:
    """Code → 16-bit output value, built from G.711's tables and its character layout: polarity bit
    (1: positive), three segment bits, four step bits; μ-law transmits bits 2-8 inverted, A-law the
    even bits inverted (XOR 0x55)."""
    segments, scale = (MULAW_SEGMENTS, 4) if name == PCM_MULAW else (ALAW_SEGMENTS, 8)
    table = {}
    for segment, (first, step) in enumerate(segments):
        for q in range(16):
            value = (first + q * step) * scale
            for positive in (True, False):
                character = (0x80 if positive else 0) | segment << 4 | q
                code = character ^ 0x7F if name == PCM_MULAW else character ^ 0x55
                table[code] = value if positive else -value
    return table


@pytest.mark.parametrize("name", [PCM_MULAW, PCM_ALAW])
def test_decoder_gives_the_output_values_of_the_g711_tables(name: str) -> None:
    table = g711_table(name)
    assert len(table) == 256
    decoded = np.frombuffer(decode_to_pcm16(bytes(range(256)), name), dtype="<i2")
    assert {code: int(decoded[code]) for code in range(256)} == table


def test_table_anchors() -> None:
    # Spot values every G.711 implementation agrees on.
    assert decode_to_pcm16(b"\xff\x7f\x80\x00", PCM_MULAW) == np.array([0, 0, 32124, -32124], "<i2").tobytes()
    assert decode_to_pcm16(b"\xd5\x55\xaa\x2a", PCM_ALAW) == np.array([8, -8, 32256, -32256], "<i2").tobytes()
    assert encode_pcm16(b"\x00\x00", PCM_MULAW) == b"\xff"  # digital silence
    assert encode_pcm16(b"\x00\x00", PCM_ALAW) == b"\xd5"
    assert encoding(PCM_MULAW).silence == b"\xff" and encoding(PCM_ALAW).silence == b"\xd5"


@pytest.mark.parametrize("name", [PCM_MULAW, PCM_ALAW])
def test_every_output_value_encodes_back_to_its_code(name: str) -> None:
    codes = bytes(range(256))
    again = encode_pcm16(decode_to_pcm16(codes, name), name)
    zeros = {0x7F, 0xFF} if name == PCM_MULAW else set()  # μ-law has +0 and -0; both decode to 0
    assert [c for c, d in zip(codes, again, strict=True) if c != d and c not in zeros] == []


ALL_INT16 = np.arange(-32768, 32768, dtype="<i2")


@pytest.mark.parametrize(
    ("name", "limit", "bound"),
    [
        # μ-law: half a step of the value's segment (step = 2 (|x| + 132) / 33 at most) plus the two
        # low bits dropped going to 14 bits.
        (PCM_MULAW, 32124, lambda a: (a + 132) / 32 + 4),
        # A-law: half a step (a sixteenth of the value above the linear segment, 16 within it) plus the
        # three low bits dropped going to 13 bits.
        (PCM_ALAW, 32256, lambda a: np.maximum(a / 32, 8) + 8),
    ],
)
def test_quantization_error_is_within_half_a_step_for_every_16_bit_value(name, limit, bound) -> None:
    x = ALL_INT16.astype(np.int64)
    y = np.frombuffer(decode_to_pcm16(encode_pcm16(ALL_INT16.tobytes(), name), name), "<i2").astype(np.int64)
    error, magnitude = np.abs(y - x), np.abs(x)
    inside = magnitude <= limit
    assert np.all(error[inside] <= bound(magnitude[inside]))
    # Beyond the largest output value the codec clips to it.
    assert np.all(np.abs(y[~inside]) == limit)


@pytest.mark.parametrize(("name", "codec"), [(PCM_MULAW, "pcm_mulaw"), (PCM_ALAW, "pcm_alaw")])
def test_ffmpeg_agrees(name: str, codec: str) -> None:
    """FFmpeg's G.711 decoder gives the same 256 values; its encoder the same code for every 16-bit value
    except near decision values, where the two pick neighbouring codes (both within half a step)."""
    av = pytest.importorskip("av")
    decoder = av.CodecContext.create(codec, "r")
    decoder.sample_rate = 8000
    decoder.layout = "mono"
    ffmpeg = np.concatenate([f.to_ndarray().ravel() for f in decoder.decode(av.Packet(bytes(range(256))))])
    assert ffmpeg.tobytes() == decode_to_pcm16(bytes(range(256)), name)

    encoder = av.CodecContext.create(codec, "w")
    encoder.sample_rate, encoder.layout, encoder.format = 8000, "mono", "s16"
    frame = av.AudioFrame.from_ndarray(ALL_INT16.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = 8000
    theirs = np.frombuffer(
        b"".join(bytes(p) for p in [*encoder.encode(frame), *encoder.encode(None)]), np.uint8
    )
    ours = np.frombuffer(encode_pcm16(ALL_INT16.tobytes(), name), np.uint8)
    differ = np.flatnonzero(ours != theirs)
    assert len(differ) < 0.02 * len(ours)
    ours_values = np.frombuffer(decode_to_pcm16(ours[differ].tobytes(), name), "<i2").astype(int)
    their_values = np.frombuffer(decode_to_pcm16(theirs[differ].tobytes(), name), "<i2").astype(int)
    steps = np.abs(ours_values - their_values)
    table = sorted(set(g711_table(name).values()))
    gaps = dict(zip(table[:-1], np.diff(table), strict=True))
    assert all(s == gaps[min(a, b)] for s, a, b in zip(steps, ours_values, their_values, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(ENCODINGS)), st.lists(st.integers(-32768, 32767), max_size=64))
def test_round_trip_shapes(name: str, samples: list[int]) -> None:
    pcm = np.array(samples, "<i2").tobytes()
    encoded = encode_pcm16(pcm, name)
    assert len(encoded) == len(samples) * sample_width(name)
    decoded = decode_to_pcm16(encoded, name)
    assert len(decoded) == len(pcm)
    if name == PCM_S16LE:
        assert decoded == pcm
    else:
        assert encode_pcm16(decoded, name) == encoded  # decoding then encoding is the identity


def test_errors() -> None:
    with pytest.raises(KeyError, match="unknown encoding"):
        encode_pcm16(b"\x00\x00", "opus")
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        encode_pcm16(b"\x00", PCM_MULAW)
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        decode_to_pcm16(b"\x00", PCM_S16LE)
    assert list(ENCODINGS) == [PCM_S16LE, PCM_MULAW, PCM_ALAW]
    assert encoding(PCM_MULAW).duration_s(8000, 8000) == 1.0
    assert encoding(PCM_S16LE).duration_s(16000, 8000) == 1.0

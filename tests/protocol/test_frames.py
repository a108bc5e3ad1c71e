"""Tests for protocol.frames: the §3.4 classification rule and the §3.3 audio cutting rule."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from protocol import frames
from protocol.frames import (
    AUDIO_FRAME_HARD_LIMIT,
    PAD_SAMPLE,
    Audio,
    AudioCut,
    Control,
    classify,
    cut_audio,
    cut_audio_frames,
    is_json_object,
    looks_like_control,
)

# --- test oracles: the rules written the slow, obvious way -------------------------------------------


def _parses_to_object(parse) -> bool:
    try:
        return isinstance(parse(), dict)
    except RecursionError:
        return True  # a client's parser gives up: counts as unsafe for audio
    except ValueError:
        return False


def oracle_strict(chunk: bytes) -> bool:
    """§3.4 as a client writes it."""
    try:
        return isinstance(json.loads(chunk.decode("utf-8")), dict)
    except (ValueError, RecursionError):
        return False


def oracle_unsafe(chunk: bytes) -> bool:
    """Every client reading of looks_like_control's docstring, by brute force."""
    return (
        _parses_to_object(lambda: json.loads(chunk.decode("utf-8")))
        or _parses_to_object(lambda: json.loads(chunk))
        or _parses_to_object(lambda: json.loads(chunk.decode("utf-8", "replace").removeprefix("\ufeff")))
    )


def exact_cut_exists(pcm: bytes, max_frame_bytes: int) -> bool:
    """Dynamic programme over sample offsets, using the oracle."""
    reachable = [False] * (len(pcm) + 1)
    reachable[0] = True
    for end in range(2, len(pcm) + 1, 2):
        reachable[end] = any(
            reachable[start] and not oracle_unsafe(pcm[start:end])
            for start in range(max(0, end - max_frame_bytes), end, 2)
        )
    return reachable[len(pcm)]


def check_cut(pcm: bytes, max_frame_bytes: int, cut: AudioCut) -> None:
    """Every §3.3 invariant of one cut."""
    for frame in cut.frames:
        assert len(frame) % 2 == 0
        assert 2 <= len(frame) <= max_frame_bytes
        assert not is_json_object(frame), frame
        assert not oracle_unsafe(frame), frame
    padded = set(cut.padded_frames)
    assert all(cut.frames[i].endswith(PAD_SAMPLE) for i in padded)
    rebuilt = b"".join(f[: -len(PAD_SAMPLE)] if i in padded else f for i, f in enumerate(cut.frames))
    assert rebuilt == pcm
    assert sum(map(len, cut.frames)) - len(pcm) == cut.padding_bytes
    assert cut_audio_frames(pcm, max_frame_bytes) == list(cut.frames)


# --- strategies --------------------------------------------------------------------------------------

# Samples that spell JSON pieces, whitespace, byte order marks and UTF-16/32 patterns.
SPECIAL_SAMPLES = [
    b"{}",  # the sample 32123
    b"  ",
    b"\r\n",
    b"\t ",
    b" {",
    b"} ",
    b'{"',
    b'":',
    b"1}",
    b'""',
    b"[]",
    b"Na",
    b"N}",
    b"\x00\x00",
    b"{\x00",
    b"}\x00",
    b" \x00",
    b"\xef\xbb",
    b"\xbf{",
    b"\xff\xfe",
    b"\xfe\xff",
    b'\xff"',
]
samples = st.one_of(st.binary(min_size=2, max_size=2), st.sampled_from(SPECIAL_SAMPLES))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(st.text(max_size=3), json_values, max_size=3).map(json.dumps)
whitespace = st.text(alphabet=" \t\r\n", max_size=4)
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]


@st.composite
def encoded_json(draw) -> bytes:
    text = draw(whitespace) + draw(json_objects) + draw(whitespace)
    return text.encode(draw(st.sampled_from(ENCODINGS)))


def make_even(data: bytes) -> bytes:
    # Padding with a space keeps JSON-looking data JSON-looking: the nasty case.
    return data + b" " if len(data) % 2 else data


pcm_streams = st.lists(
    st.one_of(
        st.lists(samples, max_size=24).map(b"".join),
        encoded_json(),
        whitespace.map(str.encode),
    ),
    max_size=6,
).map(lambda parts: make_even(b"".join(parts)))
small_pcm = st.lists(st.one_of(samples, st.sampled_from([b"{}", b"  "])), max_size=14).map(b"".join)
chunks = st.one_of(
    st.binary(max_size=16),
    encoded_json(),
    st.lists(
        st.sampled_from(
            [b"{", b"}", b" ", b"\x00", b'"', b":", b"1", b"\xef\xbb\xbf", b"\xff", b"\xfe", b"[", b"]"]
        ),
        max_size=10,
    ).map(b"".join),
    encoded_json().map(lambda b: b[:-1]),
    encoded_json().map(lambda b: b + b"x"),
)
max_sizes = st.sampled_from([4, 6, 8, 10, 16, 32, 64, 32768])
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- classification (§3.4) ---------------------------------------------------------------------------


def test_control_and_audio_examples() -> None:
    assert classify(b'{"type":"synthesis_start","request_id":"r1"}') == Control(
        {"type": "synthesis_start", "request_id": "r1"}
    )
    assert classify(b"{}") == Control({})
    assert classify(b'[{"a":1}]') == Audio(b'[{"a":1}]')  # JSON, but not an object
    assert classify(b'"{}"') == Audio(b'"{}"')
    assert classify(b"\x01\x02\x03") == Audio(b"\x01\x02\x03")
    assert classify(bytearray(b"{}")) == Control({})
    assert classify(memoryview(b"\x00")) == Audio(b"\x00")


def test_sample_32123_is_the_bytes_of_an_empty_object() -> None:
    sample = (32123).to_bytes(2, "little", signed=True)
    assert sample == b"{}"
    assert is_json_object(sample)


def test_rule_follows_json_loads_leniencies() -> None:
    # What json.loads accepts, a typical client takes as control.
    assert is_json_object(b' \r\n{"a": NaN, "b": Infinity, "a": -Infinity}\t ')
    assert is_json_object(b'{"a":1} ')  # four valid samples
    # Strict UTF-8: a lone continuation byte inside a string is not UTF-8, so not control...
    assert not is_json_object(b'{"a":"\x80"}')
    # ...but a lenient decoder would see an object, so it must never be sent as audio.
    assert looks_like_control(b'{"a":"\x80"}')


def test_nesting_beyond_the_parser_limit() -> None:
    deep = b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert not is_json_object(deep)
    assert classify(deep) == Audio(deep)
    assert looks_like_control(deep)  # a client's json.loads raises RecursionError: never send it


@pytest.mark.parametrize(
    "chunk",
    [
        b"{\x00}\x00",  # samples 0x007B 0x007D: json.loads(bytes) reads UTF-16-LE "{}"
        b"\x00{\x00}",  # UTF-16-BE
        b"{\x00\x00\x00}\x00\x00\x00",  # UTF-32-LE
        b"\xef\xbb\xbf{}",  # UTF-8 with BOM
        "{}".encode("utf-16"),
        " {} ".encode("utf-32"),
    ],
)
def test_other_encodings_are_unsafe_but_not_control(chunk: bytes) -> None:
    assert isinstance(json.loads(chunk), dict)
    assert looks_like_control(chunk)
    assert not is_json_object(chunk)


@PROPERTY
@given(chunks)
@example(b"")
@example(b"{}")
@example(b"{\x00}\x00")
def test_rules_match_the_oracles(chunk: bytes) -> None:
    assert is_json_object(chunk) == oracle_strict(chunk)
    assert looks_like_control(chunk) == oracle_unsafe(chunk)
    if is_json_object(chunk):
        assert looks_like_control(chunk)
    result = classify(chunk)
    if is_json_object(chunk):
        assert result == Control(json.loads(chunk.decode("utf-8")))
    else:
        assert result == Audio(chunk)


@PROPERTY
@given(pcm_streams, st.data())
@example(b"\xef\xbb\xbf {}", None)
def test_unsafe_check_looks_only_inside_its_window(pcm: bytes, data) -> None:
    """The cutter checks candidate frames in place; bytes beyond a frame must not change the answer."""
    if data is None:
        start, end = 0, 2
    else:
        assume(len(pcm) >= 2)
        start = data.draw(st.integers(0, len(pcm) // 2 - 1)) * 2
        end = data.draw(st.integers(start // 2 + 1, len(pcm) // 2)) * 2
    bound = frames._unsafe_from(pcm, start, end)
    assert bool(bound) == oracle_unsafe(pcm[start:end])
    if bound:
        assert start < bound <= end
        assert all(oracle_unsafe(pcm[start:e]) for e in range(bound, end + 1, 2))


# --- cutting (§3.3) ----------------------------------------------------------------------------------


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        cut_audio(b"abc")
    for bad in (0, 2, 5, 33, AUDIO_FRAME_HARD_LIMIT + 2, -4):
        with pytest.raises(ValueError, match="max_frame_bytes"):
            cut_audio(b"ab", bad)
    with pytest.raises(TypeError):
        cut_audio(b"ab", True)
    assert cut_audio(b"") == AudioCut(())
    assert cut_audio_frames(b"") == []
    assert cut_audio_frames(b"\x01\x02" * 4, AUDIO_FRAME_HARD_LIMIT) == [b"\x01\x02" * 4]


def test_ordinary_audio_is_cut_into_full_frames() -> None:
    pcm = bytes(range(1, 201)) * 3  # first bytes of frames are never "{", whitespace, NUL or a BOM
    frames_ = cut_audio_frames(pcm, 64)
    assert [len(f) for f in frames_] == [64] * 9 + [24]
    assert b"".join(frames_) == pcm


def test_json_payload_is_cut_without_padding() -> None:
    pcm = b'{"a":1} '  # four samples that together are a JSON object
    cut = cut_audio(pcm, 32)
    assert cut.padded_frames == ()
    check_cut(pcm, 32, cut)
    assert len(cut.frames) == 2


def test_lone_sample_32123_is_padded() -> None:
    cut = cut_audio(b"{}")
    assert cut == AudioCut((b"{}\x00\x00",), (0,))
    assert cut.padding_bytes == 2
    assert cut_audio_frames(b"{}") == [b"{}" + PAD_SAMPLE]


def test_trailing_32123_joins_the_previous_frame() -> None:
    pcm = b"\x01\x02" * 8 + b"{}"
    cut = cut_audio(pcm, 16)
    assert cut.padded_frames == ()
    check_cut(pcm, 16, cut)


def test_padding_goes_to_the_end_when_that_is_enough() -> None:
    pcm = b"  {}"  # "  {}" is JSON and so is "{}": no exact cut
    assert not exact_cut_exists(pcm, 8)
    cut = cut_audio(pcm, 8)
    assert cut == AudioCut((b"  {}\x00\x00",), (0,))


@pytest.mark.parametrize(
    ("pcm", "max_frame_bytes"),
    [
        (b"{}" + b"  " * 40, 32),  # "{}" followed by more whitespace than a frame holds
        (b"{}    ", 4),  # a 4-byte limit with whitespace after "{}"
        (b"  {}  ", 4),
    ],
)
def test_padding_inside_the_stream_as_a_last_resort(pcm: bytes, max_frame_bytes: int) -> None:
    assert not exact_cut_exists(pcm, max_frame_bytes)
    assert not exact_cut_exists(pcm + PAD_SAMPLE, max_frame_bytes)
    cut = cut_audio(pcm, max_frame_bytes)
    check_cut(pcm, max_frame_bytes, cut)
    assert cut.padded_frames


@PROPERTY
@given(pcm_streams, max_sizes)
@example(b"{}", 4)
@example(b'{"a":1} ', 8)
@example(b"{\x00}\x00", 4)
@example(b"  {}", 4)
@example(b"\xef\xbb\xbf {}", 4)  # a BOM cut in two by a frame boundary
def test_cut_invariants(pcm: bytes, max_frame_bytes: int) -> None:
    check_cut(pcm, max_frame_bytes, cut_audio(pcm, max_frame_bytes))


@PROPERTY
@given(small_pcm, st.sampled_from([4, 6, 8, 12]))
def test_padding_only_when_no_cut_exists(pcm: bytes, max_frame_bytes: int) -> None:
    cut = cut_audio(pcm, max_frame_bytes)
    check_cut(pcm, max_frame_bytes, cut)
    if exact_cut_exists(pcm, max_frame_bytes):
        assert cut.padded_frames == ()
    elif exact_cut_exists(pcm + PAD_SAMPLE, max_frame_bytes):
        assert cut.padded_frames == (len(cut.frames) - 1,)  # the spec's rule: one sample, at the end
    else:
        assert cut.padded_frames


@PROPERTY
@given(small_pcm, st.sampled_from([4, 6, 8, 12, 16]))
def test_each_frame_is_the_longest_that_leaves_a_cuttable_rest(pcm: bytes, max_frame_bytes: int) -> None:
    cut = cut_audio(pcm, max_frame_bytes)
    check_cut(pcm, max_frame_bytes, cut)
    assume(not cut.padded_frames)
    offset = 0
    for frame in cut.frames:
        for longer in range(len(frame) + 2, min(max_frame_bytes, len(pcm) - offset) + 1, 2):
            assert oracle_unsafe(pcm[offset : offset + longer]) or not exact_cut_exists(
                pcm[offset + longer :], max_frame_bytes
            )
        offset += len(frame)


def test_common_case_never_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audio whose frames do not start like JSON is cut without a single json.loads call."""
    calls = []
    real_loads = json.loads

    def counting_loads(*args, **kwargs):
        calls.append(1)
        return real_loads(*args, **kwargs)

    monkeypatch.setattr(frames.json, "loads", counting_loads)
    pcm = bytearray(os.urandom(4 * 1024 * 1024))
    for offset in range(0, len(pcm), 32768):
        pcm[offset] = 0x41  # "A" cannot start JSON text in any encoding
    cut = cut_audio(bytes(pcm))
    assert calls == []
    assert [len(f) for f in cut.frames] == [32768] * 128


def test_silence_and_tiny_samples_are_cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Digital silence starts with NUL (the UTF-16/32-BE pattern) yet needs no parsing either."""
    calls = []
    real_loads = json.loads
    monkeypatch.setattr(frames.json, "loads", lambda *a, **k: calls.append(1) or real_loads(*a, **k))
    cut = cut_audio(bytes(1 << 20))
    assert calls == []
    assert len(cut.frames) == 32


# --- one-byte samples: G.711 μ-law and A-law (§3.3.1) ---------------------------------------------------

byte_streams = st.lists(
    st.one_of(
        st.binary(max_size=24),
        encoded_json(),
        whitespace.map(str.encode),
        st.sampled_from([b"{", b"}", b"{}", b" ", b"\xff", b"\xd5", b"\x00"]),
    ),
    max_size=6,
).map(b"".join)


def check_byte_cut(data: bytes, max_frame_bytes: int, cut: AudioCut) -> None:
    assert cut.padded_frames == ()  # a single byte is never a JSON object: no padding is ever needed
    assert b"".join(cut.frames) == data
    for frame in cut.frames:
        assert 1 <= len(frame) <= max_frame_bytes
        assert not oracle_unsafe(frame), frame


@PROPERTY
@given(byte_streams, max_sizes)
@example(b"{}", 4)
@example(b'{"a":1}', 8)  # a G.711 stream whose first byte is 0x7B and whose first 7 samples are JSON
@example(b"{\x00}\x00", 4)
@example(b" {} ", 4)
def test_one_byte_samples_cut_invariants(data: bytes, max_frame_bytes: int) -> None:
    check_byte_cut(data, max_frame_bytes, cut_audio(data, max_frame_bytes, sample_width=1))


@PROPERTY
@given(byte_streams, st.sampled_from([4, 6, 8, 12]))
def test_one_byte_frames_are_the_longest_safe_frames(data: bytes, max_frame_bytes: int) -> None:
    """With 1-byte samples every rest can be cut, so each frame is simply the longest safe one."""
    cut = cut_audio(data, max_frame_bytes, sample_width=1)
    check_byte_cut(data, max_frame_bytes, cut)
    offset = 0
    for frame in cut.frames:
        for longer in range(len(frame) + 1, min(max_frame_bytes, len(data) - offset) + 1):
            assert oracle_unsafe(data[offset : offset + longer])
        offset += len(frame)


def test_a_g711_stream_that_spells_json_is_cut_without_padding() -> None:
    data = b'{"a":1}' + b"\xff" * 3  # μ-law samples that start with 0x7B
    assert is_json_object(data[:7])
    cut = cut_audio(data, 8, sample_width=1)
    check_byte_cut(data, 8, cut)
    assert cut.frames == (b'{"a":1}\xff', b"\xff\xff")  # longer within the limit: no longer JSON
    assert cut_audio(b"{}", 4, sample_width=1).frames == (b"{", b"}")
    assert cut_audio_frames(b"{}", 4, sample_width=1) == [b"{", b"}"]


def test_sample_width_argument() -> None:
    assert cut_audio(b"abc", 4, sample_width=1).frames == (b"abc",)
    for bad in (0, 3, 4, True):
        with pytest.raises(ValueError, match="sample_width"):
            cut_audio(b"abcd", 4, sample_width=bad)

"""Split policies (simulator/splitting.py): lossless, deterministic, and misaligned where promised."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.splitting import MessageSplitter, SplitKind, SplitPolicy, StreamSplitter

POLICIES = [
    SplitPolicy.parse(text)
    for text in ("none", "fixed:7", "random:1-50", "byte", "misaligned", "misaligned:1-9", "misaligned:40-60")
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", SplitPolicy(SplitKind.NONE)),
        ("byte", SplitPolicy(SplitKind.BYTE)),
        ("fixed:4096", SplitPolicy(SplitKind.FIXED, 4096, 4096)),
        ("random:3-90", SplitPolicy(SplitKind.RANDOM, 3, 90)),
        ("misaligned", SplitPolicy(SplitKind.MISALIGNED, 1, 1024)),
        ("misaligned:5-7", SplitPolicy(SplitKind.MISALIGNED, 5, 7)),
    ],
)
def test_parse_round_trips(text: str, expected: SplitPolicy) -> None:
    assert SplitPolicy.parse(text) == expected
    assert SplitPolicy.parse(str(expected)) == expected


@pytest.mark.parametrize(
    "text", ["", "sometimes", "fixed", "fixed:0", "fixed:x", "random:9-3", "random:5", "byte:2"]
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        SplitPolicy.parse(text)


def _stream_parts(
    policy: SplitPolicy, chunks: list[bytes], seed: int = 0, limit: int | None = None
) -> list[bytes]:
    splitter = StreamSplitter(policy, seed, max_part_bytes=limit)
    parts: list[bytes] = []
    for chunk in chunks:
        parts += splitter.feed(chunk)
    return parts + splitter.flush()


@settings(max_examples=60, deadline=None)
@given(message=st.binary(max_size=400), seed=st.integers(0, 2**32), index=st.integers(0, len(POLICIES) - 1))
def test_message_split_is_lossless_and_deterministic(message: bytes, seed: int, index: int) -> None:
    policy = POLICIES[index]
    parts = MessageSplitter(policy, seed).split(message)
    assert b"".join(parts) == message
    assert parts == MessageSplitter(policy, seed).split(message)
    assert all(parts) or parts == [b""]


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.binary(max_size=120), max_size=12), seed=st.integers(0, 2**32), index=st.integers(0, 6)
)
def test_stream_split_is_lossless_and_deterministic(chunks: list[bytes], seed: int, index: int) -> None:
    policy = POLICIES[index]
    parts = _stream_parts(policy, chunks, seed)
    assert b"".join(parts) == b"".join(chunks)
    assert all(parts)
    assert parts == _stream_parts(policy, chunks, seed)


def test_fixed_random_and_byte_sizes() -> None:
    data = bytes(range(100))
    assert [len(p) for p in MessageSplitter(SplitPolicy.parse("fixed:30")).split(data)] == [30, 30, 30, 10]
    assert all(len(p) == 1 for p in MessageSplitter(SplitPolicy.parse("byte")).split(data))
    sizes = [len(p) for p in MessageSplitter(SplitPolicy.parse("random:5-9"), seed=3).split(data * 10)]
    assert all(5 <= s <= 9 for s in sizes[:-1])
    assert len(set(sizes)) > 1
    assert MessageSplitter(SplitPolicy.parse("none")).split(data) == [data]


def test_none_keeps_container_chunks() -> None:
    chunks = [b"abc", b"defgh", b"i"]
    assert _stream_parts(SplitPolicy(), chunks) == chunks


def test_fixed_stream_parts_span_chunks() -> None:
    assert _stream_parts(SplitPolicy.parse("fixed:4"), [b"ab", b"cdefg", b"hij"]) == [b"abcd", b"efgh", b"ij"]


@settings(max_examples=80, deadline=None)
@given(message=st.binary(min_size=1, max_size=600), seed=st.integers(0, 2**32))
def test_misaligned_message_cuts_are_never_on_sample_boundaries(message: bytes, seed: int) -> None:
    parts = MessageSplitter(SplitPolicy.parse("misaligned:1-40"), seed).split(message)
    cuts = _cut_offsets(parts)
    assert all(cut % 2 == 1 for cut in cuts), cuts


@settings(max_examples=80, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=90), min_size=1, max_size=10), seed=st.integers(0, 2**32)
)
def test_misaligned_stream_cuts_avoid_samples_and_chunk_boundaries(chunks: list[bytes], seed: int) -> None:
    parts = _stream_parts(SplitPolicy.parse("misaligned:1-30"), chunks, seed)
    boundaries = set(_cut_offsets(chunks))
    for cut in _cut_offsets(parts):
        assert cut % 2 == 1, cut
        assert cut not in boundaries, cut


def test_misaligned_actually_cuts_audio_frames() -> None:
    frame = bytes(32_768)  # one full-size audio frame (PROTOCOL.md §3.3)
    parts = MessageSplitter(SplitPolicy.parse("misaligned"), seed=1).split(frame)
    assert len(parts) > 30
    assert all(len(p) <= 1_025 for p in parts)


def test_part_size_limit_wins() -> None:
    data = bytes(1000)
    for policy in ("none", "random:200-900", "misaligned:100-500"):
        parts = MessageSplitter(SplitPolicy.parse(policy), max_part_bytes=64).split(data)
        assert b"".join(parts) == data
        assert max(len(p) for p in parts) <= 64
        stream = _stream_parts(SplitPolicy.parse(policy), [data[:300], data[300:]], limit=64)
        assert max(len(p) for p in stream) <= 64


def test_empty_message_is_one_empty_part() -> None:
    assert MessageSplitter(SplitPolicy.parse("byte")).split(b"") == [b""]


def test_seed_changes_random_cuts() -> None:
    data = bytes(5000)
    policy = SplitPolicy.parse("random:1-100")
    assert MessageSplitter(policy, 1).split(data) != MessageSplitter(policy, 2).split(data)


def _cut_offsets(parts: list[bytes]) -> list[int]:
    """Offsets where one part ends and the next begins (the interior cuts)."""
    offsets, total = [], 0
    for part in parts[:-1]:
        total += len(part)
        offsets.append(total)
    return offsets

"""The suite's client path (conformance.session.Checker over protocol.session.ClientSession), fuzzed.

Verdicts are only as good as the classifier behind them: audio that spells JSON must stay audio, and a server
that sends such a frame must be caught. PCM that starts with 0x7B ("{") or holds the sample 32123 (the bytes
"{}", a JSON object, PROTOCOL.md §3.3.2) goes through the reference cutter and the checker.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.session import Checker, Message, replay
from protocol.frames import cut_audio_frames
from protocol.messages import SynthesisComplete, SynthesisStart
from protocol.session import ProtocolViolation

SAMPLE_32123 = struct.pack("<h", 32123)
assert SAMPLE_32123 == b"{}"


def start(request_id: str = "a") -> Message:
    frame = SynthesisStart(request_id=request_id, sample_rate=24000, voice="af_heart", speed=1.0).to_json()
    return Message(frame.encode(), "UTF8", 1, 0.0)


def complete(audio_bytes: int, request_id: str = "a") -> Message:
    frame = SynthesisComplete(
        request_id=request_id,
        status="completed",
        audio_bytes=audio_bytes,
        total_duration_s=audio_bytes / 48000,
        elapsed_s=0.1,
    ).to_json()
    return Message(frame.encode(), "UTF8", 1, 0.0)


def audio(data: bytes) -> Message:
    return Message(data, "BINARY", 1, 0.0)


samples = st.lists(st.integers(-32768, 32767), min_size=1, max_size=400).map(
    lambda values: b"".join(struct.pack("<h", v) for v in values)
)
json_like_pcm = st.one_of(
    samples.map(lambda pcm: b"{" + pcm[1:]),  # starts with 0x7B
    st.tuples(samples, st.integers(0, 400), samples).map(lambda t: t[0][: t[1] * 2] + SAMPLE_32123 + t[2]),
    st.tuples(st.integers(1, 30), samples).map(lambda t: SAMPLE_32123 * t[0] + t[1]),
    st.just(SAMPLE_32123),
    st.just(SAMPLE_32123 + b"  "),
)


@settings(max_examples=300, derandomize=True, database=None)
@given(pcm=json_like_pcm, frame_bytes=st.sampled_from([64, 66, 128, 1024, 32768]))
def test_json_like_pcm_cut_by_the_reference_stays_audio(pcm: bytes, frame_bytes: int) -> None:
    frames = cut_audio_frames(pcm, frame_bytes)
    sent = b"".join(frames)
    assert sent[: len(pcm)] == pcm
    checker = replay(
        [start(), *map(audio, frames), complete(len(sent))], faithful_data_types=True, expect=["a"]
    )
    answer = checker.answers["a"]
    assert bytes(answer.audio) == sent and answer.complete is not None


@settings(max_examples=200, derandomize=True, database=None)
@given(pcm=json_like_pcm, cuts=st.lists(st.integers(0, 800), max_size=8))
def test_json_like_pcm_split_anywhere_is_reassembled_by_completion_state(pcm: bytes, cuts: list[int]) -> None:
    """A transport may split an audio message anywhere (§12.3); joined by CompletionState it stays audio."""
    frames = cut_audio_frames(pcm, 1024)
    checker = Checker(faithful_data_types=False)
    checker.client.expect("a")
    checker.feed(start())
    for frame in frames:
        bounds = sorted({0, len(frame), *(c % (len(frame) + 1) for c in cuts)})
        parts = [frame[a:b] for a, b in itertools.pairwise(bounds)]
        for i, part in enumerate(parts):
            for event in checker.client.receive_part(part, i == len(parts) - 1):
                assert type(event).__name__ == "AudioReceived"
    checker.feed(complete(sum(map(len, frames))))
    assert checker.completed("a")


def test_a_binary_frame_that_is_a_json_object_is_caught() -> None:
    with pytest.raises(ProtocolViolation) as caught:
        replay([start(), audio(b"{}"), complete(2)], faithful_data_types=True, expect=["a"])
    assert caught.value.section == "§3.3.2"


def test_without_frame_types_the_object_still_breaks_a_rule() -> None:
    # Behind a transport that does not keep frame types, `{}` reads as a control frame with no type.
    with pytest.raises(ProtocolViolation):
        replay([start(), audio(b"{}"), complete(2)], faithful_data_types=False, expect=["a"])


def test_audio_in_a_text_frame_is_caught() -> None:
    with pytest.raises(ProtocolViolation) as caught:
        replay(
            [start(), Message(b"\x01\x02", "UTF8", 1, 0.0), complete(2)],
            faithful_data_types=True,
            expect=["a"],
        )
    assert caught.value.section == "§3.3.1"


def test_odd_audio_frames_are_caught() -> None:
    with pytest.raises(ProtocolViolation) as caught:
        replay(
            [start(), audio(b"\x01\x02\x03"), audio(b"\x04"), complete(4)],
            faithful_data_types=True,
            expect=["a"],
        )
    assert caught.value.section == "§3.3"


def test_interleaved_brackets_are_caught() -> None:
    with pytest.raises(ProtocolViolation) as caught:
        replay([start("a"), start("b")], faithful_data_types=True, expect=["a", "b"])
    assert caught.value.section == "§6.2"


def test_checker_collects_answers_and_errors() -> None:
    error = (
        b'{"type":"error","code":"text_required","message":"text_required: empty","request_id":"x",'
        b'"fatal":false}'
    )
    checker = replay(
        [Message(error, "UTF8", 1, 0.0), start(), audio(b"\x01\x00\x02\x00"), complete(4)],
        faithful_data_types=True,
        expect=["a"],
    )
    assert [e.code for e in checker.errors_since(0)] == ["text_required"]
    assert checker.errors_since(1) == []
    assert checker.answers["a"].frames == [4] and checker.answers["a"].duration_s == 2 / 24000

"""protocol.messages.server: the server's control frames on their one base (PROTOCOL.md §5)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import schemas
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    Capabilities,
    ErrorFrame,
    LanguageInfo,
    Marks,
    ServerFrame,
    ServerInfo,
    SynthesisComplete,
    SynthesisStart,
    VoiceInfo,
    Word,
    parse_server_control,
)

# --- server frames (§5) ---------------------------------------------------------------------------------


def test_server_frames_serialize_to_their_schemas():
    start = SynthesisStart(request_id="a1", sample_rate=24000, voice="af_heart", speed=1.0)
    assert json.loads(start.to_json()) == {
        "type": "synthesis_start",
        "request_id": "a1",
        "sample_rate": 24000,
        "encoding": "pcm_s16le",
        "channels": 1,
        "voice": "af_heart",
        "speed": 1.0,
    }
    complete = SynthesisComplete("a1", "completed", 73200, 1.525, 0.412, [Word("Hello", 0.275, 0.6)])
    assert complete.words == (Word("Hello", 0.275, 0.6),)
    error = ErrorFrame(ErrorCode.TEXT_REQUIRED, "text is required", "a3")
    assert error.message == "text is required"  # the code is in `code`, not repeated (§9.3)
    queue_full = ProtocolError(ErrorCode.QUEUE_FULL, "32 requests are queued")
    assert ErrorFrame.from_error(queue_full).to_dict()["message"] == "32 requests are queued"
    for name, frame in (("synthesis_start", start), ("synthesis_complete", complete), ("error", error)):
        schemas.validate(name, json.loads(frame.to_json()))
        assert parse_server_control(json.loads(frame.to_json())) == frame
    assert "words" not in json.loads(SynthesisComplete("a", "cancelled", 0, 0.0, 0.1).to_json())
    assert json.loads(ErrorFrame("queue_full", "full").to_json())["request_id"] is None


def test_every_server_frame_shares_one_base_and_reads_back_with_its_own_parse():
    words = (Word("Hi", 0.0, 0.2),)
    frames = (
        SynthesisStart(request_id="a", sample_rate=24000, voice="af_heart", speed=1.0),
        SynthesisComplete("a", "completed", 4800, 0.1, 0.3, list(words)),
        Marks(request_id="a", segment=0, text="Hi", start_s=0.0, end_s=0.2, words=words),
        ErrorFrame(ErrorCode.QUEUE_FULL, "full", "a", message_type="synthesize"),
        Capabilities(
            server=ServerInfo("s", "1"),
            voices=(VoiceInfo.kokoro("af_heart"),),
            languages=(LanguageInfo.kokoro("a", word_timings=True),),
        ),
    )
    for frame in frames:
        obj = frame.to_dict()
        assert isinstance(frame, ServerFrame) and next(iter(obj)) == "type" and obj["type"] == frame.type
        assert json.loads(frame.to_json()) == obj
        assert type(frame).from_dict(json.loads(frame.to_json())) == frame == parse_server_control(obj)
    with pytest.raises(ValueError, match="names no Kokoro language"):
        VoiceInfo.kokoro("xf_custom")


def test_error_frame_from_protocol_error():
    error = ProtocolError(ErrorCode.INVALID_SPEED, "speed must be from 0.5 to 2.0, not 3", "b3")
    frame = ErrorFrame.from_error(error)
    assert frame.code is ErrorCode.INVALID_SPEED and frame.request_id == "b3" and not frame.fatal
    assert json.loads(frame.to_json()) == frame.to_dict()
    assert frame.message == error.message and frame.message_type is None


@pytest.mark.parametrize(
    "build",
    [
        lambda: SynthesisStart(request_id="", sample_rate=24000, voice="v", speed=1.0),
        lambda: SynthesisStart(request_id="a", sample_rate=44100, voice="v", speed=1.0),
        lambda: SynthesisStart(request_id="a", sample_rate=24000, voice="", speed=1.0),
        lambda: SynthesisStart(request_id="a", sample_rate=24000, voice="v", speed=2.5),
        lambda: SynthesisStart(request_id="a", sample_rate=24000, voice="v", speed=1.0, channels=2),
        lambda: SynthesisStart(request_id="a", sample_rate=24000, voice="v", speed=1.0, encoding="f32"),
        lambda: SynthesisComplete("a", "done", 0, 0.0, 0.0),  # type: ignore[arg-type]
        lambda: SynthesisComplete("a", "completed", -2, 0.0, 0.0),
        lambda: SynthesisComplete("a", "completed", True, 0.0, 0.0),
        lambda: SynthesisComplete("a", "completed", 2, math.nan, 0.0),
        lambda: SynthesisComplete("a", "completed", 2, 0.0, -1.0),
        lambda: SynthesisComplete("a" * 129, "completed", 2, 0.0, 0.0),
        lambda: SynthesisComplete("a", "completed", 2, 0.0, 0.0, words=[{"word": "x"}]),  # type: ignore[list-item]
        lambda: Word("x", 2.0, 1.0),
        lambda: Word("x", -1.0, 1.0),
        lambda: ErrorFrame("Queue-Full", "m"),
        lambda: ErrorFrame("queue_full", "m", request_id=""),
        lambda: ErrorFrame("queue_full", "m", fatal=1),  # type: ignore[arg-type]
    ],
)
def test_server_frames_refuse_invalid_fields(build):
    with pytest.raises(ValueError):
        build()


# --- properties ------------------------------------------------------------------------------------------


seconds = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
ids = st.text(min_size=1, max_size=REQUEST_ID_MAX_CHARS)
words = st.tuples(st.text(max_size=12), seconds, seconds).map(
    lambda t: Word(t[0], min(t[1], t[2]), max(t[1], t[2]))
)
server_frames = st.one_of(
    st.builds(
        SynthesisStart,
        request_id=ids,
        sample_rate=st.sampled_from(SAMPLE_RATES),
        voice=st.text(min_size=1, max_size=20),
        speed=st.floats(0.5, 2.0) | st.sampled_from([1, 2]),
    ),
    st.builds(
        SynthesisComplete,
        request_id=ids,
        status=st.sampled_from(["completed", "cancelled", "failed"]),
        audio_bytes=st.integers(0, 10**9).map(lambda n: 2 * n),
        total_duration_s=seconds,
        elapsed_s=seconds,
        words=st.none() | st.lists(words, max_size=5).map(tuple),
    ),
    st.builds(
        ErrorFrame,
        code=st.sampled_from(list(ErrorCode)) | st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
        message=st.text(max_size=50),
        request_id=st.none() | ids,
        fatal=st.booleans(),
    ),
)


@settings(deadline=None)
@given(server_frames)
def test_server_frames_validate_and_round_trip(frame):
    obj = json.loads(frame.to_json())
    schemas.validate(obj["type"], obj)
    assert parse_server_control(obj) == frame
    if isinstance(frame, ErrorFrame):
        assert obj["message"] == frame.message  # as given: never rewritten (§9.3)


# --- encodings (§3.3.1) ----------------------------------------------------------------------------------


def test_synthesis_start_states_the_encoding():
    start = SynthesisStart(
        request_id="a", sample_rate=8000, voice="af_heart", speed=1.0, encoding="pcm_mulaw"
    )
    assert json.loads(start.to_json())["encoding"] == "pcm_mulaw"
    assert parse_server_control(json.loads(start.to_json())) == start
    # A G.711 bracket of three samples has an odd audio_bytes.
    assert SynthesisComplete("a", "completed", 3, 3 / 8000, 0.1).audio_bytes == 3

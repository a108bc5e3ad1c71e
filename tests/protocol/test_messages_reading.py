"""protocol.messages.reading: reading a server's control frames, refusals and later versions (§5)."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    ErrorFrame,
    InvalidServerFrame,
    SynthesisStart,
    UnknownFrameType,
    parse_server_control,
)

# --- reading server frames (§5) --------------------------------------------------------------------------


def test_parse_server_control_refusals():
    with pytest.raises(UnknownFrameType):
        parse_server_control({"type": "synthesis_progress", "request_id": "a"})
    with pytest.raises(UnknownFrameType):
        parse_server_control({"request_id": "a"})
    with pytest.raises(InvalidServerFrame):
        parse_server_control(["synthesis_start"])  # type: ignore[arg-type]
    with pytest.raises(InvalidServerFrame):
        parse_server_control({"type": "synthesis_start", "request_id": "a1"})  # the AWS sample's start
    with pytest.raises(InvalidServerFrame):
        parse_server_control(
            {"type": "synthesis_complete", "request_id": "a", "status": "completed", "audio_bytes": -2}
            | {"total_duration_s": 0, "elapsed_s": 0}
        )
    with pytest.raises(InvalidServerFrame):  # an encoding this version does not define
        parse_server_control(
            {"type": "synthesis_start", "request_id": "a", "sample_rate": 8000, "encoding": "opus"}
            | {"channels": 1, "voice": "af_heart", "speed": 1.0}
        )
    with pytest.raises(InvalidServerFrame):  # a word that ends before it starts: only the code sees it
        parse_server_control(
            {"type": "synthesis_complete", "request_id": "a", "status": "completed", "audio_bytes": 2}
            | {"total_duration_s": 0, "elapsed_s": 0, "words": [{"word": "x", "start_s": 2, "end_s": 1}]}
        )
    with pytest.raises(InvalidServerFrame):
        parse_server_control({"type": "error", "code": "queue_full", "message": "m"})  # no fatal


def test_parse_server_control_is_forward_compatible():
    frame = parse_server_control(
        {"type": "error", "code": "rate_limited", "message": "slow down", "fatal": False, "retry_after_s": 2}
    )
    assert frame == ErrorFrame("rate_limited", "slow down")
    assert not isinstance(frame.code, ErrorCode)
    start = parse_server_control(
        {"type": "synthesis_start", "request_id": "a", "sample_rate": 24000.0, "encoding": "pcm_s16le"}
        | {"channels": 1, "voice": "af_heart", "speed": 1, "model": "kokoro-82m"}
    )
    assert start == SynthesisStart(request_id="a", sample_rate=24000, voice="af_heart", speed=1.0)

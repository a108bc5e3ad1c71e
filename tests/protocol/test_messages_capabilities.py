"""protocol.messages.capabilities: describe's answer and its parts (PROTOCOL.md §4.4)."""

from __future__ import annotations

import json
import math

import pytest

from protocol import schemas
from protocol.limits import Limits
from protocol.messages import (
    FEATURES,
    PROTOCOL_VERSION,
    Capabilities,
    InvalidServerFrame,
    LanguageInfo,
    ServerInfo,
    VoiceInfo,
    parse_server_control,
)
from protocol.voices import KOKORO_VOICES, LANGUAGES

# --- describe and capabilities (§4.4) ---------------------------------------------------------------------

KOKORO_CAPABILITIES = Capabilities.from_limits(
    Limits(),
    server=ServerInfo("kokoro-bidi-tts", "0.1.0", "onnx"),
    voices=tuple(VoiceInfo.kokoro(v) for v in sorted(KOKORO_VOICES)),
    languages=tuple(LanguageInfo.kokoro(code, word_timings=code in "ab") for code in LANGUAGES),
)


def test_capabilities_of_the_54_voices_validate_and_round_trip():
    answer = KOKORO_CAPABILITIES.answering("d1")
    obj = json.loads(answer.to_json())
    schemas.validate("capabilities", obj)
    assert obj["protocol"] == PROTOCOL_VERSION == "1.1" and obj["features"] == list(FEATURES)
    assert obj["request_id"] == "d1" and KOKORO_CAPABILITIES.request_id is None
    assert len(obj["voices"]) == 54 and answer.voice_ids == KOKORO_VOICES
    assert {"id": "jm_kumo", "language": "j", "gender": "male"} in obj["voices"]
    assert obj["limits"]["max_message_bytes"] == Limits().max_message_bytes
    assert parse_server_control(obj) == answer
    assert len(answer.to_json().encode()) < 64 * 1024  # a control frame SHOULD stay under 64 KiB (§3.2)


def test_capabilities_leave_out_unbounded_limits():
    unbounded = Capabilities.from_limits(
        Limits(max_request_age_s=math.inf), server=ServerInfo("s", "1"), voices=(), languages=()
    )
    assert "max_request_age_s" not in unbounded.limits
    json.loads(unbounded.to_json())  # no Infinity in the JSON text (§1.4)


@pytest.mark.parametrize(
    "build",
    [
        lambda: VoiceInfo("bad voice", "a"),
        lambda: VoiceInfo("af_heart", "A"),
        lambda: VoiceInfo("af_heart", "a", "other"),
        lambda: LanguageInfo("a", "", "x"),
        lambda: LanguageInfo("a", "en", "x", word_timings=1),
        lambda: ServerInfo("", "1"),
        lambda: Capabilities(
            server=ServerInfo("s", "1"), voices=(VoiceInfo.kokoro("af_heart"),), languages=()
        ),
        lambda: Capabilities(
            server=ServerInfo("s", "1"),
            voices=(VoiceInfo.kokoro("af_heart"), VoiceInfo.kokoro("af_heart")),
            languages=(LanguageInfo.kokoro("a", word_timings=False),),
        ),
        lambda: Capabilities(server=ServerInfo("s", "1"), voices=(), languages=(), protocol="one"),
        lambda: Capabilities(server=ServerInfo("s", "1"), voices=(), languages=(), sample_rates=(0,)),
        lambda: Capabilities(server=ServerInfo("s", "1"), voices=(), languages=(), features=("Cancel",)),
        lambda: Capabilities(server=ServerInfo("s", "1"), voices=(), languages=(), limits={"x": math.nan}),
    ],
)
def test_capabilities_refuse_invalid_fields(build):
    with pytest.raises(ValueError):
        build()


def test_parse_capabilities_refusals_and_forward_compatibility():
    obj = json.loads(KOKORO_CAPABILITIES.to_json())
    later = obj | {"protocol": "1.2", "sample_rates": [24000, 48000], "features": ["cancel", "utterance"]}
    later |= {"server": obj["server"] | {"gpu": "H200"}, "extra": {"a": 1}}
    parsed = parse_server_control(later)
    assert parsed.protocol == "1.2" and 48000 in parsed.sample_rates and "utterance" in parsed.features
    for broken in (
        obj | {"voices": [{"id": "af_heart"}]},  # no language
        obj | {"languages": [{"code": "a", "tag": "en-US", "name": "x"}]},  # no word_timings
        {k: v for k, v in obj.items() if k != "limits"},
        obj | {"voices": [{"id": "af_heart", "language": "q"}]},  # a language not listed: code only
    ):
        with pytest.raises(InvalidServerFrame):
            parse_server_control(broken)

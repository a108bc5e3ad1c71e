"""protocol.messages.invocations: the body of POST /invocations (PROTOCOL.md §11.1)."""

from __future__ import annotations

import json

import pytest
from messages_support import NOW

from protocol import schemas
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (
    InvocationsRequest,
    SynthesisRequest,
    parse_invocations_request,
)
from protocol.voices import KOKORO_VOICES

# --- POST /invocations (§11.1) --------------------------------------------------------------------------


def test_invocations_defaults():
    parsed = parse_invocations_request(b'{"text":"Hello there."}')
    assert parsed == InvocationsRequest(
        SynthesisRequest("Hello there."), format="wav", transport="binary", stream=True
    )


def test_invocations_all_members():
    body = {
        "text": "Hi",
        "voice": "am_adam",
        "speed": 1.5,
        "sample_rate": 8000,
        "request_id": "h1",
        "request_timestamp": NOW,
        "format": "pcm",
        "transport": "sse",
        "stream": False,
        "type": "whatever",
    }
    parsed = parse_invocations_request(json.dumps(body), now=NOW, known_voices=KOKORO_VOICES)
    assert parsed == InvocationsRequest(
        SynthesisRequest("Hi", "am_adam", 1.5, 8000, "h1", NOW), "pcm", "sse", False
    )


@pytest.mark.parametrize(
    ("body", "code", "status"),
    [
        ('{"text":"hi","format":"ogg"}', ErrorCode.UNSUPPORTED_FORMAT, 400),
        ('{"text":"hi","format":"WAV"}', ErrorCode.UNSUPPORTED_FORMAT, 400),
        ('{"text":"hi","format":1}', ErrorCode.INVALID_FIELD, 400),
        ('{"text":"hi","transport":"websocket"}', ErrorCode.INVALID_FIELD, 400),
        ('{"text":"hi","stream":"yes"}', ErrorCode.INVALID_FIELD, 400),
        ('{"text":"hi","stream":1}', ErrorCode.INVALID_FIELD, 400),
        ('{"text":"  "}', ErrorCode.TEXT_REQUIRED, 400),
        ('{"text":"' + "a" * 10_001 + '"}', ErrorCode.TEXT_TOO_LONG, 413),
        ('{"text":"hi","request_timestamp":0}', ErrorCode.REQUEST_STALE, 408),
        ("[1]", ErrorCode.NOT_AN_OBJECT, 400),
        ("{", ErrorCode.INVALID_JSON, 400),
        ('{"text":"hi","speed":5,"format":"ogg"}', ErrorCode.INVALID_SPEED, 400),
        ('{"text":"hi","format":"ogg","request_timestamp":0}', ErrorCode.UNSUPPORTED_FORMAT, 400),
    ],
)
def test_invocations_refusals(body, code, status):
    with pytest.raises(ProtocolError) as info:
        parse_invocations_request(body, now=NOW)
    assert info.value.code == code
    assert info.value.code.http_status == status
    schemas.validate("http_error", info.value.http_body())


def test_invocations_mp3_needs_an_encoder():
    body = '{"text":"hi","format":"mp3","request_id":"m"}'
    assert parse_invocations_request(body).format == "mp3"
    with pytest.raises(ProtocolError) as info:
        parse_invocations_request(body, mp3_available=False)
    assert info.value.code == ErrorCode.UNSUPPORTED_FORMAT and info.value.request_id == "m"


def test_invocations_body_limit():
    body = json.dumps({"text": "a" * 70_000})
    with pytest.raises(ProtocolError) as info:
        parse_invocations_request(body.encode())
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE and info.value.code.http_status == 413


# --- encodings (§3.3.1, §11.1) ---------------------------------------------------------------------------


def test_invocations_take_g711_with_format_pcm_only():
    parsed = parse_invocations_request('{"text": "Hi.", "format": "pcm", "encoding": "pcm_mulaw"}')
    assert parsed.request.encoding == "pcm_mulaw"
    for fmt in ("wav", "mp3"):
        with pytest.raises(ProtocolError) as info:
            parse_invocations_request(f'{{"text": "Hi.", "format": "{fmt}", "encoding": "pcm_alaw"}}')
        assert info.value.code == "unsupported_encoding" and info.value.code.http_status == 400
    assert parse_invocations_request('{"text": "Hi.", "encoding": "pcm_s16le"}').format == "wav"

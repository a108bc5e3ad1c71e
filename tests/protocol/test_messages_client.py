"""protocol.messages.client: the client's messages, parsed and written (PROTOCOL.md §4.1-§4.4)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from messages_support import NOW, code_of

from protocol import schemas
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    Cancel,
    Close,
    Describe,
    InvocationsRequest,
    SynthesisRequest,
    parse_client_message,
    parse_invocations_body,
    parse_invocations_request,
)
from protocol.voices import KOKORO_VOICES

# --- synthesis request (§4.1) ---------------------------------------------------------------------------


def test_minimal_request_takes_defaults():
    assert parse_client_message('{"text":"Hello there."}') == SynthesisRequest(
        text="Hello there.", voice="af_heart", speed=1.0, sample_rate=24000, request_id=None
    )


def test_aws_sample_request():
    message = {
        "text": "Hello there.",
        "voice": "af_heart",
        "speed": 1.0,
        "request_id": "a1",
        "request_timestamp": NOW,
    }
    request = parse_client_message(json.dumps(message).encode(), now=NOW + 1, known_voices=KOKORO_VOICES)
    assert request == SynthesisRequest("Hello there.", "af_heart", 1.0, 24000, "a1", NOW)


def test_type_synthesize_and_null_members_are_defaults():
    nulls = ["voice", "speed", "sample_rate", "request_id", "request_timestamp"]
    message = json.dumps({"type": "synthesize", "text": "hi"} | dict.fromkeys(nulls))
    assert parse_client_message(message) == SynthesisRequest("hi")
    assert parse_client_message('{"type":null,"text":"hi"}') == SynthesisRequest("hi")


def test_unknown_members_are_ignored():
    assert parse_client_message('{"text":"hi","future":{"a":[1,2]},"x":null}') == SynthesisRequest("hi")


def test_text_is_passed_as_sent():
    assert parse_client_message('{"text":"  Hi.\\n"}').text == "  Hi.\n"


# --- cancel and close (§4.2, §4.3) ----------------------------------------------------------------------


def test_cancel_and_close():
    assert parse_client_message('{"type":"cancel"}') == Cancel()
    assert parse_client_message('{"type":"cancel","request_id":null}') == Cancel()
    assert parse_client_message('{"type":"cancel","request_id":"a2","why":"barge-in"}') == Cancel("a2")
    assert parse_client_message(b'{"type":"close"}') == Close()
    assert parse_client_message('{"type":"close","text":"ignored","request_id":5}') == Close()
    assert code_of('{"type":"cancel","request_id":""}') == ErrorCode.INVALID_FIELD
    assert code_of('{"type":"cancel","request_id":"' + "x" * 129 + '"}') == ErrorCode.INVALID_FIELD


def test_client_messages_serialize_to_valid_frames():
    request = SynthesisRequest("Hi.", "bf_emma", 1.25, 16000, "id-1", NOW)
    assert json.loads(request.to_json()) == {
        "text": "Hi.",
        "voice": "bf_emma",
        "speed": 1.25,
        "sample_rate": 16000,
        "request_id": "id-1",
        "request_timestamp": NOW,
    }
    assert "type" not in json.loads(request.to_json())  # as the AWS sample's clients send it
    schemas.validate("synthesis_request", request.to_dict())
    schemas.validate("cancel", Cancel().to_dict())
    schemas.validate("cancel", Cancel("a").to_dict())
    schemas.validate("close", Close().to_dict())
    assert Cancel("a").to_json() == '{"type":"cancel","request_id":"a"}'
    assert Close().to_json() == '{"type":"close"}'
    assert parse_client_message(Cancel("a").to_json()) == Cancel("a")
    assert parse_client_message(Close().to_json()) == Close()


# --- describe (§4.4) -------------------------------------------------------------------------------------


def test_describe_parses_on_the_websocket_and_on_invocations():
    assert parse_client_message(b'{"type":"describe"}') == Describe()
    assert parse_client_message('{"type":"describe","request_id":"d1","x":1}') == Describe("d1")
    assert parse_invocations_body(b'{"type":"describe","request_id":"d1"}') == Describe("d1")
    assert Describe("d1").to_json() == '{"type":"describe","request_id":"d1"}'
    # Any other type is still ignored on invocations (§11.1), so a v1 body keeps working.
    body = parse_invocations_body(b'{"type":"whatever","text":"Hi."}')
    assert isinstance(body, InvocationsRequest) and body.request.text == "Hi."
    # parse_invocations_request keeps its v1 contract: type ignored, so describe lacks text.
    with pytest.raises(ProtocolError) as info:
        parse_invocations_request(b'{"type":"describe"}')
    assert info.value.code == ErrorCode.TEXT_REQUIRED


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"type":"describe","request_id":""}', ErrorCode.INVALID_FIELD),
        (b'{"type":"describe","request_id":["d"]}', ErrorCode.INVALID_FIELD),
        (b'["describe"]', ErrorCode.NOT_AN_OBJECT),
        (b'{"type":"describe"', ErrorCode.INVALID_JSON),
    ],
)
def test_describe_refusals(body, code):
    assert code_of(body) == code
    with pytest.raises(ProtocolError) as info:
        parse_invocations_body(body)
    assert info.value.code == code


# --- properties -----------------------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
request_ish = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["synthesize", "cancel", "close", "describe", "speak", None]) | json_values,
        "text": st.sampled_from(["Hello.", "", "  ", "\u3000"]) | st.text(max_size=30) | json_values,
        "voice": st.sampled_from([*sorted(KOKORO_VOICES)[:5], "zz_x", "", "a b"]) | json_values,
        "speed": st.floats(0, 3) | json_values,
        "sample_rate": st.sampled_from([*SAMPLE_RATES, 44100, 24000.0]) | json_values,
        "request_id": st.text(min_size=0, max_size=130) | json_values,
        "request_timestamp": st.floats(NOW - 100, NOW + 100)
        | st.sampled_from(["2026-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "now"])
        | json_values,
        "extra": json_values,
    },
)


def valid_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= REQUEST_ID_MAX_CHARS


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_ish, st.booleans())
def test_random_messages_parse_or_raise_a_registry_code(obj, ascii_only):
    text = json.dumps(obj, ensure_ascii=ascii_only)
    try:
        message = parse_client_message(text, now=NOW, known_voices=KOKORO_VOICES)
    except ProtocolError as exc:
        assert exc.code in ErrorCode
        assert exc.request_id == (obj["request_id"] if valid_id(obj.get("request_id")) else None)
        with pytest.raises(ProtocolError) as again:
            parse_client_message(text.encode(), now=NOW, known_voices=KOKORO_VOICES)
        assert again.value.code == exc.code
        return
    assert parse_client_message(text.encode(), now=NOW, known_voices=KOKORO_VOICES) == message
    kind = obj.get("type")
    if isinstance(message, SynthesisRequest):
        assert kind in (None, "synthesize")
        schemas.validate("synthesis_request", obj)
        assert message.text.strip() and len(message.text) <= 10_000
        assert message.voice in KOKORO_VOICES
        assert 0.5 <= message.speed <= 2.0 and message.sample_rate in SAMPLE_RATES
        assert message.request_id is None or valid_id(message.request_id)
    elif isinstance(message, Cancel):
        assert kind == "cancel"
        schemas.validate("cancel", obj)
    elif isinstance(message, Describe):
        assert kind == "describe"
        schemas.validate("describe", obj)
    else:
        assert kind == "close" and message == Close()


@settings(deadline=None)
@given(
    st.data(),
    st.lists(
        st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0, 10**6), st.integers(0, 255)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_valid_messages_raise_only_protocol_errors(data, edits):
    base = bytearray(
        data.draw(
            st.sampled_from(
                [
                    b'{"text":"Hello there.","voice":"af_heart","speed":1.0,"request_id":"a1"}',
                    b'{"type":"cancel","request_id":"a2"}',
                    b'{"type":"close"}',
                    '{"text":"Grüße 😀","sample_rate":16000}'.encode(),
                ]
            )
        )
    )
    for op, position, byte in edits:
        i = position % (len(base) + 1)
        if op == "insert":
            base.insert(i, byte)
        elif base and op == "flip":
            base[i % len(base)] ^= byte or 1
        elif base:
            del base[i % len(base)]
    try:
        parse_client_message(bytes(base), known_voices=KOKORO_VOICES)
    except ProtocolError as exc:
        assert exc.code in ErrorCode


valid_requests = st.builds(
    SynthesisRequest,
    text=st.text(min_size=1, max_size=100).filter(str.strip),
    voice=st.sampled_from(sorted(KOKORO_VOICES)),
    speed=st.floats(0.5, 2.0),
    sample_rate=st.sampled_from(SAMPLE_RATES),
    request_id=st.none() | st.text(min_size=1, max_size=REQUEST_ID_MAX_CHARS),
    request_timestamp=st.none() | st.floats(NOW - 56, NOW + 10**6),
)


@settings(deadline=None)
@given(valid_requests)
def test_valid_requests_round_trip(request):
    assert parse_client_message(request.to_json(), now=NOW, known_voices=KOKORO_VOICES) == request
    assert parse_client_message(request.to_json().encode(), now=NOW, known_voices=KOKORO_VOICES) == request
    schemas.validate("synthesis_request", request.to_dict())
    body = json.dumps(request.to_dict() | {"format": "wav", "transport": "sse", "stream": False})
    assert parse_invocations_request(body, now=NOW, known_voices=KOKORO_VOICES).request == request


@settings(deadline=None)
@given(st.none() | st.text(min_size=1, max_size=REQUEST_ID_MAX_CHARS))
def test_cancel_round_trips(request_id):
    assert parse_client_message(Cancel(request_id).to_json()) == Cancel(request_id)


# --- encodings (§3.3.1, §4.1, §9.2) ----------------------------------------------------------------------


def test_encoding_defaults_to_pcm16_and_round_trips():
    assert parse_client_message('{"text": "Hi."}').encoding == "pcm_s16le"
    assert parse_client_message('{"text": "Hi.", "encoding": null}').encoding == "pcm_s16le"
    request = parse_client_message('{"text": "Hi.", "encoding": "pcm_mulaw", "sample_rate": 8000}')
    assert (request.encoding, request.sample_rate) == ("pcm_mulaw", 8000)
    assert parse_client_message(request.to_json()) == request
    assert "encoding" not in SynthesisRequest("Hi.").to_dict()  # a default request is a version 1 request
    opened = parse_client_message('{"type": "utterance", "request_id": "u", "encoding": "pcm_alaw"}')
    assert opened.encoding == "pcm_alaw" and opened.to_request().encoding == "pcm_alaw"

"""protocol.messages.fields: a request's members, checked in the order of PROTOCOL.md §9.2 (§4.1)."""

from __future__ import annotations

import json
import math

import pytest
from messages_support import NOW, code_of

from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    parse_client_message,
    rfc3339_to_epoch,
)
from protocol.voices import DEFAULT_VOICE, KOKORO_VOICES

# --- a synthesis request's members (§4.1) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ('{"voice":"af_heart"}', ErrorCode.TEXT_REQUIRED),
        ('{"text":null}', ErrorCode.TEXT_REQUIRED),
        ('{"text":""}', ErrorCode.TEXT_REQUIRED),
        ('{"text":" \\t\\n "}', ErrorCode.TEXT_REQUIRED),
        ('{"text":"\\u3000\\u00a0"}', ErrorCode.TEXT_REQUIRED),  # Unicode whitespace
        ('{"text":5}', ErrorCode.INVALID_FIELD),
        ('{"text":["hi"]}', ErrorCode.INVALID_FIELD),
        ('{"text":true}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","voice":3}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","voice":""}', ErrorCode.INVALID_VOICE),
        ('{"text":"hi","voice":"af heart"}', ErrorCode.INVALID_VOICE),
        ('{"text":"hi","voice":"af_heart\\n"}', ErrorCode.INVALID_VOICE),
        ('{"text":"hi","voice":"' + "a" * 129 + '"}', ErrorCode.INVALID_VOICE),
        ('{"text":"hi","speed":"fast"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","speed":true}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","speed":[1]}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","speed":0.49}', ErrorCode.INVALID_SPEED),
        ('{"text":"hi","speed":2.01}', ErrorCode.INVALID_SPEED),
        ('{"text":"hi","speed":-1}', ErrorCode.INVALID_SPEED),
        ('{"text":"hi","speed":1e300}', ErrorCode.INVALID_SPEED),
        ('{"text":"hi","sample_rate":44100}', ErrorCode.INVALID_SAMPLE_RATE),
        ('{"text":"hi","sample_rate":24000.5}', ErrorCode.INVALID_SAMPLE_RATE),
        ('{"text":"hi","sample_rate":0}', ErrorCode.INVALID_SAMPLE_RATE),
        ('{"text":"hi","sample_rate":"24000"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","sample_rate":false}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_id":5}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_id":""}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_id":"' + "r" * 129 + '"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_id":["a"]}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":true}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":"yesterday"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":"2026-01-01T00:00:00"}', ErrorCode.INVALID_FIELD),  # no offset
        ('{"text":"hi","request_timestamp":"2026-02-30T00:00:00Z"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":"2026-01-01T00:00:00+24:00"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":"2026-01-01T00:00:00Z\\n"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":"２０２６-01-01T00:00:00Z"}', ErrorCode.INVALID_FIELD),
        ('{"text":"hi","request_timestamp":' + "9" * 400 + "}", ErrorCode.INVALID_FIELD),
        ('{"type":"speak","text":"hi"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type":"synthesis_start","text":"hi"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type":"CLOSE"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type":3,"text":"hi"}', ErrorCode.INVALID_FIELD),
        ('{"type":["close"]}', ErrorCode.INVALID_FIELD),
    ],
)
def test_request_refusals(message, code):
    assert code_of(message, now=NOW) == code
    assert code_of(message.encode(), now=NOW) == code


def test_text_length_limit_counts_code_points():
    limits = Limits(max_text_chars=5)
    assert parse_client_message('{"text":"😀😀😀😀😀"}', limits=limits).text == "😀" * 5
    assert code_of('{"text":"😀😀😀😀😀😀"}', limits=limits) == ErrorCode.TEXT_TOO_LONG
    assert code_of('{"text":"' + "a" * 10_001 + '"}') == ErrorCode.TEXT_TOO_LONG
    assert parse_client_message('{"text":"' + "a" * 10_000 + '"}').text == "a" * 10_000


def test_voice_validity():
    custom = '{"text":"hi","voice":"my-voice_2.v1+blend"}'
    assert parse_client_message(custom).voice == "my-voice_2.v1+blend"
    assert code_of(custom, known_voices=KOKORO_VOICES) == ErrorCode.INVALID_VOICE
    assert code_of('{"text":"hi","voice":"af_nobody"}', known_voices=KOKORO_VOICES) == ErrorCode.INVALID_VOICE
    for voice in KOKORO_VOICES:
        message = json.dumps({"text": "hi", "voice": voice})
        assert parse_client_message(message, known_voices=KOKORO_VOICES).voice == voice
    # The default voice is not checked against known_voices when the client names none.
    assert parse_client_message('{"text":"hi"}', known_voices={"bf_emma"}).voice == DEFAULT_VOICE


def test_speed_and_sample_rate_values():
    assert parse_client_message('{"text":"hi","speed":0.5}').speed == 0.5
    assert parse_client_message('{"text":"hi","speed":2}').speed == 2.0
    assert isinstance(parse_client_message('{"text":"hi","speed":2}').speed, float)
    for rate in SAMPLE_RATES:
        assert parse_client_message(f'{{"text":"hi","sample_rate":{rate}}}').sample_rate == rate
    request = parse_client_message('{"text":"hi","sample_rate":16000.0}')
    assert request.sample_rate == 16000 and isinstance(request.sample_rate, int)


def test_request_id_bounds():
    assert parse_client_message('{"text":"hi","request_id":"x"}').request_id == "x"
    long_id = "😀" * REQUEST_ID_MAX_CHARS  # 128 characters, 512 bytes
    assert parse_client_message(json.dumps({"text": "hi", "request_id": long_id})).request_id == long_id


class TestTimestamps:
    def test_numbers(self):
        fresh = json.dumps({"text": "hi", "request_timestamp": NOW - 56})
        assert parse_client_message(fresh, now=NOW).request_timestamp == NOW - 56
        stale = json.dumps({"text": "hi", "request_timestamp": NOW - 56.001, "request_id": "s"})
        with pytest.raises(ProtocolError) as info:
            parse_client_message(stale, now=NOW)
        assert info.value.code == ErrorCode.REQUEST_STALE and info.value.request_id == "s"
        future = json.dumps({"text": "hi", "request_timestamp": NOW + 3600})
        assert parse_client_message(future, now=NOW).request_timestamp == NOW + 3600
        assert (
            parse_client_message('{"text":"hi","request_timestamp":1767225600}', now=NOW).request_timestamp
            == NOW
        )

    def test_limit_is_a_setting(self):
        message = json.dumps({"text": "hi", "request_timestamp": NOW - 10})
        assert code_of(message, now=NOW, limits=Limits(max_request_age_s=5)) == ErrorCode.REQUEST_STALE
        assert parse_client_message(message, now=NOW, limits=Limits(max_request_age_s=math.inf))

    def test_reads_the_clock_without_now(self):
        assert code_of('{"text":"hi","request_timestamp":0}') == ErrorCode.REQUEST_STALE
        assert parse_client_message('{"text":"hi","request_timestamp":4102444800}')  # 2100

    @pytest.mark.parametrize(
        ("value", "epoch"),
        [
            ("2026-01-01T00:00:00Z", NOW),
            ("2026-01-01t00:00:00z", NOW),
            ("2026-01-01T00:00:00.250Z", NOW + 0.25),
            ("2026-01-01T01:00:00+01:00", NOW),
            ("2025-12-31T23:30:00-00:30", NOW),
            ("2025-12-31T23:59:60Z", NOW),  # leap second
            ("1970-01-01T00:00:00Z", 0.0),
        ],
    )
    def test_rfc3339(self, value, epoch):
        assert rfc3339_to_epoch(value) == pytest.approx(epoch)
        message = json.dumps({"text": "hi", "request_timestamp": value})
        assert parse_client_message(message, now=epoch + 1).request_timestamp == pytest.approx(epoch)

    @pytest.mark.parametrize(
        "value",
        [
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00Z",
            "2026-1-01T00:00:00Z",
            "2026-01-01T00:00:00+0100",
            "0000-01-01T00:00:00Z",
        ],
    )
    def test_not_rfc3339(self, value):
        assert rfc3339_to_epoch(value) is None


class TestOrderOfChecks:
    """§9.2: the first failure in a fixed order is the answer, and it names the request when it can."""

    @pytest.mark.parametrize(
        ("message", "code", "request_id"),
        [
            ('{"text":5,"request_id":7}', ErrorCode.INVALID_FIELD, None),
            ('{"speed":9,"request_id":"q"}', ErrorCode.TEXT_REQUIRED, "q"),
            ('{"text":" ","voice":1,"request_id":"q"}', ErrorCode.TEXT_REQUIRED, "q"),
            ('{"text":"hi","voice":"?","speed":9,"request_id":"q"}', ErrorCode.INVALID_VOICE, "q"),
            ('{"text":"hi","speed":9,"sample_rate":1}', ErrorCode.INVALID_SPEED, None),
            ('{"text":"hi","sample_rate":1,"request_timestamp":0}', ErrorCode.INVALID_SAMPLE_RATE, None),
            ('{"type":"nope","request_id":"q"}', ErrorCode.UNKNOWN_TYPE, "q"),
            ('{"type":"nope","request_id":""}', ErrorCode.UNKNOWN_TYPE, None),
            ('{"type":1,"request_id":"q"}', ErrorCode.INVALID_FIELD, "q"),
            ('{"type":"cancel","request_id":5}', ErrorCode.INVALID_FIELD, None),
        ],
    )
    def test_first_failure_wins(self, message, code, request_id):
        with pytest.raises(ProtocolError) as info:
            parse_client_message(message, now=NOW)
        assert info.value.code == code
        assert info.value.request_id == request_id

    def test_messages_never_quote_the_text(self):
        secret = "my card number is 4111"
        for message in (
            {"text": secret * 500},
            {"text": secret, "speed": 9},
            {"text": secret, "voice": "?"},
        ):
            with pytest.raises(ProtocolError) as info:
                parse_client_message(json.dumps(message), limits=Limits(max_text_chars=100))
            assert secret not in info.value.message


# --- unknown voices (§4.4) -------------------------------------------------------------------------------


def test_unknown_voice_points_to_describe():
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text":"hi","voice":"af_nobody"}', known_voices={"af_heart"})
    assert info.value.code == ErrorCode.INVALID_VOICE and '{"type":"describe"}' in info.value.message


# --- encodings (§3.3.1, §4.1, §9.2) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "code"),
    [
        ('"encoding": "mulaw"', "unsupported_encoding"),
        ('"encoding": "PCM_MULAW"', "unsupported_encoding"),
        ('"encoding": ""', "unsupported_encoding"),
        ('"encoding": 7', "invalid_field"),
        ('"encoding": ["pcm_mulaw"]', "invalid_field"),
    ],
)
def test_unknown_encodings_are_refused_not_ignored(member, code):
    with pytest.raises(ProtocolError) as info:
        parse_client_message(f'{{"text": "Hi.", "request_id": "e1", {member}}}')
    assert (info.value.code, info.value.request_id) == (code, "e1")
    with pytest.raises(ProtocolError) as info:
        parse_client_message(f'{{"type": "utterance", "request_id": "u1", {member}}}')
    assert (info.value.code, info.value.message_type) == (code, "utterance")


def test_encoding_is_checked_after_sample_rate_and_before_the_timestamp():
    with pytest.raises(ProtocolError, match="sample_rate") as info:
        parse_client_message('{"text": "Hi.", "sample_rate": 44100, "encoding": "mulaw"}')
    assert info.value.code == "invalid_sample_rate"
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "Hi.", "encoding": "mulaw", "request_timestamp": 1.0}')
    assert info.value.code == "unsupported_encoding"


def test_a_server_refuses_encodings_it_does_not_offer():
    only_pcm = ("pcm_s16le",)
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "Hi.", "encoding": "pcm_alaw"}', encodings=only_pcm)
    assert info.value.code == "unsupported_encoding" and "pcm_s16le" in info.value.message
    assert parse_client_message('{"text": "Hi."}', encodings=only_pcm).encoding == "pcm_s16le"

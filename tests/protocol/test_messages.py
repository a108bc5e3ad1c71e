"""protocol.messages, .errors, .limits and .voices (PROTOCOL.md §3.1, §4, §5, §9, §10)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import schemas
from protocol.errors import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_TRY_AGAIN_LATER,
    REGISTRY,
    ErrorCode,
    ProtocolError,
)
from protocol.limits import AUDIO_FRAME_HARD_LIMIT, Limits
from protocol.messages import (
    FEATURES,
    PROTOCOL_VERSION,
    REQUEST_ID_MAX_CHARS,
    SAMPLE_RATES,
    Cancel,
    Capabilities,
    Close,
    Describe,
    ErrorFrame,
    InvalidServerFrame,
    InvocationsRequest,
    LanguageInfo,
    Marks,
    ServerFrame,
    ServerInfo,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    UnknownFrameType,
    VoiceInfo,
    Word,
    decode_json_object,
    parse_client_message,
    parse_invocations_body,
    parse_invocations_request,
    parse_server_control,
    rfc3339_to_epoch,
)
from protocol.voices import (
    DEFAULT_VOICE,
    KOKORO_VOICES,
    LANGUAGE_NAMES,
    LANGUAGE_TAGS,
    LANGUAGES,
    VOICE_LANGUAGE,
    language,
    language_of,
    voice_gender,
    voice_language,
)

SPEC = (Path(__file__).resolve().parents[2] / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def code_of(data: bytes | str, **kwargs: object) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data, **kwargs)  # type: ignore[arg-type]
    return info.value.code


# --- the registry (§9.1) ------------------------------------------------------------------------------


def spec_section(number: str) -> str:
    """The text of one '### <number> ...' subsection of PROTOCOL.md."""
    match = re.search(rf"^### {re.escape(number)} .*?(?=^### |^## )", SPEC, re.M | re.S)
    assert match, number
    return match.group(0)


def table_rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_registry_covers_every_code():
    assert set(REGISTRY) == set(ErrorCode)


def test_registry_matches_the_spec_table():
    rows = {row[0].strip("`"): row for row in table_rows(spec_section("9.1"))}
    assert set(rows) == {code.value for code in ErrorCode}
    for code in ErrorCode:
        _, _, scope, close, http = rows[code.value]
        assert code.fatal == (scope == "fatal"), code
        if close == "—":
            assert code.close_code is None, code
        else:
            assert code.close_code == int(close.split()[0]), code
        assert code.http_status == (None if http == "—" else int(http)), code


def test_fatal_codes_and_close_codes():
    assert [code for code in ErrorCode if code.fatal] == [
        ErrorCode.SESSION_IDLE,
        ErrorCode.CLIENT_NOT_READING,
        ErrorCode.TOO_MANY_SESSIONS,
    ]
    assert ErrorCode.TOO_MANY_SESSIONS.close_code == CLOSE_TRY_AGAIN_LATER == 1013
    assert ErrorCode.INTERNAL_ERROR.close_code == CLOSE_INTERNAL_ERROR == 1011
    assert not ErrorCode.INTERNAL_ERROR.fatal
    assert ErrorCode.REQUEST_STALE.http_status == 408
    assert ErrorCode.TEXT_TOO_LONG.http_status == ErrorCode.MESSAGE_TOO_LARGE.http_status == 413
    assert ErrorCode.QUEUE_FULL.http_status == 503


def test_protocol_error_frame_and_http_body():
    error = ProtocolError(ErrorCode.QUEUE_FULL, "32 requests are queued", request_id="a1")
    assert str(error) == "queue_full: 32 requests are queued"
    frame = ErrorFrame.from_error(error).to_dict()
    assert frame == {
        "type": "error",
        "code": "queue_full",
        "message": "32 requests are queued",  # the code is not repeated (§9.3)
        "request_id": "a1",
        "fatal": False,
    }
    schemas.validate("error", frame)
    schemas.validate("http_error", error.http_body())
    assert error.http_body() == {"error": {"code": "queue_full", "message": "32 requests are queued"}}
    fatal = ProtocolError(ErrorCode.TOO_MANY_SESSIONS, "64 sessions")
    assert fatal.fatal and ErrorFrame.from_error(fatal).to_dict()["fatal"] is True
    assert ProtocolError(ErrorCode.INTERNAL_ERROR, "boom", fatal=True).fatal


# --- limits (§10) -------------------------------------------------------------------------------------


def test_limit_defaults_match_the_spec_table():
    match = re.search(r"^## 10\. Limits.*?(?=^## )", SPEC, re.M | re.S)
    assert match
    rows = table_rows(match.group(0))
    defaults = Limits()
    assert {row[0].strip("`") for row in rows} == set(Limits.__dataclass_fields__)
    for row in rows:
        name, default = row[0].strip("`"), float(row[1].replace(",", ""))
        assert getattr(defaults, name) == default, name


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_message_bytes": 0},
        {"max_text_chars": -1},
        {"max_queue": True},
        {"max_sessions": 1.5},
        {"max_json_depth": 0},
        {"lookahead": -1},
        {"max_audio_frame_bytes": 33},
        {"max_audio_frame_bytes": 62},
        {"max_audio_frame_bytes": AUDIO_FRAME_HARD_LIMIT + 2},
        {"max_request_age_s": 0},
        {"max_request_age_s": float("nan")},
        {"close_timeout_s": -1.0},
    ],
)
def test_limits_refuse_out_of_range_values(kwargs):
    with pytest.raises(ValueError):
        Limits(**kwargs)


def test_limits_accept_their_bounds():
    Limits(max_audio_frame_bytes=AUDIO_FRAME_HARD_LIMIT, lookahead=0, max_request_age_s=math.inf)
    Limits(max_audio_frame_bytes=64)


# --- voices -------------------------------------------------------------------------------------------


def test_voices():
    assert len(KOKORO_VOICES) == 54
    assert DEFAULT_VOICE in KOKORO_VOICES
    assert set(VOICE_LANGUAGE) == KOKORO_VOICES
    assert set(VOICE_LANGUAGE.values()) == set(LANGUAGE_NAMES) == set(LANGUAGE_TAGS)
    assert voice_language("ff_siwis") == "f" and voice_language("zm_yunxi") == "z"
    assert sum(1 for v in KOKORO_VOICES if v.startswith("a")) == 20
    for voice in KOKORO_VOICES:
        assert re.fullmatch(r"[abefhijpz][fm]_[a-z]+", voice)
    with pytest.raises(KeyError):
        voice_language("xx_nobody")


def test_languages_table():
    assert "".join(LANGUAGES) == "abefhijpz"
    assert language_of("jf_alpha").tag == "ja" and language_of("af_heart+af_bella").code == "a"
    assert language_of("pm_santa").primary == "pt"
    for code_or_tag, code in [
        ("j", "j"),
        ("ja", "j"),
        ("JA-jp", "j"),
        ("pt_BR", "p"),
        ("pt-br", "p"),
        ("en", "a"),
        ("en-GB", "b"),
        ("cmn", "z"),
        ("zh", "z"),
        ("fr-fr", "f"),
        ("Hindi", "h"),
    ]:
        assert language(code_or_tag).code == code, code_or_tag
    for bad in ("xx", "", "de"):
        with pytest.raises(KeyError):
            language(bad)
    with pytest.raises(KeyError):
        language_of("xf_nobody")
    assert voice_gender("zm_yunxi") == "male" and voice_gender("ef_dora") == "female"
    assert voice_gender("x") is None


# --- strict JSON text (§3.1) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", ErrorCode.INVALID_JSON),
        ("", ErrorCode.INVALID_JSON),
        (" \t\r\n", ErrorCode.INVALID_JSON),
        (b"\xff", ErrorCode.INVALID_UTF8),
        (b'{"text":"\xc0\xaf"}', ErrorCode.INVALID_UTF8),  # overlong "/"
        (b'{"text":"\xed\xa0\x80"}', ErrorCode.INVALID_UTF8),  # an encoded surrogate
        (b'{"text":"\xe2\x82"}', ErrorCode.INVALID_UTF8),  # truncated sequence
        ('{"text":"\ud800"}', ErrorCode.INVALID_UTF8),  # a str holding a lone surrogate
        ('{"text":"\\ud800"}', ErrorCode.INVALID_JSON),  # an escaped lone surrogate
        ('{"text":"\\udc00\\ud800"}', ErrorCode.INVALID_JSON),  # a reversed pair
        ('{"text":"hi","x":["\\ud800"]}', ErrorCode.INVALID_JSON),  # nested in an ignored member
        ('{"text":"hi","\\udfff":1}', ErrorCode.INVALID_JSON),  # in a member name
        ("\ufeff" + '{"text":"hi"}', ErrorCode.INVALID_JSON),
        (b'\xef\xbb\xbf{"text":"hi"}', ErrorCode.INVALID_JSON),
        ('{"text":"hi"', ErrorCode.INVALID_JSON),
        ('{"text":"hi"} {}', ErrorCode.INVALID_JSON),
        ('{"text":"hi"}\n{"text":"ho"}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","speed":NaN}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","speed":Infinity}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","speed":-Infinity}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","x":1e400}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","x":-1e400}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","x":' + "1" * 5000 + "}", ErrorCode.INVALID_JSON),
        ('{"text":"hi","text":"ho"}', ErrorCode.INVALID_JSON),
        ('{"text":"hi","x":{"a":1,"a":1}}', ErrorCode.INVALID_JSON),
        ("{'text':'hi'}", ErrorCode.INVALID_JSON),
        ('{"text":"hi",}', ErrorCode.INVALID_JSON),
        ('{"text":"a\tb"}', ErrorCode.INVALID_JSON),  # raw control character in a string
        ("[]", ErrorCode.NOT_AN_OBJECT),
        ('"text"', ErrorCode.NOT_AN_OBJECT),
        ("null", ErrorCode.NOT_AN_OBJECT),
        ("12", ErrorCode.NOT_AN_OBJECT),
    ],
)
def test_json_text_rules(data, code):
    assert code_of(data) == code


def test_text_and_binary_frames_are_the_same():
    message = '{"text":"Grüße, 世界","request_id":"x"}'
    assert parse_client_message(message) == parse_client_message(message.encode("utf-8"))
    assert parse_client_message(bytearray(message.encode())) == parse_client_message(message)


def test_json_whitespace_around_the_object_is_fine():
    assert parse_client_message(' \r\n\t{"text":"hi"}\n ') == SynthesisRequest("hi")


def nested(depth: int) -> str:
    """A request whose extra member makes the message ``depth`` levels deep."""
    return '{"text":"hi","x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_nesting_depth_limit():
    assert parse_client_message(nested(32)) == SynthesisRequest("hi")
    assert code_of(nested(33)) == ErrorCode.INVALID_JSON
    limits = Limits(max_json_depth=2)
    assert parse_client_message(nested(2), limits=limits) == SynthesisRequest("hi")
    assert code_of(nested(3), limits=limits) == ErrorCode.INVALID_JSON


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = "[[[[" * 20 + '\\"' + "{{{{" * 20 + "\\\\"
    assert parse_client_message('{"text":"' + text + '"}').text == text.replace('\\"', '"').replace(
        "\\\\", "\\"
    )


@pytest.mark.parametrize("opening", ["[", "{", '{"a":'])
def test_very_deep_nesting_is_invalid_json_not_recursion_error(opening):
    big = Limits(max_message_bytes=1 << 21)
    data = opening * 100_000
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data, limits=big)
    assert info.value.code == ErrorCode.INVALID_JSON
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data.encode(), limits=big)
    assert info.value.code == ErrorCode.INVALID_JSON
    # Under the default limits the same input is refused before anything is decoded.
    assert code_of(data) == ErrorCode.MESSAGE_TOO_LARGE


def test_message_size_limit_is_in_utf8_bytes():
    limits = Limits(max_message_bytes=64)
    head, tail = '{"text":"', '"}'
    fits = head + "a" * (64 - len(head) - len(tail)) + tail
    assert len(fits.encode()) == 64
    assert parse_client_message(fits, limits=limits).text
    assert parse_client_message(fits.encode(), limits=limits).text
    over = head + "a" * (65 - len(head) - len(tail)) + tail
    assert code_of(over, limits=limits) == ErrorCode.MESSAGE_TOO_LARGE
    assert code_of(over.encode(), limits=limits) == ErrorCode.MESSAGE_TOO_LARGE
    # 20 characters, 60 bytes of text: over the limit in bytes although short in characters.
    wide = head + "語" * 20 + tail
    assert len(wide) < 64 < len(wide.encode())
    assert code_of(wide, limits=limits) == ErrorCode.MESSAGE_TOO_LARGE
    # Size is checked before UTF-8 validity.
    assert code_of(b"\xff" * 65, limits=limits) == ErrorCode.MESSAGE_TOO_LARGE


def test_decode_json_object_keeps_member_order():
    obj = decode_json_object(b'{"b":1,"a":2}', max_bytes=100, max_depth=2)
    assert list(obj) == ["b", "a"]


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


def test_the_error_registry_imports_nothing_of_the_message_layer():
    """errors <-> messages was an import circle (ProtocolError.to_frame); the frame has one home now."""
    probe = "import sys, protocol.errors; print('protocol.messages' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
    assert not hasattr(ProtocolError, "to_frame")


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


# --- describe and capabilities (§4.4) ---------------------------------------------------------------------

KOKORO_CAPABILITIES = Capabilities.from_limits(
    Limits(),
    server=ServerInfo("kokoro-bidi-tts", "0.1.0", "onnx"),
    voices=tuple(VoiceInfo.kokoro(v) for v in sorted(KOKORO_VOICES)),
    languages=tuple(LanguageInfo.kokoro(code, word_timings=code in "ab") for code in LANGUAGES),
)


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


def test_unknown_voice_points_to_describe():
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text":"hi","voice":"af_nobody"}', known_voices={"af_heart"})
    assert info.value.code == ErrorCode.INVALID_VOICE and '{"type":"describe"}' in info.value.message


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
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(data):
    try:
        parse_client_message(data)
    except ProtocolError as exc:
        assert exc.code in ErrorCode


@settings(deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_protocol_errors(data):
    try:
        parse_client_message(data)
    except ProtocolError as exc:
        assert exc.code in ErrorCode


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


def test_invocations_take_g711_with_format_pcm_only():
    parsed = parse_invocations_request('{"text": "Hi.", "format": "pcm", "encoding": "pcm_mulaw"}')
    assert parsed.request.encoding == "pcm_mulaw"
    for fmt in ("wav", "mp3"):
        with pytest.raises(ProtocolError) as info:
            parse_invocations_request(f'{{"text": "Hi.", "format": "{fmt}", "encoding": "pcm_alaw"}}')
        assert info.value.code == "unsupported_encoding" and info.value.code.http_status == 400
    assert parse_invocations_request('{"text": "Hi.", "encoding": "pcm_s16le"}').format == "wav"


def test_synthesis_start_states_the_encoding():
    start = SynthesisStart(
        request_id="a", sample_rate=8000, voice="af_heart", speed=1.0, encoding="pcm_mulaw"
    )
    assert json.loads(start.to_json())["encoding"] == "pcm_mulaw"
    assert parse_server_control(json.loads(start.to_json())) == start
    # A G.711 bracket of three samples has an odd audio_bytes.
    assert SynthesisComplete("a", "completed", 3, 3 / 8000, 0.1).audio_bytes == 3

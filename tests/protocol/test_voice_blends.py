"""Voice blends (PROTOCOL.md §4.1, version 1.1): the grammar, the canonical form, refusals, the session."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    VOICE_PATTERN,
    Capabilities,
    ServerInfo,
    parse_client_message,
    parse_invocations_body,
)
from protocol.server_session import ServerSession
from protocol.voices import (
    BLEND_MAX_VOICES,
    KOKORO_VOICES,
    VOICE_LANGUAGE,
    InvalidVoiceError,
    Voice,
    language_of,
    parse_voice,
)

ENGLISH = sorted(v for v in KOKORO_VOICES if VOICE_LANGUAGE[v] == "a")


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("af_bella(2)+af_sky(1)", "af_bella(0.6667)+af_sky(0.3333)"),  # Kokoro-FastAPI's example
        ("af_bella+af_sky", "af_bella(0.5)+af_sky(0.5)"),  # no weight: 1 each
        ("af_sky(1)+af_bella(2)", "af_bella(0.6667)+af_sky(0.3333)"),  # sorted by id
        ("af_sky(.5)+af_bella(1.0)", "af_bella(0.6667)+af_sky(0.3333)"),  # same ratio, other spelling
        ("af_bella+af_sky+af_heart", "af_bella(0.3334)+af_heart(0.3333)+af_sky(0.3333)"),  # tie: earliest
        ("af_bella(3)+af_sky", "af_bella(0.75)+af_sky(0.25)"),
        ("af_bella(2)", "af_bella"),  # one voice is the voice
        ("af_bella", "af_bella"),
        ("af_bella(9999)+af_sky(1)", "af_bella(0.9999)+af_sky(0.0001)"),
        (
            "zf_xiaoyi+zf_xiaoxiao+zf_xiaoni+zf_xiaobei",
            "zf_xiaobei(0.25)+zf_xiaoni(0.25)+zf_xiaoxiao(0.25)+zf_xiaoyi(0.25)",
        ),
    ],
)
def test_canonical_form(spec, canonical):
    blend = parse_voice(spec, KOKORO_VOICES)
    assert str(blend) == canonical
    assert sum(weight for _, weight in blend.parts) == 1  # exactly: multiples of 1/10000
    assert VOICE_PATTERN.fullmatch(canonical) and canonical[0] == spec[0]  # its language comes first
    assert parse_voice(canonical, KOKORO_VOICES) == blend  # the echo, sent back, is the same blend


@pytest.mark.parametrize(
    ("spec", "part", "says"),
    [
        ("af_bella+zz_nobody", "zz_nobody", 'unknown voice "zz_nobody"'),
        ("af_bella+jf_alpha", "jf_alpha", "share one language"),
        ("af_bella(0)+af_sky", "af_bella(0)", "greater than 0"),
        ("af_bella(0.0)+af_sky", "af_bella(0.0)", "greater than 0"),
        ("af_bella(x)+af_sky", "af_bella(x)", 'the weight "x"'),
        ("af_bella(1e3)+af_sky", "af_bella(1e3)", 'weight "1e3"'),
        ("af_bella(-1)+af_sky", "af_bella(-1)", 'weight "-1"'),
        ("af_bella++af_sky", "af_bella++af_sky", 'empty part after "af_bella"'),
        ("af_bella+", "af_bella+", "empty part"),
        ("+af_bella", "+af_bella", "at the start"),
        ("af_bella(2", "af_bella(2", "not a voice or voice(weight)"),
        ("af_bella+af_bella(2)", "af_bella", "twice"),
        (
            "af_bella+af_sky+af_heart+af_nova+af_kore",
            "af_bella+af_sky+af_heart+af_nova+af_kore",
            "5 voices; at most 4",
        ),
        ("af_bella(100000)+af_sky", "af_sky", "rounds to 0"),
    ],
)
def test_invalid_blends_name_the_bad_part(spec, part, says):
    with pytest.raises(InvalidVoiceError, match=re.escape(says)) as info:
        parse_voice(spec, KOKORO_VOICES)
    assert info.value.part == part and part in str(info.value)


def test_a_listed_voice_is_that_voice_whatever_it_holds():
    assert parse_voice("my+voice", {"my+voice", "my"}) == Voice((("my+voice", Fraction(1)),))


def test_a_voice_knows_its_language_and_parts():
    plain = Voice.parse("jf_alpha", KOKORO_VOICES)
    assert plain.voices == ("jf_alpha",) and not plain.is_blend and plain.weights == (1.0,)
    assert plain.code == "j" and plain.language is not None and plain.language.tag == "ja"
    blend = Voice.parse("af_sky+af_bella(3)", KOKORO_VOICES)
    assert blend.voices == ("af_bella", "af_sky") and blend.weights == (0.75, 0.25)
    assert blend.language is not None and blend.language.code == "a" and blend.is_blend
    assert Voice.parse(str(blend)) == blend == parse_voice("af_sky+af_bella(3)", KOKORO_VOICES)
    assert language_of(blend) is language_of(str(blend)) is language_of("af_bella")


def test_without_a_voice_list_any_id_is_a_voice():
    # A voice a session already accepted (a server's own pack, a canonical blend) is read without the list.
    own = Voice.parse("xf_mine")
    assert own.voices == ("xf_mine",) and own.code == "x" and own.language is None
    assert Voice.parse("xf_a+xf_b(3)").voices == ("xf_a", "xf_b")
    with pytest.raises(InvalidVoiceError, match="share one language"):
        Voice.parse("xf_a+yf_b")
    with pytest.raises(KeyError):
        language_of("xf_mine")
    with pytest.raises(KeyError):  # a malformed blend names no language
        language_of("af_a++af_b")


def test_the_same_coded_refusal_as_the_session():
    # Voice.parse is what the session's invalid_voice comes from: the same message, the same part.
    with pytest.raises(InvalidVoiceError) as info:
        Voice.parse("af_bella+zz_nobody", KOKORO_VOICES)
    with pytest.raises(ProtocolError) as session:
        parse_client_message(_request("af_bella+zz_nobody"), known_voices=KOKORO_VOICES, voice_blends=True)
    assert session.value.code == ErrorCode.INVALID_VOICE and str(info.value) in str(session.value)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(ENGLISH), min_size=1, max_size=BLEND_MAX_VOICES, unique=True),
    st.lists(st.integers(1, 10_000), min_size=BLEND_MAX_VOICES, max_size=BLEND_MAX_VOICES),
    st.integers(0, 3),
)
def test_canonical_form_is_a_fixed_point(voices, weights, decimals):
    spec = "+".join(f"{v}({w / 10**decimals})" for v, w in zip(voices, weights, strict=False))
    try:
        blend = parse_voice(spec, KOKORO_VOICES)
    except InvalidVoiceError as exc:  # only a share under 1/10000 may be refused
        assert "rounds to 0" in str(exc)
        return
    again = parse_voice(str(blend), KOKORO_VOICES)
    assert again == blend and str(again) == str(blend)
    assert len(str(blend)) <= 128
    total = sum(weights[: len(voices)])
    for (voice, weight), share in zip(blend.parts, sorted(zip(voices, weights, strict=False)), strict=True):
        assert voice == share[0]
        assert abs(weight - Fraction(share[1], total)) <= Fraction(1, 10_000)  # rounded, never further


# --- the messages (§4.1, §9.2) ------------------------------------------------------------------------------


def _request(voice: str) -> str:
    return json.dumps({"text": "Hello.", "voice": voice, "request_id": "b1"})


def test_requests_carry_the_canonical_blend_when_blends_are_offered():
    request = parse_client_message(
        _request("af_sky+af_bella(3)"), known_voices=KOKORO_VOICES, voice_blends=True
    )
    assert request.voice == "af_bella(0.75)+af_sky(0.25)"
    plain = parse_client_message(_request("af_bella"), known_voices=KOKORO_VOICES, voice_blends=True)
    assert plain.voice == "af_bella"
    http = parse_invocations_body(
        json.dumps({"text": "Hi.", "voice": "af_bella+af_sky"}), known_voices=KOKORO_VOICES, voice_blends=True
    )
    assert http.request.voice == "af_bella(0.5)+af_sky(0.5)"  # type: ignore[union-attr]


@pytest.mark.parametrize("voice", ["af_bella+af_sky", "af_bella(2)"])
def test_a_server_without_blends_refuses_them(voice):
    with pytest.raises(ProtocolError) as info:
        parse_client_message(_request(voice), known_voices=KOKORO_VOICES)
    assert info.value.code is ErrorCode.INVALID_VOICE and info.value.request_id == "b1"


@pytest.mark.parametrize(
    ("voice", "part"),
    [("af_bella+jf_alpha", "jf_alpha"), ("af_bella(0)+af_sky", "af_bella(0)"), ("af_bella+zz_x", "zz_x")],
)
def test_invalid_blends_are_invalid_voice_naming_the_part(voice, part):
    with pytest.raises(ProtocolError) as info:
        parse_client_message(_request(voice), known_voices=KOKORO_VOICES, voice_blends=True)
    assert info.value.code is ErrorCode.INVALID_VOICE and part in info.value.message
    assert info.value.request_id == "b1"


def test_the_voice_pattern_takes_blends_up_to_128_characters():
    assert VOICE_PATTERN.fullmatch("af_bella(0.6667)+af_sky(0.3333)")
    assert VOICE_PATTERN.fullmatch("a" * 128) and not VOICE_PATTERN.fullmatch("a" * 129)
    for bad in ("af bella", "af_bella,af_sky", "(af_bella)"):
        assert not VOICE_PATTERN.fullmatch(bad)


def test_the_session_echoes_the_canonical_blend_and_lists_the_feature():
    capabilities = Capabilities.from_limits(Limits(), server=ServerInfo("t", "1"), voices=(), languages=())
    for offered in (True, False):
        session = ServerSession(known_voices=KOKORO_VOICES, capabilities=capabilities, voice_blends=offered)
        session.receive_frame(b'{"type": "describe"}')
        session.receive_frame(_request("af_sky(1)+af_bella(2)"))
        frames = [json.loads(f) for f in session.data_to_send()]
        assert ("voice_blend" in frames[0]["features"]) is offered
        if not offered:
            assert frames[1]["type"] == "error" and frames[1]["code"] == "invalid_voice"
            continue
        request = session.next_request()
        assert request is not None and session.start("b1")
        [start] = [json.loads(f) for f in session.data_to_send()]
        assert start["voice"] == "af_bella(0.6667)+af_sky(0.3333)"

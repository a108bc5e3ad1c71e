"""protocol.messages.jsontext: the strict JSON text of a message (PROTOCOL.md §3.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from messages_support import code_of

from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    SynthesisRequest,
    decode_json_object,
    parse_client_message,
)

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


# --- properties ------------------------------------------------------------------------------------------


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

"""The bad-input table: client messages a server must refuse, each with the code it must answer (no I/O).

Every row is its own conformance case (``9.1.<n>``, and ``9.2.<n>`` for the order-of-checks rows): the raw
bytes of one client message, the frame type it is sent as (``BINARY``, or ``UTF8`` for a TEXT frame), the
code of PROTOCOL.md §9.1 the server must answer with and the ``request_id`` the error frame must carry (the
message's own id when it was a valid one, else ``null``; §9.2). The case then checks that the very next
valid request on the same session succeeds (§6.3: a refusal changes nothing else).

Messages that are not valid UTF-8 are only sent in BINARY frames: in a TEXT frame the WebSocket layer
itself fails the connection with 1007 before the protocol sees them (§2.5). Limits are the protocol's
defaults (§10): a server certified with other limits fails the rows that probe them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from conformance.engine.case import Case, Level
from protocol.errors import ErrorCode

__all__ = ["ROWS", "BadInput"]


@dataclass(frozen=True)
class BadInput:
    """One row: a message to refuse and the answer expected.

    Attributes:
        case: the row's conformance case.
        frame: the message's bytes.
        data_type: ``BINARY`` or ``UTF8`` (a TEXT frame at the container).
        code: the registry code the error frame must carry.
        request_id: the ``request_id`` the error frame must carry (``None``: ``null`` or absent).
    """

    case: Case
    frame: bytes
    data_type: str
    code: ErrorCode
    request_id: str | None


_ORDER_RULE = (
    "the server MUST answer with the **first** failure in this order, "
    "so that every implementation gives the same code"
)
_UTF8 = "not valid UTF-8 (overlong forms, encoded surrogates and truncated sequences included)"
_EMPTY = "empty, or only JSON whitespace"
_SYNTAX = "a JSON syntax error, or anything after the value but JSON whitespace"
_NUMBERS = "the literals `NaN`, `Infinity`, `-Infinity`, or a number outside the double range (`1e400`)"
_DUPLICATE = "a duplicate member name in any object, at any depth (RFC 7493 §2.3)"
_NOT_OBJECT = "a JSON value that is not an object"
_SEVERAL = "several objects in one message (JSON Lines, concatenation) are `invalid_json`"
_TEXT_REQUIRED = "`text` missing, `null`, empty or whitespace only (§4.1)"
_TYPES = {
    "type": "`type` not a string",
    "request_id": "`request_id` not a string of 1–128 characters",
    "text": "`text`, `voice` not strings",
    "speed": "`speed`, `sample_rate` not numbers",
    "request_timestamp": "`request_timestamp` neither a number nor a valid RFC 3339 date-time",
}


def _json(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=True).encode()


def _message_too_large() -> bytes:
    # One byte over the default max_message_bytes (65,536, §10), and still a valid request otherwise.
    head = b'{"text": "Hi.", "padding": "'
    return head + b"x" * (65_537 - len(head) - 2) + b'"}'


# (description, frame, data type, code, request_id in the error frame, section, requirement)
_FRAME_ROWS: list[tuple[str, bytes, str, ErrorCode, str | None, str, str]] = [
    (
        "a Latin-1 byte (0xE9) inside a string",
        b'{"text": "caf\xe9"}',
        "BINARY",
        ErrorCode.INVALID_UTF8,
        None,
        "§3.1",
        _UTF8,
    ),
    (
        "an overlong encoding of '/' (C0 AF)",
        b'{"text": "\xc0\xaf"}',
        "BINARY",
        ErrorCode.INVALID_UTF8,
        None,
        "§3.1",
        _UTF8,
    ),
    (
        "an encoded surrogate (ED A0 80)",
        b'{"text": "\xed\xa0\x80"}',
        "BINARY",
        ErrorCode.INVALID_UTF8,
        None,
        "§3.1",
        _UTF8,
    ),
    (
        "a truncated 3-byte sequence (E2 82)",
        b'{"text": "\xe2\x82"}',
        "BINARY",
        ErrorCode.INVALID_UTF8,
        None,
        "§3.1",
        _UTF8,
    ),
    ("plain text, not JSON", b"Hello there.", "BINARY", ErrorCode.INVALID_JSON, None, "§3.1", _SYNTAX),
    ("an empty BINARY message", b"", "BINARY", ErrorCode.INVALID_JSON, None, "§3.1", _EMPTY),
    ("an empty TEXT message", b"", "UTF8", ErrorCode.INVALID_JSON, None, "§3.1", _EMPTY),
    ("only JSON whitespace", b" \r\n\t ", "UTF8", ErrorCode.INVALID_JSON, None, "§3.1", _EMPTY),
    (
        "a request behind a UTF-8 byte order mark",
        b'\xef\xbb\xbf{"text": "Hi."}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        "starts with a UTF-8 byte order mark (RFC 8259 §8.1: senders MUST NOT add one)",
    ),
    ("a trailing comma", b'{"text": "Hi.",}', "UTF8", ErrorCode.INVALID_JSON, None, "§3.1", _SYNTAX),
    (
        "garbage after the object",
        b'{"text": "Hi."} x',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _SYNTAX,
    ),
    ("an unterminated string", b'{"text": "Hi.', "UTF8", ErrorCode.INVALID_JSON, None, "§3.1", _SYNTAX),
    (
        "two objects back to back",
        b'{"text":"Hi."}{"text":"Hi."}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _SEVERAL,
    ),
    (
        "two objects as JSON Lines",
        b'{"text":"Hi."}\n{"text":"Hi."}\n',
        "UTF8",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _SEVERAL,
    ),
    (
        "the literal NaN",
        b'{"text": "Hi.", "speed": NaN}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _NUMBERS,
    ),
    (
        "the literal Infinity",
        b'{"text": "Hi.", "speed": Infinity}',
        "UTF8",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _NUMBERS,
    ),
    (
        "a number beyond double range (1e400)",
        b'{"text": "Hi.", "speed": 1e400}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _NUMBERS,
    ),
    (
        "a duplicate top-level member",
        b'{"text": "Hi.", "text": "Bye."}',
        "UTF8",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _DUPLICATE,
    ),
    (
        "a duplicate member in a nested object",
        b'{"text": "Hi.", "extra": {"a": 1, "a": 2}}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _DUPLICATE,
    ),
    (
        "arrays nested to depth 33 (one deeper than max_json_depth)",
        b'{"text": "Hi.", "extra": ' + b"[" * 32 + b"]" * 32 + b"}",
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        "arrays and objects nested deeper than `max_json_depth` (the top-level object is depth 1)",
    ),
    (
        "an escaped lone surrogate in text",
        b'{"text": "\\ud800"}',
        "UTF8",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        'a string holding an escaped lone surrogate such as `"\\ud800"` (RFC 7493 §2.1)',
    ),
    (
        "a raw control character (U+0001) inside a string",
        b'{"text": "Hi\x01there."}',
        "BINARY",
        ErrorCode.INVALID_JSON,
        None,
        "§3.1",
        _SYNTAX,
    ),
    (
        "an array holding a request",
        b'[{"text": "Hi."}]',
        "UTF8",
        ErrorCode.NOT_AN_OBJECT,
        None,
        "§3.1",
        _NOT_OBJECT,
    ),
    ("a JSON string", b'"Hi."', "BINARY", ErrorCode.NOT_AN_OBJECT, None, "§3.1", _NOT_OBJECT),
    ("a JSON number", b"42", "UTF8", ErrorCode.NOT_AN_OBJECT, None, "§3.1", _NOT_OBJECT),
    ("JSON null", b"null", "BINARY", ErrorCode.NOT_AN_OBJECT, None, "§3.1", _NOT_OBJECT),
    (
        "a message one byte over max_message_bytes (65,537 bytes)",
        _message_too_large(),
        "BINARY",
        ErrorCode.MESSAGE_TOO_LARGE,
        None,
        "§3.1",
        "the message (HTTP: the body) is longer than `max_message_bytes` (§3.1)",
    ),
]

# (description, object, data type, code, whether the error names the message's id, section, requirement)
_MEMBER_ROWS: list[tuple[str, dict[str, object], str, ErrorCode, bool, str, str]] = [
    (
        "an unknown type",
        {"type": "start"},
        "UTF8",
        ErrorCode.UNKNOWN_TYPE,
        True,
        "§4",
        "`type` is a string naming no client message (§4)",
    ),
    (
        "an unknown type differing only in case",
        {"type": "Synthesize", "text": "Hi."},
        "BINARY",
        ErrorCode.UNKNOWN_TYPE,
        True,
        "§4",
        "`type` is a string naming no client message (§4)",
    ),
    (
        "type is a number",
        {"type": 5, "text": "Hi."},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        True,
        "§4",
        _TYPES["type"],
    ),
    ("no text member", {"voice": "af_heart"}, "UTF8", ErrorCode.TEXT_REQUIRED, True, "§4.1", _TEXT_REQUIRED),
    ("text is null", {"text": None}, "BINARY", ErrorCode.TEXT_REQUIRED, True, "§4.1", _TEXT_REQUIRED),
    ("text is empty", {"text": ""}, "UTF8", ErrorCode.TEXT_REQUIRED, True, "§4.1", _TEXT_REQUIRED),
    (
        "text is ASCII whitespace only",
        {"text": " \t\n "},
        "BINARY",
        ErrorCode.TEXT_REQUIRED,
        True,
        "§4.1",
        _TEXT_REQUIRED,
    ),
    (
        "text is Unicode whitespace only (U+3000 U+00A0 U+2003)",
        {"text": "\u3000\u00a0\u2003"},
        "UTF8",
        ErrorCode.TEXT_REQUIRED,
        True,
        "§4.1",
        _TEXT_REQUIRED,
    ),
    ("text is a number", {"text": 5}, "BINARY", ErrorCode.INVALID_FIELD, True, "§4.1", _TYPES["text"]),
    (
        "text is an array of strings",
        {"text": ["Hi."]},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["text"],
    ),
    (
        "text of 10,001 characters (max_text_chars + 1)",
        {"text": "a" * 10_001},
        "BINARY",
        ErrorCode.TEXT_TOO_LONG,
        True,
        "§4.1",
        "`text` longer than `max_text_chars` (§4.1)",
    ),
    (
        "voice is a number",
        {"text": "Hi.", "voice": 3},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["text"],
    ),
    (
        "an unknown voice",
        {"text": "Hi.", "voice": "zz_nobody"},
        "BINARY",
        ErrorCode.INVALID_VOICE,
        True,
        "§4.1",
        "`voice` is a string naming no voice of this server (§4.1)",
    ),
    (
        "a voice name with a space",
        {"text": "Hi.", "voice": "af heart"},
        "UTF8",
        ErrorCode.INVALID_VOICE,
        True,
        "§4.1",
        "`voice` is a string naming no voice of this server (§4.1)",
    ),
    (
        "speed is a string",
        {"text": "Hi.", "speed": "fast"},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["speed"],
    ),
    (
        "speed is a boolean",
        {"text": "Hi.", "speed": True},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["speed"],
    ),
    (
        "speed 0.49, just under the range",
        {"text": "Hi.", "speed": 0.49},
        "BINARY",
        ErrorCode.INVALID_SPEED,
        True,
        "§4.1",
        "`speed` is a number outside [0.5, 2.0] (§4.1)",
    ),
    (
        "speed 2.01, just over the range",
        {"text": "Hi.", "speed": 2.01},
        "UTF8",
        ErrorCode.INVALID_SPEED,
        True,
        "§4.1",
        "`speed` is a number outside [0.5, 2.0] (§4.1)",
    ),
    (
        "speed 0",
        {"text": "Hi.", "speed": 0},
        "BINARY",
        ErrorCode.INVALID_SPEED,
        True,
        "§4.1",
        "`speed` is a number outside [0.5, 2.0] (§4.1)",
    ),
    (
        "sample_rate 44100",
        {"text": "Hi.", "sample_rate": 44100},
        "UTF8",
        ErrorCode.INVALID_SAMPLE_RATE,
        True,
        "§4.1",
        "`sample_rate` is a number other than 8000, 16000, 22050, 24000 (§4.1)",
    ),
    (
        "sample_rate 24000.5",
        {"text": "Hi.", "sample_rate": 24000.5},
        "BINARY",
        ErrorCode.INVALID_SAMPLE_RATE,
        True,
        "§4.1",
        "`sample_rate` is a number other than 8000, 16000, 22050, 24000 (§4.1)",
    ),
    (
        "sample_rate is a string",
        {"text": "Hi.", "sample_rate": "24000"},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["speed"],
    ),
    (
        "request_id is empty",
        {"text": "Hi.", "request_id": ""},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        False,
        "§4.1",
        _TYPES["request_id"],
    ),
    (
        "request_id is a number",
        {"text": "Hi.", "request_id": 7},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        False,
        "§4.1",
        _TYPES["request_id"],
    ),
    (
        "request_id of 129 characters",
        {"text": "Hi.", "request_id": "r" * 129},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        False,
        "§4.1",
        _TYPES["request_id"],
    ),
    (
        "request_timestamp is not a date-time",
        {"text": "Hi.", "request_timestamp": "yesterday"},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["request_timestamp"],
    ),
    (
        "request_timestamp is a boolean",
        {"text": "Hi.", "request_timestamp": True},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        True,
        "§4.1",
        _TYPES["request_timestamp"],
    ),
    (
        "request_timestamp 1.0 (1970): stale",
        {"text": "Hi.", "request_timestamp": 1.0},
        "UTF8",
        ErrorCode.REQUEST_STALE,
        True,
        "§4.1",
        "`request_timestamp` older than `max_request_age_s` (§4.1)",
    ),
    (
        "request_timestamp 2001-01-01T00:00:00Z: stale",
        {"text": "Hi.", "request_timestamp": "2001-01-01T00:00:00Z"},
        "BINARY",
        ErrorCode.REQUEST_STALE,
        True,
        "§4.1",
        "`request_timestamp` older than `max_request_age_s` (§4.1)",
    ),
    (
        "cancel with a numeric request_id",
        {"type": "cancel", "request_id": 5},
        "UTF8",
        ErrorCode.INVALID_FIELD,
        False,
        "§4.2",
        _TYPES["request_id"],
    ),
    (
        "cancel naming no request",
        {"type": "cancel"},
        "BINARY",
        ErrorCode.UNKNOWN_REQUEST,
        True,
        "§4.2",
        "`cancel` names no queued or active request that is not already cancelled (§4.2)",
    ),
    # Strict timestamps (§4.1): an RFC 3339 date-time with an offset, a real calendar date and time, else
    # invalid_field (checked before staleness, §9.2: each of these would also be stale if read leniently).
    *(
        (
            f"request_timestamp {stamp!r} ({why})",
            {"text": "Hi.", "request_timestamp": stamp},
            data_type,
            ErrorCode.INVALID_FIELD,
            True,
            "§4.1",
            _TYPES["request_timestamp"],
        )
        for stamp, why, data_type in (
            ("2026-01-01T00:00:00", "no offset", "BINARY"),
            ("2026-01-01 00:00:00Z", "a space for T", "UTF8"),
            ("2026-02-30T00:00:00Z", "February 30", "BINARY"),
            ("2026-13-01T00:00:00Z", "month 13", "UTF8"),
            ("2026-01-01T24:00:00Z", "hour 24", "BINARY"),
            ("2026-01-01T00:00:00+24:00", "offset hour 24", "UTF8"),
            ("2026-01-01T00:00Z", "no seconds", "BINARY"),
            ("1767225600", "epoch seconds as a string", "UTF8"),
        )
    ),
]

# Order of checks (§9.2): several rules broken at once, the first in the order wins.
_ORDER_ROWS: list[tuple[str, dict[str, object], str, ErrorCode, bool]] = [
    (
        "bad request_id and empty text: request_id is checked first",
        {"request_id": 5, "text": ""},
        "BINARY",
        ErrorCode.INVALID_FIELD,
        False,
    ),
    (
        "empty text and numeric voice: text before voice",
        {"text": "", "voice": 3},
        "UTF8",
        ErrorCode.TEXT_REQUIRED,
        True,
    ),
    (
        "unknown voice and speed 9: voice before speed",
        {"text": "Hi.", "voice": "zz_nobody", "speed": 9},
        "BINARY",
        ErrorCode.INVALID_VOICE,
        True,
    ),
    (
        "speed 9 and sample_rate 5: speed before sample_rate",
        {"text": "Hi.", "speed": 9, "sample_rate": 5},
        "UTF8",
        ErrorCode.INVALID_SPEED,
        True,
    ),
    (
        "sample_rate 5 and a stale timestamp: sample_rate before request_timestamp",
        {"text": "Hi.", "sample_rate": 5, "request_timestamp": 1.0},
        "BINARY",
        ErrorCode.INVALID_SAMPLE_RATE,
        True,
    ),
    (
        "unknown type and empty text: type before the members",
        {"type": "nope", "text": ""},
        "UTF8",
        ErrorCode.UNKNOWN_TYPE,
        True,
    ),
]


def _expectation(code: ErrorCode, request_id: str | None) -> str:
    named = f'"request_id": "{request_id}"' if request_id else '"request_id": null (or absent)'
    return (
        f"exactly one error frame with code {code}, fatal false and {named} (the id is judged by 9.2.8); no "
        "synthesis_start or synthesis_complete for the refused message; the next valid request on the same "
        "session completes"
    )


# What every row also tests: exactly one error frame and the session goes on (§6.3); the frame's request_id.
_REFUSAL = ("R6.3-2a", "R6.3-2c")
"""Every row: exactly one error frame, and the session goes on (§6.3). That the refused message got no
bracket (R6.3-2b) is the observer's, on R6.1-1 in any case, not the rows' own check. The id the error frame
names (R6.3-3) is a note on the rows and is judged by 9.2.8, so a server whose error frames name no request
fails that case, not all of these; and the run, on R6.3-3, even when 9.2.8's refusals name theirs (issue
30)."""


_MEMBER_CONDITIONS = {
    ("text", ErrorCode.TEXT_REQUIRED): "R4.1-5a",
    ("text", ErrorCode.INVALID_FIELD): "R4.1-5b",
    ("text", ErrorCode.TEXT_TOO_LONG): "R4.1-5c",
    ("voice", ErrorCode.INVALID_FIELD): "R4.1-5d",
    ("voice", ErrorCode.INVALID_VOICE): "R4.1-5e",
    ("speed", ErrorCode.INVALID_FIELD): "R4.1-5g",
    ("speed", ErrorCode.INVALID_SPEED): "R4.1-5h",
    ("sample_rate", ErrorCode.INVALID_FIELD): "R4.1-5i",
    ("sample_rate", ErrorCode.INVALID_SAMPLE_RATE): "R4.1-5j",
    ("request_id", ErrorCode.INVALID_FIELD): "R4.1-5m",
}
"""The condition of §4.1's member table (R4.1-5) a refused member row tests: its member and code."""


def _member_requirement(
    code: ErrorCode, section: str, what: str = "", obj: dict[str, object] | None = None
) -> str:
    """The id of the sentence, or the condition of §4.1's member table, that requires refusing a member row
    (``what`` it sends, its message ``obj``) with ``code``.

    Raises:
        ValueError: a §4.1 row whose member and code name no condition (add it to the table).
    """
    if section == "§4":
        return "R4-1c" if code is ErrorCode.UNKNOWN_TYPE else "R4-1d"  # the type member: §4's table
    if code is ErrorCode.REQUEST_STALE:
        return "R4.1-9"
    if code is ErrorCode.UNKNOWN_REQUEST:
        return "R4.2-2d"  # a cancel naming no request
    if section == "§4.2":
        return "R4.2-1"  # a malformed cancel: the cancel rules of §4.2
    stamp = (obj or {}).get("request_timestamp")
    if stamp is not None:  # other types, no offset, a space for T, any other invalid date-time
        if not isinstance(stamp, str):
            return "R4.1-5p"
        if stamp.endswith(":00") and "+" not in stamp and "T" in stamp:
            return "R4.1-5q"
        return "R4.1-5r" if " " in stamp else "R4.1-5s"
    for member in ("request_id", "sample_rate", "speed", "voice", "text"):  # the one the row is about
        if member in what and (member, code) in _MEMBER_CONDITIONS:
            return _MEMBER_CONDITIONS[member, code]
    raise ValueError(f"no condition of R4.1-5 for {what!r} refused with {code}")


def _frame_condition(what: str, code: ErrorCode) -> str:
    """The condition of §3.1's refusal table (R3.1-3) a malformed message row tests: its row, by code and by
    what is sent."""
    by_code = {
        ErrorCode.MESSAGE_TOO_LARGE: "R3.1-3a",
        ErrorCode.INVALID_UTF8: "R3.1-3b",
        ErrorCode.NOT_AN_OBJECT: "R3.1-3j",
    }
    if code in by_code:
        return by_code[code]
    for words, condition in (
        (("empty", "only JSON whitespace"), "R3.1-3c"),
        (("byte order mark",), "R3.1-3d"),
        (("NaN", "Infinity", "1e400"), "R3.1-3f"),
        (("duplicate",), "R3.1-3g"),
        (("nested",), "R3.1-3h"),
        (("lone surrogate",), "R3.1-3i"),
    ):
        if any(w in what for w in words):
            return condition
    return "R3.1-3e"  # a syntax error, or anything after the value


def _order_condition(what: str) -> str:
    """The condition of §9.2's order (R9.2-1) an order row tests: type before the members, request_id
    first among them, or the order of the other members."""
    if "type before" in what:
        return "R9.2-1b"
    return "R9.2-1c" if "request_id is checked first" in what else "R9.2-1d"


def _order_member(what: str, code: ErrorCode) -> str:
    """The condition of the rule whose code an order row expects (§4's type table or §4.1's members)."""
    return "R4-1c" if code is ErrorCode.UNKNOWN_TYPE else _member_requirement(code, "§4.1", what)


def _rows() -> list[BadInput]:
    rows: list[BadInput] = []
    for n, (what, frame, data_type, code, request_id, section, requirement) in enumerate(_FRAME_ROWS, 1):
        case = Case(
            f"9.1.{n}",
            section,
            Level.MUST,
            requirement,
            f"send {what} as a {'TEXT' if data_type == 'UTF8' else 'BINARY'} message",
            _expectation(code, request_id),
            requirements=(_frame_condition(what, code), *_REFUSAL),
        )
        rows.append(BadInput(case, frame, data_type, code, request_id))
    start = len(rows) + 1
    for n, (what, obj, data_type, code, names_id, section, requirement) in enumerate(_MEMBER_ROWS, start):
        request_id = f"bad-9.1.{n}"
        message = {**obj, "request_id": request_id} if "request_id" not in obj else dict(obj)
        expected = request_id if names_id else None
        case = Case(
            f"9.1.{n}",
            section,
            Level.MUST,
            requirement,
            f"send a message with {what} as a {'TEXT' if data_type == 'UTF8' else 'BINARY'} message",
            _expectation(code, expected),
            requirements=(
                _member_requirement(code, section, what, obj),
                *(("R4.1-5t",) if code is ErrorCode.REQUEST_STALE else ()),  # §4.1's row says it too
                *_REFUSAL,
            ),
        )
        rows.append(BadInput(case, _json(message), data_type, code, expected))
    for n, (what, obj, data_type, code, names_id) in enumerate(_ORDER_ROWS, 1):
        request_id = f"bad-9.2.{n}"
        message = {**obj, "request_id": request_id} if "request_id" not in obj else dict(obj)
        expected = request_id if names_id else None
        case = Case(
            f"9.2.{n}",
            "§9.2",
            Level.MUST,
            _ORDER_RULE,
            f"send a message with {what}",
            _expectation(code, expected),
            requirements=(_order_condition(what), _order_member(what, code), *_REFUSAL),
        )
        rows.append(BadInput(case, _json(message), data_type, code, expected))
    return rows


ROWS: list[BadInput] = _rows()
"""Every row, in sending order."""

"""JSON text on the wire: the strict decoder of PROTOCOL.md §3.1 and the compact encoder every frame uses.

:func:`decode_json_object` turns one client message (a WebSocket frame or an HTTP body) into a JSON object
or refuses it with the registry code of §9.2 (``message_too_large``, ``invalid_utf8``, ``invalid_json``,
``not_an_object``). :func:`compact_json` writes a frame's object as compact JSON text. The field rules that
come after decoding live in :mod:`protocol.messages.fields`.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.constants import REQUEST_ID_MAX_CHARS, UTTERANCE_TYPES

__all__ = ["decode_json_object"]

SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point: in a decoded string, always a lone half (``json`` joins escaped pairs)."""
_HIGH_SURROGATE = re.compile("[\ud800-\udbff]")
_LOW_SURROGATE = re.compile("[\udc00-\udfff]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}
_JSON_WHITESPACE = " \t\n\r"


def is_number(value: object) -> bool:
    """Whether ``value`` is a JSON number as ``json`` decodes it: ``int`` or ``float``, never ``bool``."""
    # JSON true/false arrive as bool, a subclass of int; they are never numbers here.
    return isinstance(value, int | float) and not isinstance(value, bool)


def compact_json(obj: dict[str, Any]) -> str:
    """Compact JSON text of a frame's object (no spaces; NaN and infinities refused with ``ValueError``).

    A ``text`` member holding a surrogate half (the split pairs of §15.2) has no UTF-8 form: such an
    object is written with ``\\uXXXX`` escapes, as a UTF-16 client's serializer writes it.
    """
    text = obj.get("text")
    escape = isinstance(text, str) and SURROGATE.search(text) is not None
    return json.dumps(obj, ensure_ascii=escape, separators=(",", ":"), allow_nan=False)


def show(value: object) -> str:
    """``value`` as JSON for an error message, cut to 40 characters."""
    shown = json.dumps(value, ensure_ascii=True)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def valid_id(obj: dict[str, Any]) -> str | None:
    """``obj["request_id"]`` when it is a valid request id (1 to 128 characters), else ``None``."""
    request_id = obj.get("request_id")
    if isinstance(request_id, str) and 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
        return request_id
    return None


class _Refused(ValueError):
    """Raised from inside ``json.loads`` hooks; the message says why the text is refused."""


def _no_constants(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(f"number {literal[:32]} is out of range")
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _Refused(f"duplicate member name {json.dumps(key)[:64]}")
        obj[key] = value
    return obj


def _max_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in ``text``, without recursion and in linear time.

    Exact for valid JSON; for invalid JSON any answer is fine, since the parser refuses it anyway.
    Escaped backslashes go first, then escaped quotes; every quote left delimits a string, so the even
    pieces of a split on quotes are exactly the text outside strings.
    """
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", "".join(unescaped.split('"')[::2]))
    return max(accumulate(_BRACKET_DELTA[c] for c in brackets), default=0)


def _find_lone_surrogate(value: Any) -> bool:
    """Whether any string (member names included) of a parsed JSON value holds a surrogate code point.

    ``json`` joins escaped surrogate pairs into one character, so any surrogate left is a lone one.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _only_split_halves(value: Any) -> bool:
    """Whether every lone surrogate of ``value`` is one §15.2 admits: a high half ending the ``text`` of
    ``utterance``, ``append`` or ``flush``, or a low half beginning the ``text`` of ``append``, ``flush``
    or ``end``."""
    if not isinstance(value, dict) or value.get("type") not in UTTERANCE_TYPES:
        return False
    text = value.get("text")
    if not isinstance(text, str) or _find_lone_surrogate({**value, "text": ""}):
        return False
    kind = value["type"]
    if kind != "utterance" and text[:1] and _LOW_SURROGATE.fullmatch(text[0]):
        text = text[1:]
    if kind != "end" and text[-1:] and _HIGH_SURROGATE.fullmatch(text[-1]):
        text = text[:-1]
    return SURROGATE.search(text) is None


def decode_json_object(
    data: bytes | str, *, max_bytes: int, max_depth: int, split_halves: bool = False
) -> dict[str, Any]:
    """Decode one client message to a JSON object under the strict rules of PROTOCOL.md §3.1.

    Every escaped lone surrogate is refused here; :func:`~protocol.messages.client.parse_client_message`
    alone admits the split surrogate pairs of utterance text (§15.2).

    Args:
        data: the whole message: ``bytes`` (a BINARY frame or HTTP body) or ``str`` (a TEXT frame).
        max_bytes: longest message in UTF-8 bytes (``Limits.max_message_bytes``).
        max_depth: deepest nesting allowed (``Limits.max_json_depth``); the top-level object is 1.
        split_halves: admit the surrogate halves an utterance message may carry at the edges of its
            ``text`` (§15.2); their pairing is the session's to check.

    Returns:
        The object, with members in message order.

    Raises:
        ProtocolError: ``message_too_large``; ``invalid_utf8`` (bad UTF-8 bytes, or a ``str`` holding a
            lone surrogate); ``invalid_json`` (empty, byte order mark, syntax error, trailing data,
            NaN/Infinity, a number out of double range or of more than 4300 digits, a duplicate member
            name, nesting deeper than ``max_depth``, an escaped lone surrogate); ``not_an_object``.
    """
    if isinstance(data, str):
        # A character is at least one UTF-8 byte: the cheap length test refuses huge input early.
        if len(data) > max_bytes:
            raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"message is longer than {max_bytes} bytes")
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError:
            raise ProtocolError(ErrorCode.INVALID_UTF8, "message holds a lone surrogate") from None
        if size > max_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE, f"message has {size} bytes; the limit is {max_bytes}"
            )
        text = data
    else:
        if len(data) > max_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE, f"message has {len(data)} bytes; the limit is {max_bytes}"
            )
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(ErrorCode.INVALID_UTF8, f"invalid UTF-8 at byte {exc.start}") from None
    if not text.strip(_JSON_WHITESPACE):
        raise ProtocolError(ErrorCode.INVALID_JSON, "empty message")
    if text.startswith("\ufeff"):
        # RFC 8259 §8.1: senders MUST NOT add a BOM. Refusing it keeps this parser and the §3.4
        # classification rule in agreement (a BOM-prefixed audio frame is audio, not control).
        raise ProtocolError(ErrorCode.INVALID_JSON, "byte order mark before the JSON text")
    depth = _max_depth(text)
    if depth > max_depth:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"nesting depth {depth} exceeds {max_depth}")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_float=_finite_float,
            parse_constant=_no_constants,
        )
    except _Refused as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_JSON, f"not a JSON text: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError:
        # int() refuses literals of more than sys.get_int_max_str_digits() (4300) digits.
        raise ProtocolError(ErrorCode.INVALID_JSON, "number literal too long") from None
    except RecursionError:  # unreachable after the depth check; kept so no input can escape as one
        raise ProtocolError(ErrorCode.INVALID_JSON, "nesting too deep") from None
    if _find_lone_surrogate(value) and not (split_halves and _only_split_halves(value)):
        # RFC 7493 (I-JSON) §2.1: such a string cannot be encoded as UTF-8 again.
        # An utterance message whose type and id could be read names both, so that a client can tell
        # which utterance or fragment was refused (§15.6).
        kind = value.get("type") if split_halves and isinstance(value, dict) else None
        fragment = kind in UTTERANCE_TYPES
        raise ProtocolError(
            ErrorCode.INVALID_JSON,
            "string holds an escaped lone surrogate",
            valid_id(value) if fragment else None,
            message_type=kind if fragment else None,
        )
    if not isinstance(value, dict):
        raise ProtocolError(
            ErrorCode.NOT_AN_OBJECT, f"top-level JSON value is {type(value).__name__}, not an object"
        )
    return value


# --- field rules (§4.1, §9.2) ---------------------------------------------------------------------------

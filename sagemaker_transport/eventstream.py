"""AWS event-stream framing (``application/vnd.amazon.eventstream``) and the SageMaker bidi envelope.

Wire format of one message (REFERENCE.md §1; AWS Transcribe streaming and SDK documentation, "Event
stream encoding"), all integers big-endian::

    total length (u32) | headers length (u32) | prelude CRC32 (u32, over the first 8 bytes)
    headers (headers-length bytes) | payload | message CRC32 (u32, over everything before it)

A header is: name length (u8, 1..255) | name (UTF-8) | type (u8) | value. :class:`HeaderType` lists the
ten value types. Header values are plain Python values: ``bool``, ``int`` (32-bit "integer"), the
sized ints :class:`Byte`, :class:`Short` and :class:`Long`, ``bytes``, ``str``, an aware
``datetime`` (millisecond "timestamp") and ``uuid.UUID``. Decoding gives back the same types.

SageMaker ``InvokeEndpointWithBidirectionalStream`` (PROTOCOL.md §12) sends each input event as an inner
message wrapped in a signing envelope (outer headers ``:date`` and ``:chunk-signature``, payload = the
inner message) and ends input with an envelope whose payload is empty. Output events are unsigned.
Helpers for both directions are at the end of this module. Nothing here does I/O or signs anything.
"""

from __future__ import annotations

import datetime as _dt
import json
import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

__all__ = [
    "MAX_HEADERS_BYTES",
    "MAX_HEADER_VALUE_BYTES",
    "MAX_PAYLOAD_BYTES",
    "Byte",
    "EventStreamDecoder",
    "EventStreamError",
    "EventStreamMessage",
    "HeaderType",
    "HeaderValue",
    "Long",
    "PayloadPart",
    "Short",
    "decode_message",
    "encode_headers",
    "encode_message",
    "exception_message",
    "header_type",
    "is_envelope",
    "parse_payload_part",
    "payload_part_message",
    "signed_envelope",
    "unwrap_envelope",
]

#: Largest headers section accepted or produced; the limit of the AWS SDKs (botocore, smithy).
MAX_HEADERS_BYTES = 128 * 1024
#: Largest payload accepted or produced: 16 MiB, the smithy (official bidi client) limit. botocore
#: allows 24 MiB; the smaller bound is the one every client can read.
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: Largest byte_array or string header value: lengths are u16 but the SDKs stop at 2**15 - 1.
MAX_HEADER_VALUE_BYTES = 32 * 1024 - 1

_PRELUDE = struct.Struct("!III")
_PRELUDE_BYTES = 12
_OVERHEAD_BYTES = 16  # prelude and trailing message CRC
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)


class EventStreamError(ValueError):
    """Bytes that are not a valid event stream: CRC mismatch, bad lengths, malformed headers, a limit
    exceeded, or a truncated stream at :meth:`EventStreamDecoder.close`.

    ``messages`` holds the messages the failing :meth:`EventStreamDecoder.feed` call decoded before the
    bad one, so a caller can still act on them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.messages: list[EventStreamMessage] = []


class HeaderType(IntEnum):
    """Header value type codes of the event-stream format."""

    BOOL_TRUE = 0
    BOOL_FALSE = 1
    BYTE = 2
    SHORT = 3
    INTEGER = 4
    LONG = 5
    BYTE_ARRAY = 6
    STRING = 7
    TIMESTAMP = 8
    UUID = 9


class _SizedInt(int):
    _bits = 0

    def __new__(cls, value: int = 0) -> Self:
        self = super().__new__(cls, value)
        limit = 1 << (cls._bits - 1)
        if not -limit <= self < limit:
            raise ValueError(f"{cls.__name__} header value out of range: {int(self)}")
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class Byte(_SizedInt):
    """A signed 8-bit header value (type ``byte``). Compares equal to the plain int."""

    _bits = 8


class Short(_SizedInt):
    """A signed 16-bit header value (type ``short``). Compares equal to the plain int."""

    _bits = 16


class Long(_SizedInt):
    """A signed 64-bit header value (type ``long``). Compares equal to the plain int."""

    _bits = 64


#: A header value; a plain ``int`` is a 32-bit ``integer``.
type HeaderValue = bool | Byte | Short | int | Long | bytes | str | _dt.datetime | uuid.UUID


def header_type(value: HeaderValue) -> HeaderType:
    """The wire type for ``value``. Raises TypeError for values that have none."""
    # Order matters: bool and the sized ints are ints.
    if isinstance(value, bool):
        return HeaderType.BOOL_TRUE if value else HeaderType.BOOL_FALSE
    if isinstance(value, Byte):
        return HeaderType.BYTE
    if isinstance(value, Short):
        return HeaderType.SHORT
    if isinstance(value, Long):
        return HeaderType.LONG
    if isinstance(value, int):
        return HeaderType.INTEGER
    if isinstance(value, bytes | bytearray | memoryview):
        return HeaderType.BYTE_ARRAY
    if isinstance(value, str):
        return HeaderType.STRING
    if isinstance(value, _dt.datetime):
        return HeaderType.TIMESTAMP
    if isinstance(value, uuid.UUID):
        return HeaderType.UUID
    raise TypeError(f"no event-stream header type for {type(value).__name__}")


def _encode_value(name: str, value: HeaderValue) -> bytes:
    kind = header_type(value)
    if kind in (HeaderType.BOOL_TRUE, HeaderType.BOOL_FALSE):
        return bytes([kind])
    if kind is HeaderType.INTEGER:
        if not -(1 << 31) <= value < 1 << 31:  # type: ignore[operator]
            raise ValueError(f"header {name!r}: int {value} does not fit 32 bits; use Long")
        return struct.pack("!Bi", kind, value)
    if kind is HeaderType.BYTE:
        return struct.pack("!Bb", kind, value)
    if kind is HeaderType.SHORT:
        return struct.pack("!Bh", kind, value)
    if kind is HeaderType.LONG:
        return struct.pack("!Bq", kind, value)
    if kind in (HeaderType.BYTE_ARRAY, HeaderType.STRING):
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
        if len(raw) > MAX_HEADER_VALUE_BYTES:
            raise ValueError(f"header {name!r}: value of {len(raw)} bytes exceeds {MAX_HEADER_VALUE_BYTES}")
        return struct.pack("!BH", kind, len(raw)) + raw
    if kind is HeaderType.TIMESTAMP:
        assert isinstance(value, _dt.datetime)
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"header {name!r}: timestamp must be timezone-aware")
        # Integer arithmetic: exact milliseconds since the epoch, rounded down like a clock.
        return struct.pack("!Bq", kind, (value - _EPOCH) // _ONE_MS)
    assert isinstance(value, uuid.UUID)
    return bytes([kind]) + value.bytes


def encode_headers(headers: Mapping[str, HeaderValue]) -> bytes:
    """Encode a headers section, in the mapping's order.

    Raises ValueError for a name that is empty or over 255 UTF-8 bytes, an out-of-range or oversized
    value, a naive datetime, or a section over :data:`MAX_HEADERS_BYTES`; TypeError for a value with no
    header type.
    """
    parts: list[bytes] = []
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        if not 1 <= len(raw_name) <= 255:
            raise ValueError(f"header name must be 1 to 255 UTF-8 bytes, got {len(raw_name)}: {name!r}")
        parts.append(bytes([len(raw_name)]) + raw_name + _encode_value(name, value))
    out = b"".join(parts)
    if len(out) > MAX_HEADERS_BYTES:
        raise ValueError(f"headers section of {len(out)} bytes exceeds {MAX_HEADERS_BYTES}")
    return out


def encode_message(
    headers: Mapping[str, HeaderValue], payload: bytes | bytearray | memoryview = b""
) -> bytes:
    """Encode one event-stream message: prelude, prelude CRC, headers, payload, message CRC.

    Raises ValueError as :func:`encode_headers` does, or when the payload exceeds :data:`MAX_PAYLOAD_BYTES`.
    """
    raw_headers = encode_headers(headers)
    body = bytes(payload)
    if len(body) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(body)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    prelude = struct.pack("!II", _OVERHEAD_BYTES + len(raw_headers) + len(body), len(raw_headers))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + raw_headers
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + body + struct.pack("!I", crc)


@dataclass(frozen=True, slots=True)
class EventStreamMessage:
    """One decoded (or to-be-encoded) message: ``headers`` in wire order, and the ``payload`` bytes."""

    headers: Mapping[str, HeaderValue]
    payload: bytes = b""

    def _str_header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if isinstance(value, str) else None

    @property
    def message_type(self) -> str | None:
        """``:message-type``: "event", "exception" or "error" (None if absent or not a string)."""
        return self._str_header(":message-type")

    @property
    def event_type(self) -> str | None:
        """``:event-type``, e.g. "PayloadPart"."""
        return self._str_header(":event-type")

    @property
    def exception_type(self) -> str | None:
        """``:exception-type``, e.g. "ModelStreamError"."""
        return self._str_header(":exception-type")

    @property
    def content_type(self) -> str | None:
        """``:content-type`` of the payload."""
        return self._str_header(":content-type")

    def encode(self) -> bytes:
        """The wire bytes (:func:`encode_message`)."""
        return encode_message(self.headers, self.payload)


# Fixed-size value types: struct format and the Python type decoded values get.
_FIXED_TYPES: dict[int, tuple[struct.Struct, type[int]]] = {
    HeaderType.BYTE: (struct.Struct("!b"), Byte),
    HeaderType.SHORT: (struct.Struct("!h"), Short),
    HeaderType.INTEGER: (struct.Struct("!i"), int),
    HeaderType.LONG: (struct.Struct("!q"), Long),
    HeaderType.TIMESTAMP: (struct.Struct("!q"), int),
}
_LENGTH = struct.Struct("!H")


def _decode_headers(raw: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    n = len(raw)
    pos = 0
    while pos < n:
        name_len = raw[pos]
        pos += 1
        if name_len == 0:
            raise EventStreamError("header with an empty name")
        # The name and its type byte must both fit.
        if pos + name_len + 1 > n:
            raise EventStreamError("header runs past the headers section")
        try:
            name = raw[pos : pos + name_len].decode("utf-8")
        except UnicodeDecodeError:
            raise EventStreamError("header name is not UTF-8") from None
        pos += name_len
        kind = raw[pos]
        pos += 1
        value: HeaderValue
        if kind == HeaderType.BOOL_TRUE:
            value = True
        elif kind == HeaderType.BOOL_FALSE:
            value = False
        elif kind in _FIXED_TYPES:
            fmt, cls = _FIXED_TYPES[kind]
            if pos + fmt.size > n:
                raise EventStreamError(f"header {name!r} value runs past the headers section")
            (number,) = fmt.unpack_from(raw, pos)
            pos += fmt.size
            if kind == HeaderType.TIMESTAMP:
                try:
                    value = _EPOCH + number * _ONE_MS
                except OverflowError:
                    raise EventStreamError(
                        f"header {name!r}: timestamp {number} ms is out of range"
                    ) from None
            else:
                value = cls(number)
        elif kind == HeaderType.UUID:
            if pos + 16 > n:
                raise EventStreamError(f"header {name!r} value runs past the headers section")
            value = uuid.UUID(bytes=raw[pos : pos + 16])
            pos += 16
        elif kind in (HeaderType.BYTE_ARRAY, HeaderType.STRING):
            if pos + 2 > n:
                raise EventStreamError(f"header {name!r} length runs past the headers section")
            (size,) = _LENGTH.unpack_from(raw, pos)
            pos += 2
            if pos + size > n:
                raise EventStreamError(f"header {name!r} value runs past the headers section")
            chunk = raw[pos : pos + size]
            pos += size
            if kind == HeaderType.BYTE_ARRAY:
                value = chunk
            else:
                try:
                    value = chunk.decode("utf-8")
                except UnicodeDecodeError:
                    raise EventStreamError(f"header {name!r}: string value is not UTF-8") from None
        else:
            raise EventStreamError(f"header {name!r} has unknown value type {kind}")
        if name in headers:
            raise EventStreamError(f"duplicate header {name!r}")
        headers[name] = value
    return headers


class EventStreamDecoder:
    """Incremental event-stream decoder: feed bytes as they arrive, get whole messages back.

    Bytes may be split anywhere. The prelude is checked as soon as its 12 bytes arrive, so a corrupt
    or oversized length fails at once instead of waiting for data that never comes. After an
    :class:`EventStreamError` the stream cannot be resynchronised and every later call raises.
    Work is linear in the bytes fed (the buffer is a ``bytearray`` consumed from the front).

    Limits: ``max_payload_bytes`` (default :data:`MAX_PAYLOAD_BYTES`) and ``max_headers_bytes``
    (default :data:`MAX_HEADERS_BYTES`) per message.
    """

    def __init__(
        self, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES, max_headers_bytes: int = MAX_HEADERS_BYTES
    ) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.max_headers_bytes = max_headers_bytes
        self._buffer = bytearray()
        self._error: EventStreamError | None = None

    @property
    def pending(self) -> int:
        """Bytes buffered towards a message not yet complete."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[EventStreamMessage]:
        """Add bytes; return the messages they complete, in order.

        Raises :class:`EventStreamError` on a bad prelude CRC, message CRC, length, header or limit
        (messages decoded before the bad one in this call are in the exception's ``messages``).
        """
        if self._error is not None:
            raise EventStreamError(f"event stream already failed: {self._error}")
        buffer = self._buffer
        buffer += data
        messages: list[EventStreamMessage] = []
        offset = 0
        try:
            while len(buffer) - offset >= _PRELUDE_BYTES:
                total, headers_len = self._check_prelude(buffer, offset)
                if len(buffer) - offset < total:
                    break
                messages.append(self._decode_body(bytes(buffer[offset : offset + total]), headers_len))
                offset += total
        except EventStreamError as exc:
            exc.messages = messages
            self._error = exc
            buffer.clear()
            raise
        del buffer[:offset]
        return messages

    def close(self) -> None:
        """End of stream. Raises :class:`EventStreamError` when a partial message is left over
        (botocore drops such a truncated message silently, REFERENCE.md §2; we report it)."""
        if self._error is not None:
            raise EventStreamError(f"event stream already failed: {self._error}")
        if self._buffer:
            left = len(self._buffer)
            self._buffer.clear()
            raise EventStreamError(f"event stream ended inside a message ({left} bytes left over)")

    def _check_prelude(self, buffer: bytearray, offset: int) -> tuple[int, int]:
        total, headers_len, prelude_crc = _PRELUDE.unpack_from(buffer, offset)
        if zlib.crc32(buffer[offset : offset + 8]) != prelude_crc:
            raise EventStreamError("prelude CRC mismatch")
        if total < _OVERHEAD_BYTES or headers_len > total - _OVERHEAD_BYTES:
            raise EventStreamError(f"inconsistent lengths: total {total}, headers {headers_len}")
        if headers_len > self.max_headers_bytes:
            raise EventStreamError(f"headers of {headers_len} bytes exceed {self.max_headers_bytes}")
        payload_len = total - _OVERHEAD_BYTES - headers_len
        if payload_len > self.max_payload_bytes:
            raise EventStreamError(f"payload of {payload_len} bytes exceeds {self.max_payload_bytes}")
        return total, headers_len

    @staticmethod
    def _decode_body(message: bytes, headers_len: int) -> EventStreamMessage:
        (message_crc,) = struct.unpack_from("!I", message, len(message) - 4)
        if zlib.crc32(memoryview(message)[:-4]) != message_crc:
            raise EventStreamError("message CRC mismatch")
        headers = _decode_headers(message[_PRELUDE_BYTES : _PRELUDE_BYTES + headers_len])
        return EventStreamMessage(headers, message[_PRELUDE_BYTES + headers_len : -4])


def decode_message(data: bytes | bytearray | memoryview) -> EventStreamMessage:
    """Decode bytes holding exactly one message. Raises :class:`EventStreamError` otherwise."""
    decoder = EventStreamDecoder()
    messages = decoder.feed(data)
    decoder.close()
    if len(messages) != 1:
        raise EventStreamError(f"expected exactly one message, found {len(messages)}")
    return messages[0]


# --- SageMaker InvokeEndpointWithBidirectionalStream (PROTOCOL.md §12, REFERENCE.md §1) -------------

_DATE = ":date"
_SIGNATURE = ":chunk-signature"
_DATA_TYPES = ("UTF8", "BINARY")
_COMPLETION_STATES = ("PARTIAL", "COMPLETE")


def signed_envelope(inner: bytes | bytearray | memoryview, date: _dt.datetime, signature: bytes) -> bytes:
    """Wrap an encoded inner message in a signing envelope, as the SDK's event signer does.

    Outer headers ``:date`` (timestamp, millisecond precision) and ``:chunk-signature`` (bytes), in that
    order; payload = ``inner``. ``inner=b""`` makes the end-of-input envelope. The signature is taken as
    given (SigV4 chained event signing is the client's business); a test or simulator may pass any bytes.
    """
    return encode_message({_DATE: date, _SIGNATURE: bytes(signature)}, inner)


def is_envelope(message: EventStreamMessage) -> bool:
    """Whether ``message`` is a signing envelope (it carries ``:chunk-signature``)."""
    return _SIGNATURE in message.headers


def unwrap_envelope(message: EventStreamMessage) -> EventStreamMessage | None:
    """The inner message of a signing envelope; None for the empty end-of-input envelope.

    A message that is not an envelope is returned unchanged, so a receiver can apply this to every
    input message. The signature is not verified (SageMaker does that before the container sees the
    bytes). Raises :class:`EventStreamError` when the envelope's headers have the wrong types or its
    payload is not exactly one message.
    """
    if not is_envelope(message):
        return message
    if not isinstance(message.headers[_SIGNATURE], bytes) or not isinstance(
        message.headers.get(_DATE), _dt.datetime
    ):
        raise EventStreamError("signing envelope needs a bytes :chunk-signature and a timestamp :date")
    if not message.payload:
        return None
    return decode_message(message.payload)


def payload_part_message(
    payload: bytes | bytearray | memoryview,
    data_type: str | None = None,
    completion_state: str | None = None,
    p: str | None = None,
) -> bytes:
    """Encode a ``PayloadPart`` event (the inner message on input, the whole message on output).

    Headers in the order the official client (aws-sdk-sagemaker-runtime-http2 0.12.0) writes them:
    ``:message-type=event``, ``:event-type=PayloadPart``, then ``DataType``, ``CompletionState`` and
    ``P`` when given, then ``:content-type=application/octet-stream`` unless the payload is empty (the
    client leaves it out then). Absent DataType means BINARY and absent CompletionState means COMPLETE
    (REFERENCE.md §1). Raises ValueError for a DataType other than UTF8/BINARY or a CompletionState
    other than PARTIAL/COMPLETE.
    """
    if data_type is not None and data_type not in _DATA_TYPES:
        raise ValueError(f"DataType must be one of {_DATA_TYPES}, got {data_type!r}")
    if completion_state is not None and completion_state not in _COMPLETION_STATES:
        raise ValueError(f"CompletionState must be one of {_COMPLETION_STATES}, got {completion_state!r}")
    headers: dict[str, HeaderValue] = {":message-type": "event", ":event-type": "PayloadPart"}
    if data_type is not None:
        headers["DataType"] = data_type
    if completion_state is not None:
        headers["CompletionState"] = completion_state
    if p is not None:
        headers["P"] = p
    body = bytes(payload)
    if body:
        headers[":content-type"] = "application/octet-stream"
    return encode_message(headers, body)


@dataclass(frozen=True, slots=True)
class PayloadPart:
    """A decoded ``PayloadPart`` with the defaults of REFERENCE.md §1 applied.

    ``data_type`` is "BINARY" when absent, ``completion_state`` "COMPLETE" when absent; unknown values
    are passed through for the caller to judge. ``p`` is the padding string, or None.
    """

    data: bytes
    data_type: str = "BINARY"
    completion_state: str = "COMPLETE"
    p: str | None = None

    @property
    def is_utf8(self) -> bool:
        """DataType is UTF8 (the part maps to a WebSocket TEXT frame, PROTOCOL.md §12)."""
        return self.data_type == "UTF8"

    @property
    def is_complete(self) -> bool:
        """CompletionState is COMPLETE: this part ends a message."""
        return self.completion_state == "COMPLETE"


def parse_payload_part(message: EventStreamMessage) -> PayloadPart:
    """Read a ``PayloadPart`` event. Raises :class:`EventStreamError` when ``message`` is not one
    (wrong ``:message-type``/``:event-type``) or its DataType/CompletionState/P headers are not strings."""
    if message.message_type != "event" or message.event_type != "PayloadPart":
        raise EventStreamError(
            f"not a PayloadPart event: :message-type={message.message_type!r}, "
            f":event-type={message.event_type!r}"
        )
    fields: dict[str, str] = {}
    for header, field in (("DataType", "data_type"), ("CompletionState", "completion_state"), ("P", "p")):
        if header in message.headers:
            value = message.headers[header]
            if not isinstance(value, str):
                raise EventStreamError(f"PayloadPart header {header} must be a string")
            fields[field] = value
    return PayloadPart(message.payload, **fields)


def exception_message(exception_type: str, message_json: str | bytes | Mapping[str, Any]) -> bytes:
    """Encode a modeled exception event, e.g. ``ModelStreamError`` or ``InternalStreamFailure``.

    Headers ``:message-type=exception``, ``:exception-type``, ``:content-type=application/json``;
    payload = the JSON (a mapping is encoded compactly), e.g. ``{"Message": ..., "ErrorCode": ...}``
    for ModelStreamError. The official client raises these from ``receive()`` (REFERENCE.md §1).
    Raises ValueError when a str/bytes payload is not a JSON object.
    """
    if isinstance(message_json, Mapping):
        body = json.dumps(message_json, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    else:
        body = message_json.encode("utf-8") if isinstance(message_json, str) else bytes(message_json)
        try:
            parsed = json.loads(body)
        except ValueError as exc:
            raise ValueError(f"exception payload is not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError("exception payload must be a JSON object")
    headers: dict[str, HeaderValue] = {
        ":message-type": "exception",
        ":exception-type": exception_type,
        ":content-type": "application/json",
    }
    return encode_message(headers, body)

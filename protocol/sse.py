"""Server-sent events: encoding events and decoding a byte stream (PROTOCOL.md §11.4).

The decoder follows the WHATWG HTML standard, "Server-sent events", §9.2.5 (parsing an event stream)
and §9.2.6 (interpreting an event stream): UTF-8 decoding with a leading BOM dropped, lines ended by
CRLF, LF or a lone CR (also when a CR ends one read and its LF starts the next), comments, fields with
and without a colon, ``data`` lines joined with LF, and ``id``/``retry`` handling. Bytes are fed as
they arrive from any transport; nothing here does I/O.

PROTOCOL.md §11.4 carries audio as base64 inside each ``audio_chunk`` event; :func:`decode_base64_strict`
decodes one event's ``data`` field and refuses anything but canonical, padded standard base64.
"""

from __future__ import annotations

import binascii
import codecs
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SSEDecoder", "SSEError", "SSEEvent", "decode_base64_strict", "encode_event"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class SSEError(ValueError):
    """The event stream broke a limit of :class:`SSEDecoder` (for example an endless line)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event (WHATWG §9.2.6 "dispatch the event").

    ``event``: the event type, "message" when no ``event`` field was given. ``data``: the ``data``
    fields joined with LF. ``id``: the last event ID in effect when the event was dispatched (it
    persists across events until an ``id`` field changes it); None when it is empty.
    """

    data: str
    event: str = "message"
    id: str | None = None


def _check_single_line(name: str, value: str) -> None:
    if "\n" in value or "\r" in value:
        raise ValueError(f"SSE {name} must not contain line breaks: {value!r}")


def encode_event(data: str | Mapping[str, Any], event: str | None = None, id: str | None = None) -> bytes:
    """Encode one event as UTF-8 bytes ending with a blank line (PROTOCOL.md §11.4).

    ``data``: a mapping becomes compact JSON on one ``data:`` line (``NaN`` refused); a string becomes
    one ``data:`` line per line of text (CRLF, CR and LF all break lines, so a decoder gives the text
    back with LF line ends). ``event`` and ``id`` are written before the data when given. Every field
    is written as ``name: value`` so a value that starts with a space keeps it.
    Raises ValueError when ``event`` or ``id`` holds a line break or ``id`` a NUL (which decoders
    ignore), and for mappings JSON cannot encode.
    """
    lines: list[str] = []
    if event is not None:
        _check_single_line("event name", event)
        lines.append(f"event: {event}")
    if id is not None:
        _check_single_line("id", id)
        if "\0" in id:
            raise ValueError("SSE id must not contain NUL (WHATWG §9.2.6 ignores such ids)")
        lines.append(f"id: {id}")
    if isinstance(data, Mapping):
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"SSE data must be str or a mapping, not {type(data).__name__}")
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(text))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


class SSEDecoder:
    """Incremental ``text/event-stream`` parser (WHATWG §9.2.5, §9.2.6).

    ``feed(data)`` takes bytes exactly as read (any split, even inside a UTF-8 character or between
    the CR and LF of a line end) and returns the events completed by them. ``close()`` ends the
    stream; as the standard says, a final event without its blank line is discarded, and
    :attr:`incomplete` tells beforehand whether one is pending.

    ``max_event_chars`` bounds the characters buffered for one event (its fields so far plus the
    current line); exceeding it raises :class:`SSEError`. The default, 16 Mi characters, fits a
    base64 ``audio_chunk`` of the largest audio frame (1 MiB, PROTOCOL.md §3.3) many times over.
    Work is linear in the bytes fed.
    """

    def __init__(self, max_event_chars: int = 16 * 1024 * 1024) -> None:
        self.max_event_chars = max_event_chars
        # "utf-8-sig" drops one leading BOM even when it arrives split across reads; "replace" is the
        # WHATWG UTF-8 decode's handling of invalid bytes.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._line_parts: list[str] = []
        self._line_chars = 0
        self._skip_lf = False  # the last character seen was a CR, so a following LF belongs to it
        self._data: list[str] = []
        self._event_type = ""
        self._last_event_id = ""
        self._fields_pending = False
        self._event_chars = 0
        self._closed = False
        #: The last valid ``retry`` field (milliseconds), or None. Reconnection is the caller's choice.
        self.retry: int | None = None

    @property
    def last_event_id(self) -> str:
        """The last event ID buffer (WHATWG §9.2.6); "" when none was set."""
        return self._last_event_id

    @property
    def incomplete(self) -> bool:
        """Whether a partial line or fields of an undispatched event are buffered."""
        return bool(self._line_parts) or self._fields_pending

    def feed(self, data: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Parse more of the stream; return the events it completed, in order.

        Raises RuntimeError after :meth:`close`, :class:`SSEError` when ``max_event_chars`` is exceeded.
        """
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() after close()")
        return self._parse(self._decoder.decode(bytes(data)))

    def close(self) -> list[SSEEvent]:
        """End the stream and return ``[]``.

        An event still missing its blank line is discarded (WHATWG §9.2.5); check :attr:`incomplete`
        first to detect a truncated stream. Calling it again does nothing.
        """
        if not self._closed:
            # A UTF-8 sequence cut by the end of the stream becomes U+FFFD in the discarded line.
            self._decoder.decode(b"", final=True)
            self._closed = True
            self._line_parts.clear()
            self._line_chars = 0
            self._data.clear()
            self._event_type = ""
            self._fields_pending = False
            self._event_chars = 0
        return []

    def _parse(self, text: str) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        pos = 0
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                pos = 1
        for match in _LINE_BREAK.finditer(text, pos):
            self._line_parts.append(text[pos : match.start()])
            line = "".join(self._line_parts)
            self._line_parts.clear()
            self._line_chars = 0
            pos = match.end()
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        if pos < len(text):
            rest = text[pos:]
            self._line_parts.append(rest)
            self._line_chars += len(rest)
            self._check_size()
        if text:
            # A CR that ends this piece has ended its line; an LF starting the next piece belongs to it.
            self._skip_lf = text[-1] == "\r"
        return events

    def _check_size(self) -> None:
        if self._event_chars + self._line_chars > self.max_event_chars:
            raise SSEError(f"SSE event exceeds max_event_chars={self.max_event_chars}")

    def _process_line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None  # comment
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        self._fields_pending = True
        if name == "data":
            self._data.append(value)
            self._event_chars += len(value) + 1
            self._check_size()
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._last_event_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value)
        # Any other field name is ignored, as the standard says.
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, self._data = self._data, []
        event_type, self._event_type = self._event_type, ""
        self._fields_pending = False
        self._event_chars = 0
        if not data:
            return None  # no data field: nothing is dispatched, but the last event ID stays set
        return SSEEvent(data="\n".join(data), event=event_type or "message", id=self._last_event_id or None)


def decode_base64_strict(s: str | bytes) -> bytes:
    """Decode canonical standard base64 with padding (RFC 4648 §4), as PROTOCOL.md §11.4 requires.

    Refuses whitespace, the URL-safe alphabet, missing or extra padding, data after padding, non-ASCII
    input, and non-canonical encodings whose unused bits are not zero (e.g. ``QR==`` for ``QQ==``).
    Raises ValueError (``binascii.Error`` is one) with the reason.
    """
    if isinstance(s, str):
        if not s.isascii():
            raise ValueError("invalid base64: non-ASCII characters")
        raw = s.encode("ascii")
    else:
        raw = bytes(s)
    try:
        out = binascii.a2b_base64(raw, strict_mode=True)
    except binascii.Error as exc:
        raise ValueError(f"invalid base64: {exc}") from exc
    if binascii.b2a_base64(out, newline=False) != raw:
        raise ValueError("invalid base64: not the canonical encoding (non-zero unused bits)")
    return out

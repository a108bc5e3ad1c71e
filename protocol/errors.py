"""The error-code registry and the exception that carries a code (PROTOCOL.md §9).

Every way a client message can be refused has exactly one code here. The table :data:`REGISTRY` is the
code form of the §9.1 table: whether a code always ends the session, which WebSocket close code it
uses when it does, and which HTTP status ``POST /invocations`` answers with (§11.6).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL_ERROR",
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_NORMAL",
    "CLOSE_POLICY_VIOLATION",
    "CLOSE_TRY_AGAIN_LATER",
    "REGISTRY",
    "ErrorCode",
    "ProtocolError",
    "RegistryEntry",
]

# WebSocket close codes this protocol uses (RFC 6455 §7.4.1; 1013 is from the IANA registry).
CLOSE_NORMAL = 1000
"""Drained after ``close`` (§7.1)."""
CLOSE_GOING_AWAY = 1001
"""Server shutdown (§7.3)."""
CLOSE_POLICY_VIOLATION = 1008
"""``client_not_reading``: the client let the server's output wait past ``send_timeout_s`` (§10.3)."""
CLOSE_MESSAGE_TOO_BIG = 1009
"""A message over the transport's own size ceiling, too big even to answer (§10)."""
CLOSE_INTERNAL_ERROR = 1011
"""The session itself failed (``internal_error`` with ``fatal: true``)."""
CLOSE_TRY_AGAIN_LATER = 1013
"""``too_many_sessions``, and ``server_busy`` when it refuses a session as it opens."""


class ErrorCode(enum.StrEnum):
    """The registry codes of PROTOCOL.md §9.1; each value is the wire string of the ``code`` member."""

    INVALID_UTF8 = "invalid_utf8"
    """The message is not valid UTF-8 (or, as ``str``, holds a lone surrogate)."""
    INVALID_JSON = "invalid_json"
    """Not one strict JSON text (§3.1): empty, BOM, NaN/Infinity, duplicate names, too deep, trailing data."""
    NOT_AN_OBJECT = "not_an_object"
    """Valid JSON whose top-level value is not an object."""
    UNKNOWN_TYPE = "unknown_type"
    """``type`` is a string naming no client message."""
    INVALID_FIELD = "invalid_field"
    """A member has the wrong JSON type or shape (and no more specific code applies)."""
    TEXT_REQUIRED = "text_required"
    """``text`` is missing, null, empty or whitespace only."""
    TEXT_TOO_LONG = "text_too_long"
    """``text`` has more than ``max_text_chars`` characters."""
    INVALID_VOICE = "invalid_voice"
    """``voice`` is a string that names no voice of this server."""
    INVALID_SPEED = "invalid_speed"
    """``speed`` is a number outside [0.5, 2.0]."""
    INVALID_SAMPLE_RATE = "invalid_sample_rate"
    """``sample_rate`` is a number other than 8000, 16000, 22050 or 24000."""
    MESSAGE_TOO_LARGE = "message_too_large"
    """The message (or HTTP body) is longer than ``max_message_bytes``."""
    REQUEST_STALE = "request_stale"
    """``request_timestamp`` is older than ``max_request_age_s``."""
    QUEUE_FULL = "queue_full"
    """The session already holds ``max_queue`` requests (queued + active); HTTP: the server is busy."""
    DUPLICATE_REQUEST_ID = "duplicate_request_id"
    """``request_id`` names a request that is still queued or active in this session."""
    UNKNOWN_REQUEST = "unknown_request"
    """``cancel`` names no queued or active request; ``append``, ``flush`` or ``end`` no open utterance."""
    INTERNAL_ERROR = "internal_error"
    """Synthesis of one request failed (per-request), or the session itself failed (fatal, 1011)."""
    UTTERANCE_TIMEOUT = "utterance_timeout"
    """An active, open utterance got no message for ``utterance_idle_timeout_s`` (§15.5).

    A notice inside the utterance's bracket, not a refusal: the utterance then ends as if ``end`` had
    arrived, and its bracket completes.
    """
    SESSION_IDLE = "session_idle"
    """The session stayed idle for ``session_idle_timeout_s``, or gave its slot to a new session after
    ``idle_eviction_s`` idle while every slot was taken (§7.5); fatal, close 1001."""
    CLIENT_NOT_READING = "client_not_reading"
    """Output waited ``send_timeout_s`` without the client reading any of it (§10.3); fatal, close 1008."""
    TOO_MANY_SESSIONS = "too_many_sessions"
    """The server already holds ``max_sessions`` sessions; fatal, close 1013."""
    SERVER_BUSY = "server_busy"
    """The first audio the server can promise is later than ``first_audio_budget_s`` (§10.2): a request
    that would begin a speech is refused (per message; HTTP 503), or a session as it opens (fatal, close
    1013). Try again later or elsewhere; nothing was done for the refused work."""
    UNSUPPORTED_FORMAT = "unsupported_format"
    """``POST /invocations`` only: ``format`` is not one this server can produce (§11.5)."""
    UNSUPPORTED_ENCODING = "unsupported_encoding"
    """``encoding`` is a string naming no audio frame encoding this server offers (§3.3.1, §4.1), or,
    on ``POST /invocations``, a G.711 encoding with a format other than ``pcm`` (§11.3)."""

    INVALID_LEXICON = "invalid_lexicon"
    """A pronunciation lexicon (a request's ``lexicon`` member, the ``lexicon`` message) or an inline
    pronunciation of the text breaks a rule of §14.3: an empty word, a symbol outside Kokoro's phoneme
    alphabet, more than ``max_lexicon_entries`` words; the message names the entry (§4.1, §4.5)."""

    @property
    def fatal(self) -> bool:
        """Whether this code always ends the session (§9.4).

        ``internal_error`` is ``False`` here: it is fatal only when the session itself fails, and then
        the frame says so with ``fatal: true``.
        """
        return REGISTRY[self].always_fatal

    @property
    def close_code(self) -> int | None:
        """The WebSocket close code used when this code ends a session, or ``None`` if it never does."""
        return REGISTRY[self].close_code

    @property
    def http_status(self) -> int | None:
        """The HTTP status ``POST /invocations`` answers with (§11.6), or ``None`` (WebSocket only)."""
        return REGISTRY[self].http_status


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """One row of the §9.1 table.

    Attributes:
        always_fatal: the code always ends the session.
        close_code: WebSocket close code when the code ends a session; ``None`` if it never does.
        http_status: status for ``POST /invocations``; ``None`` for WebSocket-only codes.
    """

    always_fatal: bool
    close_code: int | None
    http_status: int | None


_PER_MESSAGE_400 = RegistryEntry(always_fatal=False, close_code=None, http_status=400)

REGISTRY: dict[ErrorCode, RegistryEntry] = {
    ErrorCode.INVALID_UTF8: _PER_MESSAGE_400,
    ErrorCode.INVALID_JSON: _PER_MESSAGE_400,
    ErrorCode.NOT_AN_OBJECT: _PER_MESSAGE_400,
    # POST /invocations ignores `type` (§11.1), so this code never reaches HTTP.
    ErrorCode.UNKNOWN_TYPE: RegistryEntry(always_fatal=False, close_code=None, http_status=None),
    ErrorCode.INVALID_FIELD: _PER_MESSAGE_400,
    ErrorCode.TEXT_REQUIRED: _PER_MESSAGE_400,
    ErrorCode.TEXT_TOO_LONG: RegistryEntry(always_fatal=False, close_code=None, http_status=413),
    ErrorCode.INVALID_VOICE: _PER_MESSAGE_400,
    ErrorCode.INVALID_SPEED: _PER_MESSAGE_400,
    ErrorCode.INVALID_SAMPLE_RATE: _PER_MESSAGE_400,
    ErrorCode.MESSAGE_TOO_LARGE: RegistryEntry(always_fatal=False, close_code=None, http_status=413),
    # 408 copies the AWS sample's answer to a stale request (REFERENCE.md §3).
    ErrorCode.REQUEST_STALE: RegistryEntry(always_fatal=False, close_code=None, http_status=408),
    ErrorCode.QUEUE_FULL: RegistryEntry(always_fatal=False, close_code=None, http_status=503),
    ErrorCode.DUPLICATE_REQUEST_ID: RegistryEntry(always_fatal=False, close_code=None, http_status=None),
    ErrorCode.UNKNOWN_REQUEST: RegistryEntry(always_fatal=False, close_code=None, http_status=None),
    ErrorCode.INTERNAL_ERROR: RegistryEntry(
        always_fatal=False, close_code=CLOSE_INTERNAL_ERROR, http_status=500
    ),
    ErrorCode.UTTERANCE_TIMEOUT: RegistryEntry(always_fatal=False, close_code=None, http_status=None),
    ErrorCode.SESSION_IDLE: RegistryEntry(always_fatal=True, close_code=CLOSE_GOING_AWAY, http_status=None),
    ErrorCode.CLIENT_NOT_READING: RegistryEntry(
        always_fatal=True, close_code=CLOSE_POLICY_VIOLATION, http_status=None
    ),
    ErrorCode.TOO_MANY_SESSIONS: RegistryEntry(
        always_fatal=True, close_code=CLOSE_TRY_AGAIN_LATER, http_status=None
    ),
    ErrorCode.UNSUPPORTED_FORMAT: _PER_MESSAGE_400,
    ErrorCode.UNSUPPORTED_ENCODING: _PER_MESSAGE_400,
    # Per message on a request, fatal (1013) on a session refused as it opens, like internal_error's two
    # scopes; 503 as queue_full's "no capacity", so an HTTP caller or a load balancer retries elsewhere.
    ErrorCode.SERVER_BUSY: RegistryEntry(
        always_fatal=False, close_code=CLOSE_TRY_AGAIN_LATER, http_status=503
    ),
    ErrorCode.INVALID_LEXICON: _PER_MESSAGE_400,
}


class ProtocolError(Exception):
    """A client message was refused with a registry code (PROTOCOL.md §9).

    Args:
        code: the registry code.
        message: a short sentence for people. It never quotes the request's ``text`` (§13).
        request_id: the request the message concerns, when it could be read; else ``None``.
        fatal: whether the session ends; defaults to ``code.fatal``.
        message_type: the ``type`` of the refused message when it could be read (``"synthesize"`` for
            a request sent without one), else ``None``; the error frame carries it (§5.4, §15.6).

    ``str(exc)`` is ``"<code>: <message>"``. The ``error`` frame that answers it is
    :meth:`protocol.messages.ErrorFrame.from_error` (this module imports nothing of the message layer).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        request_id: str | None = None,
        *,
        fatal: bool | None = None,
        message_type: str | None = None,
    ) -> None:
        self.code = ErrorCode(code)
        self.message = message
        self.request_id = request_id
        self.fatal = self.code.fatal if fatal is None else fatal
        self.message_type = message_type
        super().__init__(f"{self.code}: {message}")

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value!r}, {self.message!r}, request_id={self.request_id!r})"

    def http_body(self) -> dict[str, Any]:
        """The JSON body of an HTTP error answer (§11.6): ``{"error": {"code", "message"}}``."""
        return {"error": {"code": self.code.value, "message": self.message}}

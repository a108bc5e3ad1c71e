"""The bridge rules: PayloadParts ↔ WebSocket frames, and how a session ends (PROTOCOL.md §12).

This module is the simulator's model of SageMaker's bidirectional-streaming router, with no I/O.
Each rule is marked **verified** (seen with the official client or documented by AWS) or
**assumed** (described by the AWS sample or examples, or our best reading; REFERENCE §1). The
simulator's README repeats the table.

Input (client → container):

* A PayloadPart with DataType ``BINARY`` or no DataType becomes a BINARY WebSocket frame
  (assumed, strongly supported: the ``KeyError('text')`` failure of containers that call only
  ``receive_text()``). Missing DataType means BINARY (verified, API model).
* DataType ``UTF8`` becomes a TEXT frame (assumed: strongly suggested, not proven). The bytes are
  passed through unchecked; invalid UTF-8 makes the container's WebSocket stack fail the
  connection (1007), which ends the session like any abnormal close.
* ``CompletionState=PARTIAL`` parts become fragments of one WebSocket message, continued until a
  ``COMPLETE`` part (or one without CompletionState: missing means COMPLETE, verified). The first
  part of a message decides its frame type; DataType on later fragments is ignored (assumed).
  python-websockets ends a fragmented message with an empty final frame (FIN) after the last part;
  the container reassembles the same message.
* End of client input (the empty signed envelope or END_STREAM) tears the WebSocket down at once:
  container output still in flight is dropped (assumed, from the AWS description: "a client that
  closes its input right after its last send can lose that message").

Output (container → client):

* Each container WebSocket message becomes PayloadParts with DataType from the frame type (TEXT →
  ``UTF8``, BINARY → ``BINARY``), cut by the split policy; every part but the last of a message is
  ``PARTIAL``, the last ``COMPLETE`` (assumed; whether SageMaker re-splits is unknown).
  Fragments of one container message are reassembled before splitting (assumed).
* The container closing with a normal code (1000, 1001) ends the response stream cleanly;
  any other code, a dropped connection (1006) or a crash ends it with ``ModelStreamError``
  ``StreamBroken`` (assumed; REFERENCE §1 "container failure mid-stream → ModelStreamError").
* A container that stops answering pings fails the session the same way (assumed: the
  container contract requires pongs; what SageMaker does when they stop is not public).

Session opening:

* The container must accept the WebSocket within 250 ms (AWS contract); a slower, refusing or
  unreachable container gets the client a 424 ``ModelError`` before the stream opens
  (reported: any failure to open the stream to the container is a 424).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sagemaker_transport.eventstream import PayloadPart
from simulator.errors import StreamError, StreamErrorKind
from simulator.faults import Fault, FaultKind
from simulator.splitting import MessageSplitter

__all__ = [
    "BINARY",
    "COMPLETE",
    "DEFAULT_INVOCATION_PATH",
    "NORMAL_CLOSE_CODES",
    "PARTIAL",
    "UTF8",
    "BridgeError",
    "EndReason",
    "Ending",
    "Fragment",
    "InputBridge",
    "OutputBridge",
    "container_path",
]

UTF8 = "UTF8"
BINARY = "BINARY"
PARTIAL = "PARTIAL"
COMPLETE = "COMPLETE"

#: WebSocket route of a SageMaker bidirectional-streaming container (PROTOCOL.md §2).
DEFAULT_INVOCATION_PATH = "/invocations-bidirectional-stream"

#: Close codes that end the output cleanly: RFC 6455 §7.4.1 "normal closure" and "going away"
#: (python-websockets reports both as ConnectionClosedOK). Assumed for SageMaker.
NORMAL_CLOSE_CODES = frozenset({1000, 1001})


class BridgeError(Exception):
    """Input the bridge cannot forward; the session ends with :attr:`stream_error`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.stream_error = StreamError(StreamErrorKind.INTERNAL_STREAM_FAILURE, f"(simulator) {message}")


@dataclass(frozen=True)
class Fragment:
    """One WebSocket frame to send to the container.

    ``first``/``last``: the frame opens / closes a message (both True: an unfragmented message).
    ``text``: the message's frame type (decided by its first part).
    """

    data: bytes
    text: bool
    first: bool
    last: bool


class InputBridge:
    """Maps input PayloadParts to WebSocket frames (the input rules of the module docstring).

    Parts come from :func:`sagemaker_transport.eventstream.parse_payload_part`, which has already applied the
    API defaults (absent DataType → BINARY, absent CompletionState → COMPLETE).

    Args:
        max_part_bytes: parts larger than this are refused (the limit is not published; off by
            default).
    """

    def __init__(self, *, max_part_bytes: int | None = None) -> None:
        self.max_part_bytes = max_part_bytes
        self._open_text: bool | None = None  # frame type of the message being fragmented

    @property
    def in_message(self) -> bool:
        """A fragmented message is open (PARTIAL seen, COMPLETE not yet)."""
        return self._open_text is not None

    def feed(self, part: PayloadPart) -> Fragment:
        """The frame for ``part``.

        Raises:
            BridgeError: unknown DataType or CompletionState, or a part above the size limit.
        """
        if part.data_type not in (UTF8, BINARY):
            raise BridgeError(f"PayloadPart DataType {part.data_type!r} is neither UTF8 nor BINARY")
        if part.completion_state not in (PARTIAL, COMPLETE):
            raise BridgeError(
                f"PayloadPart CompletionState {part.completion_state!r} is neither PARTIAL nor COMPLETE"
            )
        if self.max_part_bytes is not None and len(part.data) > self.max_part_bytes:
            raise BridgeError(
                f"PayloadPart of {len(part.data)} bytes exceeds the part size limit of "
                f"{self.max_part_bytes} bytes"
            )
        first = self._open_text is None
        text = part.is_utf8 if first else bool(self._open_text)
        last = part.is_complete
        self._open_text = None if last else text
        return Fragment(part.data, text, first, last)


class OutputBridge:
    """Maps container WebSocket messages to output PayloadParts (the output rules).

    Args:
        splitter: cuts each message into part payloads (split policy and part-size limit).
    """

    def __init__(self, splitter: MessageSplitter) -> None:
        self._splitter = splitter

    def parts(self, message: bytes, *, text: bool) -> list[PayloadPart]:
        """The PayloadParts carrying one container message, in order."""
        data_type = UTF8 if text else BINARY
        chunks = self._splitter.split(message)
        return [
            PayloadPart(chunk, data_type, COMPLETE if i == len(chunks) - 1 else PARTIAL)
            for i, chunk in enumerate(chunks)
        ]


def container_path(invocation_path: str | None, query_string: str | None) -> str:
    """The container's WebSocket path and query for a session.

    The client may override the route with ``X-Amzn-SageMaker-Model-Invocation-Path`` and add
    ``X-Amzn-SageMaker-Model-Query-String`` (REFERENCE §1).
    """
    path = invocation_path or DEFAULT_INVOCATION_PATH
    if not path.startswith("/"):
        path = "/" + path
    if query_string:
        path += "?" + query_string.lstrip("?")
    return path


class EndReason(StrEnum):
    """Why a bidirectional session ended."""

    CONTAINER_CLOSED = "container-closed"
    CONTAINER_FAILED = "container-failed"
    PING_TIMEOUT = "ping-timeout"
    INPUT_ENDED = "input-ended"
    CLIENT_GONE = "client-gone"
    FAULT = "fault"
    IDLE_TIMEOUT = "idle-timeout"
    SESSION_TIMEOUT = "session-timeout"
    BAD_INPUT = "bad-input"
    INTERNAL = "internal"


@dataclass(frozen=True)
class Ending:
    """How to end a session: the exception event to send (if any) and the close code to send the
    container (None when the container already closed).

    Build with the classmethods; each encodes one rule of the module docstring.
    """

    reason: EndReason
    stream_error: StreamError | None = None
    close_code: int | None = 1000
    note: str = ""

    @classmethod
    def container_closed(cls, code: int | None, reason: str = "") -> Ending:
        """The container closed (or dropped) the WebSocket."""
        note = f"code {code if code is not None else 1006}" + (f" ({reason})" if reason else "")
        if code in NORMAL_CLOSE_CODES:
            return cls(EndReason.CONTAINER_CLOSED, None, None, note)
        error = StreamError(
            StreamErrorKind.MODEL_STREAM_ERROR,
            f"(simulator) the model container closed the WebSocket abnormally: {note}",
            "StreamBroken",
        )
        return cls(EndReason.CONTAINER_FAILED, error, None, note)

    @classmethod
    def ping_timeout(cls, timeout_s: float) -> Ending:
        """The container did not answer a ping within ``timeout_s``."""
        note = f"no pong within {timeout_s:g} s"
        error = StreamError(
            StreamErrorKind.MODEL_STREAM_ERROR,
            f"(simulator) the model container stopped answering WebSocket pings: {note}",
            "StreamBroken",
        )
        return cls(EndReason.PING_TIMEOUT, error, 1011, note)

    @classmethod
    def input_ended(cls) -> Ending:
        """The client ended its input: tear the WebSocket down, end the output cleanly."""
        return cls(EndReason.INPUT_ENDED, None, 1000, "end of client input")

    @classmethod
    def client_gone(cls) -> Ending:
        """The client's HTTP stream went away: nothing more can be sent to it."""
        return cls(EndReason.CLIENT_GONE, None, 1001, "client disconnected")

    @classmethod
    def fault(cls, fault: Fault, delivered: int) -> Ending:
        """An injected mid-stream fault fired after ``delivered`` payload bytes."""
        note = f"injected {fault} after {delivered} bytes"
        if fault.kind is FaultKind.INTERNAL_STREAM_FAILURE:
            error = StreamError(StreamErrorKind.INTERNAL_STREAM_FAILURE, f"(simulator) {note}")
        else:
            error = StreamError(
                StreamErrorKind.MODEL_STREAM_ERROR, f"(simulator) {note}", fault.error_code or "StreamBroken"
            )
        return cls(EndReason.FAULT, error, 1011, note)

    @classmethod
    def timeout(cls, reason: EndReason, limit_s: float) -> Ending:
        """The idle or session-length limit expired (both limits are simulator settings)."""
        what = "no traffic for" if reason is EndReason.IDLE_TIMEOUT else "session longer than"
        note = f"{what} {limit_s:g} s"
        error = StreamError(
            StreamErrorKind.MODEL_STREAM_ERROR, f"(simulator) {note}", "ModelInvocationTimeExceeded"
        )
        return cls(reason, error, 1000, note)

    @classmethod
    def bad_input(cls, error: BridgeError) -> Ending:
        """Client input the bridge refused."""
        return cls(EndReason.BAD_INPUT, error.stream_error, 1000, str(error))

    @classmethod
    def internal(cls, error: BaseException) -> Ending:
        """The simulator itself failed (a bug): the client gets InternalStreamFailure."""
        note = f"simulator error {error!r}"
        return cls(
            EndReason.INTERNAL,
            StreamError(StreamErrorKind.INTERNAL_STREAM_FAILURE, f"(simulator) internal error: {error!r}"),
            1011,
            note,
        )

"""The service's errors, as the official clients expect to parse them (REFERENCE §1, §2).

Two APIs share the simulator and name the same failures differently:

=================  ====================================  ==========================
failure            InvokeEndpointWithBidirectionalStream  InvokeEndpoint[WithResponseStream]
=================  ====================================  ==========================
bad request (400)  InputValidationError                   ValidationError
model (424)        ModelError                             ModelError
internal (500)     InternalServerError                    InternalFailure
unavailable (503)  ServiceUnavailableError                ServiceUnavailable
throttled (400)    ThrottlingException (not modelled)     ThrottlingException (not modelled)
=================  ====================================  ==========================

Before the stream opens an error is an HTTP status, the ``x-amzn-errortype`` header (the bare shape
name: both smithy's and botocore's parsers cut anything after ``:``) and a JSON body with the
shape's members (``Message``, ``ErrorCode``; ModelError adds ``OriginalStatusCode``,
``OriginalMessage``, ``LogStreamArn``). Once the stream is open, an error is an event-stream
exception message: ``ModelStreamError {Message, ErrorCode}`` or ``InternalStreamFailure {Message}``.
The official bidi client raises both from ``receive()``; botocore raises ``EventStreamError`` and
drops ``ErrorCode``. Exact message wording of the real service is not public: ours is marked
"(simulator)" so nobody mistakes it for the real text.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "Api",
    "ErrorKind",
    "HttpError",
    "ServiceError",
    "StreamError",
    "StreamErrorKind",
]


class Api(StrEnum):
    """Which API an invocation came through; it decides the error shape names."""

    BIDI = "bidi"
    """InvokeEndpointWithBidirectionalStream (HTTP/2, namespace com.amazonaws.sagemakerruntimehttp2)."""
    RUNTIME = "runtime"
    """InvokeEndpoint and InvokeEndpointWithResponseStream (HTTP/1.1, botocore's sagemaker-runtime)."""


class ErrorKind(StrEnum):
    """Failures answered before the stream opens."""

    VALIDATION = "validation"
    MODEL_ERROR = "model_error"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    THROTTLING = "throttling"


_SHAPES: dict[ErrorKind, tuple[int, str, str]] = {
    # kind: (status, bidi name, runtime name)
    ErrorKind.VALIDATION: (400, "InputValidationError", "ValidationError"),
    ErrorKind.MODEL_ERROR: (424, "ModelError", "ModelError"),
    ErrorKind.INTERNAL: (500, "InternalServerError", "InternalFailure"),
    ErrorKind.UNAVAILABLE: (503, "ServiceUnavailableError", "ServiceUnavailable"),
    ErrorKind.THROTTLING: (400, "ThrottlingException", "ThrottlingException"),
}


@dataclass(frozen=True)
class HttpError:
    """A rendered HTTP error: status, header pairs (lower-case bytes, ASGI style) and body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    shape: str


@dataclass(eq=False)
class ServiceError(Exception):
    """An error the simulator answers instead of opening the stream (raised inside the simulator).

    Attributes:
        kind: which failure.
        message: ``Message`` member.
        error_code: ``ErrorCode`` member (omitted when None).
        original_status_code: ModelError only: the container's HTTP status, if it gave one.
        original_message: ModelError only: the container's answer or the reason it gave none.
    """

    kind: ErrorKind
    message: str
    error_code: str | None = None
    original_status_code: int | None = None
    original_message: str | None = None

    def shape(self, api: Api) -> str:
        """The error shape name for ``api`` (see the module table)."""
        _, bidi, runtime = _SHAPES[self.kind]
        return bidi if api is Api.BIDI else runtime

    @property
    def status(self) -> int:
        """HTTP status code."""
        return _SHAPES[self.kind][0]

    def render(self, api: Api, *, request_id: str | None = None) -> HttpError:
        """The HTTP answer for ``api``: status, headers and JSON body."""
        body: dict[str, object] = {"Message": self.message}
        if self.error_code is not None:
            body["ErrorCode"] = self.error_code
        if self.kind is ErrorKind.MODEL_ERROR:
            if self.original_status_code is not None:
                body["OriginalStatusCode"] = self.original_status_code
            if self.original_message is not None:
                body["OriginalMessage"] = self.original_message
        payload = json.dumps(body).encode()
        shape = self.shape(api)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"x-amzn-errortype", shape.encode()),
            (b"x-amzn-requestid", (request_id or str(uuid.uuid4())).encode()),
        ]
        return HttpError(self.status, headers, payload, shape)


class StreamErrorKind(StrEnum):
    """Exception events that end an open stream (the ``:exception-type`` header value)."""

    MODEL_STREAM_ERROR = "ModelStreamError"
    INTERNAL_STREAM_FAILURE = "InternalStreamFailure"


@dataclass(frozen=True)
class StreamError:
    """An exception event ending an open stream.

    ``error_code`` is only carried by ModelStreamError; the documented codes are
    ``ModelInvocationTimeExceeded`` and ``StreamBroken`` (REFERENCE §2).
    """

    kind: StreamErrorKind
    message: str
    error_code: str | None = None

    def payload(self) -> bytes:
        """The JSON payload of the exception message."""
        body: dict[str, object] = {"Message": self.message}
        if self.kind is StreamErrorKind.MODEL_STREAM_ERROR and self.error_code is not None:
            body["ErrorCode"] = self.error_code
        return json.dumps(body).encode()

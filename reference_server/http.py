"""The HTTP routes: ``GET /ping`` (health) and ``POST /invocations`` (one-shot synthesis, PROTOCOL.md §11).

``POST /invocations`` answers one request with audio as it is synthesized: a streamed WAV (§11.2), raw
PCM16 or G.711 (§11.3), server-sent events with base64 audio (§11.4), MP3 (§11.5), or Ogg/Opus, FLAC
or AAC in ADTS (§11.7); the encoders are :mod:`reference_server.encoders`. The body is validated with the
same rules as a WebSocket request (:func:`protocol.messages.parse_invocations_request`); a refusal is an
HTTP error with the registry's status and ``{"error": {"code", "message"}}`` (§11.6). Once the status line
is out, a binary response that fails is cut short (the client sees an incomplete chunked body, which
SageMaker reports as a ``ModelStreamError``); an SSE response ends with an ``error`` event instead.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from protocol.encodings import DEFAULT_ENCODING
from protocol.encodings import encoding as encoding_named
from protocol.errors import ErrorCode, ProtocolError
from protocol.logs import log_event
from protocol.messages import (
    CHANNELS,
    Describe,
    ErrorFrame,
    InvocationsRequest,
    SynthesisRequest,
    Word,
    parse_invocations_body,
)
from protocol.pcm import wav_header
from protocol.sse import encode_event
from reference_server.encoders import (
    MEDIA_TYPES,
    MP3_AVAILABLE,
    MP3_BIT_RATE_KBPS,
    FormatEncoder,
)
from reference_server.request_audio import RequestAudio
from reference_server.runtime import Readiness, Runtime
from reference_server.scheduling import Listener
from reference_server.telemetry import RequestRecord

__all__ = [
    "MP3_AVAILABLE",
    "MP3_BIT_RATE_KBPS",
    "admit",
    "busy_error",
    "http_error",
    "invocations",
    "media_type",
    "ping",
    "read_body",
    "stream_audio",
]

logger = logging.getLogger("reference_server")


# --- GET /ping ------------------------------------------------------------------------------------------


async def ping(request: Request) -> JSONResponse:
    """``GET /ping`` (PROTOCOL.md §2): 200 once the model is loaded and warmed up, with what is loaded:
    ``{"status": "Healthy", "backend": "onnx", "voices": 54, "languages": ["a", "b", ...]}`` (the
    voice list itself is the answer to ``describe``, §4.4); 503 ``{"status": "Unhealthy", "reason":
    "loading" | "failed" | "shutting down"}`` otherwise, with ``error`` (why, and the fix) after a
    failure: the server then exits (§2.2).

    SageMaker sends no traffic to a container until this answers 200.
    """
    runtime: Runtime = request.app.state.runtime
    if runtime.closing:  # §7.3: a server shutting down reports unhealthy
        return JSONResponse({"status": "Unhealthy", "reason": "shutting down"}, status_code=503)
    if runtime.readiness is Readiness.READY:
        capabilities = runtime.capabilities
        return JSONResponse(
            {
                "status": "Healthy",
                "backend": capabilities.server.backend,
                "voices": len(capabilities.voices),
                "languages": [language.code for language in capabilities.languages],
            }
        )
    body = {"status": "Unhealthy", "reason": runtime.readiness.value}
    if runtime.failure:
        body["error"] = runtime.failure  # what failed and how to fix it, until the process exits
    return JSONResponse(body, status_code=503)


# --- POST /invocations ----------------------------------------------------------------------------------


def media_type(fmt: str, sample_rate: int, encoding: str = DEFAULT_ENCODING) -> str:
    """Content-Type of a binary response (§11.2, §11.3, §11.5, §11.7).

    Raw PCM is ``audio/pcm;rate=<Hz>;encoding=s16le;channels=1``: RFC 2586's ``audio/L16`` means
    big-endian samples, and ours are little-endian (§3.3). Raw G.711 is ``audio/PCMU;rate=<Hz>`` or
    ``audio/PCMA;rate=<Hz>`` (RFC 4856).
    """
    if fmt in MEDIA_TYPES:
        return MEDIA_TYPES[fmt]
    if encoding != DEFAULT_ENCODING:
        return f"{encoding_named(encoding).media_type};rate={sample_rate}"
    return f"audio/pcm;rate={sample_rate};encoding=s16le;channels={CHANNELS}"


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
"""Codes of HTTP errors no protocol rule answers (PROTOCOL.md §11.6): a path or method not served."""


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own HTTP errors (an unknown path, a wrong method) in the one error shape of §11.6:
    ``{"error": {"code", "message"}}`` with ``not_found`` or ``method_not_allowed``."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    code = _HTTP_CODES.get(status, f"http_{status}")
    what = f"{request.method} {request.url.path}"
    message = {404: f"no route serves {what}", 405: f"{what}: method not allowed"}.get(
        status, str(exc.detail)
    )
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=exc.headers
    )


def _error(runtime: Runtime, exc: ProtocolError) -> JSONResponse:
    runtime.metrics.refusals.labels(exc.code.value).inc()
    code = exc.code.value
    log_event(logger, "refused", logging.DEBUG, transport="http", request_id=exc.request_id, code=code)
    return JSONResponse(exc.http_body(), status_code=exc.code.http_status or 400)


async def read_body(request: Request, max_bytes: int) -> bytes | None:
    """The request body, or ``None`` as soon as it is known to exceed ``max_bytes`` (never buffered)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            return None
    return bytes(body)


def _encoder(parsed: InvocationsRequest) -> FormatEncoder:
    request = parsed.request
    stream = parsed.stream or parsed.transport == "sse"
    return FormatEncoder(parsed.format, request.sample_rate, encoding=request.encoding, stream=stream)


class _Slot:
    """An invocation slot taken for one response; released exactly once, whichever path ends it."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime: Runtime | None = runtime

    def release(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close_invocation()


class _AudioResponse(StreamingResponse):
    """A streaming response that always closes its body generator, so synthesis stops on disconnect."""

    body_iterator: Any

    def __init__(self, content: AsyncIterator[bytes], slot: _Slot, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()
            self._slot.release()


async def _pcm_pieces(
    runtime: Runtime,
    request: SynthesisRequest,
    words: list[Word],
    record: RequestRecord,
    *,
    whole: bool = False,
    listener: Listener | None = None,
) -> AsyncIterator[bytes]:
    """The request's PCM16LE audio segment by segment; word timings are appended to ``words``.

    ``whole``: the answer is sent in one piece, so nobody listens while it is made and no sentence is
    cut for an early start (PROTOCOL.md §10.1 is about a listener who plays as audio arrives).
    """
    audio = RequestAudio(runtime, request, listener, whole=whole)
    try:
        while (piece := await audio.next()) is not None:
            if piece.words:
                words.extend(piece.words)
            if piece.pcm:
                record.audio(len(piece.pcm))
                yield piece.pcm
    finally:
        audio.close()
        record.compute_s = audio.compute_s


@contextlib.asynccontextmanager
async def _logged(runtime: Runtime, record: RequestRecord, fmt: str) -> AsyncIterator[None]:
    """Log and count one invocation when its body ends: completed, failed, or disconnected (the client
    left and the body generator was closed early)."""
    status = "failed"
    try:
        yield
        status = "completed"
    except (GeneratorExit, asyncio.CancelledError, ClientDisconnect):
        status = "disconnected"
        raise
    finally:
        record.finish(status, runtime.metrics, format=fmt)


async def invocations(request: Request) -> Response:
    """``POST /invocations`` (PROTOCOL.md §11): synthesize one text and answer with its audio.

    The body ``{"type": "describe"}`` is answered with the ``capabilities`` object instead (§4.4).

    Errors before the status line (§11.6): 400 for a bad body, 408 ``request_stale``, 413
    ``message_too_large``/``text_too_long``, 503 ``queue_full`` when ``max_invocations`` responses are in
    flight, 503 ``server_busy`` when its first audio would come later than ``first_audio_budget_s``
    (§10.2), 500 ``internal_error`` when the model failed to load.
    """
    runtime: Runtime = request.app.state.runtime
    limits = runtime.limits
    try:
        body = await read_body(request, limits.max_message_bytes)
    except ClientDisconnect:
        return Response(status_code=400)
    if body is None:
        too_large = f"the body is longer than {limits.max_message_bytes} bytes"
        return _error(runtime, ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, too_large))
    if not await runtime.wait_ready():
        failed = f"the model failed to load: {runtime.failure}"
        return _error(runtime, ProtocolError(ErrorCode.INTERNAL_ERROR, failed))
    try:
        parsed = parse_invocations_body(
            body,
            limits=limits,
            known_voices=runtime.voices,
            mp3_available=MP3_AVAILABLE,
            encodings=runtime.capabilities.encodings,
            formats=runtime.capabilities.formats,
            voice_blends=runtime.voice_blends,
            lexicon=True,
        )
    except ProtocolError as exc:
        return _error(runtime, exc)
    if isinstance(parsed, Describe):  # §4.4: the capabilities object, no synthesis, no invocation slot
        return JSONResponse(runtime.capabilities.answering(parsed.request_id).to_dict())
    try:
        listener = admit(runtime, parsed.request)
    except ProtocolError as exc:
        return _error(runtime, exc)
    return await _answer(runtime, parsed, listener)


def busy_error() -> ProtocolError:
    """The refusal of a response while ``max_invocations`` responses are in flight: 503 ``queue_full``."""
    return ProtocolError(ErrorCode.QUEUE_FULL, "the server is busy; try again later")


def admit(runtime: Runtime, request: SynthesisRequest) -> Listener:
    """Take an invocation slot for a response that speaks ``request``, and its place in the model's line.

    Every HTTP route that speaks admits through here, so all refuse alike (§10.2, §10.3, §11.6).

    Returns:
        The listener the request's audio is reserved for; the slot is the caller's to release (the
        response's :class:`_Slot`).

    Raises:
        ProtocolError: ``queue_full`` while ``max_invocations`` responses are in flight
            (:func:`busy_error`); ``server_busy`` when the request's first audio would come later than
            ``first_audio_budget_s`` (503 at once rather than a silent wait). No slot is held then.
    """
    if not runtime.try_open_invocation():
        raise busy_error()
    listener = Listener()
    busy = runtime.busy(request, listener)
    if busy is not None:
        runtime.close_invocation()
        raise ProtocolError(ErrorCode.SERVER_BUSY, busy, request.request_id)
    return listener


def stream_audio(
    runtime: Runtime, parsed: InvocationsRequest, headers: dict[str, str] | None = None
) -> Response:
    """A streamed binary response of ``parsed`` (its ``format``, chunked as synthesized), the same body
    ``POST /invocations`` sends with ``stream: true`` (§11.2, §11.3, §11.5, §11.7).

    Other routes that speak (:mod:`reference_server.openai_speech`) answer through this, so they share
    admission (:func:`admit`), the invocation slot, the log line, the metrics and the encoders with
    ``POST /invocations``.

    Raises:
        ProtocolError: the server refuses the response for now (:func:`admit`).
    """
    listener = admit(runtime, parsed.request)
    slot = _Slot(runtime)
    if parsed.request.request_id is None:
        parsed = replace(parsed, request=replace(parsed.request, request_id=runtime.new_http_request_id()))
    record = RequestRecord("http", parsed.request)
    content_type = media_type(parsed.format, parsed.request.sample_rate, parsed.request.encoding)
    return _AudioResponse(
        _binary_stream(runtime, parsed, record, listener), slot, media_type=content_type, headers=headers
    )


async def _answer(runtime: Runtime, parsed: InvocationsRequest, listener: Listener | None = None) -> Response:
    """The response to an accepted ``POST /invocations`` whose invocation slot is taken; ``listener``: the
    one its admission reserved a place in line for (§10.2)."""
    slot = _Slot(runtime)
    if parsed.request.request_id is None:
        parsed = replace(parsed, request=replace(parsed.request, request_id=runtime.new_http_request_id()))
    record = RequestRecord("http", parsed.request)
    if parsed.transport == "sse":
        return _AudioResponse(
            _sse_events(runtime, parsed, record, listener),
            slot,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    if parsed.stream:
        content_type = media_type(parsed.format, parsed.request.sample_rate, parsed.request.encoding)
        return _AudioResponse(
            _binary_stream(runtime, parsed, record, listener), slot, media_type=content_type
        )
    try:
        async with _logged(runtime, record, parsed.format):
            return await _binary_whole(runtime, parsed, record, listener)
    finally:
        slot.release()


async def _binary_stream(
    runtime: Runtime, parsed: InvocationsRequest, record: RequestRecord, listener: Listener | None = None
) -> AsyncIterator[bytes]:
    """Binary body streamed as synthesized: WAV header with 0xFFFFFFFF sizes first (§11.2), or bare PCM
    or G.711 (§11.3), MP3 frames (§11.5), Ogg pages, FLAC frames or ADTS frames (§11.7)."""
    request = parsed.request
    async with _logged(runtime, record, parsed.format):
        encoder = _encoder(parsed)
        if parsed.format == "wav":
            yield wav_header(request.sample_rate, data_bytes=None)
        async for pcm in _pcm_pieces(runtime, request, [], record, listener=listener):
            if out := encoder.encode(pcm):
                yield out
        if tail := encoder.flush():
            yield tail


async def _binary_whole(
    runtime: Runtime, parsed: InvocationsRequest, record: RequestRecord, listener: Listener | None = None
) -> Response:
    """``stream: false``: the whole file, with exact WAV sizes and a Content-Length."""
    request = parsed.request
    encoder = _encoder(parsed)
    parts: list[bytes] = []
    pcm_bytes = 0
    async for pcm in _pcm_pieces(runtime, request, [], record, whole=True, listener=listener):
        pcm_bytes += len(pcm)
        parts.append(encoder.encode(pcm))
    parts.append(encoder.flush())
    if parsed.format == "wav":
        parts.insert(0, wav_header(request.sample_rate, data_bytes=pcm_bytes))
    return Response(
        b"".join(parts), media_type=media_type(parsed.format, request.sample_rate, request.encoding)
    )


_SSE_ENCODINGS = {"wav": DEFAULT_ENCODING, "mp3": "mp3", "opus": "opus", "flac": "flac", "aac": "aac"}
"""``synthesis_start.encoding`` of an SSE stream by format (§11.4); ``pcm`` carries the request's."""


async def _sse_events(
    runtime: Runtime, parsed: InvocationsRequest, record: RequestRecord, listener: Listener | None = None
) -> AsyncIterator[bytes]:
    """``transport: "sse"`` (§11.4): ``synthesis_start``, ``audio_chunk``*, then ``synthesis_complete`` or
    ``error``. Each chunk is at most ``max_audio_frame_bytes`` decoded bytes, base64 on its own."""
    request = parsed.request
    request_id = request.request_id
    assert request_id is not None  # assigned by invocations()
    chunk_bytes = runtime.limits.max_audio_frame_bytes
    start = {
        "type": "synthesis_start",
        "request_id": request_id,
        "sample_rate": request.sample_rate,
        "encoding": _SSE_ENCODINGS.get(parsed.format, request.encoding),
        "channels": CHANNELS,
        "format": parsed.format,
        "voice": request.voice,
        "speed": request.speed,
    }
    yield encode_event(start, event="synthesis_start")
    encoder = _encoder(parsed)
    # A WAV stream's 44-byte header (0xFFFFFFFF sizes) rides at the front of the first chunk, which says
    # so with header_bytes (§11.4); max_audio_frame_bytes is at least 64, so the header never splits.
    header = wav_header(request.sample_rate, data_bytes=None) if parsed.format == "wav" else b""
    seq = audio_bytes = pcm_bytes = 0
    words: list[Word] = []

    def audio_chunks(data: bytes) -> list[bytes]:
        nonlocal header, seq, audio_bytes
        header_bytes, data, header = len(header), header + data, b""
        events = []
        for i in range(0, len(data), chunk_bytes):
            chunk = data[i : i + chunk_bytes]
            event: dict[str, Any] = {
                "type": "audio_chunk",
                "seq": seq,
                "data": base64.b64encode(chunk).decode("ascii"),
            }
            if header_bytes and i == 0:
                event["header_bytes"] = header_bytes
            events.append(encode_event(event, event="audio_chunk"))
            seq += 1
            audio_bytes += len(chunk)
        return events

    status = "disconnected"  # unless the body ends below
    try:
        try:
            async for pcm in _pcm_pieces(runtime, request, words, record, listener=listener):
                pcm_bytes += len(pcm)
                for event in audio_chunks(encoder.encode(pcm)):
                    yield event
            for event in audio_chunks(encoder.flush()):
                yield event
        except Exception:
            logger.exception("synthesis of request %r failed", request_id)  # %r: ids are client-chosen
            status = "failed"
            error = ProtocolError(ErrorCode.INTERNAL_ERROR, "synthesis failed", request_id)
            frame = ErrorFrame.from_error(error).to_dict()
            del frame["fatal"]  # an SSE error always ends the response
            yield encode_event(frame, event="error")
            return
        complete: dict[str, Any] = {
            "type": "synthesis_complete",
            "request_id": request_id,
            "status": "completed",
            "audio_bytes": audio_bytes,
            "chunks": seq,
            "total_duration_s": pcm_bytes / 2 / request.sample_rate,
            "elapsed_s": round(time.monotonic() - record.accepted_at, 3),  # to the millisecond (§5.3)
        }
        if words:
            complete["words"] = [w.to_dict() for w in words]
        status = "completed"
        yield encode_event(complete, event="synthesis_complete")
    finally:
        record.finish(status, runtime.metrics, format=parsed.format)

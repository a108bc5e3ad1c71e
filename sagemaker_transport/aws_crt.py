"""One quirk of the official SageMaker client's CRT transport, contained where it arises.

The bidirectional client (``aws-sdk-sagemaker-runtime-http2`` on ``awscrt``, REFERENCE.md §1) writes a
session's input from a background task of awscrt's HTTP/2 stream (``_set_request_body_generator``).
``await stream.input_stream.close()`` returns once the end-of-input envelope is queued; the task writes
the HTTP/2 END_STREAM afterwards, in its ``finally``. A client that then closes the SDK client (or leaves
its event loop) at once tears the connection down under that write, the task fails with
``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED``, nothing awaits it, and asyncio prints "Task exception was never
retrieved" with two tracebacks. That is the natural way to write a client (PROTOCOL.md §12.4: send
``close``, read until the response stream ends, end the input, close the client), and it happens against
the real service as well as the simulator.

What the endpoint does is not the cause: SageMaker ends the response stream when the container closes its
WebSocket ("the bidirectional stream maintains the connection until either the client closes it or the
model indicates completion", the API reference of InvokeEndpointWithBidirectionalStream), as the
simulator does, and the input can still be ended after that (RFC 9113 §8.1; verified through the
simulator: with one turn of the event loop between ``close()`` and closing the client, END_STREAM
arrives and nothing is printed).

* :func:`end_input` is the quiet way to end a session's input: it ends the input and waits until the CRT
  has written END_STREAM (or found the stream already gone), so the caller may close the client
  right after. ``sagemaker_transport.client.BidiStream.close_input`` and the agent's TTS leg use it.
* :func:`absorb_completed_stream_writes` gives each such task a done-callback that retrieves that one
  error (and only it: any other failure of the task is reported to the loop's exception handler as
  before), for sessions abandoned without :func:`end_input` (an exception, a timeout).

Standard library only (the task is found by its coroutine's name), so it costs no import of the SDK.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

__all__ = [
    "END_INPUT_TIMEOUT_S",
    "STREAM_HAS_COMPLETED",
    "absorb_completed_stream_writes",
    "body_writer",
    "end_input",
]

STREAM_HAS_COMPLETED = "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED"
"""The CRT error name of a write to an HTTP/2 stream whose response has already ended."""

_WRITER = "_set_request_body_generator"
"""Name of the coroutine of awscrt's request-body task (awscrt.aio.http, HTTP/2 streams)."""

END_INPUT_TIMEOUT_S = 5.0
"""Longest wait of :func:`end_input` for the input to end and for END_STREAM to be written; a healthy
connection takes a few milliseconds, a dead one fails the write at once, so this only bounds a hang."""

logger = logging.getLogger("sagemaker_transport.aws_crt")
_watched: weakref.WeakSet[asyncio.Task[object]] = weakref.WeakSet()


def _is_stream_completed(error: BaseException) -> bool:
    # awscrt raises AwsCrtError (name attribute) from the write callback and RuntimeError("2080 (...)")
    # from the synchronous call; both carry the name in their text.
    return STREAM_HAS_COMPLETED in f"{getattr(error, 'name', '')} {error}"


def _absorb(task: asyncio.Task[object]) -> None:
    if task.cancelled():
        return
    error = task.exception()  # retrieving it is what keeps asyncio from reporting it
    if error is None:
        return
    if _is_stream_completed(error):
        logger.debug("input ended after the response had: %s", error)
        return
    task.get_loop().call_exception_handler(
        {"message": "Task exception was never retrieved", "exception": error, "future": task}
    )


def absorb_completed_stream_writes() -> int:
    """Watch every CRT request-body task of the running loop; returns how many were newly watched.

    Call it from the loop that runs the client, at or after the moment the session's input is ended
    (calling it more often is harmless). Raises RuntimeError outside a running loop.
    """
    newly = 0
    for task in asyncio.all_tasks():
        if task in _watched or getattr(task.get_coro(), "__name__", "") != _WRITER:
            continue
        _watched.add(task)
        task.add_done_callback(_absorb)
        newly += 1
    return newly


def body_writer(input_stream: Any) -> asyncio.Task[object] | None:
    """The CRT task that writes ``input_stream``'s HTTP/2 request body, or ``None`` if none is found.

    Args:
        input_stream: ``stream.input_stream`` of a stream the official client opened
            (``invoke_endpoint_with_bidirectional_stream``): an event publisher whose ``_writer`` is the
            request body that awscrt's task iterates.

    Found by identity while the task still iterates the body (before the input ends): the task's
    ``body_iterator`` is smithy-http's generator over that same body. Private attributes of pinned
    releases (smithy-http, awscrt); anything unexpected gives ``None``, and the caller falls back to
    :func:`absorb_completed_stream_writes`.
    """
    body = getattr(input_stream, "_writer", None)
    if body is None:
        return None
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        if getattr(coro, "__name__", "") != _WRITER:
            continue
        frame = getattr(coro, "cr_frame", None)
        iterator = frame.f_locals.get("body_iterator") if frame is not None else None
        generator_frame = getattr(iterator, "ag_frame", None)
        if generator_frame is not None and generator_frame.f_locals.get("body") is body:
            return task
    return None


async def end_input(input_stream: Any, *, timeout_s: float = END_INPUT_TIMEOUT_S) -> bool:
    """End a bidirectional stream's input quietly, whether or not the response has already ended.

    Sends the end of input (the signed empty envelope, then HTTP/2 END_STREAM) and returns once the CRT
    has written END_STREAM or found the stream gone, so the caller may close the client next without
    the "Task exception was never retrieved" traceback (module docstring). Keep the input open until
    the output is drained: SageMaker tears the container's WebSocket down when the input ends
    (REFERENCE.md §1).

    Args:
        input_stream: ``stream.input_stream`` of the official client's bidirectional stream.
        timeout_s: longest wait for each of the two steps.

    Returns:
        Whether the end of the request (END_STREAM) was written; ``False`` when the stream was already
        gone (the connection closed, the stream reset) or the writer was not found.

    Raises:
        TimeoutError: the input did not close within ``timeout_s``.
        Exception: any failure of ``close()`` other than the stream having completed.
    """
    writer = body_writer(input_stream)
    absorb_completed_stream_writes()
    try:
        await asyncio.wait_for(input_stream.close(), timeout_s)
    except Exception as exc:
        if not _is_stream_completed(exc):
            raise
        logger.debug("input ended after the stream had: %s", exc)
    if writer is None:
        return False
    done, _ = await asyncio.wait({writer}, timeout=timeout_s)
    # The done-callback of absorb_completed_stream_writes retrieves the writer's one known error.
    return bool(done) and not writer.cancelled() and writer.exception() is None

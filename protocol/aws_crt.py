"""One quirk of the official SageMaker client's CRT transport, contained where it arises.

The bidirectional client (``aws-sdk-sagemaker-runtime-http2`` on ``awscrt``, REFERENCE.md §1) writes a
session's input from a background task of awscrt's HTTP/2 stream (``_set_request_body_generator``). A
session ends politely like this (PROTOCOL.md §12.4): the client sends ``close``, reads until the response
stream ends, and only then ends its input. By then the CRT considers the HTTP/2 stream complete, so that
task's last write fails with ``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED``. Nothing awaits the task, and
asyncio prints "Task exception was never retrieved" with two tracebacks after every successful session.
The same happens against the real service: the response ends when the container closes (REFERENCE.md §1).

:func:`absorb_completed_stream_writes` gives each such task a done-callback that retrieves that one
error (and only it: any other failure of the task is reported to the loop's exception handler as
before). Every piece that ends sessions through the official client calls it when it ends a session's
input: ``simulator.client.BidiSession.close_input`` (so the conformance suite and the benchmarks) and the
agent's TTS leg.

Standard library only (the task is found by its coroutine's name), so it costs no import of the SDK.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

__all__ = ["STREAM_HAS_COMPLETED", "absorb_completed_stream_writes"]

STREAM_HAS_COMPLETED = "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED"
"""The CRT error name of a write to an HTTP/2 stream whose response has already ended."""

_WRITER = "_set_request_body_generator"
"""Name of the coroutine of awscrt's request-body task (awscrt.aio.http, HTTP/2 streams)."""

logger = logging.getLogger("protocol.aws_crt")
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

"""sagemaker_transport/aws_crt.py retrieves exactly one known error of the CRT's request-body task, nothing
else.

The task is imitated by a coroutine with the same name (the real one is exercised through the official
client in tests/simulator/test_simulator_network.py)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from sagemaker_transport.aws_crt import absorb_completed_stream_writes, body_writer, end_input


async def _set_request_body_generator(error: BaseException | None) -> None:
    await asyncio.sleep(0)
    if error is not None:
        raise error


async def _other_task() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("2080 (AWS_ERROR_HTTP_STREAM_HAS_COMPLETED): not the writer")


def _reports(errors: list[BaseException | None], other: bool = False) -> list[str]:
    reports: list[str] = []

    async def main() -> int:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reports.append(str(context.get("exception")))
        )
        tasks = [asyncio.create_task(_set_request_body_generator(e)) for e in errors]
        if other:
            tasks.append(asyncio.create_task(_other_task()))
        watched = absorb_completed_stream_writes()
        assert absorb_completed_stream_writes() == 0  # each task is watched once
        await asyncio.wait(tasks)
        await asyncio.sleep(0)  # done-callbacks run
        del tasks
        gc.collect()
        return watched

    watched = asyncio.run(main())
    gc.collect()
    assert watched == len(errors)
    return reports


def test_the_completed_stream_error_is_retrieved():
    crt_sync = RuntimeError("2080 (AWS_ERROR_HTTP_STREAM_HAS_COMPLETED): HTTP-stream has completed")
    assert _reports([crt_sync, None]) == []


def test_the_named_error_of_the_write_callback_is_retrieved_too():
    class AwsCrtError(Exception):
        name = "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED"

    assert _reports([AwsCrtError("HTTP-stream has completed, action cannot be performed.")]) == []


def test_any_other_failure_is_still_reported():
    assert _reports([ValueError("a real bug")]) == ["a real bug"]


def test_only_the_writer_task_is_touched():
    reports = _reports([], other=True)
    assert reports == ["2080 (AWS_ERROR_HTTP_STREAM_HAS_COMPLETED): not the writer"]


# --- end_input: the writer is found by its body, and waited for ------------------------------------------


class _Body:
    """The request body smithy-http hands awscrt: events in, None at the end."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()


class _InputStream:
    """An event publisher as the official client's: ``_writer`` is the body; ``close`` ends it."""

    def __init__(self, close_error: BaseException | None = None) -> None:
        self._writer = _Body()
        self.close_error = close_error

    async def close(self) -> None:
        await self._writer.queue.put(None)
        if self.close_error is not None:
            raise self.close_error


async def _chunks(body: _Body):  # smithy-http's _create_body_generator: its local is named `body`
    while (chunk := await body.queue.get()) is not None:
        yield chunk


def _writer_named():
    written: list[str] = []

    async def _set_request_body_generator(body_iterator) -> None:  # awscrt's task, by name
        try:
            async for _ in body_iterator:
                pass
        finally:
            await asyncio.sleep(0.05)  # the END_STREAM write, after close() has returned
            written.append("END_STREAM")

    return _set_request_body_generator, written


def test_end_input_waits_for_the_end_stream_write_of_its_own_stream_only():
    async def main() -> tuple[bool, list[str], bool]:
        writer, written = _writer_named()
        mine, other = _InputStream(), _InputStream()
        tasks = [asyncio.create_task(writer(_chunks(s._writer))) for s in (mine, other)]
        await asyncio.sleep(0)  # both writers iterate their bodies
        assert body_writer(mine) is tasks[0] and body_writer(other) is tasks[1]
        ended = await end_input(mine, timeout_s=5)
        other_still_open = not tasks[1].done()
        await other.close()
        await asyncio.wait(tasks)
        return ended, written[:1], other_still_open

    ended, written, other_still_open = asyncio.run(main())
    assert ended and written == ["END_STREAM"]  # returned only after the write
    assert other_still_open  # another session's input is not touched


def test_end_input_is_quiet_when_the_stream_is_already_gone_and_loud_otherwise():
    completed = RuntimeError("2080 (AWS_ERROR_HTTP_STREAM_HAS_COMPLETED): HTTP-stream has completed")

    async def main(error: BaseException) -> bool:
        return await end_input(_InputStream(close_error=error), timeout_s=5)  # no writer task: False

    assert asyncio.run(main(completed)) is False
    with pytest.raises(ValueError):
        asyncio.run(main(ValueError("a real bug")))

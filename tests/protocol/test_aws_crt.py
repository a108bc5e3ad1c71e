"""protocol/aws_crt.py retrieves exactly one known error of the CRT's request-body task, nothing else.

The task is imitated by a coroutine with the same name (the real one is exercised through the official
client in tests/simulator/test_simulator_network.py)."""

from __future__ import annotations

import asyncio
import gc

from protocol.aws_crt import absorb_completed_stream_writes


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

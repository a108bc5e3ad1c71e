"""An asyncio event loop on its own thread, driven from synchronous pytest code.

The suite runs two: one hosts the simulator (the endpoint, as a third party's infrastructure would be), the
other the clients. A client loop that outlives single test functions lets one bidirectional session span
several cases (the bad-input table shares sessions) and lets hypothesis drive a live session example by
example. Every call is bounded by a timeout: the official client can hang silently (REFERENCE.md §1).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["LoopThread"]

_CRT_STREAM_COMPLETED = "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED"

WEDGED_LOOP_GRACE_S = 5.0
"""How long past its timeout :meth:`LoopThread.run` waits for a cancelled coroutine to finish."""


def _quiet_crt_races(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: drop one benign race of the CRT client, report the rest as usual.

    When a session's input is ended after the server already ended the response (every session that
    closes politely), the CRT's request-body task fails with ``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED`` and
    nobody awaits it; asyncio would print "Task exception was never retrieved" for each such session.
    """
    exception = context.get("exception")
    if exception is not None and _CRT_STREAM_COMPLETED in repr(exception) + str(exception):
        return
    loop.default_exception_handler(context)


class LoopThread:
    """A daemon thread running one event loop until :meth:`stop`.

    Args:
        name: the thread's name (shows in stack dumps).
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_quiet_crt_races)
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run[T](self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and return its result; cancel it after ``timeout`` seconds.

        Raises:
            TimeoutError: the coroutine did not finish in time (it has been cancelled).
            Exception: whatever the coroutine raised.
        """
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine, timeout), self.loop)
        try:
            # The loop enforces the timeout; this outer bound only guards against a wedged loop (or a
            # cancelled coroutine whose clean-up hangs).
            return future.result(timeout + WEDGED_LOOP_GRACE_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(
                f"the event loop did not answer within {timeout + WEDGED_LOOP_GRACE_S:g} s"
            ) from None

    def stop(self) -> None:
        """Cancel what is left on the loop, stop it and join the thread (idempotent)."""
        if self.loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(30.0)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30.0)
        if not self._thread.is_alive():
            self.loop.close()

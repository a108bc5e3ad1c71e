"""The per-case deadline: every case ends with a verdict within ``--case-timeout`` seconds (no I/O).

The plugin starts the clock when a case's setup begins (after the server under test is up) and every
wait of the suite is bounded by what is left: each coroutine run on the client loop, each receive and send
on a bidirectional stream, each ``POST /invocations`` call, each ``GET /ping``. A case that runs out of
time gets the verdict its level gives a failure, with a message that says what it was waiting for,
instead of hanging the run. Session-scoped recordings run inside the deadline of the first case that
uses them.

The default, :data:`DEFAULT_CASE_TIMEOUT_S`, fits the slowest case on the reference server (the long text
and twenty disconnects, on two loaded CPU cores) with room to spare; a server a hundred times slower than
real time is not certifiable anyway.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

__all__ = [
    "DEFAULT_CASE_TIMEOUT_S",
    "TONE_CASE_TIMEOUT_S",
    "CaseTimeout",
    "bound",
    "case_timeout",
    "expired",
    "remaining",
    "start",
    "take_uncharged",
    "uncharged",
]

DEFAULT_CASE_TIMEOUT_S = 120.0
"""Seconds a case may take, its shared recordings included (``--case-timeout``)."""

TONE_CASE_TIMEOUT_S = 30.0
"""``--case-timeout`` of the project's own runs against the tone-backed servers (the hand-written mutants,
mutation testing of the shipped server). Their slowest case takes about 9 s (4.2.4, which waits out an idle
period, on two loaded cores), so a case still waiting at 30 s waits for an answer the server will never send:
it is FAILED at 30 s as it was at 120 s, and costs a quarter of the time."""

_MINIMUM_S = 0.05

_seconds = DEFAULT_CASE_TIMEOUT_S
_ends: float | None = None
_uncharged_s = 0.0


class CaseTimeout(TimeoutError):
    """The case ran out of its deadline; the message says what it was waiting for."""


def start(seconds: float | None = None) -> None:
    """Start a case's clock: it may run ``seconds`` (default: the last value given) from now."""
    global _seconds, _ends
    if seconds is not None:
        _seconds = float(seconds)
    _ends = time.monotonic() + _seconds


@contextlib.contextmanager
def uncharged() -> Iterator[None]:
    """The suite's own start-up work (starting the target, importing and starting the local agent).

    What runs inside is not the server's time: when it ends, the current case's clock is pushed back by
    what it took, and the seconds add up in :func:`take_uncharged`, which the plugin subtracts from the
    case's reported duration. Waits on the server under test never belong in here.
    """
    global _ends, _uncharged_s
    began = time.monotonic()
    try:
        yield
    finally:
        spent = time.monotonic() - began
        _uncharged_s += spent
        if _ends is not None:
            _ends += spent


def take_uncharged() -> float:
    """Seconds spent in :func:`uncharged` since the last call (then zero)."""
    global _uncharged_s
    spent, _uncharged_s = _uncharged_s, 0.0
    return spent


def case_timeout() -> float:
    """The deadline in force, in seconds (``--case-timeout``)."""
    return _seconds


def remaining() -> float:
    """Seconds left to the current case (the whole deadline when no case runs); never below 50 ms."""
    if _ends is None:
        return _seconds
    return max(_MINIMUM_S, _ends - time.monotonic())


def expired() -> bool:
    """Whether the current case has used up its deadline."""
    return _ends is not None and time.monotonic() >= _ends


def bound(seconds: float) -> float:
    """``seconds``, or what is left of the case's deadline if that is less."""
    return min(seconds, remaining())

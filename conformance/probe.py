"""What a case works with: :class:`Probe` (the ``conf`` fixture) and :class:`Recording` (a session judged by
several cases).

A :class:`Probe` runs the case's coroutines on the client loop, opens checked sessions through the target,
changes simulator settings for the case, and gathers what the report keeps beside the verdict: each
session's client-side log, the simulator's wire log during the case, and the values the case observed.

A :class:`Recording` is one session run once (by a module-scoped fixture) and judged by several cases, so
that, say, one three-request session serves the framing, ordering and close cases (Autobahn keeps one
wire log per case; here several cases point at the same log).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.loop import LoopThread
from conformance.report import CaseResult
from conformance.session import Checker, Message, Session, replay
from conformance.target import Target

__all__ = ["CASE_TIMEOUT_S", "Probe", "Recording", "record"]

CASE_TIMEOUT_S = 300.0
"""Longest a case's coroutine may run; only a guard against hangs (a long text takes about a minute on two
CPU cores)."""


@dataclass
class Recording:
    """Messages of one session, recorded without checks, for cases to judge.

    Attributes:
        name: what the session did.
        messages: every whole server message, in order.
        expect: the request ids sent, in order (``None``: assigned by the server).
        log: the session's client-side log.
        wire: the simulator's wire log of the session (empty on the live target).
        error: what ended the recording early (an exception from the stream, a timeout), if anything.
        ended: the output stream ended (the server closed the session).
        faithful_data_types: see :class:`conformance.session.Checker`.
        extra: values the recording scenario measured on the side.
    """

    name: str
    messages: list[Message] = field(default_factory=list)
    expect: list[str | None] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    ended: bool = False
    faithful_data_types: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def replay(self, *, check_frames: bool = True) -> Checker:
        """Judge the messages (see :func:`conformance.session.replay`); raises ProtocolViolation."""
        return replay(
            self.messages,
            faithful_data_types=self.faithful_data_types,
            expect=self.expect,
            check_frames=check_frames,
        )

    def require_clean_end(self) -> None:
        """Fail unless the session ran to its end without an error."""
        if self.error is not None:
            raise AssertionError(f"the {self.name} session failed: {self.error}")
        if not self.ended:
            raise AssertionError(f"the {self.name} session did not end")


def record(
    target: Target,
    loop: LoopThread,
    name: str,
    scenario: Callable[[Session, Recording], Awaitable[None]],
    *,
    timeout: float = CASE_TIMEOUT_S,
    settings: dict[str, Any] | None = None,
    **bidi_options: Any,
) -> Recording:
    """Open a session, run ``scenario(session, recording)`` and keep what happened.

    The session records without checking; ``scenario`` sends, reads (``session.drain()``) and may store
    values in ``recording.extra``. An exception or a timeout ends the recording and is kept in
    ``recording.error`` rather than raised, so each case judges what was recorded.

    Args:
        settings: simulator settings for the session (ignored on the live target).
    """
    recording = Recording(name, faithful_data_types=target.faithful_data_types)
    mark = target.wire_mark()

    async def main() -> None:
        async with target.bidi(**bidi_options) as bidi:
            session = Session(bidi, faithful_data_types=target.faithful_data_types, check=False, name=name)
            try:
                await scenario(session, recording)
            finally:
                recording.messages = session.messages
                recording.log = session.log
                recording.ended = session.ended

    configure = target.configure(**settings) if settings and target.simulated else contextlib.nullcontext()
    with configure:  # type: ignore[attr-defined]
        try:
            loop.run(main(), timeout)
        except Exception as exc:
            recording.error = f"{type(exc).__name__}: {exc}"
    recording.wire = target.wire_since(mark)
    return recording


class Probe:
    """The per-case context (fixture ``conf``).

    Args:
        target: the server under test.
        loop: the client event loop.
        result: where the case's report entry goes (``None`` outside the conformance plugin).
    """

    def __init__(self, target: Target, loop: LoopThread, result: CaseResult | None) -> None:
        self.target = target
        self.loop = loop
        self.result = result
        self._sessions: list[tuple[Session, int]] = []
        self._recordings: list[Recording] = []
        self._mark = target.wire_mark()
        self.observations: dict[str, Any] = {}

    def run[T](self, coroutine: Coroutine[Any, Any, T], timeout: float = CASE_TIMEOUT_S) -> T:
        """Run the case's coroutine on the client loop (cancelled after ``timeout`` seconds)."""
        return self.loop.run(coroutine, timeout)

    @contextlib.asynccontextmanager
    async def session(
        self, name: str = "s", *, check: bool = True, check_frames: bool = True, **bidi_options: Any
    ) -> AsyncIterator[Session]:
        """Open a checked :class:`Session` whose log goes into the case's report."""
        async with self.target.bidi(**bidi_options) as bidi:
            session = Session(
                bidi,
                faithful_data_types=self.target.faithful_data_types,
                check=check,
                check_frames=check_frames,
                name=name,
            )
            self.attach(session)
            yield session

    def attach(self, session: Session) -> None:
        """Put ``session``'s log from now on into this case's report (for sessions shared by cases)."""
        self._sessions.append((session, len(session.log)))

    def use(self, recording: Recording) -> Recording:
        """Judge ``recording`` in this case: its logs go into the report. Returns it."""
        self._recordings.append(recording)
        return recording

    def observe(self, **values: Any) -> None:
        """Record values in the case's report (measurements, ids)."""
        self.observations.update(values)

    @property
    def simulated(self) -> bool:
        """Whether the simulator is in front of the server."""
        return self.target.simulated

    def require_simulator(self, what: str) -> None:
        """Skip the case on targets without the simulator; ``what`` says what needs it."""
        if not self.target.simulated:
            pytest.skip(f"needs the simulator to {what}; the live target cannot")

    def require_container(self, what: str) -> str:
        """The container's URL; skip when the suite cannot reach the container itself."""
        if self.target.container_url is None:
            pytest.skip(f"needs direct access to the container to {what}")
        return self.target.container_url

    @contextlib.contextmanager
    def configure(self, **changes: Any) -> Iterator[None]:
        """Simulator settings for sessions opened inside the block (skips on the live target)."""
        self.require_simulator("change its settings (" + ", ".join(changes) + ")")
        with self.target.configure(**changes):  # type: ignore[attr-defined]
            yield

    def finish(self) -> None:
        """Move logs and observations into the case's report entry."""
        if self.result is None:
            return
        result = self.result
        result.observations.update(self.observations)
        for recording in self._recordings:
            result.client_log.append({"session": recording.name, "recorded": True, "entries": recording.log})
            result.wire_log.extend(recording.wire)
            if recording.error:
                result.observations.setdefault("recording_errors", {})[recording.name] = recording.error
        for session, first in self._sessions:
            entry: dict[str, Any] = {"session": session.name, "entries": session.log[first:]}
            if session.log_dropped:
                entry["entries_dropped"] = session.log_dropped
            result.client_log.append(entry)
        try:
            result.wire_log.extend(self.target.wire_since(self._mark))
        except Exception:
            result.observations["wire_log_error"] = traceback.format_exc(limit=2)

"""What a case works with: :class:`Probe` (the ``conf`` fixture) and :class:`Recording` (a session judged by
several cases).

A :class:`Probe` runs the case's coroutines on the client loop and its blocking calls on a worker thread,
both within the case's deadline (:mod:`conformance.engine.deadline`), opens observed sessions through the
target, changes simulator settings for the case, and gathers what the report keeps beside the verdict: the
findings of its sessions and recordings and of its own non-fatal checks (:meth:`Probe.check`), each session's
client-side log, the simulator's wire log during the case, and the values the case observed.

A :class:`Recording` is one session run once (by a module-scoped fixture) and judged by several cases, so
that, say, one three-request session serves the framing, ordering and close cases (Autobahn keeps one
wire log per case; here several cases point at the same log).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.engine import deadline
from conformance.engine.loop import LoopThread
from conformance.engine.observer import Finding, Message, Observer
from conformance.engine.report import CaseResult
from conformance.engine.stream import ObservedStream, open_stream
from conformance.engine.target import Target

__all__ = ["Probe", "Recording", "record"]


@dataclass
class Recording:
    """Messages of one session, recorded and observed once, for several cases to judge.

    Attributes:
        name: what the session did.
        messages: every whole server message, in order.
        expect: the request ids sent, in order (``None``: assigned by the server).
        observer: the session's observer (answers, errors, findings).
        log: the session's client-side log.
        wire: the simulator's wire log of the session (empty on the live target).
        error: what ended the scenario early (the session ended before what it waited for, a timeout).
        ended: the output stream ended (the server closed the session, normally or not).
        faithful_data_types: see :class:`conformance.engine.observer.Observer`.
        extra: values the recording scenario measured on the side.
        others: the recording's other sessions (a second session opened beside it, the sessions of the crowd):
            their findings are the recording's too, judged like its own, and their logs go into the report.
    """

    name: str
    messages: list[Message] = field(default_factory=list)
    expect: list[str | None] = field(default_factory=list)
    observer: Observer | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    ended: bool = False
    faithful_data_types: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    others: list[ObservedStream] = field(default_factory=list)

    def replay(self) -> Observer:
        """The session's :class:`~conformance.engine.observer.Observer` (its answers, errors and findings)."""
        if self.observer is None:
            self.observer = Observer(faithful_data_types=self.faithful_data_types, name=self.name)
        return self.observer

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the session and of the recording's other sessions (:attr:`others`)."""
        found = list(self.observer.findings) if self.observer is not None else []
        for session in self.others:
            found += session.observer.findings
        return found

    def require_end(self) -> None:
        """Fail unless the scenario ran to its end and the server ended the session."""
        if self.error is not None:
            raise AssertionError(f"the {self.name} session failed: {self.error}")
        if not self.ended:
            raise AssertionError(f"the {self.name} session did not end")


def record(
    target: Target,
    loop: LoopThread,
    name: str,
    scenario: Callable[[ObservedStream, Recording], Awaitable[None]],
    *,
    settings: dict[str, Any] | None = None,
    **bidi_options: Any,
) -> Recording:
    """Open a session, run ``scenario(session, recording)`` and keep what happened.

    ``scenario`` sends (announcing its requests with ``session.expect``), reads (``session.drain()``) and
    may store values in ``recording.extra``. An exception or the end of the case's deadline ends the
    recording and is kept in ``recording.error`` rather than raised, so each case judges what was recorded.

    Args:
        settings: simulator settings for the session (ignored on the live target).
    """
    recording = Recording(name, faithful_data_types=target.faithful_data_types)
    mark = target.wire_mark()
    sessions: list[ObservedStream] = []

    async def main() -> None:
        async with open_stream(target, name, **bidi_options) as session:
            sessions.append(session)
            await scenario(session, recording)

    configure = target.configure(**settings) if settings and target.simulated else contextlib.nullcontext()
    with configure:  # type: ignore[attr-defined]
        try:
            loop.run(main(), deadline.remaining())
        except Exception as exc:
            waiting = sessions[0].waiting_for if sessions else None
            recording.error = f"{type(exc).__name__}: {exc}" + (
                f" (waiting for {waiting})" if waiting else ""
            )
    if sessions:
        session = sessions[0]
        recording.messages = session.messages
        recording.log = session.log
        recording.ended = session.ended
        recording.observer = session.observer
    if recording.ended:  # let the simulator write how the container closed it (Target.bidi_outcomes)
        target.bidi_outcomes(mark)
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
        self._sessions: list[tuple[ObservedStream, int, int]] = []
        self._recordings: list[Recording] = []
        self._adopted: list[tuple[str, list[dict[str, Any]], list[Finding]]] = []
        self._mark = target.wire_mark()
        self._checks: list[Finding] = []
        self.observations: dict[str, Any] = {}

    # -- running within the case's deadline ---------------------------------------------------------

    def _waiting(self) -> str:
        waits = [s.waiting_for for s, _, _ in self._sessions if s.waiting_for]
        return f" while waiting until {'; '.join(waits)}" if waits else ""

    def run[T](
        self, coroutine: Coroutine[Any, Any, T], timeout: float = deadline.DEFAULT_CASE_TIMEOUT_S
    ) -> T:
        """Run the case's coroutine on the client loop, within ``timeout`` and the case's deadline.

        Raises:
            conformance.engine.deadline.CaseTimeout: the case's deadline ran out first (the coroutine is
            cancelled). TimeoutError: ``timeout`` ran out first.
        """
        bounded = deadline.bound(timeout)
        try:
            return self.loop.run(coroutine, bounded)
        except TimeoutError as exc:
            if isinstance(exc, deadline.CaseTimeout):
                raise
            if deadline.expired() or bounded < timeout:
                raise deadline.CaseTimeout(
                    f"no verdict within the case's deadline of {deadline.case_timeout():g} s (--case-timeout)"
                    f"{self._waiting()}"
                ) from None
            raise TimeoutError(f"nothing within {timeout:g} s{self._waiting()}") from None

    def blocking[T](self, function: Callable[[], T], what: str = "the server answered") -> T:
        """Call ``function`` (blocking I/O: boto3, httpx) on a worker thread, within the case's deadline.

        Raises:
            conformance.engine.deadline.CaseTimeout: the deadline ran out first (the thread is left to
            finish).
        """
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="conformance-call")
        future = pool.submit(function)
        pool.shutdown(wait=False)
        try:
            return future.result(deadline.remaining())
        except concurrent.futures.TimeoutError:
            raise deadline.CaseTimeout(
                f"no verdict within the case's deadline of {deadline.case_timeout():g} s (--case-timeout) "
                f"while waiting until {what}"
            ) from None

    def runtime(self) -> Any:
        """A boto3 ``sagemaker-runtime`` client whose reads time out with the case's deadline."""
        return self.target.runtime(read_timeout=deadline.remaining())

    # -- sessions ----------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session(
        self,
        name: str = "s",
        *,
        check_frames: bool = True,
        stream_errors: str = "observe",
        **bidi_options: Any,
    ) -> AsyncIterator[ObservedStream]:
        """Open an observed :class:`ObservedStream` (:func:`~conformance.engine.stream.open_stream`) whose
        log and findings go into the case's report."""
        async with open_stream(
            self.target, name, check_frames=check_frames, stream_errors=stream_errors, **bidi_options
        ) as session:
            self.attach(session)
            yield session

    def attach(self, session: ObservedStream) -> None:
        """Put ``session``'s log and findings from now on into this case (for sessions shared by cases)."""
        self._sessions.append((session, len(session.log), len(session.observer.findings)))

    def adopt(self, session: str, entries: list[dict[str, Any]], findings: list[Finding]) -> None:
        """Judge in this case a part of a session that ran outside it (for it, in a group of cases): the
        client-log ``entries`` and ``findings`` of that part go into the report."""
        self._adopted.append((session, entries, findings))

    def use(self, recording: Recording) -> Recording:
        """Judge ``recording`` in this case: its logs and findings go into the report. Returns it."""
        self._recordings.append(recording)
        return recording

    # -- findings and observations --------------------------------------------------------------------

    def check(self, clause: str, condition: bool, message: str) -> bool:
        """A check of ``clause`` that does not stop the case: a finding when ``condition`` is false.

        The finding fails the case if ``clause`` is one of its own (at the end of the case), and is a note
        on it otherwise (which still fails the run on ``clause`` at the clause's level). Returns
        ``condition``.
        """
        if not condition:
            self._checks.append(Finding(clause, message))
        return condition

    def findings(self) -> list[Finding]:
        """Every finding of the case so far: its sessions', its recordings' and its own checks'."""
        found: list[Finding] = []
        for recording in self._recordings:
            found += recording.findings
        for session, _, first in self._sessions:
            found += session.observer.findings[first:]
        for _, _, findings in self._adopted:
            found += findings
        return found + self._checks

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
            for other in recording.others:
                result.client_log.append({"session": other.name, "recorded": True, "entries": other.log})
            result.wire_log.extend(recording.wire)
            if recording.error:
                result.observations.setdefault("recording_errors", {})[recording.name] = recording.error
        for name, entries, _ in self._adopted:
            result.client_log.append({"session": name, "entries": entries})
        for session, first, _ in self._sessions:
            entry: dict[str, Any] = {"session": session.name, "entries": session.log[first:]}
            if session.log_dropped:
                entry["entries_dropped"] = session.log_dropped
            result.client_log.append(entry)
        try:
            result.wire_log.extend(self.target.wire_since(self._mark))
        except Exception:
            result.observations["wire_log_error"] = traceback.format_exc(limit=2)

"""§2.3, §9.4, §7.4 the session limit: the session one past ``max_sessions`` is accepted, then refused with
the fatal ``too_many_sessions`` and closed with 1013; a session dropped mid-synthesis gives its place back.

All four cases judge one recording (:func:`conformance.engine.recordings.crowded`): the server filled to its
``max_sessions`` (``capabilities.limits``, or the default 64 without ``describe``), one session more, then the
one speaking dropped without ``close`` and sessions opened until one is admitted. While crowding, the
simulator gives the container 3 s rather than SageMaker's 250 ms to accept each WebSocket (a loaded machine
accepting a batch may be slower; 2.3.1 holds a busy server to 250 ms): only a refusal counts. A server
whose limit is over :data:`conformance.engine.recordings.MAX_CROWD`, or that lists none, is not crowded: the
cases are SKIPPED. Each case judges only its own sentence, so a server that refuses the handshake fails 2.3.3
and nothing that needed the session open.
"""

from __future__ import annotations

import pytest

from conformance.engine.case import Level, case
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import AFTER_DROP_GRACE, MAX_CROWD


def _crowd(conf: Probe, crowded: Recording) -> dict[str, object]:
    conf.use(crowded)
    crowded.replay()
    extra = crowded.extra
    conf.observe(**{k: v for k, v in extra.items() if k != "skip"})
    if "skip" in extra:
        pytest.skip(str(extra["skip"]))
    assert "opened" in extra, f"the server could not be filled to max_sessions: {crowded.error}"
    return extra


def _refused_frame(crowded: Recording) -> object:
    errors = [e for _, e in crowded.replay().errors if e.code == "too_many_sessions"]
    return errors[0] if errors else None


@case(
    "2.3.3",
    "§2.3",
    Level.MUST,
    requirements=("R2.3-5",),
    requirement="A server MUST NOT refuse the handshake because it is busy.",
    description=f"open max_sessions sessions (at most {MAX_CROWD}), then one more",
    expectation="the session one past the limit opens (SageMaker answers no 424): its handshake completes",
)
def test_busy_server_completes_the_handshake(conf: Probe, crowded: Recording) -> None:
    extra = _crowd(conf, crowded)
    assert "refused_handshake" not in extra, (
        f"the session past max_sessions ({extra['max_sessions']}) could not be opened: "
        f"{extra['refused_handshake']}; the server must accept it, then refuse it with too_many_sessions"
    )


@case(
    "9.4.1",
    "§9.4",
    Level.MUST,
    requirements=("R9.4-1",),
    requirement="The error frame is REQUIRED even though the close code carries the same information",
    description=f"open max_sessions sessions (at most {MAX_CROWD}), then one more, which sends a request",
    expectation="the session past the limit gets an error frame too_many_sessions, not fatal: false (a "
    "missing fatal member is 3.2.1's; not judged when its handshake was refused: 2.3.3)",
)
def test_too_many_sessions_error_frame(conf: Probe, crowded: Recording) -> None:
    extra = _crowd(conf, crowded)
    if "refused_handshake" in extra:
        return  # no session, no frame to judge: 2.3.3's defect
    error = _refused_frame(crowded)
    served = " (its request was answered)" if extra.get("extra_served") else ""
    assert error is not None, (
        f"the session past max_sessions ({extra['max_sessions']}) got no too_many_sessions error "
        f"frame{served}: {[(e.code, e.fatal) for _, e in crowded.replay().errors]}"
    )
    # A missing ``fatal`` member breaks the frame's schema (R5-1, judged by 3.2.1); a false one is this
    # clause's.
    assert error.obj.get("fatal") is not False, (
        "the too_many_sessions error frame says fatal: false; it ends the session (§9.1)"
    )


@case(
    "9.4.2",
    "§9.4",
    Level.MUST,
    requirements=("R9.4-2a", "R9.4-2b"),
    requirement="A fatal error ends the session: the server MUST send the `error` frame with `fatal: true` "
    "as its last frame, then a WebSocket Close with the code of §9.1 (1011 for `internal_error`, 1013 for "
    "`too_many_sessions`), and reads nothing more.",
    description=f"open max_sessions sessions (at most {MAX_CROWD}), then one more, which sends a request; "
    "read how the container closed it from the simulator's wire log",
    expectation="nothing follows the fatal error frame (the request is not answered) and the session ends "
    "within 3 s, the container closing its WebSocket with 1013 (not judged when no session past the limit "
    "opened)",
)
def test_fatal_error_ends_the_session(conf: Probe, crowded: Recording) -> None:
    extra = _crowd(conf, crowded)
    if "refused_handshake" in extra or extra.get("extra_served"):
        return  # nothing was refused: 2.3.3's or 9.4.1's defect
    outcome = extra.get("extra_outcome")
    if _refused_frame(crowded) is not None:
        assert not extra.get("after_fatal"), f"frames after the fatal error frame: {extra['after_fatal'][:5]}"
        assert extra.get("closed_after_fatal"), "the session did not end within 3 s of its fatal error frame"
    if conf.simulated and outcome is not None:
        assert str(outcome).endswith(": code 1013"), (
            f"the session past max_sessions ended as {outcome!r}, not with the WebSocket close code 1013"
        )


@case(
    "7.4.2",
    "§7.4",
    Level.MUST,
    requirements=("R7.4-1a", "R7.4-1b"),
    requirement="the server MUST stop synthesis for that session promptly (within one synthesis segment) "
    "and free everything the session held: queued requests, synthesized-ahead audio, its place in "
    "`max_sessions`.",
    description=f"with the server at max_sessions (at most {MAX_CROWD}), one session speaks a 1,000-"
    "character text at speed 1; at its first audio, after the session one too many, its input ends "
    "without close (SageMaker drops the container's WebSocket); then sessions open, one every 0.5 s, until "
    "one is admitted",
    expectation=f"a session is admitted and its request completes within {AFTER_DROP_GRACE[0]:g} s or "
    f"{AFTER_DROP_GRACE[1]:g} times the dropped request's time to first audio, whichever is longer: the "
    "dropped session stopped synthesizing and gave its place back, long before its text was spoken",
)
def test_dropped_session_frees_its_place(conf: Probe, crowded: Recording) -> None:
    extra = _crowd(conf, crowded)
    assert "admitted_after_s" in extra, f"the scenario did not get that far: {crowded.error}"
    assert extra["admitted_after_s"] is not None, (
        f"no session was admitted within {extra['grace_s']} s of dropping one mid-synthesis "
        f"({extra['admitted_attempts']} attempts, refused with {extra.get('refusal')}): the dropped session "
        "still held its place in max_sessions"
    )

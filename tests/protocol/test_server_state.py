"""The server's state tables against the session and against the spec: the session's
(protocol/server_state.py, §7) and each request's (protocol/request_state.py, §6.1).

Each table is the one home of its lifecycle: spec/PROTOCOL.md carries the diagram drawn from it (checked
here, character for character), and :class:`protocol.server_session.ServerSession` moves only along it
(checked here on the transitions a client and an adapter can cause; for requests, on every transition).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.constants import STATUSES
from protocol.request_state import (
    REQUEST_CANCELLED,
    REQUEST_FINAL,
    REQUEST_INITIAL,
    REQUEST_OPEN,
    REQUEST_STARTED,
    REQUEST_TRANSITIONS,
    PendingRequest,
    RequestEvent,
    RequestState,
    next_request_state,
    render_request_mermaid,
)
from protocol.server_session import ServerSession
from protocol.server_state import (
    ENDS,
    INITIAL,
    READS_MESSAGES,
    TRANSITIONS,
    SessionEvent,
    SessionState,
    SessionStateError,
    next_state,
    render_mermaid,
)

SPEC = (Path(__file__).resolve().parents[2] / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")
BLOCK = re.compile(
    r"<!-- session-states:[^\n]*-->\n```mermaid\n(?P<diagram>.*?)```\n<!-- /session-states -->", re.S
)


REQUEST_BLOCK = re.compile(
    r"<!-- request-states:[^\n]*-->\n```mermaid\n(?P<diagram>.*?)```\n<!-- /request-states -->", re.S
)


def spec_diagram(block: re.Pattern[str] = BLOCK) -> str:
    matches = list(block.finditer(SPEC))
    assert len(matches) == 1, f"spec/PROTOCOL.md holds one block matching {block.pattern[:24]!r}"
    return matches[0].group("diagram")


def test_spec_diagram_is_the_table():
    assert spec_diagram() == render_mermaid(), (
        "spec/PROTOCOL.md §7's state diagram differs from protocol/server_state.py: paste the output of "
        "`python -m protocol.server_state` between the session-states markers"
    )


def test_spec_diagram_sits_in_section_7():
    start = SPEC.index("## 7. Session lifetime")
    end = SPEC.index("### 7.1 ")
    assert start < SPEC.index("<!-- session-states:") < end


def test_spec_names_every_state():
    section = SPEC[SPEC.index("## 7. Session lifetime") : SPEC.index("### 7.1 ")]
    for state in SessionState:
        assert f"**{state.value}**" in section


def test_table_covers_every_state_and_event():
    assert {state for state, _ in TRANSITIONS} | set(TRANSITIONS.values()) == set(SessionState)
    assert {event for _, event in TRANSITIONS} == set(SessionEvent)
    assert INITIAL in READS_MESSAGES
    # close and fatal refusals come only with a message: only states that read messages have them.
    for (state, event), _ in TRANSITIONS.items():
        if event in (SessionEvent.CLOSE, SessionEvent.FATAL_ERROR):
            assert state in READS_MESSAGES
    # Every state ends somewhere: a way out of the table, or an end of the connection.
    assert set(ENDS) | {state for state, _ in TRANSITIONS} == set(SessionState)


def test_next_state_refuses_a_missing_pair():
    assert next_state(SessionState.OPEN, SessionEvent.CLOSE) is SessionState.DRAINING
    with pytest.raises(SessionStateError, match="closed cannot take"):
        next_state(SessionState.CLOSED, SessionEvent.ABORT)


def _session() -> ServerSession:
    return ServerSession(known_voices=None)


def test_session_follows_the_table_on_close_then_abort():
    session = _session()
    assert session.state is INITIAL
    session.receive_frame('{"type":"close"}')
    assert session.state is TRANSITIONS[(INITIAL, SessionEvent.CLOSE)]
    assert session.finished  # nothing pending: drained at once (ENDS)
    assert session.receive_frame('{"type":"synthesize","text":"hi"}') == []  # ignored (§7.1)
    session.abort(ErrorCode.SESSION_IDLE, "idle")
    assert session.state is TRANSITIONS[(SessionState.DRAINING, SessionEvent.ABORT)]


def test_session_follows_the_table_on_a_fatal_refusal():
    # No message of this version is refused fatally by the session itself; the move is the one a fatal
    # ProtocolError takes on its way out of the parser (ServerSession._reject).
    session = _session()
    session._reject(ProtocolError(ErrorCode.CLIENT_NOT_READING, "flood"))
    frames = session.data_to_send()
    assert len(frames) == 1 and json.loads(frames[0])["fatal"] is True
    assert session.state is TRANSITIONS[(SessionState.OPEN, SessionEvent.FATAL_ERROR)]
    assert session.receive_frame('{"type":"close"}') == []  # closed reads nothing
    session.abort()  # closed is final: nothing more is queued
    assert session.state is SessionState.CLOSED and session.data_to_send() == []


# --- one request (protocol/request_state.py, §6.1) --------------------------------------------------------


def _section_6_1() -> str:
    return SPEC[SPEC.index("### 6.1 Brackets") : SPEC.index("### 6.2 ")]


def test_spec_request_diagram_is_the_table():
    assert spec_diagram(REQUEST_BLOCK) == render_request_mermaid(), (
        "spec/PROTOCOL.md §6.1's request diagram differs from protocol/request_state.py: paste the output of "
        "`python -m protocol.request_state` between the request-states markers"
    )


def test_spec_request_diagram_sits_in_section_6_1_and_names_every_state():
    section = _section_6_1()
    assert "<!-- request-states:" in section and "<!-- /request-states -->" in section
    prose = section[: section.index("<!-- request-states:")]
    for state in RequestState:
        assert f"**{state.value}**" in prose


def _reachable(starts: set[RequestState]) -> set[RequestState]:
    seen, todo = set(starts), list(starts)
    while todo:
        state = todo.pop()
        for (source, _), target in REQUEST_TRANSITIONS.items():
            if source is state and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_request_table_covers_every_state_and_event():
    sources = {state for state, _ in REQUEST_TRANSITIONS}
    assert sources | set(REQUEST_TRANSITIONS.values()) == set(RequestState)
    assert {event for _, event in REQUEST_TRANSITIONS} == set(RequestEvent)
    assert _reachable(set(REQUEST_INITIAL.values())) == set(RequestState)
    # The final states are the statuses of synthesis_complete (§5.3); nothing leaves them.
    assert tuple(state.value for state in REQUEST_FINAL) == STATUSES
    assert sources.isdisjoint(REQUEST_FINAL)
    assert set(REQUEST_FINAL) == set(RequestState) - sources
    # Every live state can still be answered (§6.1): a final state is reachable from each.
    for state in sources:
        assert _reachable({state}) & set(REQUEST_FINAL)


def test_request_state_sets_are_read_from_the_table():
    def moves(event: RequestEvent) -> set[RequestState]:
        return {state for state, e in REQUEST_TRANSITIONS if e is event}

    # Only an open utterance takes end, every open one ends on close (§15.5), only the active one times out.
    assert REQUEST_OPEN == moves(RequestEvent.END) == moves(RequestEvent.CLOSE)
    assert moves(RequestEvent.TIMEOUT) == REQUEST_OPEN & REQUEST_STARTED == {RequestState.ACTIVE_OPEN}
    # Cancel takes every live request not cancelled yet, to one of the cancelled states (§4.2).
    assert REQUEST_CANCELLED == {
        REQUEST_TRANSITIONS[key] for key in REQUEST_TRANSITIONS if key[1] is RequestEvent.CANCEL
    }
    assert moves(RequestEvent.CANCEL) == set(RequestState) - REQUEST_CANCELLED - set(REQUEST_FINAL)
    # Started: every live state after a synthesis_start; only a started request completes (§6.1).
    starts = {REQUEST_TRANSITIONS[key] for key in REQUEST_TRANSITIONS if key[1] is RequestEvent.START}
    assert REQUEST_STARTED == _reachable(starts) - set(REQUEST_FINAL)
    assert moves(RequestEvent.COMPLETE) <= REQUEST_STARTED
    assert moves(RequestEvent.START).isdisjoint(REQUEST_STARTED | REQUEST_CANCELLED)


def test_next_request_state_refuses_a_missing_pair():
    assert next_request_state(RequestState.QUEUED, RequestEvent.START) is RequestState.ACTIVE
    with pytest.raises(SessionStateError, match="active_open cannot take synthesis_complete"):
        next_request_state(RequestState.ACTIVE_OPEN, RequestEvent.COMPLETE)
    for state in REQUEST_FINAL:
        for event in RequestEvent:
            with pytest.raises(SessionStateError):
                next_request_state(state, event)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _synthesize(request_id: str) -> str:
    return json.dumps({"type": "synthesize", "text": "Hello.", "request_id": request_id})


def _utterance(request_id: str) -> str:
    return json.dumps({"type": "utterance", "request_id": request_id})


def _message(kind: str, request_id: str | None = None) -> str:
    return json.dumps({"type": kind, "request_id": request_id})


def _completes(frames: list) -> dict[str, str]:
    """``request_id -> status`` of the synthesis_complete frames among ``frames``."""
    controls = [json.loads(f) for f in frames if isinstance(f, str)]
    return {c["request_id"]: c["status"] for c in controls if c["type"] == "synthesis_complete"}


def _requests_queued_then_active(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_synthesize("a"))
    session.receive_frame(_utterance("u"))  # queued_open behind a
    session.receive_frame(_message("end", "u"))  # queued_open -> queued
    session.start("a")
    session.audio("a", bytes(64))
    session.complete("a")  # active -> completed
    session.start("u")
    session.fail("u", "boom")  # active -> failed
    return {"a": "completed", "u": "failed"}


def _utterance_open_ended_answered(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_utterance("u"))
    session.start("u")  # queued_open -> active_open
    session.receive_frame(_message("end", "u"))  # active_open -> active
    session.complete("u")
    return {"u": "completed"}


def _cancelled_while_queued_or_active(session: ServerSession, clock: _Clock) -> dict[str, str]:
    for request_id in ("a", "b"):
        session.receive_frame(_synthesize(request_id))
    session.receive_frame(_utterance("u"))
    session.receive_frame(_message("cancel", "b"))  # queued -> cancelled_queued
    session.receive_frame(_message("cancel", "u"))  # queued_open -> cancelled_queued
    session.start("a")
    session.receive_frame(_message("cancel", "a"))  # active -> cancelled_active
    assert not session.audio("a", bytes(64))
    session.complete("a")  # cancelled_active -> cancelled; then b and u in their turn (answer)
    return {"a": "cancelled", "b": "cancelled", "u": "cancelled"}


def _active_utterance_cancelled(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_utterance("u"))
    session.start("u")
    session.receive_frame(_message("cancel"))  # active_open -> cancelled_active
    session.complete("u")
    session.receive_frame(_synthesize("f"))
    session.start("f")
    session.receive_frame(_message("cancel", "f"))
    session.fail("f", "boom")  # cancelled_active -> failed
    return {"u": "cancelled", "f": "failed"}


def _failures_before_the_audio(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_synthesize("q"))
    session.fail("q", "boom")  # queued -> failed
    session.receive_frame(_utterance("o"))
    session.fail("o", "boom")  # queued_open -> failed
    session.receive_frame(_utterance("p"))
    session.start("p")
    session.fail("p", "boom")  # active_open -> failed
    return {"q": "failed", "o": "failed", "p": "failed"}


def _idle_timeout(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_utterance("u"))
    session.start("u")
    clock.t += session.limits.utterance_idle_timeout_s
    assert session.expire()  # active_open -> active
    assert session.deadline() is None
    session.complete("u")
    return {"u": "completed"}


def _close_ends_open_utterances(session: ServerSession, clock: _Clock) -> dict[str, str]:
    session.receive_frame(_utterance("u"))
    session.receive_frame(_utterance("v"))
    session.start("u")
    session.receive_frame(_message("close"))  # active_open -> active, queued_open -> queued
    session.complete("u")
    session.start("v")
    session.complete("v")
    assert session.finished
    return {"u": "completed", "v": "completed"}


SCENARIOS = [
    _requests_queued_then_active,
    _utterance_open_ended_answered,
    _cancelled_while_queued_or_active,
    _active_utterance_cancelled,
    _failures_before_the_audio,
    _idle_timeout,
    _close_ends_open_utterances,
]


def test_a_real_session_takes_every_request_transition_and_only_those(monkeypatch: pytest.MonkeyPatch):
    taken: list[tuple[RequestState, RequestEvent]] = []
    move = PendingRequest.move

    def recording(self: PendingRequest, event: RequestEvent) -> None:
        before = self.state
        move(self, event)
        taken.append((before, event))
        assert self.state is REQUEST_TRANSITIONS[(before, event)]

    monkeypatch.setattr(PendingRequest, "move", recording)
    for scenario in SCENARIOS:
        clock = _Clock()
        session = ServerSession(known_voices=None, clock=clock, utterances=True)
        statuses = scenario(session, clock)
        # The status on the wire is the final state the request reached (§5.3), and nothing is left.
        assert _completes(session.data_to_send()) == statuses, scenario.__name__
        assert session.pending_ids == []
    assert set(taken) == set(REQUEST_TRANSITIONS), sorted(
        f"{s.value} on {e.name}" for s, e in set(REQUEST_TRANSITIONS) - set(taken)
    )


def test_a_session_raises_on_a_request_move_the_table_lacks():
    session = ServerSession(known_voices=None, utterances=True)
    session.receive_frame(_utterance("u"))
    with pytest.raises(SessionStateError, match="queued_open cannot take synthesis_complete"):
        session.complete("u")  # not started, and still open
    session.start("u")
    with pytest.raises(SessionStateError, match="active_open cannot take synthesis_start"):
        session.start("u")
    with pytest.raises(SessionStateError, match="active_open cannot take synthesis_complete"):
        session.complete("u")  # still open: more text may come (§15.4)
    session.receive_frame(_message("end", "u"))
    session.complete("u")
    assert _completes(session.data_to_send()) == {"u": "completed"}


def test_refused_messages_leave_the_request_where_it_was():
    # A pair the table lacks that a client can cause is refused on the wire (§4.2, §15.5), not raised.
    session = ServerSession(known_voices=None, utterances=True)
    session.receive_frame(_utterance("u"))
    session.receive_frame(_synthesize("a"))
    session.receive_frame(_message("cancel", "u"))
    session.receive_frame(_message("end", "a"))  # not an utterance: no END from queued
    session.receive_frame(_message("end", "u"))  # cancelled: no END from cancelled_queued
    session.receive_frame(_message("cancel", "u"))  # answered already: unknown
    codes = [json.loads(f)["code"] for f in session.data_to_send() if isinstance(f, str) and '"error"' in f]
    assert codes == ["unknown_request"] * 3
    assert session.pending_ids == ["a"] and session.is_cancelled("u")

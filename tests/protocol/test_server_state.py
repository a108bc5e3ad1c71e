"""The server session's state table (protocol/server_state.py) against the session and against the spec.

The table is the one home of the server session's lifecycle: spec/PROTOCOL.md §7 carries the diagram drawn
from it (checked here, character for character), and :class:`protocol.server_session.ServerSession` moves
only along it (checked here on the transitions a client and an adapter can cause).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, ProtocolError
from protocol.server_session import ServerSession
from protocol.server_state import (
    ENDS,
    INITIAL,
    READS_MESSAGES,
    TRANSITIONS,
    SessionEvent,
    SessionState,
    next_state,
    render_mermaid,
)

SPEC = (Path(__file__).resolve().parents[2] / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")
BLOCK = re.compile(
    r"<!-- session-states:[^\n]*-->\n```mermaid\n(?P<diagram>.*?)```\n<!-- /session-states -->", re.S
)


def spec_diagram() -> str:
    matches = list(BLOCK.finditer(SPEC))
    assert len(matches) == 1, "spec/PROTOCOL.md holds one session-states block"
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
    with pytest.raises(KeyError):
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

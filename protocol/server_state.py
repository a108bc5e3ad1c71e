"""The server session's lifecycle as one table (PROTOCOL.md §7), in the manner of h11's ``_state.py``.

:data:`TRANSITIONS` holds every move of a :class:`protocol.server_session.ServerSession`: a
``(state, event)`` pair maps to the next state, and a pair that is not in the table cannot happen (the
session never fires it). :class:`ServerSession` changes its state only through this table, and
:func:`render_mermaid` draws the diagram from it; spec/PROTOCOL.md §7 carries that drawing, and
tests/protocol/test_server_state.py fails when the two differ. Print the drawing with
``python -m protocol.server_state``.

What happens to one request (queued, active, answered; an utterance open until it ends, §15) is a second
table, in :mod:`protocol.request_state`, drawn into §6.1.
"""

from __future__ import annotations

import enum

__all__ = [
    "ENDS",
    "INITIAL",
    "READS_MESSAGES",
    "TRANSITIONS",
    "SessionEvent",
    "SessionState",
    "SessionStateError",
    "next_state",
    "render_mermaid",
]


class SessionStateError(RuntimeError):
    """The adapter used a session out of order (a bug in the caller, never a protocol error).

    Raised, for example, when audio is reported for a request that is not the one whose turn it is, or
    when a request is moved along a pair that :data:`protocol.request_state.REQUEST_TRANSITIONS` does not
    hold.
    """


class SessionState(enum.Enum):
    """Lifecycle of a server session (PROTOCOL.md §7)."""

    OPEN = "open"
    """Messages are read and answered."""
    DRAINING = "draining"
    """``close`` received: later messages are ignored, accepted requests are still answered (§7.1)."""
    CLOSED = "closed"
    """A fatal error or :meth:`ServerSession.abort`: nothing more is sent but what is queued."""


class SessionEvent(enum.Enum):
    """What moves a server session to another state; each value is how the diagram labels it."""

    CLOSE = "client sends close (§7.1)"
    """The client's ``close`` was read (§4.3, §7.1)."""
    FATAL_ERROR = "a message refused with a fatal error (§9.4)"
    """A message was refused with a fatal error (§9.4)."""
    ABORT = "server ends it with a fatal error (§7.5, §10.3)"
    """The adapter ended the session (:meth:`ServerSession.abort`): shutdown, idle limit, a failure."""


TRANSITIONS: dict[tuple[SessionState, SessionEvent], SessionState] = {
    (SessionState.OPEN, SessionEvent.CLOSE): SessionState.DRAINING,
    (SessionState.OPEN, SessionEvent.FATAL_ERROR): SessionState.CLOSED,
    (SessionState.OPEN, SessionEvent.ABORT): SessionState.CLOSED,
    (SessionState.DRAINING, SessionEvent.ABORT): SessionState.CLOSED,
}
"""Every transition of a server session: ``(state, event) -> next state``. ``CLOSED`` is final."""

READS_MESSAGES = frozenset({SessionState.OPEN})
"""The states in which a client message is read; in the others it is ignored without an answer (§7.1),
so ``close`` and fatal errors, which only a message brings, happen only in these."""

INITIAL = SessionState.OPEN
"""A session is open as soon as the WebSocket handshake completes (§7)."""

ENDS: dict[SessionState, str] = {
    SessionState.DRAINING: "last request answered, then close 1000 (§7.1)",
    SessionState.CLOSED: "error frame sent, then close with its code (§9.4)",
}
"""When the adapter closes the connection, by state (:attr:`ServerSession.finished`, §7.1, §9.4); a
session that ends no other way is ended by the loss of its connection (§7.4)."""


def next_state(state: SessionState, event: SessionEvent) -> SessionState:
    """The state a session in ``state`` moves to on ``event``.

    Raises:
        SessionStateError: the table has no such transition (the event cannot happen in that state), as
            :func:`protocol.request_state.next_request_state` raises for a request.
    """
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise SessionStateError(f"a session that is {state.value} cannot take {event.value}") from None


def render_mermaid() -> str:
    """The state diagram of :data:`TRANSITIONS` as a Mermaid ``stateDiagram-v2`` (no fences): one line per
    transition in the table's order, then where the session ends (:data:`ENDS`)."""
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL.value}"]
    lines += [
        f"    {state.value} --> {target.value}: {event.value}"
        for (state, event), target in TRANSITIONS.items()
    ]
    lines += [f"    {state.value} --> [*]: {when}" for state, when in ENDS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_mermaid(), end="")

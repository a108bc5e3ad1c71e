"""One request's lifecycle as a table (PROTOCOL.md §4.2, §6.1, §15), beside the session's in
:mod:`protocol.server_state`, in the manner of h11's ``_state.py``.

:data:`REQUEST_TRANSITIONS` holds every move of one accepted request of a
:class:`protocol.server_session.ServerSession`, from its acceptance (queued; an utterance also open, §15)
through its ``synthesis_start`` (active) to its ``synthesis_complete``, whose ``status`` is the final state
(completed, cancelled, failed; §5.3). A ``(state, event)`` pair that is not in the table cannot happen:
:func:`next_request_state` raises :class:`~protocol.server_state.SessionStateError` for it.
:class:`PendingRequest` is the session's record of one request; it changes state only through
:meth:`PendingRequest.move`. :func:`render_request_mermaid` draws the diagram that spec/PROTOCOL.md §6.1
carries (tests/protocol/test_server_state.py fails when the two differ); print it with
``python -m protocol.request_state``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.messages import SynthesisRequest
from protocol.server_state import SessionStateError

__all__ = [
    "REQUEST_CANCELLED",
    "REQUEST_FINAL",
    "REQUEST_INITIAL",
    "REQUEST_OPEN",
    "REQUEST_STARTED",
    "REQUEST_TRANSITIONS",
    "PendingRequest",
    "RequestEvent",
    "RequestState",
    "next_request_state",
    "render_request_mermaid",
]


class RequestState(enum.Enum):
    """Lifecycle of one accepted request, from its acceptance to its ``synthesis_complete`` (§4.2, §6.1, §15).

    The three final states are the ``status`` of the request's ``synthesis_complete`` (§5.3); once in one,
    the request has left the session.
    """

    QUEUED = "queued"
    """Accepted; its ``synthesis_start`` is not sent yet (§6.2)."""
    QUEUED_OPEN = "queued_open"
    """A queued utterance that still takes text (§15.1)."""
    ACTIVE = "active"
    """Its ``synthesis_start`` is sent; its audio is going out (§5.1, §5.2)."""
    ACTIVE_OPEN = "active_open"
    """An active utterance that still takes text; it alone has an idle deadline (§15.5)."""
    CANCELLED_QUEUED = "cancelled_queued"
    """Cancelled before its ``synthesis_start``: answered in its turn with an empty bracket (§4.2)."""
    CANCELLED_ACTIVE = "cancelled_active"
    """Cancelled after its ``synthesis_start``: the adapter stops its audio and completes it (§4.2)."""
    COMPLETED = "completed"
    """Answered with ``status`` ``completed`` (§5.3)."""
    CANCELLED = "cancelled"
    """Answered with ``status`` ``cancelled`` (§4.2)."""
    FAILED = "failed"
    """Answered with ``status`` ``failed``, after an ``internal_error`` frame (§6.3)."""


class RequestEvent(enum.Enum):
    """What moves a request to another state; each value is how the diagram labels it."""

    START = "synthesis_start sent (§5.1)"
    """The adapter started it in its turn (:meth:`ServerSession.start`)."""
    END = "end (§15.1)"
    """The client's ``end`` was accepted."""
    CLOSE = "close, as if end arrived (§15.5)"
    """The session drains (§7.1): every open utterance ends."""
    TIMEOUT = "idle timeout (§15.5)"
    """No message for the active utterance for ``utterance_idle_timeout_s`` (:meth:`ServerSession.expire`)."""
    CANCEL = "cancel (§4.2)"
    """A ``cancel`` naming it, or one without ``request_id``."""
    ANSWER = "its turn, an empty bracket (§4.2)"
    """The session answers a request cancelled while queued: ``synthesis_start``, then its
    ``synthesis_complete``, no audio."""
    COMPLETE = "synthesis_complete sent (§5.3)"
    """The adapter completed it (:meth:`ServerSession.complete`)."""
    FAIL = "synthesis failed (§6.3)"
    """The adapter reported a failure (:meth:`ServerSession.fail`)."""


REQUEST_INITIAL: dict[str, RequestState] = {
    "synthesize": RequestState.QUEUED,
    "utterance": RequestState.QUEUED_OPEN,
}
"""The state a request starts in, by the type of the message that was accepted (§4.1, §15.1)."""

REQUEST_TRANSITIONS: dict[tuple[RequestState, RequestEvent], RequestState] = {
    (RequestState.QUEUED, RequestEvent.START): RequestState.ACTIVE,
    (RequestState.QUEUED_OPEN, RequestEvent.START): RequestState.ACTIVE_OPEN,
    (RequestState.QUEUED_OPEN, RequestEvent.END): RequestState.QUEUED,
    (RequestState.ACTIVE_OPEN, RequestEvent.END): RequestState.ACTIVE,
    (RequestState.QUEUED_OPEN, RequestEvent.CLOSE): RequestState.QUEUED,
    (RequestState.ACTIVE_OPEN, RequestEvent.CLOSE): RequestState.ACTIVE,
    (RequestState.ACTIVE_OPEN, RequestEvent.TIMEOUT): RequestState.ACTIVE,
    (RequestState.QUEUED, RequestEvent.CANCEL): RequestState.CANCELLED_QUEUED,
    (RequestState.QUEUED_OPEN, RequestEvent.CANCEL): RequestState.CANCELLED_QUEUED,
    (RequestState.ACTIVE, RequestEvent.CANCEL): RequestState.CANCELLED_ACTIVE,
    (RequestState.ACTIVE_OPEN, RequestEvent.CANCEL): RequestState.CANCELLED_ACTIVE,
    (RequestState.CANCELLED_QUEUED, RequestEvent.ANSWER): RequestState.CANCELLED,
    (RequestState.ACTIVE, RequestEvent.COMPLETE): RequestState.COMPLETED,
    (RequestState.CANCELLED_ACTIVE, RequestEvent.COMPLETE): RequestState.CANCELLED,
    (RequestState.QUEUED, RequestEvent.FAIL): RequestState.FAILED,
    (RequestState.QUEUED_OPEN, RequestEvent.FAIL): RequestState.FAILED,
    (RequestState.ACTIVE, RequestEvent.FAIL): RequestState.FAILED,
    (RequestState.ACTIVE_OPEN, RequestEvent.FAIL): RequestState.FAILED,
    (RequestState.CANCELLED_ACTIVE, RequestEvent.FAIL): RequestState.FAILED,
}
"""Every transition of one request: ``(state, event) -> next state``. ``COMPLETED``, ``CANCELLED`` and
``FAILED`` are final. A cancel of a request in no pair with ``CANCEL`` is refused with
``unknown_request`` (§4.2), as is an ``append``, ``flush`` or ``end`` for one not in :data:`REQUEST_OPEN`
(§15.5); any other missing pair is the adapter's error (:class:`SessionStateError`)."""

REQUEST_OPEN = frozenset({RequestState.QUEUED_OPEN, RequestState.ACTIVE_OPEN})
"""The states of an utterance that still takes ``append``, ``flush`` and ``end`` (§15.1)."""

REQUEST_STARTED = frozenset({RequestState.ACTIVE, RequestState.ACTIVE_OPEN, RequestState.CANCELLED_ACTIVE})
"""The states of a live request whose ``synthesis_start`` is sent: its audio and marks may follow."""

REQUEST_CANCELLED = frozenset({RequestState.CANCELLED_QUEUED, RequestState.CANCELLED_ACTIVE})
"""The states of a live request that was cancelled (§4.2)."""

REQUEST_FINAL = (RequestState.COMPLETED, RequestState.CANCELLED, RequestState.FAILED)
"""The final states, in the diagram's order: a request in one has left the session (§5.3)."""


def next_request_state(state: RequestState, event: RequestEvent) -> RequestState:
    """The state a request in ``state`` moves to on ``event``.

    Raises:
        SessionStateError: the table has no such transition (the event cannot happen in that state).
    """
    try:
        return REQUEST_TRANSITIONS[(state, event)]
    except KeyError:
        raise SessionStateError(f"a request that is {state.value} cannot take {event.value}") from None


def render_request_mermaid() -> str:
    """The state diagram of :data:`REQUEST_TRANSITIONS` as a Mermaid ``stateDiagram-v2`` (no fences): how
    a request starts (:data:`REQUEST_INITIAL`), one line per transition in the table's order, then the
    final states."""
    lines = ["stateDiagram-v2"]
    lines += [f"    [*] --> {state.value}: {kind} accepted" for kind, state in REQUEST_INITIAL.items()]
    lines += [
        f"    {state.value} --> {target.value}: {event.value}"
        for (state, event), target in REQUEST_TRANSITIONS.items()
    ]
    lines += [f"    {state.value} --> [*]" for state in REQUEST_FINAL]
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class PendingRequest:
    """A :class:`ServerSession`'s record of one accepted request until its ``synthesis_complete`` is queued.

    ``state`` moves only along :data:`REQUEST_TRANSITIONS` (:meth:`move`); ``started``, ``cancelled`` and
    ``open`` are read from it. ``accepted_at`` and ``last_input`` are on the session's clock (seconds);
    ``audio_bytes`` counts the audio frames sent (§5.3). Three fields are an utterance's (§15): how many
    code points it took (``max_text_chars`` bounds them), a high surrogate half waiting for its low half
    (§15.2), and when its last message was accepted (for the idle timeout, §15.5). ``segments`` and
    ``marked_to_s`` are the ``marks`` sent so far and where the last one ended (§5.5).
    """

    request: SynthesisRequest
    accepted_at: float
    state: RequestState = RequestState.QUEUED
    audio_bytes: int = 0
    text_chars: int = 0
    held_half: str = ""
    last_input: float = 0.0
    segments: int = 0
    marked_to_s: float = 0.0

    def move(self, event: RequestEvent) -> None:
        """Take the transition of :data:`REQUEST_TRANSITIONS` for ``event``.

        Raises:
            SessionStateError: the table has no such move (the adapter called the session out of order).
        """
        try:
            self.state = next_request_state(self.state, event)
        except SessionStateError as exc:
            raise SessionStateError(f"request {self.request.request_id!r}: {exc}") from None

    def can(self, event: RequestEvent) -> bool:
        """Whether :data:`REQUEST_TRANSITIONS` has a move for ``event`` from the current state."""
        return (self.state, event) in REQUEST_TRANSITIONS

    @property
    def started(self) -> bool:
        """Its ``synthesis_start`` was sent (§5.1)."""
        return self.state in REQUEST_STARTED

    @property
    def cancelled(self) -> bool:
        """It was cancelled (§4.2)."""
        return self.state in REQUEST_CANCELLED

    @property
    def open(self) -> bool:
        """An utterance that still takes text (§15.1)."""
        return self.state in REQUEST_OPEN


if __name__ == "__main__":
    print(render_request_mermaid(), end="")

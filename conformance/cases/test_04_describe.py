"""§4.4 describe: answered at once, one ``capabilities`` frame per ``describe``, and never unasked.

Both cases judge one recorded session (:func:`conformance.engine.recordings.described`): two requests, and two
``describe`` messages (one with a ``request_id``, one without) sent while the first request is active and
the second queued. A server that answers ``describe`` with ``unknown_type`` does not offer it (§1.5): 4.4.2
is then UNIMPLEMENTED; 4.4.3 still holds every server to sending no ``capabilities`` unasked.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.engine import expect
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import DESCRIBED, DESCRIBES

AT_ONCE_S = 0.25
"""Slack for "at once": an answer may follow a request's ``synthesis_complete`` that was already on its way
when the describe arrived, but not one that came this much later (the server waited for its queue)."""


def _capabilities(recording: Recording) -> list[tuple[int, float, dict[str, Any]]]:
    """``(index, time, frame)`` of every ``capabilities`` frame of the session."""
    found = []
    for index, message in enumerate(recording.messages):
        if message.is_control:
            obj = json.loads(message.data)
            if obj.get("type") == "capabilities":
                found.append((index, message.t, obj))
    return found


@case(
    "4.4.2",
    "§4.4",
    Level.MUST,
    requirements=("R4.4-2", "R4.4-3"),
    requirement="The server MUST answer each `describe` at once with exactly one `capabilities` control "
    "frame whose `request_id` is the `describe`'s (`null` when it had none).",
    description="send two requests at speed 2; at the first one's synthesis_start send describe with "
    "request_id d1 and describe without request_id; then close",
    expectation="a capabilities frame with request_id d1 and one with request_id null follow the describes, "
    "without waiting for the requests queued or active then (not later than their last "
    f"synthesis_complete, unless that came within {AT_ONCE_S} s); both requests complete with plausible "
    "speech, as without describe",
)
def test_describe_is_answered_at_once(conf: Probe, described: Recording) -> None:
    conf.use(described)
    observer = described.replay()
    sent_at = described.extra.get("describe_index")
    assert sent_at is not None, f"the describes were never sent: {described.error}"
    refused = [e for i, e in observer.errors if i >= sent_at and e.code == "unknown_type"]
    if refused:
        raise Unimplemented("the server answered describe with unknown_type: it does not offer it (§4.4)")
    answers = [(i, t, obj) for i, t, obj in _capabilities(described) if i >= sent_at]
    conf.observe(capabilities=[(i, obj.get("request_id")) for i, _, obj in answers])
    # Every request queued or active when the describes went out was completed: when was the last?
    pending = described.extra.get("pending", [])
    ends = [m.t for r in pending if (m := _complete_message(described, r)) is not None]
    last_end = max(ends) if ends and len(ends) == len(pending) else None
    for request_id in DESCRIBES:
        mine = [t for _, t, obj in answers if obj.get("request_id") == request_id]
        named = f"request_id {request_id!r}" if request_id else "no request_id"
        assert mine, f"the describe with {named} got no capabilities frame naming it"
        if last_end is not None:
            after = last_end - described.extra["describe_t"]
            assert not (mine[0] > last_end and after > AT_ONCE_S), (
                f"the describe with {named} was answered only after the requests queued or active then were "
                f"completed ({after:.2f} s after it was sent), not at once"
            )
    for request in DESCRIBED:
        assert request.request_id in observer.answers, f"{request.request_id} got no bracket"
        expect.spoken(observer.answers[request.request_id], request.text, speed=request.speed)


def _complete_message(recording: Recording, request_id: str) -> Any:
    """The message that carried ``request_id``'s ``synthesis_complete`` (its time), or ``None``."""
    for message in recording.messages:
        if message.is_control:
            obj = json.loads(message.data)
            if obj.get("type") == "synthesis_complete" and obj.get("request_id") == request_id:
                return message
    return None


@case(
    "4.4.3",
    "§4.4",
    Level.MUST,
    requirements=("R4.4-4",),
    requirement="A server MUST NOT send `capabilities` except in answer to `describe`.",
    description="the session of 4.4.2: two requests, two describes while the first is active, then close",
    expectation="no more capabilities frames than describe messages sent, none before the first describe "
    "(read by the suite's observer, protocol/reader.py)",
)
def test_no_capabilities_unasked(conf: Probe, described: Recording) -> None:
    conf.use(described)
    described.replay()
    conf.observe(capabilities=[(i, obj.get("request_id")) for i, _, obj in _capabilities(described)])

"""Asking a server what it offers: ``describe`` and its ``capabilities`` answer (PROTOCOL.md §4.4), read
leniently.

Cases that depend on an OPTIONAL feature (§1.5: marks, utterances, encodings) or on a server's limits (§10)
learn them here. A server that answers ``describe`` with ``unknown_type`` does not offer it: :func:`ask`
returns ``None`` and each case decides what that means (UNIMPLEMENTED, or the protocol's default limits).
Whatever shape the answer has, reading it never raises anything but an :class:`AssertionError` with a
readable message: a malformed ``capabilities`` frame is judged by the frame cases (R5-1), not by a crash.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from conformance.engine.case import Unimplemented
from conformance.engine.stream import ObservedStream
from protocol.limits import Limits
from protocol.messages import Capabilities, Describe, read_server_control

__all__ = ["Offer", "ask", "require_features"]


@dataclass(frozen=True)
class Offer:
    """A ``capabilities`` frame as received (its members read leniently).

    Attributes:
        obj: the frame's JSON object.
        index: its message index in the session.
    """

    obj: dict[str, Any]
    index: int

    @property
    def features(self) -> frozenset[str]:
        """``features``: the OPTIONAL features offered (strings only; empty when malformed)."""
        raw = self.obj.get("features")
        return frozenset(f for f in raw if isinstance(f, str)) if isinstance(raw, list) else frozenset()

    def limit(self, name: str) -> float | None:
        """The limit ``name`` of ``limits`` (§10); ``None`` when absent or not a number (not bounded)."""
        raw = self.obj.get("limits")
        value = raw.get(name) if isinstance(raw, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value

    def capabilities(self) -> Capabilities:
        """The frame as :class:`protocol.messages.Capabilities`.

        Raises:
            AssertionError: the frame breaks its schema (the problem named).
        """
        reading = read_server_control(self.obj)
        if not isinstance(reading.frame, Capabilities):
            problems = "; ".join(reading.problems[:3]) or "not a capabilities frame"
            raise AssertionError(f"the capabilities frame breaks its schema: {problems}")
        return reading.frame


DEFAULT_LIMITS = Limits()
"""The protocol's default limits (§10): what a server without ``describe`` is assumed to use."""


async def ask(session: ObservedStream, request_id: str = "caps") -> Offer | None:
    """Send ``describe`` with ``request_id`` on ``session`` and return its answer (§4.4).

    The answer is the first ``capabilities`` frame after the send naming ``request_id`` (or, from a server
    that names none, the first one after the send). ``None`` when the server refused ``describe`` with
    ``unknown_type``: it does not offer it (§1.5).

    Raises:
        conformance.engine.stream.StreamEnded: the session ended first.
        AssertionError: ``describe`` was refused with another code.
    """
    sent = len(session.messages)
    errors = len(session.observer.errors)
    session.observer.reader.expect_describe(request_id)
    await session.send(Describe(request_id=request_id).to_json().encode())
    found: list[Offer] = []

    def answered() -> bool:
        candidates = []
        for index in range(sent, len(session.messages)):
            message = session.messages[index]
            if message.is_control:
                obj = json.loads(message.data)
                if obj.get("type") == "capabilities":
                    candidates.append(Offer(obj, index))
        named = [c for c in candidates if c.obj.get("request_id") == request_id]
        if named or candidates:
            found[:] = (named or candidates)[:1]
            return True
        return any(e.request_id in (request_id, None) for _, e in session.observer.errors[errors:])

    await session.wait(answered, "the answer to describe")
    if found:
        return found[0]
    refusal = next(e for _, e in session.observer.errors[errors:] if e.request_id in (request_id, None))
    if refusal.code == "unknown_type":
        return None
    raise AssertionError(f"describe was refused with {refusal.code}: {refusal.message[:200]!r}")


def require_features(features: Collection[str] | None, *names: str) -> None:
    """Go on only if the server lists every feature of ``names`` (§4.4): optional features are
    UNIMPLEMENTED, not FAILED, where a server does not offer them (§1.7).

    Args:
        features: ``capabilities.features`` from the server's answer to ``describe`` (:func:`ask`), or
            ``None`` when it does not offer ``describe``: then a client cannot learn that it offers any.
        names: the features the case needs.

    Raises:
        conformance.engine.case.Unimplemented: ``features`` is ``None`` or lacks one of ``names``.
    """
    wanted = " and ".join(names)
    if features is None:
        raise Unimplemented(
            f"the server does not offer describe, so a client cannot learn that it offers {wanted}"
        )
    missing = [name for name in names if name not in features]
    if missing:
        raise Unimplemented(
            f"the server does not list {' and '.join(missing)} in capabilities.features ({sorted(features)})"
        )

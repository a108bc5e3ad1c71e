"""Fault injection: the failures a real endpoint produces, on demand and reproducibly.

A :class:`FaultPlan` is a tuple of :class:`Fault`. Two families exist:

* **before the stream opens** — the invocation is answered with the service's HTTP error instead of
  reaching the container: ``throttle`` (400 ThrottlingException), ``unavailable`` (503),
  ``internal`` (500), ``model_error`` (424 ModelError). REFERENCE §1: throttling arrives as 400.
* **mid-stream** — after ``k`` payload bytes have been sent to the client, the stream ends with an
  exception event: ``model_stream_error`` (ModelStreamError, ErrorCode ``StreamBroken`` unless
  given) or ``internal_stream_failure`` (InternalStreamFailure). The part that crosses byte ``k``
  is cut so that exactly ``k`` bytes arrive first.

Spelling on the command line: ``KIND[:ERROR_CODE][@AFTER_BYTES][*TIMES]``, for example
``model_stream_error@4096``, ``model_stream_error:ModelInvocationTimeExceeded@0``, ``throttle*2``
(only the first two invocations are throttled, so a retrying client then succeeds). ``TIMES``
counts invocations of the simulator, all front doors together, from 0.

Everything here is sans-I/O; the servers consult :meth:`FaultPlan.before_stream` and drive a
:class:`FaultCursor` per invocation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Fault", "FaultCursor", "FaultKind", "FaultPlan"]


class FaultKind(StrEnum):
    """The injectable failures. Values are the command-line names."""

    THROTTLE = "throttle"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"
    MODEL_ERROR = "model_error"
    MODEL_STREAM_ERROR = "model_stream_error"
    INTERNAL_STREAM_FAILURE = "internal_stream_failure"

    @property
    def mid_stream(self) -> bool:
        """True for the faults that end an open stream with an exception event."""
        return self in (FaultKind.MODEL_STREAM_ERROR, FaultKind.INTERNAL_STREAM_FAILURE)


_SPEC = re.compile(
    r"^(?P<kind>[a-z_]+)(?::(?P<code>[A-Za-z0-9_]+))?(?:@(?P<after>\d+))?(?:\*(?P<times>\d+))?$"
)


@dataclass(frozen=True)
class Fault:
    """One injected failure.

    Attributes:
        kind: which failure.
        after_bytes: mid-stream faults only: payload bytes delivered before the exception event
            (0 = before the first byte). Defaults to 0.
        error_code: ModelStreamError's ``ErrorCode`` (default ``StreamBroken``, one of the two
            documented codes); for the HTTP faults the ``ErrorCode`` body member, if set.
        times: how many invocations it hits, counted from the simulator's first; None = all.

    Raises:
        ValueError: ``after_bytes`` on a fault that is not mid-stream, or negative numbers.
    """

    kind: FaultKind
    after_bytes: int | None = None
    error_code: str | None = None
    times: int | None = None

    def __post_init__(self) -> None:
        if self.after_bytes is not None and not self.kind.mid_stream:
            raise ValueError(f"{self.kind} happens before the stream opens; it takes no @AFTER_BYTES")
        if (self.after_bytes or 0) < 0 or (self.times is not None and self.times < 0):
            raise ValueError("fault byte offsets and counts must not be negative")

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Parse ``KIND[:ERROR_CODE][@AFTER_BYTES][*TIMES]``.

        Raises:
            ValueError: unknown kind or malformed spelling.
        """
        match = _SPEC.match(text.strip())
        if match is None:
            raise ValueError(f"malformed fault {text!r}: expected KIND[:CODE][@AFTER_BYTES][*TIMES]")
        try:
            kind = FaultKind(match["kind"])
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise ValueError(f"unknown fault {match['kind']!r} (known: {known})") from None
        return cls(
            kind=kind,
            after_bytes=int(match["after"]) if match["after"] is not None else None,
            error_code=match["code"],
            times=int(match["times"]) if match["times"] is not None else None,
        )

    @property
    def offset(self) -> int:
        """Bytes delivered before a mid-stream fault fires."""
        return self.after_bytes or 0

    def hits(self, invocation: int) -> bool:
        """Whether this fault applies to the ``invocation``-th invocation (0-based)."""
        return self.times is None or invocation < self.times

    def __str__(self) -> str:
        text = self.kind.value
        if self.error_code:
            text += f":{self.error_code}"
        if self.after_bytes is not None:
            text += f"@{self.after_bytes}"
        if self.times is not None:
            text += f"*{self.times}"
        return text


@dataclass(frozen=True)
class FaultPlan:
    """The faults armed in a simulator; empty by default.

    Raises:
        ValueError: more than one mid-stream fault (the first one would always win, so a second
            one is a mistake in the plan).
    """

    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if sum(1 for f in self.faults if f.kind.mid_stream) > 1:
            raise ValueError("at most one mid-stream fault (model_stream_error / internal_stream_failure)")

    @classmethod
    def parse(cls, specs: list[str] | tuple[str, ...]) -> FaultPlan:
        """A plan from command-line spellings (see the module docstring)."""
        return cls(tuple(Fault.parse(spec) for spec in specs))

    def before_stream(self, invocation: int) -> Fault | None:
        """The HTTP-level fault that answers this invocation, if any (first listed wins)."""
        for fault in self.faults:
            if not fault.kind.mid_stream and fault.hits(invocation):
                return fault
        return None

    def cursor(self, invocation: int) -> FaultCursor:
        """A fresh byte counter for one invocation's output."""
        for fault in self.faults:
            if fault.kind.mid_stream and fault.hits(invocation):
                return FaultCursor(fault)
        return FaultCursor(None)


class FaultCursor:
    """Counts the payload bytes delivered on one stream and says when a mid-stream fault fires.

    Call :meth:`take` with each part before sending it. It returns how many of the part's bytes
    to send and the fault to raise afterwards (None while the stream is healthy).
    """

    def __init__(self, fault: Fault | None) -> None:
        self.fault = fault
        self.delivered = 0
        self.fired = False

    def take(self, size: int) -> tuple[int, Fault | None]:
        """Admit up to ``size`` bytes of the next part.

        Returns:
            ``(n, fault)``: send the first ``n`` bytes of the part; if ``fault`` is not None, send
            the exception event next and end the stream.
        """
        if self.fault is None or self.fired:
            self.delivered += size
            return size, None
        room = self.fault.offset - self.delivered
        if size < room or (size == room and size > 0):
            # The fault fires once the delivered bytes *exceed* k, so exactly k always arrive;
            # a part ending exactly at k is still delivered whole.
            self.delivered += size
            return size, None
        self.delivered += room
        self.fired = True
        return room, self.fault

    def at_end(self) -> Fault | None:
        """The stream is about to end normally: a fault at exactly the delivered count fires now.

        This keeps ``@k`` meaningful when k equals the whole output (for example ``@0`` on an
        empty stream): the client still sees the exception rather than a clean end.
        """
        if self.fault is not None and not self.fired and self.fault.offset <= self.delivered:
            self.fired = True
            return self.fault
        return None

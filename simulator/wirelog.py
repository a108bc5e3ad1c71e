"""A per-session wire log: what crossed the simulator, in order, with timings.

Autobahn|Testsuite keeps the raw wire log beside each verdict; the conformance suite attaches these
records to its report the same way. Each :class:`WireRecord` is one event on one leg:

* ``leg="client"``: event-stream messages between the client and the simulator (``direction`` ``in``
  = from the client). ``event`` is ``PayloadPart``, ``ModelStreamError``, ``InternalStreamFailure``,
  ``end-of-input`` (the empty signed envelope) or an HTTP-level event (``http-response``).
* ``leg="container"``: WebSocket / HTTP traffic between the simulator and the container
  (``direction`` ``out`` = to the container). ``event`` is ``text``, ``binary``, ``fragment``,
  ``close``, ``ping``, ``pong``, ``connect`` or ``http-chunk``.

``head`` holds the first bytes of the payload (``head_bytes``, default 16) so a reader can tell a
JSON control frame from audio. Set it to 0 to log no content at all (PROTOCOL.md §13: do not log
text by default in production; the simulator is a test tool, so it keeps a short prefix).

Sans-I/O: the log is a list in memory; :meth:`WireLog.to_jsonl` renders it for a report file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["WireLog", "WireRecord"]


@dataclass(frozen=True)
class WireRecord:
    """One logged event.

    Attributes:
        t: seconds since the session started (monotonic clock).
        leg: ``client`` or ``container``.
        direction: ``in`` (towards the simulator) or ``out`` (away from it).
        event: event name (see the module docstring).
        length: payload length in bytes.
        data_type: ``UTF8`` / ``BINARY`` when the event has one (PayloadPart DataType, or the
            WebSocket frame type), else None.
        completion_state: ``PARTIAL`` / ``COMPLETE`` for PayloadParts, else None.
        head: the first payload bytes, as hex.
        note: free text (close code and reason, error message, HTTP status ...).
    """

    t: float
    leg: str
    direction: str
    event: str
    length: int = 0
    data_type: str | None = None
    completion_state: str | None = None
    head: str = ""
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (None members dropped)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class WireLog:
    """The records of one session.

    Attributes:
        session_id: the simulator's id for the session (``s1``, ``s2`` ...).
        api: ``bidi``, ``response-stream`` or ``invoke``.
        endpoint: the endpoint name the client used.
        head_bytes: how many payload bytes each record keeps.
        outcome: how the session ended (set by the simulator when it ends).
        max_records: records kept at most; later ones are counted in ``dropped`` (a body split byte by
            byte is an event per byte: without a bound, a few megabytes of it took gigabytes of memory).
        dropped: records not kept.
    """

    session_id: str
    api: str
    endpoint: str
    head_bytes: int = 16
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    records: list[WireRecord] = field(default_factory=list)
    outcome: str | None = None
    max_records: int = 100_000
    dropped: int = 0

    def __post_init__(self) -> None:
        self._start = self.clock()

    @property
    def started_at(self) -> float:
        """The ``clock`` reading (``time.monotonic()`` by default) at which ``t = 0``: a record happened
        at ``started_at + record.t``, so records can be lined up with a client's own monotonic times
        (the latency legs of bench/simulator_overhead.py)."""
        return self._start

    def add(
        self,
        leg: str,
        direction: str,
        event: str,
        payload: bytes = b"",
        *,
        data_type: str | None = None,
        completion_state: str | None = None,
        note: str | None = None,
    ) -> WireRecord:
        """Append and return one record."""
        record = WireRecord(
            t=round(self.clock() - self._start, 6),
            leg=leg,
            direction=direction,
            event=event,
            length=len(payload),
            data_type=data_type,
            completion_state=completion_state,
            head=payload[: self.head_bytes].hex(),
            note=note,
        )
        if len(self.records) < self.max_records:
            self.records.append(record)
        else:
            self.dropped += 1
        return record

    def select(self, *, leg: str | None = None, direction: str | None = None, event: str | None = None):
        """The records matching every given field, in order."""
        return [
            r
            for r in self.records
            if (leg is None or r.leg == leg)
            and (direction is None or r.direction == direction)
            and (event is None or r.event == event)
        ]

    def to_dict(self) -> dict[str, object]:
        """The whole log as one JSON-ready dict."""
        return {
            "session_id": self.session_id,
            "api": self.api,
            "endpoint": self.endpoint,
            "outcome": self.outcome,
            "records": [r.to_dict() for r in self.records],
            **({"records_dropped": self.dropped} if self.dropped else {}),
        }

    def to_jsonl(self) -> str:
        """A header line (session, api, endpoint, outcome) then one JSON line per record."""
        header = {k: v for k, v in self.to_dict().items() if k != "records"}
        lines = [json.dumps(header)] + [json.dumps(r.to_dict()) for r in self.records]
        return "\n".join(lines) + "\n"

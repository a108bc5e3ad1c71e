"""Mutants that break which requests a server accepts and what ids it gives them (§4.1).

Each is :class:`~conformance.mutants.base.ToneServer` with one rule of admission broken (issue 12, item 4);
:data:`conformance.mutants.MUTANTS` names the cases that must catch each.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from conformance.mutants.base import ToneConnection, ToneServer
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import ErrorFrame, SynthesisRequest
from reference_server.driver import AudioPiece

__all__ = [
    "AssignsWithoutSkipping",
    "LenientTimestamps",
    "NoIdReuse",
    "QueuesSilently",
    "RefusesSlowest",
    "UnhealthyWhenBusy",
]


def _object(data: bytes | str) -> dict[str, Any] | None:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _is_request(obj: dict[str, Any]) -> bool:
    return obj.get("type") in (None, "synthesize")


class _RewritingConnection(ToneConnection):
    """Rewrites or refuses client messages before the (correct) session sees them."""

    def rewrite(self, obj: dict[str, Any]) -> dict[str, Any] | ProtocolError:
        return obj

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            obj = _object(data) if data is not None else None
            if obj is None or not _is_request(obj):
                return data
            rewritten = self.rewrite(obj)
            if isinstance(rewritten, ProtocolError):
                self.session._outgoing.append(ErrorFrame.from_error(rewritten).to_json())
                self.kick()
                continue
            return json.dumps(rewritten)


class _NoSkipConnection(_RewritingConnection):
    assigned = 0

    def rewrite(self, obj: dict[str, Any]) -> dict[str, Any] | ProtocolError:
        if obj.get("request_id") is None:
            self.assigned += 1
            return {**obj, "request_id": f"r{self.assigned}"}  # r<N>, counting, but never skipping ids in use
        return obj


class AssignsWithoutSkipping(ToneServer):
    """Assigns r1, r2, ... to requests without an id but does not skip ids a client chose (§4.1)."""

    name = "ids-no-skip"
    connection_class = _NoSkipConnection


class _NoReuseConnection(_RewritingConnection):
    def rewrite(self, obj: dict[str, Any]) -> dict[str, Any] | ProtocolError:
        used: set[str] = self.__dict__.setdefault("used", set())
        request_id = obj.get("request_id")
        if isinstance(request_id, str):
            if request_id in used:
                return ProtocolError(
                    ErrorCode.DUPLICATE_REQUEST_ID, f"request_id {request_id!r} was used before", request_id
                )
            used.add(request_id)
        return obj


class NoIdReuse(ToneServer):
    """Refuses a request_id used earlier in the session, even once its synthesis_complete was sent (§4.1)."""

    name = "no-id-reuse"
    connection_class = _NoReuseConnection


class _LenientTimestampConnection(_RewritingConnection):
    def rewrite(self, obj: dict[str, Any]) -> dict[str, Any] | ProtocolError:
        stamp = obj.get("request_timestamp")
        if not isinstance(stamp, str):
            return obj
        try:
            # fromisoformat: no offset (read as UTC), a space for "T", no seconds ... yet no leap second.
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return {**obj, "request_timestamp": "not a date"}
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return {**obj, "request_timestamp": moment.timestamp()}


class LenientTimestamps(ToneServer):
    """Reads request_timestamp with datetime.fromisoformat: accepts date-times without an offset or with a
    space, refuses a leap second (§4.1 asks for RFC 3339 with an offset, leap seconds included)."""

    name = "lenient-timestamps"
    connection_class = _LenientTimestampConnection


class _RefusesSlowestConnection(_RewritingConnection):
    def rewrite(self, obj: dict[str, Any]) -> dict[str, Any] | ProtocolError:
        if obj.get("speed") == 0.5:
            return ProtocolError(ErrorCode.INVALID_SPEED, "speed must be over 0.5", obj.get("request_id"))
        return obj


class RefusesSlowest(ToneServer):
    """Takes the speed range as open at 0.5: refuses the slowest valid speed (§4.1: 0.5 ≤ speed ≤ 2.0)."""

    name = "refuses-slowest"
    connection_class = _RefusesSlowestConnection


# --- admission by latency (§10.2) ------------------------------------------------------------------------


class _SharedModelConnection(ToneConnection):
    """Synthesizes on the server's one model: segments of every session take turns (§10.2), as one CPU or
    one GPU does; the server's ``speaking`` counts the segments being made."""

    server: _SharedModelServer

    async def work(self, seconds: float) -> None:
        self.server.speaking += 1
        try:
            async with self.server.model:
                await super().work(seconds)
        finally:
            self.server.speaking -= 1


class _SharedModelServer(ToneServer):
    connection_class = _SharedModelConnection

    def __init__(self) -> None:
        super().__init__()
        self.model = asyncio.Lock()  # FIFO: the first to wait for the model gets it first
        self.speaking = 0


class QueuesSilently(_SharedModelServer):
    """Queues every new speech silently on its one model, however late its first audio (§10.2).

    A burst of new speeches is accepted whole and the last waits for every other's first segment, far past
    ``first_audio_budget_s``, told nothing; it must be refused with ``server_busy`` at once instead."""

    name = "queues-silently"


class _CountingConnection(ToneConnection):
    """The unbroken session, counting in the server's ``speaking`` the segments being made."""

    server: UnhealthyWhenBusy

    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[AudioPiece]:
        self.server.speaking += 1
        try:
            async for piece in super().synthesize(request):
                yield piece
        finally:
            self.server.speaking -= 1


class UnhealthyWhenBusy(ToneServer):
    """Answers ``GET /ping`` with 503 while it synthesizes (§10.2, §2.2).

    SageMaker would replace the instance exactly when capacity is short."""

    name = "unhealthy-when-busy"
    connection_class = _CountingConnection

    def __init__(self) -> None:
        super().__init__()
        self.speaking = 0

    async def ping(self, request: Request) -> Response:
        if self.speaking:
            return JSONResponse({"status": "Unhealthy", "reason": "busy"}, status_code=503)
        return await super().ping(request)

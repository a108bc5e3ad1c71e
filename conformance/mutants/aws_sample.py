"""A server written to the AWS sample's session contract (REFERENCE.md §3), and a variant of it.

:class:`AwsSampleServer` is the unbroken tone server with only the AWS sample's frame shapes and close
behaviour, everything else (parsing, codes, ordering, audio framing, cancel, draining) as the spec says:

* ``synthesis_start`` carries only ``type`` and ``request_id`` (§5.1 requires ``sample_rate``,
  ``encoding``, ``channels``, ``voice`` and ``speed``);
* ``synthesis_complete`` carries only ``type``, ``request_id``, ``total_duration_s`` and ``elapsed_s``
  (§5.3 requires ``status`` and ``audio_bytes``);
* ``error`` carries only ``type`` and ``message`` (§5.4 requires ``code`` and ``fatal``; §9.2 names the
  request in ``request_id``); the message still starts with the code, as the sample's clients match codes
  by substring;
* after ``close`` the WebSocket handler returns without a Close frame, so uvicorn drops the connection
  (the peer sees 1006; §7.1 requires 1000).

Like the sample it offers no voice blends (version 1.1, §4.1) and lists no word timings (§14.1). The suite
must report those four defects, each on its own clauses, and nothing else: this is the server of issue 12,
which once got 139 of 157 cases FAILED for them. :class:`AwsSampleTextOnly` also reads client
messages with ``receive_text()``, as the sample's handler did: a BINARY frame raises ``KeyError('text')``
and kills the session (§3.1, §2.4). It must differ from :class:`AwsSampleServer` by the verdict of the
binary-frame case (3.1.1).
"""

from __future__ import annotations

import json
from typing import Any

from conformance.mutants.base import ToneConnection, ToneServer

__all__ = ["AwsSampleServer", "AwsSampleTextOnly"]

_KEPT: dict[str, tuple[str, ...]] = {
    "synthesis_start": ("type", "request_id"),
    "synthesis_complete": ("type", "request_id", "total_duration_s", "elapsed_s"),
    "error": ("type", "request_id", "message"),
}


def sample_shape(frame: str) -> str:
    """The control frame ``frame`` cut down to the members the AWS sample sends."""
    obj: dict[str, Any] = json.loads(frame)
    kept = _KEPT.get(obj.get("type", ""), tuple(obj))
    return json.dumps({k: obj[k] for k in kept if k in obj}, separators=(",", ":"))


class _AwsSampleConnection(ToneConnection):
    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        return [sample_shape(f) if isinstance(f, str) else f for f in frames]

    async def end(self, code: int) -> None:
        return  # the handler returns without a Close frame: uvicorn drops the connection (1006)


class AwsSampleServer(ToneServer):
    """Sends only the AWS sample's control-frame members and ends sessions without a Close frame."""

    name = "aws-sample"
    connection_class = _AwsSampleConnection
    utterances = False  # a version 1 server: the sample has no utterances (§15.1)
    word_timings: frozenset[str] = frozenset()  # its synthesis_complete has no words: it lists none (§14.1)
    voice_blends = False  # a version 1 server: a blend names no voice (its blend cases are UNIMPLEMENTED)
    lexicon = False  # a version 1 server: no pronunciation lexicons (§14.3; their cases are UNIMPLEMENTED)


class _AwsSampleTextOnlyConnection(_AwsSampleConnection):
    async def receive(self) -> bytes | str | None:
        # Starlette's receive_text() reads message["text"]: a BINARY frame raises KeyError('text').
        return await self.websocket.receive_text()


class AwsSampleTextOnly(ToneServer):
    """The AWS-sample server that also reads messages with ``receive_text()`` only (crashes on BINARY)."""

    name = "aws-sample-text-only"
    connection_class = _AwsSampleTextOnlyConnection
    voice_blends = False

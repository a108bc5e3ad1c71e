"""Shared helpers for the simulator tests: a bounded event loop and the three-sentence session."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from protocol.client_session import ClientSession
from protocol.messages import Capabilities
from protocol.server_output import (
    AudioReceived,
    CapabilitiesReceived,
    ErrorReceived,
    SynthesisCompleted,
    SynthesisStarted,
)
from sagemaker_transport.client import BidiStream, ReceivedPart, open_bidi_stream

#: REFERENCE §3's deployment check.
SENTENCES = ("Hello there.", "This is a deployment check.", "It has three sentences.")

#: Every test coroutine runs under this bound, so a hang fails the test instead of the CI job.
TEST_TIMEOUT_S = 60.0


def run[T](coroutine: Coroutine[Any, Any, T], timeout: float = TEST_TIMEOUT_S) -> T:
    """Run ``coroutine`` in a fresh event loop, failing with TimeoutError after ``timeout`` s."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


@dataclass
class Transcript:
    """What a client saw: the checked protocol events per request and the raw PayloadParts."""

    parts: list[ReceivedPart] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    audio: dict[str, bytearray] = field(default_factory=dict)
    completed: list[str] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)


async def speak(
    session: BidiStream, texts: tuple[str, ...] = SENTENCES, *, data_type: str = "BINARY"
) -> Transcript:
    """Send ``texts`` as synthesis requests then ``close``, read everything back, check it.

    The output is checked by the team's :class:`protocol.client_session.ClientSession`, which raises
    ProtocolViolation on any broken ordering or framing rule (PROTOCOL.md §3–§6). Parts are joined by
    CompletionState (§12), as a client must when the transport re-splits messages.
    """
    client = ClientSession(check_frames=False)
    transcript = Transcript()
    for text in texts:
        _, frame = client.request(text)
        await session.send(frame, data_type=data_type)
    await session.send(client.close(), data_type=data_type)
    async for part in session:
        transcript.parts.append(part)
        for event in client.receive_part(part.data, part.is_complete):
            if isinstance(event, SynthesisStarted):
                transcript.started.append(event.frame.request_id)
            elif isinstance(event, AudioReceived):
                transcript.audio.setdefault(event.request_id, bytearray()).extend(event.pcm)
            elif isinstance(event, SynthesisCompleted):
                transcript.completed.append(event.frame.request_id)
            elif isinstance(event, ErrorReceived):
                transcript.errors.append(event.frame)
    return transcript


async def describe(session: BidiStream, *, data_type: str = "BINARY") -> Capabilities:
    """Send ``describe`` (PROTOCOL.md §4.4) and read parts until its ``capabilities`` frame; the session
    stays open for more. The frame is checked by :class:`protocol.client_session.ClientSession`."""
    client = ClientSession(check_frames=False)
    await session.send(client.describe("voices"), data_type=data_type)
    while (part := await session.receive()) is not None:
        for event in client.receive_part(part.data, part.is_complete):
            if isinstance(event, CapabilitiesReceived):
                return event.frame
    raise AssertionError("the session ended before capabilities arrived")


async def speak_through(texts: tuple[str, ...] = SENTENCES, **target: Any) -> Transcript:
    """Open a session with :func:`open_bidi_stream` (``target`` = its keyword arguments) and speak."""
    target.setdefault("timeout", 30.0)
    async with open_bidi_stream("tts-endpoint", **target) as session:
        return await speak(session, texts)

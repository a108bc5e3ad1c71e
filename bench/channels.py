"""One bidirectional TTS session as the benchmarks see it: frames out, checked events in, with times.

Two ways in, both ending at the reference server's WebSocket route:

* :func:`simulator_channel`: through the SageMaker simulator with the official client
  (``aws-sdk-sagemaker-runtime-http2``, CRT transport, TLS + HTTP/2), as a deployed agent reaches an
  endpoint;
* :func:`direct_channel`: a python-websockets client straight to the server, as SageMaker's router
  reaches the container.

Every server message goes through :class:`protocol.client_session.ClientSession`, which raises
:class:`~protocol.client_session.ProtocolViolation` on any broken rule, so a benchmark never times a broken
stream. :func:`converse` sends requests, reads until the session ends and returns a
:class:`RequestTimeline` per request.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.client_session import ClientSession
from protocol.server_output import (
    AudioReceived,
    ClientEvent,
    ErrorReceived,
    SynthesisCompleted,
    SynthesisStarted,
)

__all__ = [
    "BYTES_PER_SECOND",
    "Channel",
    "RequestTimeline",
    "SessionError",
    "converse",
    "direct_channel",
    "simulator_channel",
]

BYTES_PER_SECOND = 48_000
"""PCM16 mono at 24 kHz: two bytes per sample."""

SESSION_TIMEOUT_S = 300.0
"""Longest a single send or receive may wait: a guard against hangs, far above any real wait."""


class SessionError(RuntimeError):
    """The server answered a request with an error frame, or a request did not complete."""


@dataclass
class RequestTimeline:
    """When each part of one request's answer arrived (``time.perf_counter()`` seconds).

    Attributes:
        request_id: the id the client gave it.
        text: what was asked for.
        sent_at: just before the request frame was handed to the transport.
        started_at: ``synthesis_start`` received.
        first_audio_at: the first audio bytes received.
        completed_at: ``synthesis_complete`` received.
        status: ``synthesis_complete``'s status.
        arrivals: ``(time, bytes)`` for every piece of audio, in order.
        pcm: the audio itself, when the caller asked to keep it.
    """

    request_id: str
    text: str
    sent_at: float | None = None
    started_at: float | None = None
    first_audio_at: float | None = None
    completed_at: float | None = None
    status: str | None = None
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    pcm: bytearray | None = None

    @property
    def audio_bytes(self) -> int:
        """PCM bytes received."""
        return sum(size for _, size in self.arrivals)

    @property
    def audio_s(self) -> float:
        """Seconds of audio received (24 kHz PCM16 mono)."""
        return self.audio_bytes / BYTES_PER_SECOND

    @property
    def first_audio_ms(self) -> float | None:
        """Milliseconds from sending the request to its first audio."""
        if self.sent_at is None or self.first_audio_at is None:
            return None
        return (self.first_audio_at - self.sent_at) * 1000.0

    @property
    def complete_ms(self) -> float | None:
        """Milliseconds from sending the request to its ``synthesis_complete``."""
        if self.sent_at is None or self.completed_at is None:
            return None
        return (self.completed_at - self.sent_at) * 1000.0


class Channel(abc.ABC):
    """An open session: :meth:`send` client frames, iterate :meth:`events` until the server ends it.

    Attributes:
        client: the :class:`~protocol.client_session.ClientSession` that builds requests and checks answers.
        kind: ``"simulator"`` or ``"direct"``.
    """

    kind: str

    def __init__(self, client: ClientSession) -> None:
        self.client = client

    @abc.abstractmethod
    async def send(self, frame: bytes) -> None:
        """Send one client message (a JSON object, PROTOCOL.md §4) as a TEXT frame / UTF8 part."""

    @abc.abstractmethod
    def events(self) -> AsyncIterator[list[ClientEvent]]:
        """The checked events of each server message or part, until the output ends.

        Raises:
            protocol.client_session.ProtocolViolation: the server broke a rule.
        """


class _SimulatorChannel(Channel):
    kind = "simulator"

    def __init__(self, session: Any) -> None:
        # Parts may re-split messages at any byte (§3.4), so frames are checked once reassembled.
        super().__init__(ClientSession(check_frames=False))
        self._session = session

    async def send(self, frame: bytes) -> None:
        await self._session.send(frame, data_type="UTF8")

    async def events(self) -> AsyncIterator[list[ClientEvent]]:
        async for part in self._session:
            yield self.client.receive_part(part.data, part.is_complete)


class _DirectChannel(Channel):
    kind = "direct"

    def __init__(self, connection: Any) -> None:
        super().__init__(ClientSession())
        self._connection = connection

    async def send(self, frame: bytes) -> None:
        await self._connection.send(frame.decode("utf-8"))

    async def events(self) -> AsyncIterator[list[ClientEvent]]:
        async for message in self._connection:  # ends at a normal close (1000)
            yield self.client.receive_message(message)


@contextlib.asynccontextmanager
async def simulator_channel(
    simulator: Any, endpoint_name: str = "bench", *, tcp_nodelay: bool = True
) -> AsyncIterator[Channel]:
    """A session through ``simulator`` (listening) with the official client over TLS + HTTP/2.

    ``tcp_nodelay=False`` keeps the official client's own socket settings (Nagle on, REFERENCE.md §8).
    """
    from sagemaker_transport.client import open_bidi_stream

    async with open_bidi_stream(
        endpoint_name,
        endpoint_url=simulator.endpoint_url,
        ca_file=simulator.ca_file,
        timeout=SESSION_TIMEOUT_S,
        tcp_nodelay=tcp_nodelay,
    ) as session:
        await session.opened()
        yield _SimulatorChannel(session)


@contextlib.asynccontextmanager
async def direct_channel(ws_url: str) -> AsyncIterator[Channel]:
    """A session straight to the server's WebSocket route (python-websockets, no compression)."""
    from websockets.asyncio.client import connect

    async with connect(
        ws_url, max_size=None, compression=None, open_timeout=30, close_timeout=10, ping_interval=None
    ) as connection:
        yield _DirectChannel(connection)


async def converse(
    channel: Channel,
    texts: Sequence[str],
    *,
    voice: str = "af_heart",
    keep_pcm: bool = False,
    timeout_s: float = SESSION_TIMEOUT_S,
) -> list[RequestTimeline]:
    """Send one synthesis request per text, all at once, then ``close``; read until the session ends.

    Args:
        channel: an open session (used once: it ends with ``close``).
        texts: the requests' texts, sent in order.
        voice: every request's voice.
        keep_pcm: keep each request's audio in :attr:`RequestTimeline.pcm`.
        timeout_s: guard for the whole conversation.

    Returns:
        One timeline per text, in order.

    Raises:
        SessionError: an error frame arrived, or a request never completed.
        protocol.client_session.ProtocolViolation: the server broke the protocol.
        TimeoutError: the conversation took longer than ``timeout_s``.
    """
    client = channel.client
    timelines: list[RequestTimeline] = []
    by_id: dict[str, RequestTimeline] = {}
    frames: list[bytes] = []
    for text in texts:
        request_id, frame = client.request(text, voice=voice)
        timeline = RequestTimeline(request_id, text, pcm=bytearray() if keep_pcm else None)
        timelines.append(timeline)
        by_id[request_id] = timeline
        frames.append(frame)
    errors: list[str] = []

    async def send_all() -> None:
        for timeline, frame in zip(timelines, frames, strict=True):
            timeline.sent_at = time.perf_counter()
            await channel.send(frame)
        await channel.send(client.close())

    async def receive_all() -> None:
        async for events in channel.events():
            now = time.perf_counter()
            for event in events:
                if isinstance(event, AudioReceived):
                    timeline = by_id[event.request_id]
                    if timeline.first_audio_at is None:
                        timeline.first_audio_at = now
                    timeline.arrivals.append((now, len(event.pcm)))
                    if timeline.pcm is not None:
                        timeline.pcm.extend(event.pcm)
                elif isinstance(event, SynthesisStarted):
                    by_id[event.frame.request_id].started_at = now
                elif isinstance(event, SynthesisCompleted):
                    timeline = by_id[event.frame.request_id]
                    timeline.completed_at = now
                    timeline.status = event.frame.status
                elif isinstance(event, ErrorReceived):
                    errors.append(f"{event.frame.code}: {event.frame.message}")

    async with asyncio.timeout(timeout_s):
        tasks = {asyncio.create_task(send_all()), asyncio.create_task(receive_all())}
        try:
            # Ends when both are done, or at once when either fails (a failed send must not leave the
            # reader waiting for answers that will never come).
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if (error := task.exception()) is not None:
                    raise error
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    if errors:
        raise SessionError("; ".join(errors))
    unfinished = [t.request_id for t in timelines if t.completed_at is None]
    if unfinished:
        raise SessionError(f"requests {unfinished} never completed")
    return timelines

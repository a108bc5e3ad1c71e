"""The agent's SSE events: one small sans-I/O writer that stamps ``seq`` and ``t_ms`` on each.

The agent answers ``POST /invocations`` with Server-Sent Events that ``BedrockAgentCoreApp`` frames as
``data: {json}\\n\\n`` (REFERENCE.md §5). The event types follow the AWS sample's agent (REFERENCE.md §3);
their JSON Schemas are ``spec/schemas/agent_*.schema.json`` (see :func:`schema_name`).

Every event carries:

* ``type``: one of :data:`EVENT_TYPES`;
* ``seq``: its position in the stream, counting from 0 with no gaps (``agent_start`` is 0);
* ``t_ms``: milliseconds since ``agent_start`` on a monotonic clock, never decreasing.

A successful stream reads::

    agent_start (text_delta | audio_stream_start | audio_chunk)* audio_stream_end agent_end

with ``audio_stream_start`` before every ``audio_chunk`` and no ``text_delta`` after
``audio_stream_end`` (all text is spoken before the audio stream ends). A failed stream ends with one
``error`` event instead of ``agent_end``; nothing follows either. :mod:`reference_agent.checks` holds
these rules as code.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "EVENT_TYPES",
    "TERMINAL_TYPES",
    "AgentErrorCode",
    "AgentEventWriter",
    "Segment",
    "schema_name",
]

EVENT_TYPES = (
    "agent_start",
    "text_delta",
    "audio_stream_start",
    "audio_chunk",
    "audio_stream_end",
    "agent_end",
    "error",
)
"""Every event type the agent sends, in the order they first appear in a successful stream."""

TERMINAL_TYPES = frozenset({"agent_end", "error"})
"""The event types that end a stream; exactly one of them is the last event."""

AUDIO_FORMAT = "pcm16"
"""``audio_stream_start.format``, as in the AWS sample (REFERENCE.md §3): raw PCM16LE mono."""


class AgentErrorCode(StrEnum):
    """``error.code`` values of the agent stream: which leg failed."""

    TTS_UNAVAILABLE = "tts_unavailable"
    """The TTS endpoint could not be reached (connection refused, TLS failure, HTTP error, timeout)."""
    TTS_ERROR = "tts_error"
    """The TTS stream failed once open: ``ModelStreamError``, ``InternalStreamFailure``, an ``error``
    frame, a protocol violation, or the stream ending with requests unanswered."""
    LLM_ERROR = "llm_error"
    """The language model failed (Bedrock error, throttling, a model provider exception)."""
    TIMEOUT = "timeout"
    """A leg made no progress within the agent's time limit."""
    INTERNAL_ERROR = "internal_error"
    """A bug in the agent itself."""


def schema_name(event_type: str) -> str:
    """The :mod:`protocol.schemas` name of an event type's schema.

    ``agent_start`` → ``agent_start``, ``agent_end`` → ``agent_end``, anything else ``X`` →
    ``agent_X`` (``text_delta`` → ``agent_text_delta``), so every agent schema file starts with
    ``agent_``.
    """
    return event_type if event_type.startswith("agent_") else f"agent_{event_type}"


@dataclass(frozen=True, slots=True)
class Segment:
    """One TTS synthesis request of a reply: the text sent and the audio bytes its answer reported.

    Attributes:
        words: the answer's word timings (seconds from the segment's first sample, PROTOCOL.md §5.3),
            each with its span of the *reply* (the ``text_delta`` texts joined, in code points) where
            the TTS gave spans of the text sent (§14.4, ``text_spans``); ``None`` when it gave no words.
    """

    text: str
    audio_bytes: int
    words: tuple[dict[str, Any], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"text", "audio_bytes"}`` as carried in ``audio_stream_end.segments``, with ``words`` when
        the TTS gave word timings."""
        out: dict[str, Any] = {"text": self.text, "audio_bytes": self.audio_bytes}
        if self.words is not None:
            out["words"] = list(self.words)
        return out


class AgentEventWriter:
    """Builds the events of one agent stream in order, stamping ``seq`` and ``t_ms``.

    Each method returns the next event as a JSON-ready dict; the caller sends them in the order they
    were built. The writer does no I/O. It also totals the audio it framed, so ``audio_stream_end``
    always agrees with the ``audio_chunk`` events before it.

    Args:
        request_id: the invocation's id, echoed in ``agent_start``.
        mode: ``"bidi"``, ``"stream"`` or ``"batch"``.
        clock: monotonic seconds; injectable for tests.
    """

    def __init__(self, request_id: str, mode: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.request_id = request_id
        self.mode = mode
        self._clock = clock
        self._t0: float | None = None
        self._seq = 0
        self.sample_rate: int | None = None
        self.total_chunks = 0
        self.audio_bytes = 0
        self.first_audio_ms: float | None = None
        """``t_ms`` of the first ``audio_chunk``, or ``None`` before it."""
        self.finished = False
        """``True`` once a terminal event (``agent_end`` or ``error``) was built."""

    def _event(self, type_: str, **fields: Any) -> dict[str, Any]:
        if self.finished:
            raise RuntimeError(f"{type_} after the stream ended")
        now = self._clock()
        if self._t0 is None:
            if type_ != "agent_start":
                raise RuntimeError(f"{type_} before agent_start")
            self._t0 = now
        elif type_ == "agent_start":
            raise RuntimeError("agent_start twice")
        # Rounded to microseconds: enough resolution, and rounding keeps the values non-decreasing.
        t_ms = round(max(0.0, now - self._t0) * 1000.0, 3)
        event = {"type": type_, "seq": self._seq, "t_ms": t_ms, **fields}
        self._seq += 1
        if type_ in TERMINAL_TYPES:
            self.finished = True
        return event

    def start(self, session_id: str | None = None) -> dict[str, Any]:
        """``agent_start {request_id, mode, session_id}``: always the first event (``seq`` 0, ``t_ms`` 0)."""
        return self._event("agent_start", request_id=self.request_id, mode=self.mode, session_id=session_id)

    def text_delta(self, text: str) -> dict[str, Any]:
        """``text_delta {text}``: a piece of the reply as the model wrote it (never empty)."""
        if not text:
            raise ValueError("text_delta must carry text")
        return self._event("text_delta", text=text)

    def audio_stream_start(self, *, voice: str, sample_rate: int) -> dict[str, Any]:
        """``audio_stream_start {format: "pcm16", encoding, channels, sample_rate, voice}``.

        Sent once the TTS session is open, before any ``audio_chunk``.
        """
        self.sample_rate = sample_rate
        return self._event(
            "audio_stream_start",
            format=AUDIO_FORMAT,
            encoding="pcm_s16le",
            channels=1,
            sample_rate=sample_rate,
            voice=voice,
        )

    def audio_chunk(self, pcm: bytes) -> dict[str, Any]:
        """``audio_chunk {data}``: whole PCM16LE samples, standard padded base64 (RFC 4648 §4).

        Raises:
            ValueError: ``pcm`` is empty or not whole samples.
            RuntimeError: no ``audio_stream_start`` was built.
        """
        if self.sample_rate is None:
            raise RuntimeError("audio_chunk before audio_stream_start")
        if not pcm or len(pcm) % 2:
            raise ValueError(f"audio_chunk needs whole PCM16 samples, got {len(pcm)} bytes")
        event = self._event("audio_chunk", data=base64.b64encode(pcm).decode("ascii"))
        if self.first_audio_ms is None:
            self.first_audio_ms = event["t_ms"]
        self.total_chunks += 1
        self.audio_bytes += len(pcm)
        return event

    def audio_stream_end(self, segments: Sequence[Segment]) -> dict[str, Any]:
        """``audio_stream_end {total_chunks, audio_bytes, duration_s, segments}``.

        ``segments`` lists the TTS requests of the reply in order; a conforming stream's segment texts
        hold every word of the reply, and their ``audio_bytes`` sum to ``audio_bytes``.
        """
        if self.sample_rate is None:
            raise RuntimeError("audio_stream_end before audio_stream_start")
        return self._event(
            "audio_stream_end",
            total_chunks=self.total_chunks,
            audio_bytes=self.audio_bytes,
            duration_s=round(self.audio_bytes / 2 / self.sample_rate, 6),
            segments=[segment.to_json() for segment in segments],
        )

    def end(self, *, interrupted: bool = False) -> dict[str, Any]:
        """``agent_end {first_audio_ms}``: the last event of a successful stream; ``interrupted: true`` when
        a barge-in stopped the reply (:meth:`reference_agent.conversation.Conversation.barge_in`)."""
        if interrupted:
            return self._event("agent_end", first_audio_ms=self.first_audio_ms, interrupted=True)
        return self._event("agent_end", first_audio_ms=self.first_audio_ms)

    def error(self, code: AgentErrorCode | str, message: str) -> dict[str, Any]:
        """``error {code, message}``: the last event of a failed stream."""
        return self._event("error", code=str(code), message=message)

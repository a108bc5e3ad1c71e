"""Mutants that break how audio is produced and sent: each a defect real servers have shipped.

Each is :class:`~conformance.mutants.base.ToneServer` with one behaviour broken (issue 12, item 4);
:data:`conformance.mutants.MUTANTS` names the cases that must catch each.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from typing import Any

import numpy as np

from conformance.mutants.base import ToneConnection, ToneServer, ToneSynthesizer
from protocol.frames import cut_audio_frames
from protocol.messages import SynthesisRequest
from reference_server.driver import AudioPiece, Job

__all__ = [
    "BigFrames",
    "CancelThenStream",
    "LateCancel",
    "SegmentFrames",
    "WholeTextFirst",
    "WrapsAround",
]


class _LateCancelConnection(ToneConnection):
    """Holds a cancel while a request is pending, and lets the session see it only once the active request's
    audio is all queued."""

    held: list[bytes | str]

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is not None and _is_cancel(data) and self.session.pending_ids:
                self.held = [*getattr(self, "held", []), data]
                continue
            return data

    def before_complete(self, job: Job) -> None:
        # The whole request was synthesized and streamed; only now is the cancel acted on, so the request
        # still ends "cancelled", with audio_bytes counting every frame sent.
        for data in getattr(self, "held", []):
            self.act(self.session.receive_frame(data))
        self.held = []


def _is_cancel(data: bytes | str) -> bool:
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "cancel"


class LateCancel(ToneServer):
    """Acknowledges a cancel of the active request (status cancelled, correct audio_bytes) but synthesizes
    and streams the whole request anyway (§4.2)."""

    name = "late-cancel"
    connection_class = _LateCancelConnection


class _CancelThenStreamConnection(ToneConnection):
    """Answers a cancel of the active request at once with its ``synthesis_complete`` (status cancelled,
    the audio sent so far), then goes on synthesizing that request and sends the rest of its audio anyway,
    in frames outside any bracket, before the next request's ``synthesis_start``.

    Hooks only: :meth:`on_cancelled` starts the stray synthesis of the segments not yet queued
    (:meth:`on_audio_queued` counts them); :meth:`outgoing` lets the session's frames out up to that
    request's ``synthesis_complete``, then the stray audio, and holds the session's later frames until the
    stray audio is all out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queued: dict[str, int] = {}  # segments of each request whose audio was queued
        self.stray: list[bytes | str] = []
        self.streaming: str | None = None  # the cancelled request whose audio goes on
        self.completed = False  # its synthesis_complete went out
        self.held: list[bytes | str] = []

    def on_audio_queued(self, job: Job, piece: AudioPiece) -> None:
        self.queued[job.request_id] = self.queued.get(job.request_id, 0) + 1

    def on_cancelled(self, job: Job, started: bool) -> None:
        if not started or job.utterance or self.streaming is not None:
            return  # an utterance, or a queued request, is cancelled as the base server does
        self.streaming, self.completed = job.request_id, False
        asyncio.get_running_loop().create_task(self._stream_rest(job.request))

    async def _stream_rest(self, request: SynthesisRequest) -> None:
        synth = self.server.synth
        segments = synth.segments(request.text)[self.queued.get(request.request_id or "", 0) :]
        for segment in segments:
            pcm = synth.render(segment, request.voice, request.speed, request.sample_rate)
            await self.work(synth.work_s(pcm, request.sample_rate))
            # The bracket is closed; the audio is sent all the same.
            self.stray += cut_audio_frames(pcm, self.session.limits.max_audio_frame_bytes)
            self.kick()
        self.streaming = None
        self.kick()

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        for frame in frames:
            if self.completed:
                self.held.append(frame)  # after the stray audio
                continue
            out.append(frame)
            obj = _control(frame)
            if self.streaming and obj.get("type") == "synthesis_complete":
                self.completed = obj.get("request_id") == self.streaming
        if self.completed or self.streaming is None:
            out += self.stray
            self.stray = []
        if self.streaming is None and not self.stray:
            out += self.held
            self.held, self.completed = [], False
        return out

    def should_close(self) -> bool:
        # After close, a request answered early is still streamed to its end before the Close frame.
        return super().should_close() and self.streaming is None and not self.stray and not self.held


def _control(frame: bytes | str) -> dict[str, Any]:
    if not isinstance(frame, str):
        return {}
    obj = json.loads(frame)
    return obj if isinstance(obj, dict) else {}


class CancelThenStream(ToneServer):
    """Answers a cancel of the active request at once with ``synthesis_complete``, then keeps streaming that
    request's audio outside any bracket (§4.2, §6.1)."""

    name = "cancel-then-stream"
    connection_class = _CancelThenStreamConnection


class WholeTextFirst(ToneServer):
    """Synthesizes a request's whole text before sending its first audio frame (§10.1)."""

    name = "whole-text"
    whole_text_first = True


class _SegmentFramesConnection(ToneConnection):
    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        for frame in frames:
            if isinstance(frame, bytes) and out and isinstance(out[-1], bytes):
                out[-1] += frame  # the segment's frames joined again: one frame per segment
            else:
                out.append(frame)
        return out


class SegmentFrames(ToneServer):
    """Sends each synthesized segment as one audio frame, whatever its length: over 1 MiB for a long
    segment at speed 1 (§3.3.1), as the AWS sample does."""

    name = "segment-frames"
    connection_class = _SegmentFramesConnection


class BigFrames(ToneServer):
    """Cuts audio into 64 KiB frames, twice the recommended max_audio_frame_bytes (§3.3.1, §10)."""

    name = "big-frames"

    def __init__(self) -> None:
        super().__init__()
        self.limits = replace(self.limits, max_audio_frame_bytes=65_536)


class _LoudWrappingSynthesizer(ToneSynthesizer):
    def render(self, segment: str, voice: str, speed: float, sample_rate: int) -> bytes:
        if "!" not in segment:
            return super().render(segment, voice, speed, sample_rate)
        n = max(2, round(self.seconds(segment, voice, speed) * sample_rate))
        t = np.arange(n) / sample_rate
        envelope = np.minimum(1.0, np.minimum(t, t[::-1]) * 40.0)
        wave = 1.3 * np.sin(2 * math.pi * 220.0 * t) * envelope  # shouting: beyond full scale
        # float -> int16 by scaling and casting, without clipping: 1.3 * 32768 wraps to a negative sample.
        return (wave * 32768).astype(np.int64).astype("<i2").tobytes()


class WrapsAround(ToneServer):
    """Converts loud float audio to int16 without clipping, so samples beyond full scale wrap around
    (§3.3.1)."""

    name = "wrap"

    def __init__(self) -> None:
        super().__init__()
        self.synth = _LoudWrappingSynthesizer()

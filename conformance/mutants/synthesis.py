"""Mutants that break how audio is produced and sent: each a defect real servers have shipped.

Each is :class:`~conformance.mutants.base.ToneServer` with one behaviour broken (issue 12, item 4);
:data:`conformance.mutants.MUTANTS` names the cases that must catch each.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import numpy as np

from conformance.mutants.base import ToneConnection, ToneServer, ToneSynthesizer
from protocol.frames import cut_audio_frames
from protocol.messages import SynthesisRequest
from protocol.server_session import RequestCancelled, ServerEvent, SessionStateError

__all__ = [
    "BigFrames",
    "CancelThenStream",
    "LateCancel",
    "SegmentFrames",
    "WholeTextFirst",
    "WrapsAround",
]


class _LateCancelConnection(ToneConnection):
    """Holds a cancel until the active request's audio is all queued, then lets the session see it."""

    held: list[bytes | str]

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is not None and _is_cancel(data) and self.session.pending_ids:
                self.held = [*getattr(self, "held", []), data]
                continue
            return data

    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[bytes]:
        async for pcm in super().synthesize(request):
            yield pcm
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
    in frames outside any bracket, before the next request's ``synthesis_start``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.active: str | None = None
        self.answered_early: set[str] = set()
        self.stray: list[bytes | str] = []

    def act(self, events: list[ServerEvent]) -> None:
        super().act(events)
        active = self.active
        for event in events:
            if not isinstance(event, RequestCancelled) or event.request_id != active or active is None:
                continue
            if active in self.answered_early or active in self.utterances:
                continue  # an utterance is cancelled as the base server does
            try:
                self.session.complete(active)  # at once, while its synthesis goes on
            except SessionStateError:
                continue
            self.answered_early.add(active)
            self.kick()

    def mark(self, request: SynthesisRequest, segment: str, pcm: bytes) -> None:
        if request.request_id not in self.answered_early:  # no bracket left to mark
            super().mark(request, segment, pcm)

    async def work(self) -> None:
        session = self.session
        while True:
            request = session.next_request()
            if request is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            request_id = request.request_id
            assert request_id is not None
            if session.start(request_id):
                self.active = request_id
                self._deadline_moved.set()
                self.kick()
                async for pcm in self.synthesize(request):
                    if request_id in self.answered_early:
                        # The bracket is closed; the audio is sent all the same.
                        self.stray += cut_audio_frames(pcm, session.limits.max_audio_frame_bytes)
                    elif not session.audio(request_id, pcm):
                        break  # cancelled while it could not be answered at once (an utterance)
                    self.sent(request_id)
                    self.kick()
                self.active = None
                while self.stray:  # out before the next bracket opens
                    self.kick()
                    await asyncio.sleep(0.005)
                if request_id not in self.answered_early:
                    session.complete(request_id, self.complete_words(request))
                self.after_complete(request_id)
            self.words.pop(request_id, None)
            self.segment_words.pop(request_id, None)
            self.spoken_s.pop(request_id, None)
            self.utterances.pop(request_id, None)
            self.kick()

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        stray, self.stray = self.stray, []
        return [*frames, *stray]

    def should_close(self) -> bool:
        # After close, a request answered early is still streamed to its end before the Close frame.
        return super().should_close() and self.active is None and not self.stray


class CancelThenStream(ToneServer):
    """Answers a cancel of the active request at once with ``synthesis_complete``, then keeps streaming that
    request's audio outside any bracket (§4.2, §6.1)."""

    name = "cancel-then-stream"
    connection_class = _CancelThenStreamConnection


class _WholeTextFirstConnection(ToneConnection):
    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[bytes]:
        synth = self.server.synth
        texts = synth.segments(request.text)
        segments = [synth.render(s, request.voice, request.speed, request.sample_rate) for s in texts]
        # Every segment is synthesized before the first byte leaves.
        await asyncio.sleep(sum(synth.work_s(p, request.sample_rate) for p in segments))
        for text, pcm in zip(texts, segments, strict=True):
            self.mark(request, text, pcm)
            yield pcm


class WholeTextFirst(ToneServer):
    """Synthesizes a request's whole text before sending its first audio frame (§10.1)."""

    name = "whole-text"
    connection_class = _WholeTextFirstConnection


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

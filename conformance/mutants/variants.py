"""The mutants: each is :class:`~conformance.mutants.base.ToneServer` with one behaviour broken.

Each breaks a rule real servers have broken (the first is the AWS sample's own ``KeyError('text')``,
REFERENCE.md §1); :data:`conformance.mutants.MUTANTS` lists, for each, the case ids that must catch it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from starlette.websockets import WebSocket

from conformance.mutants.base import ToneConnection, ToneServer, ToneUtterance
from protocol.frames import cut_audio_frames
from protocol.messages import SynthesisComplete, SynthesisRequest, SynthesisStart
from reference_server.driver import AudioPiece, Job

__all__ = [
    "BlockingSynthesis",
    "CancelIgnoresUtterance",
    "CloseDropsUtterance",
    "ClosesAfterFirstRequest",
    "ClosesOnBadMessage",
    "ClosesWithoutDraining",
    "FlushEndsUtterance",
    "FragmentSegments",
    "IgnoresClose",
    "IgnoresFlush",
    "InterleavesRequests",
    "JsonObjectAudioFrame",
    "NoIdleTimeout",
    "OddAudioFrames",
    "RefusalWithoutMessageType",
    "TextOnlyReceive",
    "WaitsForEnd",
    "WithoutCancel",
    "WithoutUtterances",
    "WrongSampleRate",
]


class _TextOnlyConnection(ToneConnection):
    async def receive(self) -> bytes | str | None:
        # Starlette's receive_text() reads message["text"]: a BINARY frame raises KeyError('text').
        return await self.websocket.receive_text()


class TextOnlyReceive(ToneServer):
    """Reads client messages with ``receive_text()`` only: a BINARY frame kills the session (§3.1)."""

    name = "text-only"
    connection_class = _TextOnlyConnection


class _CloseAfterFirstConnection(ToneConnection):
    def should_close(self) -> bool:
        return self.answered >= 1 or super().should_close()


class ClosesAfterFirstRequest(ToneServer):
    """Closes the WebSocket once the first request is answered, as one-shot handlers do (§7)."""

    name = "close-after-first"
    connection_class = _CloseAfterFirstConnection


class _OddFramesConnection(ToneConnection):
    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        audio = b""
        for frame in [*frames, ""]:
            if isinstance(frame, bytes):
                audio += frame
                continue
            # Cut the audio gathered so far at 1001-byte steps: every frame but the last is half a sample off.
            out += [audio[i : i + 1001] for i in range(0, len(audio), 1001)]
            audio = b""
            if frame:
                out.append(frame)
        return out


class OddAudioFrames(ToneServer):
    """Cuts audio into frames of odd length, splitting samples across frames (§3.3.1)."""

    name = "odd-frames"
    connection_class = _OddFramesConnection


class _JsonFrameConnection(ToneConnection):
    opened = False  # a synthesis_start went out and its first audio frame did not yet

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        for frame in frames:
            if isinstance(frame, str):
                self.opened = '"synthesis_start"' in frame
            elif self.opened and len(frame) > 2:
                # The first sample of each request becomes 32123, the bytes "{}", sent as a frame of its own.
                out += [b"{}", frame[2:]]
                self.opened = False
                continue
            out.append(frame)
        return out


class JsonObjectAudioFrame(ToneServer):
    """Sends an audio frame that is exactly ``{}`` (the sample 32123), a valid JSON object (§3.3.2)."""

    name = "json-frame"
    connection_class = _JsonFrameConnection


class BlockingSynthesis(ToneServer):
    """Synthesizes on the event loop, so pings go unanswered while it works (§8, §2.2, §2.3)."""

    name = "blocking"
    whole_text_first = True
    blocking_work = True  # the whole request is synthesized on the event loop: nothing is served meanwhile


class _IgnoresCloseConnection(ToneConnection):
    def on_close_requested(self) -> None:
        self.closing = False  # answers what was queued, then keeps the session open


class IgnoresClose(ToneServer):
    """Never closes the session after ``close`` (§7.1): the client waits forever."""

    name = "ignores-close"
    connection_class = _IgnoresCloseConnection


class _NoDrainConnection(ToneConnection):
    dropped = False

    def on_close_requested(self) -> None:
        self.dropped = True

    def should_close(self) -> bool:
        return self.dropped or super().should_close()


class ClosesWithoutDraining(ToneServer):
    """Closes at once on ``close``, dropping the queued requests (§7.1)."""

    name = "no-drain"
    connection_class = _NoDrainConnection


class _InterleaveConnection(ToneConnection):
    def __init__(self, server: ToneServer, websocket: WebSocket) -> None:
        super().__init__(server, websocket)
        self._extra: list[bytes | str] = []
        self._unanswered = 0
        self._close_requested = False

    def on_accepted(self, job: Job) -> None:
        super().on_accepted(job)  # an utterance's text is gathered as the base server gathers it
        # Every request is answered at once, on its own task: brackets overlap and audio interleaves.
        self._unanswered += 1
        asyncio.get_running_loop().create_task(self._answer(job.request))

    async def _feed(self) -> None:
        # The answers bypass the session's queue (no marks: the session only marks its started head
        # request): the driver's feeder and synthesizer get nothing to do.
        await asyncio.Event().wait()

    def open_audio(self, job: Job) -> AsyncIterator[AudioPiece]:
        return _nothing()

    def on_close_requested(self) -> None:
        self._close_requested = True

    def should_close(self) -> bool:
        # The session's own queue never drains (the answers bypass it): close once every request is
        # answered after close, as §7.1 asks, so the defect is the interleaving only.
        return self._close_requested and not self._unanswered and not self._extra

    async def _answer(self, request: SynthesisRequest) -> None:
        request_id = request.request_id or "r0"
        start = SynthesisStart(
            request_id=request_id, sample_rate=request.sample_rate, voice=request.voice, speed=request.speed
        )
        self._extra.append(start.to_json())
        self.kick()
        sent = 0
        started = time.monotonic()
        async for piece in self.synthesize(request):
            for frame in cut_audio_frames(piece.pcm, 4096):
                sent += len(frame)
                self._extra.append(frame)
                self.kick()
                await asyncio.sleep(0)
        complete = SynthesisComplete(
            request_id=request_id,
            status="completed",
            audio_bytes=sent,
            total_duration_s=sent / 2 / request.sample_rate,
            elapsed_s=time.monotonic() - started,
        )
        self._extra.append(complete.to_json())
        self._unanswered -= 1
        self.kick()

    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        extra, self._extra = self._extra, []
        return frames + extra


async def _nothing() -> AsyncIterator[AudioPiece]:
    return
    yield


class InterleavesRequests(ToneServer):
    """Answers every request at once, so two requests' brackets and audio interleave (§6.2)."""

    name = "interleave"
    connection_class = _InterleaveConnection


class _ClosesOnBadConnection(ToneConnection):
    refused = False

    def on_refused(self) -> None:
        self.refused = True
        self.kick()

    def should_close(self) -> bool:
        return self.refused or super().should_close()

    def closing_code(self) -> int:
        # 1008 Policy Violation (RFC 6455 §7.4.1): what such servers typically send.
        return 1008 if self.refused else super().closing_code()


class ClosesOnBadMessage(ToneServer):
    """Answers a bad message with its error frame, then closes the session (1008) instead of going on
    (§6.3)."""

    name = "close-on-bad"
    connection_class = _ClosesOnBadConnection


class _WrongRateConnection(ToneConnection):
    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[AudioPiece]:
        synth = self.server.synth
        for segment in synth.segments(request.text):
            # Always the model's rate: synthesis_start still declares the requested one.
            pcm = synth.render(segment, request.voice, request.speed, 24000)
            await self.work(synth.work_s(pcm, 24000))
            yield self.piece(request, segment, pcm)


class WrongSampleRate(ToneServer):
    """Declares the requested sample_rate but always sends 24 kHz audio (§4.1, §5.1)."""

    name = "wrong-rate"
    connection_class = _WrongRateConnection


class _NoCancelConnection(ToneConnection):
    async def receive(self) -> bytes | str | None:
        data = await super().receive()
        if data is not None and _is_cancel(data):
            # Renamed so the session refuses it with unknown_type, exactly as §1.5 requires of a
            # server without the OPTIONAL cancel feature.
            return '{"type": "cancel-not-offered"}'
        return data


def _is_cancel(data: bytes | str) -> bool:
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "cancel"


class WithoutCancel(ToneServer):
    """Does not offer the OPTIONAL cancel feature: refuses cancel with unknown_type (§1.5, §4.2).

    Not broken: its cancel cases must be UNIMPLEMENTED, never FAILED, and everything else OK.
    """

    name = "no-cancel"
    connection_class = _NoCancelConnection


# --- utterances (PROTOCOL.md §15) -------------------------------------------------------------------------


class WithoutUtterances(ToneServer):
    """Does not offer the OPTIONAL utterances: refuses their four messages with unknown_type (§15.1).

    Not broken: a version 1 server. Its utterance cases must be UNIMPLEMENTED, never FAILED.
    """

    name = "no-utterances"
    utterances = False


class _FragmentSegmentsConnection(ToneConnection):
    def on_text(self, job: Job, text: str) -> None:
        job.state.take([text])  # every fragment its own segment: the speech depends on the split


class FragmentSegments(ToneServer):
    """Speaks each utterance fragment as its own segment, so the audio depends on how the text was split
    (§15.3 fragmentation invariance)."""

    name = "fragment-segments"
    connection_class = _FragmentSegmentsConnection


class _IgnoresFlushConnection(ToneConnection):
    def on_flush(self, job: Job) -> None:
        pass  # held text waits for a sentence end or `end`


class IgnoresFlush(ToneServer):
    """Ignores flush: an unfinished sentence is spoken only at end (§15.3)."""

    name = "ignores-flush"
    connection_class = _IgnoresFlushConnection


class _CancelIgnoresUtteranceConnection(ToneConnection):
    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is None or not _cancels_an_utterance(data, self.utterances):
                return data
            # Dropped unanswered: the utterance goes on as if no cancel had come.


def _cancels_an_utterance(data: bytes | str, utterances: dict[str, ToneUtterance]) -> bool:
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "cancel" and obj.get("request_id") in utterances


class CancelIgnoresUtterance(ToneServer):
    """Drops a cancel that names an utterance: it is spoken to the end (§15.5, §4.2)."""

    name = "cancel-ignores-utterance"
    connection_class = _CancelIgnoresUtteranceConnection


class _CloseDropsUtteranceConnection(ToneConnection):
    def on_utterance_end(self, job: Job, reason: str) -> None:
        utterance: ToneUtterance = job.state
        if reason == "close":
            utterance.ready.clear()  # what it held is dropped instead of spoken
            utterance.ended = True
            utterance.changed.set()
            return
        super().on_utterance_end(job, reason)


class CloseDropsUtterance(ToneServer):
    """On close, drops the text an open utterance holds instead of speaking it (§15.5)."""

    name = "close-drops-open"
    connection_class = _CloseDropsUtteranceConnection


class _NoMessageTypeConnection(ToneConnection):
    def outgoing(self, frames: list[bytes | str]) -> list[bytes | str]:
        out: list[bytes | str] = []
        for frame in frames:
            if isinstance(frame, str) and '"message_type"' in frame:
                obj = json.loads(frame)
                obj.pop("message_type", None)
                frame = json.dumps(obj, separators=(",", ":"))
            out.append(frame)
        return out


class RefusalWithoutMessageType(ToneServer):
    """Refuses utterance messages without message_type: a refused fragment cannot be told from a refused
    utterance (§15.6, §5.4)."""

    name = "no-message-type"
    connection_class = _NoMessageTypeConnection


class _FlushEndsUtteranceConnection(ToneConnection):
    def on_flush(self, job: Job) -> None:
        # Reads flush as the end of the utterance (as an empty text ends an ElevenLabs stream): the
        # utterance is closed in the session, so its later fragments are refused.
        self.act(self.session.receive_frame(json.dumps({"type": "end", "request_id": job.request_id})))


class FlushEndsUtterance(ToneServer):
    """Takes flush for end: the utterance completes at its first flush and its later text is refused
    (§15.4, §15.3)."""

    name = "flush-ends-utterance"
    connection_class = _FlushEndsUtteranceConnection


class _WaitsForEndConnection(ToneConnection):
    def __init__(self, server: ToneServer, websocket: WebSocket) -> None:
        super().__init__(server, websocket)
        self._held: dict[str, str] = {}

    def on_text(self, job: Job, text: str) -> None:
        self._held[job.request_id] = self._held.get(job.request_id, "") + text  # nothing spoken yet

    def _release(self, job: Job) -> None:
        utterance: ToneUtterance = job.state
        utterance.take(utterance.chunker.feed(self._held.pop(job.request_id, "")))

    def on_flush(self, job: Job) -> None:
        self._release(job)
        super().on_flush(job)

    def on_utterance_end(self, job: Job, reason: str) -> None:
        self._release(job)
        super().on_utterance_end(job, reason)


class WaitsForEnd(ToneServer):
    """Speaks an utterance only once it has ended (or been flushed): no speech while the text is being
    written (§15.3)."""

    name = "waits-for-end"
    connection_class = _WaitsForEndConnection


class _NoIdleTimeoutConnection(ToneConnection):
    async def watch_idle(self) -> None:
        await asyncio.Event().wait()  # never ends an idle utterance


class NoIdleTimeout(ToneServer):
    """Never ends an idle utterance: an open utterance holds the session's queue forever (§15.5)."""

    name = "no-idle-timeout"
    connection_class = _NoIdleTimeoutConnection

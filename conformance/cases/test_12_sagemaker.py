"""§12.3 the bidirectional stream behind SageMaker: output re-split into PayloadParts, faults, and §3.4 the
classification rule under arbitrary split points (property-based)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from aws_sdk_sagemaker_runtime_http2.models import ModelStreamError
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conformance.engine import deadline, expect
from conformance.engine.bodies import decode_sse
from conformance.engine.case import Case, Level, case, param
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import PIPELINED
from conformance.engine.stream import Answer
from conformance.engine.texts import FAST, SENTENCES, SHORT
from protocol.reader import StreamReader
from protocol.server_output import AudioReceived, SynthesisCompleted, SynthesisStarted
from simulator import FaultPlan, SplitPolicy

BIDI_SPLITS = ("fixed:7", "random:1-4000", "byte", "misaligned")

_FUZZ = settings(
    max_examples=50,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize(
    "policy",
    [
        param(
            policy,
            Case(
                f"12.3.{n}",
                "§12.3",
                Level.MUST,
                "clients reassemble by `CompletionState` and classify by content (§3.4)",
                f"a session with one request (8 kHz) with the simulator re-splitting every container message "
                "with "
                f"policy {policy}",
                "the messages, reassembled by CompletionState, are whole messages (whole samples per audio "
                "message, brackets, audio_bytes as observed) and the request completes with plausible speech",
                requirements=("R3.3.1-1", "R3.3.2-1", "R6.1-1a", "R6.1-1b", "R5.3-2"),
            ),
        )
        for n, policy in enumerate(BIDI_SPLITS, 1)
    ],
)
def test_bidi_output_under_split_policy(conf: Probe, policy: str) -> None:
    # One short request at 8 kHz: the byte policy turns each of its bytes into an event the client decodes.
    async def scenario() -> Answer:
        async with conf.session(f"split-{policy}") as s:
            answer = await s.answer(await s.request(SHORT, speed=FAST, sample_rate=8000))
            await s.close()
            await s.drain()
            conf.observe(messages=len(s.messages), parts=sum(m.parts for m in s.messages))
            return answer

    # The session ends with the case's deadline: a server that answers megabytes must not keep the simulator
    # splitting them byte by byte after the case is over.
    with conf.configure(split=SplitPolicy.parse(policy), seed=7, max_session_s=deadline.remaining() + 1.0):
        expect.spoken(conf.run(scenario()), SHORT, speed=FAST)


@case(
    "12.5.2",
    "§12.5",
    Level.MUST,
    requirement="`ModelStreamError`, raised by the official client from `receive()`",
    description="a session with one request while the simulator breaks the output stream after 2,000 bytes "
    "(fault model_stream_error@2000)",
    expectation="the official client raises ModelStreamError from receive() after exactly 2,000 payload "
    "bytes",
)
def test_bidi_fault_mid_stream(conf: Probe) -> None:
    conf.require_simulator("inject a mid-stream fault")
    received: list[int] = []

    async def scenario() -> None:
        async with conf.session("fault", stream_errors="raise") as s:
            await s.request(SENTENCES[0], speed=FAST)
            try:
                await s.drain()
            finally:
                received.append(sum(len(m.data) for m in s.messages))

    with conf.configure(faults=FaultPlan.parse(["model_stream_error@2000"])), pytest.raises(ModelStreamError):
        conf.run(scenario())
    # Whole messages only: bytes of a message cut by the fault arrive as PARTIAL parts, never COMPLETE.
    conf.observe(bytes_in_whole_messages=received[0])
    assert received[0] <= 2000, f"{received[0]} bytes arrived before the fault"


# --- §3.4 under arbitrary split points --------------------------------------------------------------------


def _events(parts: list[tuple[bytes, bool]]) -> list[tuple[str, Any]]:
    """What a client makes of the parts: joined by CompletionState, read by the lenient reader."""
    reader = StreamReader(check_frames=False)
    for request in PIPELINED:
        reader.expect(request.request_id)
    out: list[tuple[str, Any]] = []
    audio: dict[str | None, bytearray] = {}
    pending = bytearray()
    for data, complete in parts:
        pending += data
        if not complete:
            continue
        message, pending = bytes(pending), bytearray()
        for event in reader.receive_message(message).events:
            if isinstance(event, SynthesisStarted):
                out.append(("start", event.request_id))
            elif isinstance(event, AudioReceived):
                audio.setdefault(event.request_id, bytearray()).extend(event.pcm)
            elif isinstance(event, SynthesisCompleted):
                out.append(("complete", event.request_id, bytes(audio.get(event.request_id, b""))))
    return out


@case(
    "3.4.F1",
    "§3.4",
    Level.MUST,
    requirements=(
        "R3.3.2-1",
        "R3.3.1-1",
    ),
    requirement="A transport may split a message at any byte (§12.2, §12.3), so a client MUST carry an odd "
    "trailing byte over to the next audio message rather than assume each message holds whole samples.",
    description="property-based (hypothesis, derandomized, 50 examples): cut every message of the pipelined "
    "session at random points into PayloadParts (PARTIAL ... COMPLETE) and feed them to the strict client",
    expectation="every split gives the same brackets and the same audio, byte for byte, as the unsplit "
    "session",
)
def test_bidi_output_classifies_the_same_under_any_split(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    messages = [m.data for m in pipelined.messages]
    assert messages, f"the pipelined session recorded nothing ({pipelined.error or 'no error'})"
    reference = _events([(m, True) for m in messages])
    assert reference, "the pipelined session has no bracket"

    @_FUZZ
    @given(
        st.lists(st.lists(st.integers(0, 2**16), max_size=6), min_size=len(messages), max_size=len(messages))
    )
    def check(cuts: list[list[int]]) -> None:
        parts: list[tuple[bytes, bool]] = []
        for data, points in zip(messages, cuts, strict=True):
            bounds = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
            pieces = [data[a:b] for a, b in itertools.pairwise(bounds)] or [b""]
            parts += [(piece, i == len(pieces) - 1) for i, piece in enumerate(pieces)]
        assert _events(parts) == reference

    check()


@case(
    "12.2.F1",
    "§12.2",
    Level.MUST,
    requirements=("R11.4-5",),
    requirement="one PayloadPart may hold part of an event or several events, so a client buffers bytes and "
    "cuts at blank lines, never parsing a PayloadPart as one event",
    description="property-based (hypothesis, derandomized, 50 examples): cut one recorded SSE body "
    "(transport sse, format pcm) at random points and decode it part by part",
    expectation="every split decodes to the same events and the same audio as the whole body",
)
def test_sse_body_decodes_the_same_under_any_split(conf: Probe) -> None:
    def call() -> bytes:
        response = conf.runtime().invoke_endpoint_with_response_stream(
            EndpointName=conf.target.endpoint_name,
            Body=json.dumps({"text": SHORT, "speed": FAST, "format": "pcm", "transport": "sse"}).encode(),
            ContentType="application/json",
        )
        return b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event)

    body = conf.blocking(call, "the SSE body arrived")
    reference = decode_sse([body])
    conf.observe(events=len(reference.events), audio_bytes=len(reference.audio))

    @_FUZZ
    @given(st.lists(st.integers(0, len(body)), max_size=40))
    def check(points: list[int]) -> None:
        bounds = sorted({0, len(body), *points})
        decoded = decode_sse(body[a:b] for a, b in itertools.pairwise(bounds))
        assert decoded.events == reference.events and decoded.audio == reference.audio

    check()

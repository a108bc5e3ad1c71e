"""§3.2 control frames, §3.3 audio frames, §5 frame contents, §6.1–§6.2 ordering, §7.1 close drains.

All judged on one recording (:func:`conformance.recordings.pipelined`): the three REFERENCE.md §3
sentences sent back to back, the second at 16 kHz, then ``close``.
"""

from __future__ import annotations

import json
import re

from conformance.cases import Level, case
from conformance.probe import Probe, Recording
from conformance.recordings import PIPELINED
from protocol.frames import AUDIO_FRAME_HARD_LIMIT, looks_like_control
from protocol.messages import parse_server_control

_STRING = re.compile(rb'"(?:\\.|[^"\\])*"')


def _controls(recording: Recording) -> list[bytes]:
    return [m.data for m in recording.messages if m.is_control]


def _audio(recording: Recording) -> list[tuple[int, bytes, str]]:
    return [(i, m.data, m.data_type) for i, m in enumerate(recording.messages) if not m.is_control]


def _nonempty(recording: Recording) -> None:
    assert recording.messages, f"the server sent nothing ({recording.error or 'no error'})"


@case(
    "3.2.1",
    "§3.2",
    Level.MUST,
    requirements=(
        "R3.2-4",
        "R3.2-1",
        "R5-1",
    ),
    requirement="Every server control frame MUST be a **TEXT** message holding one JSON object in UTF-8",
    description="judge every control frame of the pipelined session (three requests, then close)",
    expectation="each is a TEXT message (DataType UTF8; checked behind the simulator only) and validates "
    "against its schema (synthesis_start, synthesis_complete, error)",
)
def test_control_frames_are_text_and_valid(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    for message in pipelined.messages:
        if not message.is_control:
            continue
        if conf.simulated:
            assert message.data_type == "UTF8", (
                f"a control frame arrived as {message.data_type}: {message.data[:80]!r}"
            )
        parse_server_control(json.loads(message.data.decode("utf-8")))


@case(
    "3.2.2",
    "§3.2",
    Level.MUST,
    requirements=("R3.2-2",),
    requirement="A control frame MUST be at most 1 MiB and SHOULD be at most 64 KiB",
    description="measure every control frame of the pipelined session",
    expectation="none is longer than 1,048,576 bytes",
)
def test_control_frames_at_most_1_mib(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    sizes = [len(c) for c in _controls(pipelined)]
    conf.observe(largest_control_frame=max(sizes, default=0))
    assert all(size <= AUDIO_FRAME_HARD_LIMIT for size in sizes), f"control frame sizes: {sizes}"


@case(
    "3.2.3",
    "§3.2",
    Level.SHOULD,
    requirements=("R3.2-2",),
    requirement="A control frame MUST be at most 1 MiB and SHOULD be at most 64 KiB",
    description="measure every control frame of the pipelined session",
    expectation="none is longer than 65,536 bytes",
)
def test_control_frames_at_most_64_kib(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    sizes = [len(c) for c in _controls(pipelined)]
    assert all(size <= 65_536 for size in sizes), f"control frame sizes: {sizes}"


@case(
    "3.2.4",
    "§3.2",
    Level.SHOULD,
    requirements=("R3.2-3",),
    requirement="A server SHOULD write compact JSON (no insignificant whitespace).",
    description="look for whitespace outside strings in every control frame of the pipelined session",
    expectation="there is none",
)
def test_control_frames_are_compact(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    for data in _controls(pipelined):
        outside = _STRING.sub(b'""', data)
        assert not re.search(rb"\s", outside), f"insignificant whitespace in {data[:120]!r}"


@case(
    "3.3.1",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-5",),
    requirement="An audio frame MUST be a **BINARY** message of raw PCM",
    description="look at the frame type of every audio message of the pipelined session (behind the "
    "simulator, DataType shows the container's frame type)",
    expectation="every message that is not a control frame arrived in a BINARY frame",
)
def test_audio_frames_are_binary(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    conf.require_simulator("see the container's frame types")
    audio = _audio(pipelined)
    assert audio, "the pipelined session carried no audio"
    text = [(i, len(data)) for i, data, data_type in audio if data_type != "BINARY"]
    assert not text, f"audio (non-JSON) messages in TEXT frames at (index, bytes): {text[:10]}"


@case(
    "3.3.2",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-1",),
    requirement="has an **even** length of at least 2 bytes (whole samples only; empty frames MUST NOT be "
    "sent)",
    description="measure every audio frame of the pipelined session",
    expectation="every audio frame's length is even and at least 2",
)
def test_audio_frames_are_whole_samples(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    audio = _audio(pipelined)
    assert audio, "the pipelined session carried no audio"
    bad = [(i, len(data)) for i, data, _ in audio if len(data) < 2 or len(data) % 2]
    conf.observe(audio_frames=len(audio), frame_sizes=sorted({len(d) for _, d, _ in audio})[:20])
    assert not bad, f"audio frames that are not whole samples, as (index, bytes): {bad[:10]}"


@case(
    "3.3.3",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-6",),
    requirement="never longer than the **hard ceiling of 1 MiB (1,048,576 bytes)**, whatever the "
    "configuration",
    description="measure every audio frame of the pipelined session",
    expectation="none is longer than 1,048,576 bytes",
)
def test_audio_frames_at_most_1_mib(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    audio = _audio(pipelined)
    assert audio, "the pipelined session carried no audio"
    largest = max(len(data) for _, data, _ in audio)
    conf.observe(largest_audio_frame=largest)
    assert largest <= AUDIO_FRAME_HARD_LIMIT, f"an audio frame of {largest} bytes"


@case(
    "3.3.4",
    "§3.3.2",
    Level.MUST,
    requirements=(
        "R3.3.2-1",
        "R3.3.1-2",
    ),
    requirement="A server **MUST NOT** send an audio frame whose whole bytes decode as UTF-8 and parse as a "
    "JSON object under §3.4",
    description="look for BINARY messages of the pipelined session that are JSON objects, and for control "
    "frames without a known type inside a bracket (how such audio reads behind a transport that does not "
    "keep frame types)",
    expectation="there are none",
)
def test_no_audio_frame_is_a_json_object(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    for index, message in enumerate(pipelined.messages):
        if not message.is_control:
            continue
        obj = json.loads(message.data.decode("utf-8"))
        assert not (conf.simulated and message.data_type == "BINARY"), (
            f"message {index}, a BINARY frame, is the JSON object {message.data[:60]!r}"
        )
        assert obj.get("type") in ("synthesis_start", "synthesis_complete", "error"), (
            f"message {index} reads as the JSON object {message.data[:60]!r}: audio taken for a control frame"
        )


@case(
    "3.3.5",
    "§3.3.2",
    Level.SHOULD,
    requirements=("R3.3.2-2",),
    requirement="A server **SHOULD** also avoid audio frames that lenient decoders take for a JSON object",
    description="apply protocol.frames.looks_like_control (UTF-16/32 detection, BOM stripping, replacement "
    "decoding) to every audio frame of the pipelined session",
    expectation="no audio frame looks like a control frame to a lenient decoder",
)
def test_no_audio_frame_looks_like_json_to_lenient_decoders(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    audio = _audio(pipelined)
    assert audio, "the pipelined session carried no audio"
    lenient = [i for i, data, _ in audio if looks_like_control(data)]
    assert not lenient, (
        f"audio frames a lenient decoder reads as JSON objects, at message index {lenient[:10]}"
    )


@case(
    "5.1.1",
    "§5.1",
    Level.MUST,
    requirements=("R5.1-1",),
    requirement="rate of the audio frames that follow, Hz: the requested `sample_rate`",
    description="compare each synthesis_start of the pipelined session with its request (the second asked "
    "for 16 kHz)",
    expectation="request_id, sample_rate, voice and speed are those of the request; encoding pcm_s16le, "
    "channels 1",
)
def test_synthesis_start_describes_the_request(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    checker = pipelined.replay()
    for request in PIPELINED:
        answer = checker.answers.get(request.request_id or "")
        assert answer is not None, f"no synthesis_start for {request.request_id!r}"
        start = answer.start
        assert (start.sample_rate, start.voice, start.speed) == (
            request.sample_rate,
            request.voice,
            request.speed,
        ), (
            f"{request.request_id}: synthesis_start says {start.sample_rate} Hz, {start.voice!r}, speed "
            f"{start.speed}; the request asked for {request.sample_rate} Hz, {request.voice!r}, speed "
            f"{request.speed}"
        )


@case(
    "5.3.1",
    "§5.3",
    Level.MUST,
    requirements=("R5.3-2",),
    requirement="the sum of the lengths of this request's audio frames (even; padding included, §3.3.4)",
    description="add up each request's audio frames in the pipelined session and compare with its "
    "synthesis_complete",
    expectation="audio_bytes equals the bytes received; total_duration_s equals audio_bytes / 2 / "
    "sample_rate (within 1 ms); status completed",
)
def test_synthesis_complete_accounts_for_the_audio(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    checker = pipelined.replay()  # ClientSession checks audio_bytes against what arrived (§5.3)
    for request in PIPELINED:
        answer = checker.answers.get(request.request_id or "")
        assert answer is not None and answer.complete is not None, f"{request.request_id!r} was not completed"
        complete = answer.complete
        assert complete.status == "completed", f"{request.request_id}: status {complete.status!r}"
        expected = complete.audio_bytes / 2 / answer.start.sample_rate
        assert abs(complete.total_duration_s - expected) <= 0.001, (
            f"{request.request_id}: total_duration_s {complete.total_duration_s}, audio_bytes / 2 / "
            "sample_rate "
            f"is {expected}"
        )


@case(
    "6.1.1",
    "§6.1",
    Level.MUST,
    requirements=("R6.1-1",),
    requirement="For every accepted request the server MUST send **exactly one** `synthesis_start`, "
    "then zero or more audio frames, then **exactly one** `synthesis_complete`",
    description="replay the pipelined session through the strict client (protocol.session.ClientSession)",
    expectation="each of the three requests gets one bracket; no audio outside a bracket",
)
def test_one_bracket_per_request(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    checker = pipelined.replay()
    missing = [r.request_id for r in PIPELINED if not checker.completed(r.request_id or "")]
    assert not missing, f"requests without a complete bracket: {missing} ({pipelined.error or 'no error'})"


@case(
    "6.2.1",
    "§6.2",
    Level.MUST,
    requirements=(
        "R6.2-3",
        "R6.2-2",
    ),
    requirement="The `synthesis_start` of a request MUST follow the `synthesis_complete` of the request "
    "accepted before it; brackets never overlap or interleave.",
    description="replay the pipelined session (three requests sent at once) through the strict client",
    expectation="the brackets come in the order p1, p2, p3 and none opens before the previous one closed",
)
def test_brackets_in_order_never_interleaved(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    checker = pipelined.replay()
    order = list(checker.answers)
    assert order == [r.request_id for r in PIPELINED][: len(order)], f"brackets opened in the order {order}"


@case(
    "7.1.1",
    "§7.1",
    Level.MUST,
    requirements=(
        "R7.1-2",
        "R7.1-3",
    ),
    requirement="Every request accepted before `close` MUST still be answered in full, in order (§6), "
    "exactly as if `close` had not been sent; queued requests are **not** dropped.",
    description="send three requests and close at once, then read the session to its end",
    expectation="all three are completed, then the server ends the session (within 10 s of the last "
    "synthesis_complete)",
)
def test_close_drains(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    checker = pipelined.replay()
    missing = [r.request_id for r in PIPELINED if not checker.completed(r.request_id or "")]
    assert not missing, f"requests sent before close that were not answered: {missing}"
    pipelined.require_clean_end()


@case(
    "7.1.2",
    "§7.1",
    Level.MUST,
    requirements=("R7.1-3",),
    requirement="the server MUST send a WebSocket Close frame with status **1000**",
    description="read how the container closed the pipelined session's WebSocket from the simulator's wire "
    "log",
    expectation="close code 1000",
)
def test_close_code_1000(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    conf.require_simulator("see the container's WebSocket close code")
    outcomes = [log["outcome"] for log in pipelined.wire if log["api"] == "bidi"]
    conf.observe(outcomes=outcomes)
    assert outcomes and outcomes[0] == "container-closed: code 1000", f"the session ended as: {outcomes}"

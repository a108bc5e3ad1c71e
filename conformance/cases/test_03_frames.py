"""§3.2 control frames, §3.3 audio frames, §5 frame contents, §6.1–§6.2 ordering, §7.1 close drains.

All judged on one recording (:func:`conformance.engine.recordings.pipelined`): the three REFERENCE.md §3
sentences sent back to back, the second at 16 kHz, then ``close``. The observer's findings on the session
(:mod:`conformance.engine.observer`) are judged by the case that owns each clause; a case that checks the
content of brackets judges the brackets that arrived, and a session the server ended early is judged by the §7
cases. 3.3.3 also reads the describe recording, for the server's own ``max_audio_frame_bytes``.
"""

from __future__ import annotations

import json
import re

from conformance.engine import clauses
from conformance.engine.case import Level, case
from conformance.engine.observer import Answer
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import PIPELINED
from protocol.frames import AUDIO_FRAME_HARD_LIMIT, DEFAULT_MAX_AUDIO_FRAME_BYTES, looks_like_control

_STRING = re.compile(rb'"(?:\\.|[^"\\])*"')


def _controls(recording: Recording) -> list[bytes]:
    return [m.data for m in recording.messages if m.is_control]


def _audio(recording: Recording) -> list[tuple[int, bytes, str]]:
    return [(i, m.data, m.data_type) for i, m in enumerate(recording.messages) if not m.is_control]


def _nonempty(recording: Recording) -> None:
    assert recording.messages, f"the server sent nothing ({recording.error or 'no error'})"


def _ended_early(recording: Recording) -> bool:
    """Whether the server ended the session before ``close`` (a §7 finding, judged by the §7 cases)."""
    return any(f.clause == clauses.SESSION_ENDS_ONLY_BY for f in recording.findings)


def _answers(recording: Recording) -> list[tuple[str, Answer]]:
    """The pipelined requests' answers that arrived, by request id; fails when none did."""
    observer = recording.replay()
    found = [
        (r.request_id or "", observer.answers[r.request_id or ""])
        for r in PIPELINED
        if r.request_id in observer.answers
    ]
    assert found, f"no request of the {recording.name} session was answered ({recording.error or 'no error'})"
    return found


def _unanswered(recording: Recording) -> list[str]:
    """Pipelined requests without a closed bracket, unless the server ended the session early (§7)."""
    observer = recording.replay()
    missing = [r.request_id or "" for r in PIPELINED if not observer.completed(r.request_id or "")]
    return [] if _ended_early(recording) else missing


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
    description="observe every control frame of the pipelined session (three requests, then close) and of "
    "the refusals session (five refused messages, then close)",
    expectation="each is a TEXT message (DataType UTF8; checked behind the simulator only) with a string "
    "type, and validates against its schema (synthesis_start, synthesis_complete, error)",
)
def test_control_frames_are_text_and_valid(conf: Probe, pipelined: Recording, refusals: Recording) -> None:
    conf.use(pipelined)
    conf.use(refusals)
    _nonempty(pipelined)
    controls = sum(1 for r in (pipelined, refusals) for m in r.messages if m.is_control)
    conf.observe(control_frames=controls)
    assert controls, "no control frame to judge"


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
    requirement="An audio frame MUST be a **BINARY** message of raw audio",
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
    requirement="so an **even** length of at least 2 bytes for `pcm_s16le` and any length of at least 1 byte "
    "for the G.711 encodings (empty frames MUST NOT be sent)",
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


def _advertised_frame_limit(recording: Recording) -> int:
    """``limits.max_audio_frame_bytes`` of the first ``capabilities`` frame of ``recording`` that has it as
    an integer; the default of §10 from a server without ``describe`` (or that lists no such limit)."""
    for message in recording.messages:
        if not message.is_control:
            continue
        try:
            obj = json.loads(message.data)
        except ValueError:
            continue
        limits = obj.get("limits") if isinstance(obj, dict) and obj.get("type") == "capabilities" else None
        value = limits.get("max_audio_frame_bytes") if isinstance(limits, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return DEFAULT_MAX_AUDIO_FRAME_BYTES


@case(
    "3.3.3",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-6a",),
    requirement="MUST be at most `max_audio_frame_bytes` long",
    description="read max_audio_frame_bytes from the describe session's capabilities (§10's default from a "
    "server without describe); measure every audio frame of that session and of the pipelined one",
    expectation="none is longer than the server's own max_audio_frame_bytes",
)
def test_audio_frames_at_most_max_audio_frame_bytes(
    conf: Probe, pipelined: Recording, described: Recording
) -> None:
    conf.use(pipelined)
    conf.use(described)
    limit = _advertised_frame_limit(described)
    audio = _audio(pipelined) + _audio(described)
    assert audio, "the pipelined and describe sessions carried no audio"
    largest = max(len(data) for _, data, _ in audio)
    conf.observe(max_audio_frame_bytes=limit, largest_audio_frame=largest)
    assert largest <= limit, f"an audio frame of {largest} bytes; capabilities list {limit} at most"


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
    "frames without a type inside a bracket (how such audio reads behind a transport that does not keep "
    "frame types)",
    expectation="there are none",
)
def test_no_audio_frame_is_a_json_object(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)  # the observer reports each such frame on this case's clause
    _nonempty(pipelined)


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
    requirements=("R5.1-1a",),
    requirement="rate of the audio frames that follow, Hz: the requested `sample_rate`",
    description="compare each synthesis_start of the pipelined session with its request (the second asked "
    "for 16 kHz)",
    expectation="each declares the request's sample_rate, voice and speed (members missing or different "
    "fail; the frame's other members are judged by 3.2.1)",
)
def test_synthesis_start_describes_the_request(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    requests = {r.request_id: r for r in PIPELINED}
    for request_id, answer in _answers(pipelined):
        request, declared = requests[request_id], answer.start.obj
        said = tuple(declared.get(name) for name in ("sample_rate", "voice", "speed"))
        asked = (request.sample_rate, request.voice, request.speed)
        assert said == asked, (
            f"{request_id}: synthesis_start declares sample_rate, voice, speed = {said}; the request asked "
            f"for {asked}"
        )


@case(
    "5.3.1",
    "§5.3",
    Level.MUST,
    requirements=("R5.3-2",),
    requirement="the sum of the lengths of this request's audio frames (whole samples of its encoding: even "
    "for `pcm_s16le`; padding included, §3.3.4)",
    description="add up each request's audio frames in the pipelined session and compare with its "
    "synthesis_complete",
    expectation="each synthesis_complete has audio_bytes, equal to the bytes received; total_duration_s "
    "equals audio_bytes / 2 / sample_rate (within 1 ms); status completed when present (the frame's other "
    "members are judged by 3.2.1)",
)
def test_synthesis_complete_accounts_for_the_audio(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)  # the observer checks audio_bytes against what arrived (§5.3)
    closed = [(i, a) for i, a in _answers(pipelined) if a.complete is not None]
    assert closed, f"no request of the pipelined session was completed ({pipelined.error or 'no error'})"
    for request_id, answer in closed:
        complete = answer.complete
        assert complete is not None
        assert complete.status in ("completed", None), f"{request_id}: status {complete.status!r}"
        assert complete.audio_bytes is not None, (
            f"{request_id}: synthesis_complete states no audio_bytes ({answer.complete.obj})"
        )
        if complete.total_duration_s is None:
            continue  # a missing member is the schema's finding (3.2.1)
        expected = complete.audio_bytes / 2 / answer.start.sample_rate
        conf.check(
            clauses.AUDIO_BYTES,
            abs(complete.total_duration_s - expected) <= 0.001,
            f"{request_id}: total_duration_s {complete.total_duration_s}, audio_bytes / 2 / sample_rate is "
            f"{expected}",
        )


@case(
    "6.1.1",
    "§6.1",
    Level.MUST,
    requirements=("R6.1-1a", "R6.1-1b", "R6.1-2"),
    requirement="For every accepted request the server MUST send **exactly one** `synthesis_start`, "
    "then zero or more audio frames, then **exactly one** `synthesis_complete`",
    description="observe the pipelined session: match brackets to requests (protocol.reader.StreamReader)",
    expectation="each of the three requests gets one bracket; no audio outside a bracket, no bracket that "
    "answers nothing (a session the server ended early is judged by the §7 cases)",
)
def test_one_bracket_per_request(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    _nonempty(pipelined)
    missing = _unanswered(pipelined)
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
    description="observe the pipelined session (three requests sent at once)",
    expectation="the brackets come in the order p1, p2, p3 and none opens before the previous one closed",
)
def test_brackets_in_order_never_interleaved(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    order = [a.request_id for a in pipelined.replay().history]
    assert order == [r.request_id for r in PIPELINED][: len(order)], f"brackets opened in the order {order}"


@case(
    "7.1.1",
    "§7.1",
    Level.MUST,
    requirements=("R7.1-2", "R7.1-3a"),
    requirement="Every request accepted before `close` MUST still be answered in full, in order (§6), "
    "exactly as if `close` had not been sent; queued requests are **not** dropped.",
    description="send three requests and close at once, then read the session to its end",
    expectation="all three are completed, then the server ends the session (within 10 s of the last "
    "synthesis_complete)",
)
def test_close_drains(conf: Probe, pipelined: Recording) -> None:
    conf.use(pipelined)
    observer = pipelined.replay()
    missing = [r.request_id for r in PIPELINED if not observer.completed(r.request_id or "")]
    assert not missing, f"requests sent before close that were not answered: {missing}"
    pipelined.require_end()


@case(
    "7.1.2",
    "§7.1",
    Level.MUST,
    requirements=("R7.1-3a", "R7.1-3b"),
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

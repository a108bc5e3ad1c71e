"""The suite's client path: the lenient observer (conformance.engine.observer) over the protocol's reader,
fuzzed.

Verdicts are only as good as the classifier behind them: audio that spells JSON must stay audio, and a server
that sends such a frame must be caught. PCM that starts with 0x7B ("{") or holds the sample 32123 (the bytes
"{}", a JSON object, PROTOCOL.md §3.3.2) goes through the reference cutter and the observer. And the observer
must carry on: each broken rule is one finding on its clause, and the rest of the session is still judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import struct
import types
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.engine import clauses
from conformance.engine.observer import Message, Observer, observe
from conformance.engine.stream import HANDSHAKE_ATTEMPTS, ObservedStream, open_stream
from protocol.client_session import ClientSession
from protocol.frames import cut_audio_frames
from protocol.messages import SynthesisComplete, SynthesisStart
from protocol.server_output import AudioReceived

SAMPLE_32123 = struct.pack("<h", 32123)
assert SAMPLE_32123 == b"{}"


def control(obj: dict) -> Message:
    return Message(json.dumps(obj).encode(), "UTF8", 1, 0.0)


def start(request_id: str = "a", **members: object) -> Message:
    frame = SynthesisStart(request_id=request_id, sample_rate=24000, voice="af_heart", speed=1.0).to_dict()
    return control({**frame, **members})


def complete(audio_bytes: int, request_id: str = "a") -> Message:
    frame = SynthesisComplete(
        request_id=request_id,
        status="completed",
        audio_bytes=audio_bytes,
        total_duration_s=audio_bytes / 48000,
        elapsed_s=0.1,
    ).to_json()
    return Message(frame.encode(), "UTF8", 1, 0.0)


def audio(data: bytes) -> Message:
    return Message(data, "BINARY", 1, 0.0)


def clauses_of(observer: Observer) -> list[str]:
    return [f.clause for f in observer.findings]


samples = st.lists(st.integers(-32768, 32767), min_size=1, max_size=400).map(
    lambda values: b"".join(struct.pack("<h", v) for v in values)
)
json_like_pcm = st.one_of(
    samples.map(lambda pcm: b"{" + pcm[1:]),  # starts with 0x7B
    st.tuples(samples, st.integers(0, 400), samples).map(lambda t: t[0][: t[1] * 2] + SAMPLE_32123 + t[2]),
    st.tuples(st.integers(1, 30), samples).map(lambda t: SAMPLE_32123 * t[0] + t[1]),
    st.just(SAMPLE_32123),
    st.just(SAMPLE_32123 + b"  "),
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(pcm=json_like_pcm, frame_bytes=st.sampled_from([64, 66, 128, 1024, 32768]))
def test_json_like_pcm_cut_by_the_reference_stays_audio(pcm: bytes, frame_bytes: int) -> None:
    frames = cut_audio_frames(pcm, frame_bytes)
    sent = b"".join(frames)
    assert sent[: len(pcm)] == pcm
    observer = observe(
        [start(), *map(audio, frames), complete(len(sent))], faithful_data_types=True, expect=["a"]
    )
    answer = observer.answers["a"]
    assert bytes(answer.audio) == sent and answer.complete is not None
    assert observer.findings == []


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(pcm=json_like_pcm, cuts=st.lists(st.integers(0, 800), max_size=8))
def test_json_like_pcm_split_anywhere_is_reassembled_by_completion_state(pcm: bytes, cuts: list[int]) -> None:
    """A transport may split an audio message anywhere (§12.3); joined by CompletionState it stays audio."""
    frames = cut_audio_frames(pcm, 1024)
    client = ClientSession(check_frames=False)
    client.expect("a")
    client.receive_message(start().data)
    for frame in frames:
        bounds = sorted({0, len(frame), *(c % (len(frame) + 1) for c in cuts)})
        parts = [frame[a:b] for a, b in itertools.pairwise(bounds)]
        for i, part in enumerate(parts):
            for event in client.receive_part(part, i == len(parts) - 1):
                assert isinstance(event, AudioReceived)
    client.receive_message(complete(sum(map(len, frames))).data)
    assert client.outstanding == []


def test_a_binary_frame_that_is_a_json_object_is_a_finding_and_stays_audio() -> None:
    observer = observe([start(), audio(b"{}"), complete(2)], faithful_data_types=True, expect=["a"])
    assert clauses_of(observer) == [clauses.AUDIO_NOT_JSON]
    assert bytes(observer.answers["a"].audio) == b"{}"  # still the request's audio: audio_bytes agrees


def test_without_frame_types_the_object_still_breaks_a_rule() -> None:
    # Behind a transport that does not keep frame types, `{}` reads as a control frame with no type.
    observer = observe([start(), audio(b"{}"), complete(2)], faithful_data_types=False, expect=["a"])
    assert clauses_of(observer) == [clauses.AUDIO_NOT_JSON]


def test_audio_in_a_text_frame_is_a_finding() -> None:
    observer = observe(
        [start(), Message(b"\x01\x02", "UTF8", 1, 0.0), complete(2)], faithful_data_types=True, expect=["a"]
    )
    assert clauses_of(observer) == [clauses.AUDIO_IS_BINARY]


def test_odd_audio_frames_are_findings_and_the_audio_is_joined() -> None:
    observer = observe(
        [start(), audio(b"\x01\x02\x03"), audio(b"\x04"), complete(4)], faithful_data_types=True, expect=["a"]
    )
    assert clauses_of(observer) == [clauses.AUDIO_WHOLE_SAMPLES] * 2
    assert bytes(observer.answers["a"].audio) == b"\x01\x02\x03\x04"


def test_interleaved_brackets_are_one_finding() -> None:
    observer = observe(
        [start("a"), audio(b"\x01\x00"), start("b"), audio(b"\x02\x00"), complete(2, "a"), complete(2, "b")],
        faithful_data_types=True,
        expect=["a", "b"],
    )
    assert clauses_of(observer) == [clauses.IN_ORDER]  # audio_bytes is not judged once brackets overlap
    assert observer.completed("a") and observer.completed("b")


def test_aws_sample_frame_shapes_carry_on_with_one_finding_per_frame() -> None:
    """The AWS sample's frames (REFERENCE.md §3): the session is still judged to its end."""
    messages = [
        control({"type": "error", "message": "text_required: text is empty"}),
        control({"type": "synthesis_start", "request_id": "a"}),
        audio(b"\x01\x00\x02\x00"),
        control({"type": "synthesis_complete", "request_id": "a", "total_duration_s": 0.1, "elapsed_s": 0.2}),
    ]
    observer = observe(messages, faithful_data_types=True, expect=[("a", {"sample_rate": 16000})])
    assert clauses_of(observer) == [clauses.FRAME_VALID] * 3
    answer = observer.answers["a"]
    assert answer.start.sample_rate == 16000 and answer.start.voice == "af_heart"  # the request's values
    assert (
        answer.complete is not None and answer.complete.status is None and answer.complete.audio_bytes is None
    )
    (error,) = observer.errors_since(0)
    assert (error.code, error.fatal, error.request_id) == ("text_required", False, None)  # code from message


def test_a_wrong_request_id_is_one_finding_and_the_bracket_answers_the_request_in_turn() -> None:
    observer = observe(
        [start("zz"), complete(0, "zz"), start("b"), complete(0, "b")],
        faithful_data_types=True,
        expect=["a", "b"],
    )
    assert clauses_of(observer) == [clauses.ONE_BRACKET]
    assert observer.completed("a") and observer.completed("b")


def test_a_second_start_of_the_open_bracket_is_one_finding_and_the_request_still_completes() -> None:
    """A server that sends ``synthesis_start`` twice (R6.1-1a): one finding, and the audio and the
    ``synthesis_complete`` that follow still answer the request, so a case waiting on it ends at once instead
    of waiting out its deadline for an answer the reader had given to a second, phantom bracket."""
    observer = observe(
        [start("a"), start("a"), audio(b"\x01\x00"), complete(2, "a"), start("b"), complete(0, "b")],
        faithful_data_types=True,
        expect=["a", "b"],
    )
    assert clauses_of(observer) == [clauses.ONE_BRACKET]
    assert observer.completed("a") and observer.completed("b")
    assert observer.answers["a"].frames == [2]


def test_a_wrong_audio_bytes_is_one_finding() -> None:
    observer = observe([start(), audio(b"\x01\x00"), complete(4)], faithful_data_types=True, expect=["a"])
    assert clauses_of(observer) == [clauses.AUDIO_BYTES]


def test_the_same_assigned_id_twice_keeps_two_answers() -> None:
    """A server that assigns "unknown" to every id-less request: two answers, not one overwritten."""
    messages = [start("unknown"), complete(0, "unknown"), start("unknown"), complete(0, "unknown")]
    observer = observe(messages, faithful_data_types=True, expect=[None, None])
    assert observer.completions() == 2 and observer.findings == []
    assert [a.start.request_id for a in observer.history] == ["unknown", "unknown"]


def test_frames_no_one_asked_for_are_findings() -> None:
    observer = observe([audio(b"\x01\x00"), complete(0, "x"), start("y")], faithful_data_types=True)
    assert clauses_of(observer) == [clauses.AUDIO_IN_BRACKET, clauses.ONE_BRACKET, clauses.ONE_BRACKET]


def test_observer_collects_answers_and_errors() -> None:
    error = (
        b'{"type":"error","code":"text_required","message":"text_required: empty","request_id":"x",'
        b'"fatal":false}'
    )
    observer = observe(
        [Message(error, "UTF8", 1, 0.0), start(), audio(b"\x01\x00\x02\x00"), complete(4)],
        faithful_data_types=True,
        expect=["a"],
    )
    assert [e.code for e in observer.errors_since(0)] == ["text_required"]
    assert observer.errors_since(1) == []
    assert observer.answers["a"].frames == [4] and observer.answers["a"].duration_s == 2 / 24000
    assert observer.findings == []


def test_a_start_whose_encoding_is_not_a_string_is_read_as_pcm16le() -> None:
    """A hostile server's ``"encoding": [...]`` once made the suite itself raise TypeError (unhashable):
    the member is a finding on its clause, and the audio is still measured (2-byte samples)."""
    observer = observe(
        [start(encoding=["pcm_mulaw"]), audio(b"\x01\x00\x02\x00"), complete(4)],
        faithful_data_types=True,
        expect=["a"],
    )
    assert observer.answers["a"].duration_s == 2 / 24000
    assert observer.findings, "the malformed encoding is a finding"


def test_a_complete_without_its_start_is_kept_by_the_id_it_names() -> None:
    """A synthesis_complete that closes no bracket is a finding, and the observer keeps it by the id it
    names, so a case waiting on that request ends instead of waiting out its deadline."""
    observer = observe([complete(0, "x")], faithful_data_types=True, expect=["x"])
    assert "x" not in observer.answers and observer.orphans["x"].status == "completed"
    assert clauses_of(observer) == [clauses.ONE_BRACKET]


class ModelError(Exception):
    """Named as the official client's error for a refused opening (the service's 424)."""


class _Bidi:
    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.exited = False

    async def opened(self) -> None:
        if self.refuse:
            raise ModelError("the container did not accept the WebSocket within 250 ms")


class _Target:
    """A target whose first ``refusals`` openings are refused."""

    faithful_data_types = False

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.opened: list[_Bidi] = []

    @contextlib.asynccontextmanager
    async def bidi(self, **options: object) -> AsyncIterator[_Bidi]:
        bidi = _Bidi(len(self.opened) < self.refusals)
        self.opened.append(bidi)
        try:
            yield bidi
        finally:
            bidi.exited = True


async def _open(target: _Target) -> tuple[ObservedStream, bool]:
    async with open_stream(target, "s") as session:  # type: ignore[arg-type]
        return session, session.bidi.exited


def test_a_refused_opening_is_tried_again_and_logged_not_a_finding() -> None:
    """A finding fails the run wherever it is seen (issue 30); an opening that the host's load may have
    refused and the next try opened is logged, and 2.3.1 judges the handshake on sessions of its own."""
    target = _Target(refusals=HANDSHAKE_ATTEMPTS - 1)
    session, exited = asyncio.run(_open(target))
    assert HANDSHAKE_ATTEMPTS > 1 and len(target.opened) == HANDSHAKE_ATTEMPTS
    assert session.bidi is target.opened[-1] and not exited
    assert all(bidi.exited for bidi in target.opened)  # the refused tries were released, then the last
    assert not [f for f in session.observer.findings if f.clause == clauses.HANDSHAKE]
    logged = [e["note"].split(":")[0] for e in session.log if e.get("dir") == "open"]
    assert logged == [
        f"the session could not be opened on try {n}, and was tried again"
        for n in range(1, HANDSHAKE_ATTEMPTS)
    ]


def test_the_last_try_is_left_to_the_session_to_observe() -> None:
    target = _Target(refusals=HANDSHAKE_ATTEMPTS)  # every opening refused: the last is not awaited here
    session, _ = asyncio.run(_open(target))
    assert len(target.opened) == HANDSHAKE_ATTEMPTS and session.bidi is target.opened[-1]
    assert len([e for e in session.log if e.get("dir") == "open"]) == HANDSHAKE_ATTEMPTS - 1


def test_an_opened_session_is_not_tried_again() -> None:
    target = _Target(refusals=0)
    session, _ = asyncio.run(_open(target))
    assert len(target.opened) == 1 and not session.observer.findings


def test_the_agents_protocol_error_names_the_clause_it_breaks() -> None:
    """Issue 30: when the agent's strict TTS client refuses the container's frames, the agent case is SKIPPED
    and the broken rule's clause is a finding (a note on it), so a defect only the agent's traffic shows
    fails the run. The error the agent reports names the rule; the suite maps it to the clause."""
    from conformance.cases.test_agent import TTS_BROKE_PROTOCOL, broken_clause
    from protocol.client_session import ClientSession, ProtocolViolation

    client = ClientSession(check_frames=False)  # as the agent's TTS client (reference_agent.tts)
    with pytest.raises(ProtocolViolation) as caught:
        client.receive_message(b"\x10\x00\x10\x00")  # audio before any synthesis_start
    assert caught.value.rule == "AUDIO_IN_BRACKET"
    message = f"{TTS_BROKE_PROTOCOL}: {caught.value} [rule {caught.value.rule}]"  # reference_agent/tts.py
    assert broken_clause(message) == clauses.AUDIO_IN_BRACKET == "R6.1-2"
    assert broken_clause(f"{TTS_BROKE_PROTOCOL}: {caught.value}") is None  # an agent that names no rule
    assert broken_clause(f"{TTS_BROKE_PROTOCOL}: x [rule NO_SUCH_RULE]") is None


def test_a_recordings_other_sessions_findings_are_the_recordings() -> None:
    """Issue 30, point 2: the sessions a recording opens beside its own (the second session of the long text,
    the crowd's holder and the sessions after it) are observed like it, and their findings reach every case
    that judges the recording, with their logs; they were kept only as strings before, or dropped."""
    from types import SimpleNamespace

    from conformance.engine.case import Case, Level
    from conformance.engine.probe import Probe, Recording
    from conformance.engine.report import CaseResult

    own = observe([], faithful_data_types=True, name="long")
    second = Observer(faithful_data_types=True, name="second")
    second.feed(Message(b"\x10\x00\x10\x00", "BINARY", 1, 0.0))  # audio outside any bracket
    other = SimpleNamespace(name="second", observer=second, log=[{"t": 0.0, "dir": "recv", "bytes": 4}])
    recording = Recording("long", observer=own, others=[other])  # type: ignore[list-item]
    assert [f.clause for f in recording.findings] == [clauses.AUDIO_IN_BRACKET]

    target = SimpleNamespace(wire_mark=lambda: {}, wire_since=lambda mark: [])
    case = Case("8.2.1", "§8", Level.MUST, "r", "d", "e", requirements=("R2.3-1",))
    result = CaseResult(case, "node")
    probe = Probe(target, None, result)  # type: ignore[arg-type]
    probe.use(recording)
    assert [f.session for f in probe.findings()] == ["second"]
    probe.finish()
    assert [entry["session"] for entry in result.client_log] == ["long", "second"]


def test_a_recording_judged_by_several_cases_counts_its_findings_once() -> None:
    """The clause row counts distinct findings: a recording gives each case that judges it the same ones."""
    from conformance.engine.case import Case, Level, Verdict
    from conformance.engine.report import Results

    seen = Observer(faithful_data_types=True, name="pipelined")
    seen.feed(Message(b"\x10\x00\x10\x00", "BINARY", 1, 0.0))  # audio outside any bracket
    results = Results()
    for case_id in ("3.3.1", "3.3.2"):
        result = results.add(
            Case(case_id, "§3.3", Level.MUST, "r", "d", "e", requirements=("R3.3.1-5",)), case_id
        )
        result.verdict, result.notes = Verdict.OK, list(seen.findings)
    [row] = results.defects()
    assert (row["clause"], row["findings"], row["per_case"]) == ("R6.1-2", 1, {"3.3.1": 1, "3.3.2": 1})
    assert row["verdict"] == "FAILED" and not row["carried"] and results.failed()


class _Scripted:
    """A stream whose server sends ``script`` (whole messages, each one COMPLETE part) and then nothing."""

    faithful_data_types = True

    def __init__(self, script: list[bytes | str]) -> None:
        self.script = list(script)

    @contextlib.asynccontextmanager
    async def bidi(self, **options: object) -> AsyncIterator[_Scripted]:
        yield self

    async def opened(self) -> None:
        return None

    async def send(self, data: bytes, **options: object) -> None:
        return None

    async def receive(self) -> object:
        if not self.script:
            await asyncio.sleep(3600)  # a server that never answers: only the case's deadline ends this
        item = self.script.pop(0)
        data, kind = (item.encode(), "UTF8") if isinstance(item, str) else (item, "BINARY")
        return types.SimpleNamespace(data=data, data_type=kind, is_complete=True)


def _began(script: list[bytes | str], *, method: str = "began", **options: bool) -> str:
    async def scenario() -> str:
        async with open_stream(_Scripted(script), "s") as session:  # type: ignore[arg-type]
            await session.request("Hello.", request_id="x")
            try:
                await asyncio.wait_for(getattr(session, method)("x", **options), 5.0)
            except AssertionError as exc:
                return str(exc)
            return "began"

    return asyncio.run(scenario())


START = json.dumps({"type": "synthesis_start", "request_id": "x", "sample_rate": 24000})
COMPLETE = json.dumps(
    {"type": "synthesis_complete", "request_id": "x", "status": "completed", "audio_bytes": 0}
)


def test_waiting_for_audio_ends_at_once_on_a_refusal_or_a_silent_answer() -> None:
    """ObservedStream.began and .started: a case waiting for a request's audio (or its start) fails at once,
    with the reason, when the server refuses the request or completes it without audio, instead of waiting
    out its deadline."""
    refusal = json.dumps(
        {
            "type": "error",
            "code": "invalid_voice",
            "message": "invalid_voice: no",
            "request_id": "x",
            "fatal": False,
        }
    )
    assert _began([START, b"\x01\x00"]) == "began"
    assert _began([START, COMPLETE]) == "began"  # a request may end before a cancel meant for it
    assert _began([START, COMPLETE], or_complete=False) == "'x' was completed without audio"
    assert _began([refusal]) == "'x' was refused: invalid_voice: invalid_voice: no"
    assert _began([START], method="started") == "began"  # ObservedStream.started: the bracket opened
    assert _began([refusal], method="started") == "'x' was refused: invalid_voice: invalid_voice: no"

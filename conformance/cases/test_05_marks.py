"""§5.5 marks (version 1.1, OPTIONAL): one ``marks`` frame per segment, in order, spanning the audio; only for
the requests that ask; nothing else changed by asking; a malformed ``marks`` member refused.

Every case judges one recorded session (:func:`conformance.engine.recordings.marked`): ``describe``, then, on
a server that lists ``marks`` in ``capabilities.features``, a short request, the same two sentences with and
without ``"marks": true``, and two requests whose ``marks`` is a string. A server that does not list marks
(or does not offer describe, the only way a client learns it, §1.5) gets UNIMPLEMENTED.

Which segment an audio frame belongs to is not on the wire; a ``marks`` frame says where its segment's
audio begins and ends. The cases check what that allows: the spans follow one another without gaps from
the first sample to the last (a segment without its frame leaves a gap), and each frame comes before
audio beyond its own span (the observer, ``protocol/reader.py``).
"""

from __future__ import annotations

from typing import Any

from conformance.engine import clauses, expect
from conformance.engine.case import Level, case
from conformance.engine.describe import require_features
from conformance.engine.observer import Answer, MarkView, Observer
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import BAD_MARKS, MARKED

TOLERANCE_S = 0.05
"""Slack between a span's edge and the audio it describes: resampling a request's audio shifts segment edges
by a few samples (§5.5)."""

DURATION_SLACK = (0.2, 0.3)
"""The request asking for marks lasts as long as the same request without them, within this fraction plus
these seconds: a server that cuts segments by its time budget (§10.1) may cut the two differently."""


def _marked(conf: Probe, recording: Recording) -> Observer:
    """The recording, judged by this case; UNIMPLEMENTED on a server that does not list marks."""
    conf.use(recording)
    observer = recording.replay()
    require_features(recording.extra.get("features"), "marks")
    return observer


def _answer(observer: Observer, request_id: str) -> Answer:
    answer = observer.answers.get(request_id)
    assert answer is not None and answer.complete is not None, f"{request_id} got no complete bracket"
    return answer


def _spans(marks: list[MarkView]) -> list[tuple[float, float]]:
    spans = [(m.start_s, m.end_s) for m in marks]
    missing = [i for i, (a, b) in enumerate(spans) if a is None or b is None]
    assert not missing, f"marks frames without a numeric start_s or end_s: {missing}"
    return spans  # type: ignore[return-value]


@case(
    "5.5.1",
    "§5.5",
    Level.MUST,
    requirements=("R5.5-4a", "R5.5-4b", "R5.5-4c"),
    requirement="For a request that asked for marks, MUST send exactly one `marks` frame for each synthesis "
    "segment whose audio it sends, inside the request's bracket, in the order of the segments with "
    "`segment` counting from 0, and each before any audio frame of a later segment.",
    description="two sentences at speed 2 with marks: true (the marks session)",
    expectation="marks frames inside the bracket, segment 0, 1, ...; each before audio beyond its own span "
    "(observer); their spans follow one another from 0 s to the end of the audio without a gap (within "
    f"{TOLERANCE_S} s): every segment whose audio was sent was marked",
)
def test_marks_cover_every_segment(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    answer = _answer(observer, "mk1")
    assert answer.marks, "the request asked for marks and got none"
    spans = _spans(answer.marks)
    conf.observe(spans=spans, audio_s=round(answer.duration_s, 3))
    assert spans[0][0] <= TOLERANCE_S, f"the first segment's span starts at {spans[0][0]} s, not at 0"
    gaps = [
        (k, spans[k - 1][1], spans[k][0])
        for k in range(1, len(spans))
        if spans[k][0] > spans[k - 1][1] + TOLERANCE_S
    ]
    assert not gaps, f"audio no marks frame spans (segment, previous end, its start): {gaps}"
    end = max(b for _, b in spans)
    assert abs(end - answer.duration_s) <= TOLERANCE_S, (
        f"the spans end at {end} s but the audio lasts {answer.duration_s:.3f} s: audio no marks frame spans"
        if end < answer.duration_s
        else f"the spans end at {end} s, after the audio's end ({answer.duration_s:.3f} s)"
    )


@case(
    "5.5.2",
    "§5.5",
    Level.MUST,
    requirements=("R5.5-6a", "R5.5-6b"),
    requirement="MUST keep every `start_s` at most its `end_s` and at least the previous segment's `end_s`.",
    description="the marks of 5.5.1's request",
    expectation="every span has start_s <= end_s and starts no earlier than the previous one ends (observer)",
)
def test_marks_spans_in_order(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    answer = _answer(observer, "mk1")
    spans = _spans(answer.marks)
    conf.observe(spans=spans)
    for k, (start, end) in enumerate(spans):
        conf.check(
            clauses.MARKS_SPANS, start <= end, f"segment {k}'s span starts at {start} s after its end {end}"
        )


@case(
    "5.5.3",
    "§5.5",
    Level.MUST,
    requirements=("R5.5-7a", "R5.5-7b"),
    requirement="MUST NOT send `marks` for a request that did not ask for them, nor outside that request's "
    "bracket.",
    description="the marks session: two requests without marks beside the one with them, and two refused",
    expectation="no marks frame but inside the bracket of the request that asked (observer)",
)
def test_marks_only_when_asked(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    conf.observe(marks={a.request_id: len(a.marks) for a in observer.history})


@case(
    "5.5.4",
    "§5.5",
    Level.MUST,
    requirements=("R5.5-8",),
    requirement="MUST NOT change anything else because marks were asked for: the audio frames and the "
    "`synthesis_complete` (its `words` included) are those it sends without them.",
    description="the same two sentences at speed 2, once with marks: true and once without",
    expectation="the same synthesis_start (rate, encoding, channels, voice, speed) and status; both "
    "plausible speech of the text, as long as each other within "
    f"{DURATION_SLACK[0]:.0%} + {DURATION_SLACK[1]} s; words in both or in neither, the same words in order",
)
def test_marks_change_nothing_else(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    with_marks, without = _answer(observer, "mk1"), _answer(observer, "mk2")
    text, speed = MARKED[1].text, MARKED[1].speed
    expect.spoken(with_marks, text, speed=speed)
    expect.spoken(without, text, speed=speed)
    members = ("sample_rate", "encoding", "channels", "voice", "speed")
    differ = {
        m: (with_marks.start.obj.get(m), without.start.obj.get(m))
        for m in members
        if with_marks.start.obj.get(m) != without.start.obj.get(m)
    }
    assert not differ, f"synthesis_start differs with marks (with, without): {differ}"
    assert with_marks.complete is not None and without.complete is not None
    assert with_marks.complete.status == without.complete.status, (
        f"status {with_marks.complete.status!r} with marks, {without.complete.status!r} without"
    )
    a, b = with_marks.duration_s, without.duration_s
    conf.observe(duration_s={"marks": round(a, 3), "plain": round(b, 3)})
    assert abs(a - b) <= DURATION_SLACK[0] * b + DURATION_SLACK[1], (
        f"{a:.3f} s of audio with marks, {b:.3f} s without"
    )
    words = {
        name: None if answer.complete.words is None else [w.word for w in answer.complete.words]
        for name, answer in (("marks", with_marks), ("plain", without))
        if answer.complete is not None
    }
    conf.observe(words=words)
    assert words["marks"] == words["plain"], (
        f"synthesis_complete's words differ with marks: {words['marks']} with, {words['plain']} without"
    )


@case(
    "5.5.5",
    "§5.5",
    Level.MUST,
    requirements=("R5.5-3", "R4.1-5u"),
    requirement="MUST refuse a `marks` member that is neither a boolean nor `null` with `invalid_field`, in "
    "the order of §9.2.",
    description='a request with "marks": "yes"; one with "speed": 5 and "marks": "yes"',
    expectation="the first refused with invalid_field, the second with invalid_speed (speed is checked "
    "before marks); each names its request",
)
def test_bad_marks_member_refused(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    for message, code in BAD_MARKS:
        request_id = message["request_id"]
        errors = [e for _, e in observer.errors if e.request_id == request_id]
        answered = request_id in observer.answers
        assert not answered, f"{request_id} ({_show(message)}) was answered, not refused with {code}"
        expect.one_error(conf, errors, code, request_id)


def _show(message: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in message.items() if k != "text")


@case(
    "5.5.6",
    "§5.5",
    Level.SHOULD,
    requirements=("R5.5-5",),
    requirement="It SHOULD send each before the first audio frame of its own segment, so that a client knows "
    "what it is about to play; the reference does.",
    description="the marks of 5.5.1's request, and the audio received before each",
    expectation="the first marks frame comes before any audio; each later one before audio beyond the "
    f"previous span's end (within {TOLERANCE_S} s)",
)
def test_marks_before_their_audio(conf: Probe, marked: Recording) -> None:
    observer = _marked(conf, marked)
    answer = _answer(observer, "mk1")
    late = []
    for k, mark in enumerate(answer.marks):
        before = answer.seconds(mark.received)
        begins = 0.0 if k == 0 else answer.marks[k - 1].end_s
        if begins is not None and before > begins + TOLERANCE_S:
            late.append((k, round(before, 3), begins))
    assert not late, (
        f"marks frames after audio of their own segment (segment, audio before it, its start): {late}"
    )

"""§1.4 JSON conventions, §4 and §4.1 synthesis requests: shapes accepted, parameters honoured, session
rules."""

from __future__ import annotations

import datetime
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from conformance.engine import expect
from conformance.engine.audio import check_speech
from conformance.engine.case import Case, Level, case, param
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import VARIATIONS
from conformance.engine.stream import Answer, ObservedStream
from conformance.engine.texts import FAST, SENTENCES, SHORT, TWO_SENTENCES


async def _only_answer(session: ObservedStream, request_id: str | None) -> Answer:
    if request_id is not None:
        return await session.answer(request_id)
    return (await session.completions(1))[0]


def _single(conf: Probe, name: str, message: dict[str, Any], *, data_type: str | None = "BINARY") -> Answer:
    """Send ``message`` alone on a new session, close, drain; return its answer."""
    request_id = message.get("request_id")

    async def scenario() -> Answer:
        async with conf.session(name) as s:
            s.expect(request_id, message)
            await s.send(json.dumps(message).encode(), data_type=data_type)
            answer = await _only_answer(s, request_id)
            await s.close()
            await s.drain()
            return answer

    return conf.run(scenario())


@case(
    "1.4.1",
    "§1.4",
    Level.MUST,
    requirements=("R1.4-2",),
    requirement="A member whose value is `null` MUST be treated exactly as if it were absent.",
    description='send {"type": null, "text": "Hi.", "voice": null, "speed": null, "sample_rate": null, '
    '"request_timestamp": null, "request_id": "null-1"}',
    expectation="the request completes with the defaults: voice af_heart, speed 1.0, 24000 Hz",
)
def test_null_members_are_absent(conf: Probe) -> None:
    message = {
        "type": None,
        "text": SHORT,
        "voice": None,
        "speed": None,
        "sample_rate": None,
        "request_timestamp": None,
        "request_id": "null-1",
    }
    answer = _single(conf, "nulls", message)
    expect.spoken(answer, SHORT)
    start = answer.start
    assert (start.voice, start.speed, start.sample_rate) == ("af_heart", 1.0, 24000), (
        f"defaults not applied: voice {start.voice!r}, speed {start.speed}, {start.sample_rate} Hz"
    )


@case(
    "1.4.2",
    "§1.4",
    Level.MUST,
    requirements=("R1.4-1",),
    requirement="Receivers MUST ignore members they do not know, so that later versions can add members.",
    description="send a request with two unknown members, one of them a nested object",
    expectation="the request completes",
)
def test_unknown_members_are_ignored(conf: Probe) -> None:
    message = {
        "text": SHORT,
        "speed": FAST,
        "request_id": "unknown-1",
        "emotion": "cheerful",
        "x-extension": {"nested": [1, 2, {"deep": True}], "note": None},
    }
    expect.spoken(_single(conf, "unknown-members", message), SHORT, speed=FAST)


@case(
    "1.4.3",
    "§1.4",
    Level.MUST,
    requirements=("R1.4-3",),
    requirement="A number is an integer when its value is integral, and receivers MUST read it as one: "
    "`24000` and `24000.0` are the same `sample_rate`.",
    description='send a request with "sample_rate": 24000.0 and "speed": 2 (an integer)',
    expectation="the request completes at 24000 Hz, speed 2",
)
def test_integral_numbers(conf: Probe) -> None:
    frame = {"text": SHORT, "sample_rate": 24000.0, "speed": 2, "request_id": "integral-1"}
    answer = _single(conf, "integral", frame)
    expect.spoken(answer, SHORT, speed=FAST)
    assert answer.start.sample_rate == 24000, f"synthesis_start says {answer.start.sample_rate} Hz"


@case(
    "4.0.1",
    "§4",
    Level.MUST,
    requirements=("R4-1b",),
    requirement='absent, `null` or `"synthesize"`',
    description='send a request with "type": "synthesize" in a TEXT message',
    expectation="the request completes",
)
def test_type_synthesize(conf: Probe) -> None:
    message = {"type": "synthesize", "text": SHORT, "speed": FAST, "request_id": "typed-1"}
    expect.spoken(_single(conf, "typed", message, data_type="UTF8"), SHORT, speed=FAST)


@case(
    "4.1.1",
    "§1.1",
    Level.MUST,
    requirements=("R4-1a",),
    requirement="a client of that sample works unchanged (no `type` member is needed in requests, §4.1)",
    description="speak two sentences the way the AWS sample's client does: json.dumps({'text', 'voice', "
    "'request_timestamp': time.time(), 'speed'}) in PayloadParts without DataType, each after the previous "
    "one's synthesis_complete, then json.dumps({'type': 'close'})",
    expectation="each gets a bracket with a server-assigned id and plausible speech; the session then ends",
)
def test_aws_sample_message_shapes(conf: Probe) -> None:
    texts = (SENTENCES[0], SHORT)

    async def scenario() -> list[Answer]:
        answers = []
        async with conf.session("aws-sample") as s:
            for text in texts:
                body = {"text": text, "voice": "af_heart", "request_timestamp": time.time(), "speed": 1.0}
                s.expect(None, body)
                await s.send(json.dumps(body).encode("utf-8"), data_type=None)
                answers.append((await s.completions(len(answers) + 1))[-1])
            await s.send(json.dumps({"type": "close"}).encode("utf-8"), data_type=None)
            await s.drain()
        return answers

    answers = conf.run(scenario())
    for text, answer in zip(texts, answers, strict=True):
        expect.spoken(answer, text)


@case(
    "4.1.2",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-8a", "R4.1-8c"),
    requirement="When `request_id` is absent the server MUST assign `r<N>` (N = 1, 2, …, skipping ids in "
    "use) and report it in `synthesis_start`",
    description="send two requests without request_id back to back",
    expectation="both complete; their synthesis_start frames carry two different ids of the form r<N>",
)
def test_server_assigns_request_ids(conf: Probe) -> None:
    async def scenario() -> list[Answer]:
        async with conf.session("assigned") as s:
            for _ in range(2):
                s.expect(None, {"speed": FAST})
                await s.send(json.dumps({"text": SHORT, "speed": FAST}).encode())
            await s.close()
            await s.drain_after_close([None, None])
            return list(s.observer.history)

    answers = conf.run(scenario())
    ids = [a.start.request_id for a in answers]
    conf.observe(assigned_ids=ids)
    assert len(ids) == 2 and ids[0] != ids[1], f"assigned ids: {ids}"
    assert all(isinstance(i, str) and re.fullmatch(r"r[1-9][0-9]*", i) for i in ids), (
        f"assigned ids are not of the form r<N>: {ids}"
    )
    for answer in answers:
        expect.completed(answer)


@case(
    "4.1.3",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-10",),
    requirement="Timestamps in the future MUST be accepted (clocks differ).",
    description="send a request whose request_timestamp is one hour in the future (Unix seconds)",
    expectation="the request completes",
)
def test_future_timestamp_accepted(conf: Probe) -> None:
    message = {
        "text": SHORT,
        "speed": FAST,
        "request_id": "future-1",
        "request_timestamp": time.time() + 3600,
    }
    expect.spoken(_single(conf, "future", message), SHORT, speed=FAST)


@case(
    "4.1.4",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-5n",),
    requirement="Unix epoch seconds (fractions allowed) or an RFC 3339 `date-time` with offset",
    description="send two requests stamped now as RFC 3339 strings, one in UTC ('Z') with milliseconds, one "
    "with a +02:00 offset",
    expectation="both complete",
)
def test_rfc3339_timestamps_accepted(conf: Probe) -> None:
    now = datetime.datetime.now(datetime.UTC)
    stamps = (
        now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        now.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat(timespec="seconds"),
    )
    conf.observe(timestamps=stamps)

    async def scenario() -> list[Answer]:
        async with conf.session("rfc3339") as s:
            ids = []
            for n, stamp in enumerate(stamps, 1):
                ids.append(f"stamp-{n}")
                body = {"text": SHORT, "speed": FAST, "request_id": ids[-1], "request_timestamp": stamp}
                s.expect(ids[-1], body)
                await s.send(json.dumps(body).encode())
            answers = [await s.answer(i) for i in ids]
            await s.close()
            await s.drain()
            return answers

    for answer in conf.run(scenario()):
        expect.spoken(answer, SHORT, speed=FAST)


@case(
    "4.1.5",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-7b", "R4.1-7c"),
    requirement="A request whose id is already queued or active in the session MUST be refused with "
    "`duplicate_request_id` (the first request is unaffected)",
    description="send a request with id 'dup', and right behind it a request with the same id",
    expectation="one error frame duplicate_request_id naming 'dup'; the first request completes with "
    "plausible speech of its text",
)
def test_duplicate_request_id(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("duplicate") as s:
            await s.request(SENTENCES[0], request_id="dup", speed=FAST)
            await s.send(json.dumps({"text": SHORT, "request_id": "dup"}).encode())
            answer = await s.answer("dup")
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    expect.one_error(conf, errors, "duplicate_request_id", "dup")
    expect.spoken(answer, SENTENCES[0], speed=FAST)


@case(
    "4.1.6",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-11a", "R4.1-11b"),
    requirement="then with `queue_full` when `max_queue` requests are already queued or active",
    description="send 33 requests at once (max_queue is 32): a two-sentence one, then 32 short ones; after "
    "the refusal, cancel everything and close",
    expectation="exactly one error frame, queue_full naming the 33rd request; each of the first 32 gets its "
    "bracket (completed or cancelled)",
)
def test_queue_full(conf: Probe) -> None:
    async def scenario() -> tuple[list[str], list[Any], dict[str, Answer]]:
        async with conf.session("queue") as s:
            frames = [(f"q{n}", SHORT if n > 1 else TWO_SENTENCES) for n in range(1, 34)]
            for request_id, text in frames[:32]:
                await s.request(text, request_id=request_id, speed=FAST)
            # The 33rd is refused, so it is sent raw: no bracket is expected for it.
            await s.send(json.dumps({"text": SHORT, "request_id": "q33"}).encode())
            # A server that swallows the 33rd (neither refuses nor answers it) is known once it has answered
            # the first 32: a queued 33rd would then have been answered too.
            await s.wait(
                lambda: bool(s.observer.errors) or "q33" in s.answers or s.observer.completions() >= 32,
                "an error frame answered the 33rd request",
            )
            await s.cancel()
            await s.close()
            await s.drain_after_close([i for i, _ in frames[:32]])
            return [i for i, _ in frames[:32]], s.observer.errors_since(0), s.answers

    expected, errors, answers = conf.run(scenario())
    expect.one_error(conf, errors, "queue_full", "q33")
    missing = [i for i in expected if i not in answers or answers[i].complete is None]
    assert not missing, f"requests without a closed bracket: {missing}"


def _variation(variations: Recording, name: str) -> Answer:
    request = VARIATIONS[name]
    answer = variations.replay().answers.get(request.request_id or "")
    assert answer is not None and answer.complete is not None, (
        f"{request.request_id!r} was not answered ({variations.error or 'no error'})"
    )
    return answer


@case(
    "4.1.7",
    "§5.1",
    Level.MUST,
    requirements=("R5.1-1b",),
    requirement="| `voice` | string | the voice used; a blend in its canonical form (§4.1) |",
    description="speak the same sentence with voice af_heart and am_michael at speed 2 (one recorded "
    "session)",
    expectation="synthesis_start names the requested voice; both are plausible speech; the audio differs",
)
def test_voice_is_honoured(conf: Probe, variations: Recording) -> None:
    conf.use(variations)
    base, other = _variation(variations, "base"), _variation(variations, "voice")
    assert other.start.voice == "am_michael", f"synthesis_start says voice {other.start.voice!r}"
    expect.spoken(base, SENTENCES[0], speed=FAST)
    expect.spoken(other, SENTENCES[0], speed=FAST)
    assert bytes(other.audio) != bytes(base.audio), "am_michael and af_heart gave the same audio"


@case(
    "4.1.8",
    "§5.1",
    Level.MUST,
    requirements=("R5.1-1c",),
    requirement="| `speed` | number | the speed used |",
    description="speak the same sentence at speed 1.0 and 2.0 (one recorded session)",
    expectation="each synthesis_start says its speed; the fast audio lasts at most 75% of the normal one",
)
def test_speed_is_honoured(conf: Probe, variations: Recording) -> None:
    conf.use(variations)
    base, fast = _variation(variations, "speed"), _variation(variations, "base")
    expect.spoken(base, SENTENCES[0], speed=1.0)
    expect.spoken(fast, SENTENCES[0], speed=FAST)
    assert base.start.speed == 1.0, f"synthesis_start says speed {base.start.speed} for speed 1.0"
    assert fast.start.speed == FAST, f"synthesis_start says speed {fast.start.speed} for speed {FAST}"
    conf.observe(normal_s=base.duration_s, fast_s=fast.duration_s)
    assert fast.duration_s <= 0.75 * base.duration_s, (
        f"speed 2.0 gave {fast.duration_s:.3f} s against {base.duration_s:.3f} s at speed 1.0"
    )


@case(
    "4.1.9",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-6", "R5.1-1d"),
    requirement="Audio is produced at the model's rate (24 kHz for Kokoro) and the server MUST resample it "
    "to `sample_rate` when that differs.",
    description="speak the same sentence at 24000, 22050 and 8000 Hz, speed 2 (one recorded session)",
    expectation="each synthesis_start declares the requested rate; each is plausible speech at that rate "
    "(smooth little-endian PCM); the three durations agree within 3%",
)
def test_sample_rate_is_honoured(conf: Probe, variations: Recording) -> None:
    conf.use(variations)
    base = _variation(variations, "base")
    durations = {24000: base.duration_s}
    for name in ("22050", "8000"):
        answer = _variation(variations, name)
        rate = int(name)
        assert answer.start.sample_rate == rate, (
            f"asked for {rate} Hz, synthesis_start says {answer.start.sample_rate}"
        )
        problems = check_speech(bytes(answer.audio), rate, SENTENCES[0], FAST)
        assert not problems, f"at {rate} Hz: " + "; ".join(problems)
        durations[rate] = answer.duration_s
    conf.observe(durations_s=durations)
    for rate, seconds in durations.items():
        assert abs(seconds - base.duration_s) <= 0.03 * base.duration_s, (
            f"{seconds:.3f} s at {rate} Hz against {base.duration_s:.3f} s at 24000 Hz: the audio is not at "
            "the declared rate"
        )


async def _completions_or_error(s: ObservedStream, count: int) -> list[Answer]:
    """Read until ``count`` brackets closed; fail at once when an error frame arrives instead."""
    await s.wait(lambda: s.observer.completions() >= count or bool(s.observer.errors), f"{count} completions")
    refused = [(e.code, e.request_id, e.message) for e in s.observer.errors_since(0)]
    assert not refused, f"error frames where none was due: {refused}"
    return list(s.observer.history)


@case(
    "4.1.11",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-8a", "R4.1-8b", "R4.1-8c"),
    requirement="When `request_id` is absent the server MUST assign `r<N>` (N = 1, 2, …, skipping ids in "
    "use) and report it in `synthesis_start`.",
    description="on a fresh session send a request without id, then one with the client's id 'r2' (queued "
    "behind the first, so still in use), then another without id; after all three, a fourth without id",
    expectation="the requests without id get exactly r1, r3 (r2 is in use) and r4, reported in their "
    "synthesis_start",
)
def test_server_assigned_ids_exactly(conf: Probe) -> None:
    async def send_without_id(s: ObservedStream) -> None:
        body = {"text": SHORT, "speed": FAST}
        s.expect(None, body)
        await s.send(json.dumps(body).encode())

    async def scenario() -> list[Answer]:
        async with conf.session("assigned-exactly") as s:
            await send_without_id(s)
            await s.request(SENTENCES[1], request_id="r2", speed=FAST)
            await send_without_id(s)
            await _completions_or_error(s, 3)
            await send_without_id(s)
            answers = await _completions_or_error(s, 4)
            await s.close()
            await s.drain()
            return answers

    answers = conf.run(scenario())
    assigned = [a.start.request_id for a in answers if a.request_id != "r2"]
    conf.observe(assigned_ids=assigned)
    assert assigned == ["r1", "r3", "r4"], f"the requests without id were assigned {assigned}"


@case(
    "4.1.12",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-3",),
    requirement="An id MAY be reused once its `synthesis_complete` was sent.",
    description="send a request with id 'again'; once its synthesis_complete arrived, send another request "
    "with the same id",
    expectation="both complete with plausible speech and no error frame (duplicate_request_id is only for "
    "ids queued or active)",
)
def test_request_id_reused_after_completion(conf: Probe) -> None:
    async def scenario() -> tuple[list[Answer], list[Any]]:
        async with conf.session("reuse") as s:
            await s.answer(await s.request(SHORT, request_id="again", speed=FAST))
            await s.request(SENTENCES[1], request_id="again", speed=FAST)
            answers = await _completions_or_error(s, 2)
            await s.close()
            await s.drain()
            return answers, s.observer.errors_since(0)

    answers, errors = conf.run(scenario())
    assert not errors, f"reusing a completed id was refused: {[(e.code, e.message) for e in errors]}"
    expect.spoken(answers[0], SHORT, speed=FAST)
    expect.spoken(answers[1], SENTENCES[1], speed=FAST)


# --- accepted at the edge of every rule (§4.1, §9.2) ------------------------------------------------------


def _leap_second() -> str:
    """A leap-second stamp (`:60`) a minute or two ahead: valid RFC 3339, and the future is accepted."""
    ahead = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
    return ahead.strftime("%Y-%m-%dT%H:%M:60Z")


def _now_in(offset_hours: int, fmt: str = "%Y-%m-%dT%H:%M:%S%z") -> str:
    moment = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=offset_hours)))
    text = moment.strftime(fmt)
    return text[:-2] + ":" + text[-2:] if fmt.endswith("%z") else text


def _padded_to(size: int) -> dict[str, Any]:
    """A request of exactly ``size`` bytes as :func:`test_accepted_at_the_edge` sends it."""
    head = {"text": SHORT, "speed": FAST, "request_id": "edge-1", "padding": ""}
    head["padding"] = "x" * (size - len(json.dumps(head).encode()))
    return head


ACCEPTED: list[tuple[str, Callable[[], dict[str, Any]], str]] = [
    ("a leap second (:60) in request_timestamp", lambda: {"request_timestamp": _leap_second()}, "R4.1-5o"),
    (
        "lower-case 't' and 'z' in request_timestamp (RFC 3339 §5.6 allows them)",
        lambda: {"request_timestamp": _now_in(0, "%Y-%m-%dt%H:%M:%Sz")},
        "R4.1-5n",
    ),
    ("a -05:00 offset in request_timestamp", lambda: {"request_timestamp": _now_in(-5)}, "R4.1-5n"),
    (
        "nine fractional digits in request_timestamp",
        lambda: {"request_timestamp": _now_in(0, "%Y-%m-%dT%H:%M:%S.123456789Z")},
        "R4.1-5n",
    ),
    ("speed 0.5, the slowest allowed", lambda: {"speed": 0.5}, "R4.1-5f"),
    ("a request_id of 128 characters", lambda: {"request_id": "i" * 128}, "R4.1-5l"),
    ("a message of exactly max_message_bytes (65,536 bytes)", lambda: _padded_to(65_536), "R3.1-3k"),
]
"""Messages at the edge of a rule that must be accepted: (what, extra members, requirement)."""


@pytest.mark.parametrize(
    "row",
    [
        param(
            row,
            Case(
                f"4.1.13.{n}",
                "§4.1",
                Level.MUST,
                "A server MUST refuse a message as follows"
                if row[2].startswith("R3.1-3")  # the message's size: §3.1's table
                else "a server MUST refuse a request whose member breaks the member's rule with the code its "
                "last column gives",
                f"send a request with {row[0]}",
                "no error frame; the request completes with plausible speech",
                requirements=(row[2],),
            ),
        )
        for n, row in enumerate(ACCEPTED, 1)
    ],
)
def test_accepted_at_the_edge(conf: Probe, row: tuple[str, Callable[[], dict[str, Any]], str]) -> None:
    what, members, _ = row
    message = {"text": SHORT, "speed": FAST, "request_id": "edge-1", **members()}
    conf.observe(
        message={k: (v if len(str(v)) < 80 else f"<{len(str(v))} characters>") for k, v in message.items()}
    )

    data = json.dumps(message).encode()
    conf.observe(bytes=len(data))

    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("edge") as s:
            s.expect(message["request_id"], message)
            await s.send(data)
            request_id = message["request_id"]
            await s.wait(lambda: s.observer.completed(request_id) or bool(s.observer.errors), "an answer")
            refused = [(e.code, e.message) for e in s.observer.errors_since(0)]
            assert not refused, f"a request with {what} was refused: {refused}"
            answer = await s.answer(message["request_id"])
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    assert not errors, f"a request with {what} was refused: {[(e.code, e.message) for e in errors]}"
    expect.spoken(answer, SHORT, speed=message["speed"])


@case(
    "4.1.41",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-7a", "R4.1-7c"),
    requirement="A request whose id is already queued or active in the session MUST be refused with "
    "`duplicate_request_id` (the first request is unaffected)",
    description="send a two-sentence request 'busy', then 'dup' (queued behind it), then another 'dup' at "
    "once: the duplicate arrives while the first 'dup' is queued, not active",
    expectation="one error frame duplicate_request_id naming 'dup', sent before the first 'dup''s "
    "synthesis_start (so it was queued when refused); the first 'dup' completes with plausible speech of its "
    "text",
)
def test_duplicate_of_a_queued_request(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[tuple[int, Any]]]:
        async with conf.session("duplicate-queued") as s:
            await s.request(TWO_SENTENCES, request_id="busy", speed=FAST)
            await s.request(SENTENCES[0], request_id="dup", speed=FAST)
            await s.send(json.dumps({"text": SHORT, "request_id": "dup"}).encode())
            answer = await s.answer("dup")
            await s.close()
            await s.drain()
            return answer, list(s.observer.errors)

    answer, indexed = conf.run(scenario())
    error = expect.one_error(conf, [e for _, e in indexed], "duplicate_request_id", "dup")
    refused_at = next(i for i, e in indexed if e is error)
    assert refused_at < answer.index, (
        f"the refusal (message {refused_at}) came after 'dup' started (message {answer.index}): the server "
        "read the duplicate only once the first 'dup' was active: this session did not test the queued state"
    )
    expect.spoken(answer, SENTENCES[0], speed=FAST)

"""§15 utterances (token streaming): one bracket per utterance, fragmentation invariance, speech before end,
flush, cancel mid-way, an utterance left open at close, the idle timeout, refusals.

Utterances are OPTIONAL (§1.5, §15.1): every case opens its utterance first and waits for its
``synthesis_start`` (sent in its turn even before any text, §15.4); a server that answers the ``utterance``
message with ``unknown_type`` does not offer them and the case is UNIMPLEMENTED, not FAILED.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from conformance.engine import expect
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.describe import ask, require_features
from conformance.engine.observer import Answer, ErrorView
from conformance.engine.probe import Probe
from conformance.engine.stream import ObservedStream
from conformance.engine.texts import FAST

# Two sentences with a thumbs-up emoji (a surrogate pair in UTF-16) inside the first: split per UTF-16 code
# unit, its halves travel in two messages (§15.2).
REPLY = "Good question \U0001f44d, it streams. The listener hears the reply sooner."

PADDING_S = 0.8
"""One segment's padding: the silence a synthesizer adds around each segment (Kokoro-82M: about 0.8 s)."""

WAIT_S = 15.0
"""Longest wait for audio the server owes without any further message (speech before end, flush): far
beyond a synthesis segment on a loaded CPU, short enough that a server that never speaks fails quickly."""

IDLE_TIMEOUT_S = 20.0
"""The default ``utterance_idle_timeout_s`` (§10): what a server that does not advertise its own uses."""

IDLE_GRACE_S = 15.0
"""How late past its ``utterance_idle_timeout_s`` an idle utterance may end (timers, a loaded machine)."""

EARLY_S = 0.1
"""How much sooner than ``utterance_idle_timeout_s`` after the last accepted message its notice may be read
(clock granularity): the server counts from the message's arrival, after the client sent it."""

SAME_LENGTH_SHARE = 0.1
"""Beyond one segment's padding, the audio of differently split texts may differ by this share of its
length (a deadline-aware server cuts a sentence where its timing says, §10.1); more cannot be the same
words spoken the same way."""


def _utf16_units(text: str) -> list[str]:
    """``text`` as UTF-16 code units: each a one-character ``str``, lone surrogate halves included."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


def _tokens(text: str) -> list[str]:
    """``text`` as a language model streams it: words with their trailing spaces."""
    pieces, word = [], ""
    for char in text:
        if word and not word[-1].isspace() and char.isspace():
            word += char
            continue
        if word and word[-1].isspace() and not char.isspace():
            pieces.append(word)
            word = ""
        word += char
    return [*pieces, word] if word else pieces


def _errors_for(session: ObservedStream, request_id: str) -> list[ErrorView]:
    return [e for e in session.observer.errors_since(0) if e.request_id == request_id]


async def _open(session: ObservedStream, request_id: str, **fields: Any) -> None:
    """Open an utterance and wait for its ``synthesis_start``; raise :class:`Unimplemented` when the
    server refuses the ``utterance`` message with ``unknown_type`` (a server without utterances, §15.1).

    A refusal that names no request (a server whose error frames lack ``request_id``) counts too: nothing
    else is in flight when a case opens its utterance.
    """
    mark = session.observer.fed
    await session.utterance(request_id, **fields)

    def refusals() -> list[ErrorView]:
        return [e for e in session.observer.errors_since(mark) if e.request_id in (request_id, None)]

    def settled() -> bool:
        return request_id in session.answers or bool(refusals())

    await _within(
        WAIT_S,
        session.wait(settled, f"the synthesis_start of utterance {request_id!r} (or its refusal)"),
        f"neither the synthesis_start of utterance {request_id!r} nor a refusal of it (§15.4: it is sent "
        "in the utterance's turn, before any text)",
    )
    # A refusal whose code cannot be read (an error frame without `code`) is taken as unknown_type too:
    # nothing else refuses a well-formed opener on a fresh session, and the frame's own defect is judged
    # by the §5 cases.
    if request_id not in session.answers and any(e.code in ("unknown_type", None) for e in refusals()):
        raise Unimplemented("the server answered the utterance message with unknown_type (§15.1)")
    assert request_id in session.answers, (
        f"utterance {request_id!r} was refused: {[(e.code, e.message) for e in refusals()]}"
    )


async def _within(seconds: float, waiting: Any, what: str) -> None:
    """Await ``waiting``; fail the case with ``what`` when it takes longer than ``seconds``."""
    try:
        await asyncio.wait_for(waiting, seconds)
    except TimeoutError:
        raise AssertionError(f"nothing within {seconds:g} s: {what}") from None


async def _speak(session: ObservedStream, request_id: str, pieces: list[str], **fields: Any) -> Answer:
    """One utterance: opened, ``pieces`` appended one message each, ended; its answer."""
    await _open(session, request_id, **fields)
    for piece in pieces:
        await session.fragment("append", request_id, piece)
    await session.fragment("end", request_id)
    return await session.answer(request_id)


def _no_errors(session: ObservedStream) -> None:
    errors = session.observer.errors_since(0)
    assert not errors, f"unexpected error frames: {[(e.code, e.request_id, e.message) for e in errors]}"


@case(
    "15.4.1",
    "§15.4",
    Level.MUST,
    requirements=("R15.4-2", "R15.1-1", "R15.3-4a"),
    requirement="the server MUST answer it with **exactly one** `synthesis_start` and **exactly one** "
    "`synthesis_complete` whatever happens to it (§6.1), never one bracket per segment or per `flush`",
    description="open an utterance, append two sentences in three fragments with a flush between them, end "
    "it, then send a plain request",
    expectation="one bracket for the utterance, status completed, holding plausible speech of the whole "
    "text; no error frame; the request after it is answered after it",
)
def test_one_bracket_per_utterance(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, Answer, ObservedStream]:
        async with conf.session("utterance-bracket") as s:
            await _open(s, "u1", speed=FAST)
            await s.fragment("append", "u1", "Hello there, ")
            await s.fragment("flush", "u1", "this is the first part.")
            await s.fragment("append", "u1", " And here is a second one.")
            await s.fragment("end", "u1")
            after = await s.request("Hi.", request_id="after-u1", speed=FAST)
            answer, plain = await s.answer("u1"), await s.answer(after)
            await s.close()
            await s.drain()
            return answer, plain, s

    answer, plain, session = conf.run(scenario())
    _no_errors(session)
    expect.spoken(answer, "Hello there, this is the first part. And here is a second one.", speed=FAST)
    expect.completed(plain)
    starts = [a.request_id for a in session.observer.history]
    assert starts == ["u1", "after-u1"], f"brackets opened: {starts} (one per utterance, in order)"


@case(
    "15.3.1",
    "§15.3",
    Level.MUST,
    requirements=("R15.3-3a", "R15.3-3b", "R15.2-2", "R15.2-3", "R15.2-5"),
    requirement="For the same text and the same `flush` positions, the server MUST speak the same words in "
    "the same order however the text was divided into messages",
    description=f"speak {REPLY!r} as three utterances: the whole text in one append; one append per token "
    "(word and its space); one append per UTF-16 code unit, so the emoji's surrogate halves go in two "
    "messages (§15.2)",
    expectation="no error frame; the three complete with plausible speech; when the server sends word "
    "timings, the same words; the audio lengths agree within one segment's padding (0.8 s) plus 10 %",
)
def test_fragmentation_does_not_change_the_speech(conf: Probe) -> None:
    splits = {"whole": [REPLY], "token": _tokens(REPLY), "char": _utf16_units(REPLY)}

    async def scenario() -> tuple[dict[str, Answer], ObservedStream]:
        async with conf.session("utterance-fragments") as s:
            answers = {how: await _speak(s, f"u-{how}", pieces, speed=FAST) for how, pieces in splits.items()}
            await s.close()
            await s.drain()
            return answers, s

    answers, session = conf.run(scenario())
    _no_errors(session)
    lengths = {how: round(a.duration_s, 3) for how, a in answers.items()}
    conf.observe(durations_s=lengths, messages={how: len(p) for how, p in splits.items()})
    for answer in answers.values():
        expect.spoken(answer, REPLY, speed=FAST)
    words = {how: [w.word for w in a.complete.words] for how, a in answers.items() if a.complete.words}
    if words:
        assert len(words) == len(answers) and all(w == words["whole"] for w in words.values()), (
            f"the words differ with the split: {words}"
        )
    whole = answers["whole"].duration_s
    allowed = PADDING_S + SAME_LENGTH_SHARE * whole
    for how in ("token", "char"):
        difference = abs(answers[how].duration_s - whole)
        assert difference <= allowed, (
            f"sent {how} by {how}, the utterance lasts {answers[how].duration_s:.3f} s against {whole:.3f} s "
            f"sent whole: {difference:.3f} s apart, more than {allowed:.3f} s"
        )


@case(
    "15.3.2",
    "§15.3",
    Level.MUST,
    requirements=("R15.3-1a",),
    requirement="The server MUST NOT wait for `end` before it starts speaking",
    description="open an utterance and append a complete first sentence and the start of a second one, "
    "token by token; send nothing more until the utterance's audio starts",
    expectation="audio of the utterance arrives while it is still open (before end); then end it and it "
    "completes",
)
def test_speech_starts_before_end(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, int, ObservedStream]:
        async with conf.session("utterance-early") as s:
            await _open(s, "u1", speed=FAST)
            for piece in _tokens("Good question, and a quick answer. The second sentence is"):
                await s.fragment("append", "u1", piece)
            await _within(
                WAIT_S,
                s.wait(lambda: bool(s.answers["u1"].audio), "audio of the open utterance"),
                "no audio of the utterance's first sentence while it was open (before end)",
            )
            early = len(s.answers["u1"].audio)
            await s.fragment("end", "u1", " still being written.")
            answer = await s.answer("u1")
            await s.close()
            await s.drain()
            return answer, early, s

    answer, early, session = conf.run(scenario())
    _no_errors(session)
    conf.observe(audio_before_end_bytes=early)
    expect.spoken(
        answer, "Good question, and a quick answer. The second sentence is still being written.", speed=FAST
    )


@case(
    "15.3.3",
    "§15.3",
    Level.MUST,
    requirements=("R15.3-4b",),
    requirement="When it accepts a `flush`, the server MUST treat the end of the text received so far as a "
    "segment boundary and MUST speak all of that text without waiting for any further message",
    description="open an utterance, append a sentence without an end (no terminator), flush, and wait",
    expectation="audio of all the flushed text arrives with nothing more sent: as long as the speech of the "
    "text (plausible duration); then end the utterance and it completes with no more audio than a flushed "
    "text and nothing",
)
def test_flush_speaks_what_is_held(conf: Probe) -> None:
    held = "This half sentence has no end yet and"

    def flushed(s: ObservedStream) -> bool:
        # All of the held text is spoken once the audio reaches the shortest plausible length of it.
        from conformance.engine.audio import duration_bounds

        return s.answers["u1"].duration_s >= duration_bounds(held, FAST)[0]

    async def scenario() -> tuple[float, Answer, ObservedStream]:
        async with conf.session("utterance-flush") as s:
            await _open(s, "u1", speed=FAST)
            for piece in _tokens(held):
                await s.fragment("append", "u1", piece)
            await s.fragment("flush", "u1")
            await _within(
                WAIT_S,
                s.wait(lambda: flushed(s), "the audio of the flushed text"),
                "the flushed text was not spoken (nothing more was sent after flush)",
            )
            # Read what else is already on its way, then end the utterance.
            before_end = s.answers["u1"].duration_s
            await s.fragment("end", "u1")
            answer = await s.answer("u1")
            await s.close()
            await s.drain()
            return before_end, answer, s

    before_end, answer, session = conf.run(scenario())
    _no_errors(session)
    conf.observe(audio_before_end_s=round(before_end, 3), audio_s=round(answer.duration_s, 3))
    expect.spoken(answer, held, speed=FAST)


def _require_cancel(errors: list[ErrorView]) -> None:
    if any(e.code == "unknown_type" for e in errors):
        raise Unimplemented("the server answered cancel with unknown_type: it does not offer cancel (§4.2)")


@case(
    "15.5.1",
    "§15.5",
    Level.MUST,
    requirements=("R15.5-4", "R4.2-5a"),
    requirement="A cancelled utterance is no longer open: the server MUST refuse a later `append`, `flush` "
    "or `end` for it with `unknown_request`.",
    description="open an utterance, append three sentences (no end), at its first audio cancel it by id, "
    "then append to it and open a second utterance",
    expectation="the first completes with status cancelled (it was never ended, so the cancel cannot cross "
    "its completion); the append after the cancel gets unknown_request naming it and no other error "
    "comes; the second utterance is answered",
)
def test_cancel_mid_utterance(conf: Probe) -> None:
    text = "One sentence is spoken first. Another one follows it. And a third one ends it."

    async def scenario() -> tuple[Answer, Answer, list[ErrorView]]:
        async with conf.session("utterance-cancel") as s:
            await _open(s, "u1", speed=FAST)
            await s.fragment("append", "u1", text)
            await _within(
                WAIT_S,
                s.wait(lambda: bool(s.answers["u1"].audio), "audio of the utterance"),
                "no audio of the open utterance's first sentence",
            )
            mark = s.observer.fed
            await s.cancel("u1")
            await _within(
                WAIT_S,
                s.wait(
                    lambda: s.observer.completed("u1") or bool(s.observer.errors_since(mark)),
                    "the cancelled utterance's synthesis_complete",
                ),
                "the cancelled utterance was not completed",
            )
            _require_cancel(s.observer.errors_since(mark))  # a server without cancel (§1.5)
            await _within(WAIT_S, s.answer("u1"), "the cancelled utterance was not completed")
            await s.fragment("append", "u1", " Too late.")
            second = await _speak(s, "u2", ["Hi."], speed=FAST)
            await s.close()
            await s.drain()
            return s.answers["u1"], second, s.observer.errors_since(mark)

    cancelled, second, errors = conf.run(scenario())
    _require_cancel(errors)
    expect.completed(cancelled, status="cancelled")
    conf.observe(audio_bytes=len(cancelled.audio))
    expect.one_error(conf, errors, "unknown_request", "u1")
    expect.completed(second)


@case(
    "15.5.2",
    "§15.5",
    Level.MUST,
    requirements=("R15.5-1a", "R15.5-1b", "R15.5-1c"),
    requirement="the server MUST treat every utterance that is open when `close` arrives as if its `end` had "
    "arrived at that moment: the text it holds is spoken and its bracket completes with `status` "
    "`completed`, in order, before the server closes with 1000",
    description="speak a sentence and a long half sentence as one utterance ended with end; then the same "
    "text token by token as a second utterance, left open, and send close",
    expectation="the second completes with status completed and as much speech as the first (within one "
    "segment's padding plus 10 %), and the session then ends (close code 1000 behind the simulator)",
)
def test_utterance_left_open_at_close(conf: Probe) -> None:
    text = "It is done. And this second one, much longer than the first, is only half"
    mark = conf.target.wire_mark()

    async def scenario() -> tuple[Answer, Answer, ObservedStream]:
        async with conf.session("utterance-close") as s:
            ended = await _speak(s, "u-ended", _tokens(text), speed=FAST)
            await _open(s, "u-open", speed=FAST)
            for piece in _tokens(text):
                await s.fragment("append", "u-open", piece)
            await s.close()
            await s.drain_after_close(["u-open"])
            return ended, s.answers["u-open"], s

    ended, left_open, session = conf.run(scenario())
    _no_errors(session)
    expect.spoken(left_open, text, speed=FAST)
    allowed = PADDING_S + SAME_LENGTH_SHARE * ended.duration_s
    conf.observe(ended_s=round(ended.duration_s, 3), left_open_s=round(left_open.duration_s, 3))
    assert abs(left_open.duration_s - ended.duration_s) <= allowed, (
        f"left open at close, the utterance lasts {left_open.duration_s:.3f} s against "
        f"{ended.duration_s:.3f} s ended with end: the text it held was not all spoken"
    )
    if conf.simulated:
        outcomes = conf.target.bidi_outcomes(mark)
        conf.observe(outcomes=outcomes)
        assert outcomes and outcomes[0] == "container-closed: code 1000", f"the session ended as: {outcomes}"


@case(
    "15.5.3",
    "§15.5",
    Level.MUST,
    requirements=("R15.5-3a", "R15.5-3b", "R15.5-3c"),
    requirement="If no message for it is accepted for `utterance_idle_timeout_s` seconds (§10), counted from "
    "its `synthesis_start` or from its last accepted message, whichever is later, the server MUST send an "
    "`error` frame with code `utterance_timeout`, `fatal: false` and the utterance's `request_id`, and then "
    "end the utterance as if `end` had arrived.",
    description="describe (§4.4) to learn the server's utterance_idle_timeout_s (20 s, the default, when it "
    "does not say); open an utterance, append a few words, after 0.3 of that timeout append the rest (so the "
    "last accepted message, not the synthesis_start, starts the count), then send nothing for up to that "
    "timeout plus 15 s",
    expectation="one utterance_timeout error frame naming it, not fatal, inside its bracket, read no sooner "
    "than the timeout after the last append; the utterance completes with status completed and the words "
    "spoken",
)
def test_idle_utterance_times_out(conf: Probe) -> None:
    text = "Spoken after a silence"
    timeouts: list[float] = []
    waited: list[float] = []

    async def scenario() -> tuple[Answer, list[ErrorView]]:
        async with conf.session("utterance-idle") as s:
            try:
                offer = await ask(s, "idle-caps")
            except AssertionError:  # describe itself is broken: its cases judge that (§4.4)
                offer = None
            advertised = None if offer is None else offer.limit("utterance_idle_timeout_s")
            timeouts.append(
                float(advertised) if advertised is not None and advertised > 0 else IDLE_TIMEOUT_S
            )
            await _open(s, "u1", speed=FAST)
            first, rest = text.split(" a ")
            await s.fragment("append", "u1", first)
            await asyncio.sleep(timeouts[0] * 0.3)  # the count starts again at the next message
            await s.fragment("append", "u1", " a " + rest)
            last = time.monotonic()
            mark = s.observer.fed

            def noticed() -> bool:
                return any(e.code == "utterance_timeout" for e in s.observer.errors_since(mark))

            await _within(
                timeouts[0] + IDLE_GRACE_S,
                s.wait(noticed, "the utterance_timeout notice"),
                f"no utterance_timeout within {timeouts[0]:g} s (utterance_idle_timeout_s) plus "
                f"{IDLE_GRACE_S:g} s of the last append",
            )
            waited.append(time.monotonic() - last)
            await _within(
                timeouts[0] + IDLE_GRACE_S,
                s.answer("u1"),  # only the idle timeout can end it
                f"the idle utterance was not ended within {timeouts[0]:g} s (utterance_idle_timeout_s) "
                f"plus {IDLE_GRACE_S:g} s",
            )
            answer = s.answers["u1"]
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    conf.observe(utterance_idle_timeout_s=timeouts[0] if timeouts else None, notice_after_s=waited)
    assert waited[0] >= timeouts[0] - EARLY_S, (
        f"utterance_timeout came {waited[0]:.2f} s after the last accepted append, before the "
        f"{timeouts[0]:g} s utterance_idle_timeout_s: counted from an earlier message or the synthesis_start"
    )
    notice = expect.one_error(conf, errors, "utterance_timeout", "u1")
    assert notice.fatal is False
    expect.spoken(answer, text, speed=FAST)


@case(
    "15.6.1",
    "§15.6",
    Level.MUST,
    requirements=("R15.6-1", "R15.2-4a", "R15.2-4e", "R15.1-1"),
    requirement="An `error` frame that refuses one of these four messages MUST carry `message_type` (§5.4), "
    "the refused message's `type`, whenever that could be read",
    description="on one session: an append naming no utterance; an utterance without request_id; an open "
    "utterance then an append without text, an append whose text starts with a lone low surrogate half, "
    "a flush of text 'A' ending with a high half followed by an append that does not complete it; then the "
    "pair completed and the utterance ended",
    expectation="each refused message gets one error frame: unknown_request, invalid_field, text_required, "
    "invalid_json, invalid_json, each with the message_type of the refused message; the utterance goes on "
    "and completes with its text",
)
def test_refusals_name_the_refused_message(conf: Probe) -> None:
    async def scenario() -> tuple[list[ErrorView], Answer]:
        async with conf.session("utterance-refusals") as s:
            await _open(s, "u1", speed=FAST)
            mark = s.observer.fed
            await s.fragment("append", "nobody", "Hello.")
            await s.send(b'{"type": "utterance"}')
            await s.send(b'{"type": "append", "request_id": "u1"}')
            await s.fragment("append", "u1", "\ude00 is not a character.")
            await s.fragment("flush", "u1", "Hello \ud83d")
            await s.fragment("append", "u1", "there.")  # does not complete the pair
            await s.fragment("append", "u1", "\udc4d there.")  # completes it: 👍
            await s.fragment("end", "u1")
            answer = await s.answer("u1")
            await s.close()
            await s.drain()
            return s.observer.errors_since(mark), answer

    errors, answer = conf.run(scenario())
    seen = [(e.code, e.request_id, e.obj.get("message_type")) for e in errors]
    conf.observe(errors=seen)
    expected = [
        ("unknown_request", "nobody", "append"),
        ("invalid_field", None, "utterance"),
        ("text_required", "u1", "append"),
        ("invalid_json", "u1", "append"),
        ("invalid_json", "u1", "append"),
    ]
    assert [(code, rid) for code, rid, _ in seen] == [(code, rid) for code, rid, _ in expected], seen
    assert all(not e.fatal for e in errors), seen
    missing = [(code, rid) for code, rid, kind in seen if kind is None]
    conf.check("R15.6-1", not missing, f"refusals without message_type: {missing}")
    wrong = [(s, e) for s, e in zip(seen, expected, strict=True) if s[2] is not None and s[2] != e[2]]
    assert not wrong, f"message_type names another message than the refused one: {wrong}"
    expect.spoken(answer, "Hello \U0001f44d there.", speed=FAST)


@case(
    "15.1.1",
    "§15.1",
    Level.MUST,
    requirements=("R5.5-4b",),
    requirement="For a request that asked for marks, MUST send exactly one `marks` frame for each synthesis "
    "segment whose audio it sends, inside the request's bracket, in the order of the segments with "
    "`segment` counting from 0, and each before any audio frame of a later segment.",
    description="describe; on a server that offers utterances and marks, open an utterance with marks: "
    "true (an utterance takes `marks` as a request does, §15.1), append two sentences in two fragments, "
    "end it",
    expectation="the utterance's bracket holds marks frames, segment 0, 1, ..., whose spans cover its audio "
    "from 0 s to the end; a server without utterances or marks gets UNIMPLEMENTED",
)
def test_an_utterance_opened_with_marks_gets_them(conf: Probe) -> None:
    """Found by mutation testing: a server that turned an utterance into a request without its ``marks``
    member passed every case, the marks cases asking only on plain requests."""

    async def scenario() -> Answer:
        async with conf.session("utterance-marks") as s:
            offer = await ask(s, "utterance-marks-features")
            require_features(None if offer is None else offer.features, "utterance", "marks")
            await _open(s, "um1", speed=FAST, marks=True)
            await s.fragment("append", "um1", "The first sentence is here. ")
            await s.fragment("append", "um1", "And the second one follows it.")
            await s.fragment("end", "um1")
            answer = await s.answer("um1")
            await s.close()
            await s.drain()
            return answer

    answer = conf.run(scenario())
    expect.completed(answer)
    spans = [(m.start_s, m.end_s) for m in answer.marks]
    conf.observe(spans=spans, audio_s=round(answer.duration_s, 3))
    assert spans, "the utterance asked for marks and got none"
    assert [m.segment for m in answer.marks] == list(range(len(spans))), (
        f"marks segments {[m.segment for m in answer.marks]}, not 0, 1, ..."
    )
    assert spans[0][0] is not None and spans[-1][1] is not None and spans[0][0] <= 0.05, spans
    assert abs(spans[-1][1] - answer.duration_s) <= 0.05, (
        f"the marks end at {spans[-1][1]} s, the audio at {answer.duration_s:.3f} s"
    )


@case(
    "15.6.2",
    "§15.6",
    Level.MUST,
    requirements=("R15.6-1",),
    requirement="An `error` frame that refuses one of these four messages MUST carry `message_type` (§5.4), "
    "the refused message's `type`, whenever that could be read (from step 4 of §9.2 on, and for the "
    "surrogate rules of §15.2)",
    description="open an utterance; send an append whose text holds an escaped high surrogate half in the "
    "middle of its text, and a flush with a lone low half in a member other than text; then append the "
    "rest and end the utterance",
    expectation="two error frames invalid_json, each naming the utterance (request_id) and the refused "
    "message's type (append, flush), not fatal; the utterance goes on and completes with the text of its "
    "accepted fragments only",
)
def test_lone_surrogate_inside_a_fragment_names_the_message(conf: Probe) -> None:
    async def scenario() -> tuple[list[ErrorView], Answer]:
        async with conf.session("utterance-lone-surrogate") as s:
            await _open(s, "u1", speed=FAST)
            mark = s.observer.fed
            # A half anywhere but the edges of `text`, or in another member, is the lone surrogate of §3.1
            # (§15.2 item 3): refused, but the message's type and request_id can still be read.
            await s.send(b'{"type": "append", "request_id": "u1", "text": "Hel\\ud83dlo. "}')
            await s.send(b'{"type": "flush", "request_id": "u1", "note": "\\udc4d"}')
            await s.fragment("append", "u1", "It goes on.")
            await s.fragment("end", "u1")
            answer = await s.answer("u1")
            await s.close()
            await s.drain()
            return s.observer.errors_since(mark), answer

    errors, answer = conf.run(scenario())
    seen = [(e.code, e.request_id, e.obj.get("message_type")) for e in errors]
    conf.observe(errors=seen)
    assert [code for code, _, _ in seen] == ["invalid_json", "invalid_json"], seen
    assert all(not e.fatal for e in errors), seen
    unnamed = [(code, rid) for code, rid, kind in seen if kind is None or rid is None]
    conf.check("R15.6-1", not unnamed, f"refusals without message_type or request_id: {unnamed}")
    assert [(rid, kind) for _, rid, kind in seen] == [("u1", "append"), ("u1", "flush")], seen
    expect.spoken(answer, "It goes on.", speed=FAST)


# A letter outside the Basic Multilingual Plane that is spoken (MATHEMATICAL BOLD CAPITAL A, U+1D400: a
# surrogate pair in UTF-16), and the text it is said in.
BMP_OUTSIDE = "\U0001d400"
SPOKEN_PAIR = f"Say {BMP_OUTSIDE} now."


@case(
    "15.2.1",
    "§15.2",
    Level.MUST,
    requirements=("R15.2-3", "R15.2-2"),
    requirement="while a half is held, the next non-empty `text` of the utterance MUST begin with an escaped "
    "low surrogate (`\\uDC00`–`\\uDFFF`), and the server MUST join the two into one code point.",
    description=f"speak {SPOKEN_PAIR!r} (its bold A is a surrogate pair) as a request, then as an "
    "utterance whose first append ends with the pair's high half and whose second begins with its low half",
    expectation="no error frame; both complete; when the server sends word timings, the utterance's words "
    "are the request's (the pair joined into U+1D400, not another code point)",
)
def test_split_pair_is_joined_into_its_code_point(conf: Probe) -> None:
    high, low = _utf16_units(BMP_OUTSIDE)
    before, after = SPOKEN_PAIR.split(BMP_OUTSIDE)

    async def scenario() -> tuple[Answer, Answer, ObservedStream]:
        async with conf.session("utterance-pair-joined") as s:
            await s.request(SPOKEN_PAIR, request_id="whole", speed=FAST)
            whole = await s.answer("whole")
            await _open(s, "u1", speed=FAST)
            await s.fragment("append", "u1", before + high)
            await s.fragment("append", "u1", low + after)
            await s.fragment("end", "u1")
            split = await s.answer("u1")
            await s.close()
            await s.drain()
            return whole, split, s

    whole, split, session = conf.run(scenario())
    _no_errors(session)
    words = {how: [w.word for w in a.complete.words or []] for how, a in (("whole", whole), ("split", split))}
    conf.observe(words=words)
    assert words["split"] == words["whole"], f"the words differ when the pair is split: {words}"


@case(
    "15.2.2",
    "§15.2",
    Level.MUST,
    requirements=("R15.2-4a", "R15.2-4b", "R15.2-4c", "R15.2-4d"),
    requirement="an `end` without `text` (or with empty `text`) while a half is held",
    description="open an utterance; flush 'Hi ' ending with the high half of U+1F44D; append 'now' (no low "
    "half); send end without text; send end whose text is the low half, ' and ' and a high half; then append "
    "the low half and ' there.', and end",
    expectation="the append and the two ends are each refused with invalid_json naming the utterance and "
    "change nothing: the half stays held, the append completes the pair, the last end ends the "
    "utterance, which speaks 'Hi 👍 there.'",
)
def test_an_end_is_refused_while_a_half_is_held_or_ends_on_one(conf: Probe) -> None:
    high, low = _utf16_units("\U0001f44d")

    async def scenario() -> tuple[list[ErrorView], Answer]:
        async with conf.session("utterance-end-on-half") as s:
            await _open(s, "u1", speed=FAST)
            mark = s.observer.fed
            await s.fragment("flush", "u1", "Hi " + high)
            await s.fragment("append", "u1", "now")  # does not begin with the low half: refused
            await s.fragment("end", "u1")  # a half is held: refused
            await s.fragment("end", "u1", low + " and " + high)  # ends on a high half: refused
            await s.fragment("append", "u1", low + " there.")  # the held half is completed
            await s.fragment("end", "u1")
            answer = await s.answer("u1")
            await s.close()
            await s.drain()
            return s.observer.errors_since(mark), answer

    errors, answer = conf.run(scenario())
    seen = [(e.code, e.request_id, e.obj.get("message_type")) for e in errors]
    conf.observe(errors=seen)
    assert [(code, rid) for code, rid, _ in seen] == [("invalid_json", "u1")] * 3, (
        f"error frames {seen}; expected invalid_json for the append and each of the two ends, naming u1"
    )
    expect.spoken(answer, "Hi \U0001f44d there.", speed=FAST)

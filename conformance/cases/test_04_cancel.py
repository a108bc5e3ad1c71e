"""§4.2 cancel, §7.2 cancel-then-close (barge-in) and §5.3 what a cancelled request says it spoke."""

from __future__ import annotations

from typing import Any

from conformance.engine import clauses, expect
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.describe import require_features
from conformance.engine.probe import Probe, Recording
from conformance.engine.stream import Answer
from conformance.engine.texts import FAST, LONG, SENTENCES, SHORT, TWO_SENTENCES


def _require_cancel(errors: list[Any]) -> None:
    """Cancel is OPTIONAL (§1.5, §4.2): a server without it refuses every cancel with ``unknown_type``."""
    if any(e.code == "unknown_type" for e in errors):
        raise Unimplemented("the server answered cancel with unknown_type: it does not offer cancel (§4.2)")


def _cancelled_or_crossed(conf: Probe, answer: Answer, errors: list[Any]) -> str:
    """``cancelled``, or ``crossed`` when the cancel crossed the request's completion (§4.2 allows it)."""
    _require_cancel(errors)
    assert answer.complete is not None, f"{answer.request_id!r} got no synthesis_complete"
    crossed = any(e.code == "unknown_request" for e in errors)
    if answer.complete.status == "cancelled" or (answer.complete.status is None and not crossed):
        assert not errors, f"unexpected error frames: {[e.code for e in errors]}"
        return "cancelled"
    expect.completed(answer)
    expect.one_error(conf, errors, "unknown_request", answer.request_id)
    return "crossed"


@case(
    "4.2.1",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-6b", "R4.2-5a", "R4.2-1", "R1.5-2"),
    requirement="an **active** request: the server MUST stop synthesizing it and send at most the audio it "
    "has already produced for the current chunk",
    description="send a two-sentence request; at its first audio frame send cancel naming it",
    expectation="its synthesis_complete has status cancelled and audio_bytes equal to the audio sent (or, if "
    "the cancel crossed the completion, status completed and one unknown_request error)",
)
def test_cancel_active_request(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-active") as s:
            await s.request(TWO_SENTENCES, request_id="c1", speed=FAST)
            await s.began("c1")
            await s.cancel("c1")
            answer = await s.answer("c1")
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    conf.observe(outcome=_cancelled_or_crossed(conf, answer, errors), audio_bytes=len(answer.audio))


@case(
    "4.2.2",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-7a", "R4.2-7b", "R4.2-7c", "R4.2-5a", "R4.2-1", "R1.5-2", "R4.2-2a"),
    requirement="a **queued** request: in its turn, the server MUST send its `synthesis_start` immediately "
    "followed by its `synthesis_complete` with `status` `cancelled` and `audio_bytes` 0",
    description="send a two-sentence request, then a short one; cancel the short one at once",
    expectation="the first completes normally; the second gets synthesis_start then synthesis_complete "
    "status cancelled, audio_bytes 0, no audio",
)
def test_cancel_queued_request(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, Answer, list[Any]]:
        async with conf.session("cancel-queued") as s:
            await s.request(TWO_SENTENCES, request_id="c2a", speed=FAST)
            await s.request(SHORT, request_id="c2b")
            await s.cancel("c2b")
            first, second = await s.answer("c2a"), await s.answer("c2b")
            await s.close()
            await s.drain()
            return first, second, s.observer.errors_since(0)

    first, second, errors = conf.run(scenario())
    _require_cancel(errors)
    assert not errors, f"unexpected error frames: {[(e.code, e.request_id) for e in errors]}"
    expect.spoken(first, TWO_SENTENCES, speed=FAST)
    expect.completed(second, status="cancelled")
    assert second.complete is not None and not second.audio, (
        f"the cancelled queued request carried {len(second.audio)} audio bytes"
    )
    assert second.complete.audio_bytes in (0, None), (  # None: a missing member is §5.3's finding
        f"the cancelled queued request's synthesis_complete says audio_bytes {second.complete.audio_bytes}"
    )


@case(
    "4.2.3",
    "§4.2",
    Level.MUST,
    requirements=(
        "R4.2-4a",
        "R4.2-4b",
        "R4.2-8",
        "R4.2-1",
        "R1.5-2",
    ),
    requirement="A cancel without `request_id` when nothing is queued or active does nothing and MUST NOT be "
    "refused.",
    description='send {"type": "cancel"} on an idle session, then a request',
    expectation="no error frame; the request completes",
)
def test_cancel_all_when_idle(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-idle") as s:
            await s.cancel(data_type="UTF8")
            answer = await s.answer(await s.request(SHORT, speed=FAST))
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    _require_cancel(errors)
    assert not errors, f"error frames for an idle cancel: {[(e.code, e.message) for e in errors]}"
    expect.spoken(answer, SHORT, speed=FAST)


@case(
    "7.2.1",
    "§7.2",
    Level.MUST,
    requirements=("R4.2-5a", "R7.1-3a", "R7.1-3b", "R4.2-1", "R1.5-2"),
    requirement="Every request is answered at once with its (possibly empty) cancelled bracket (§4.2), and "
    "the session closes with 1000.",
    description="send a two-sentence request and a second one; at the first audio frame send cancel (no id), "
    "then close",
    expectation="the first ends cancelled (or completed, if the cancel crossed it), the second cancelled "
    "with audio_bytes 0; the session then ends (close code 1000, checked behind the simulator)",
)
def test_cancel_then_close_aborts(conf: Probe) -> None:
    mark = conf.target.wire_mark()

    async def scenario() -> tuple[Answer, Answer, list[Any]]:
        async with conf.session("abort") as s:
            await s.request(TWO_SENTENCES, request_id="ab1")
            await s.request(SENTENCES[1], request_id="ab2")
            await s.began("ab1")
            await s.cancel()
            await s.close()
            await s.drain_after_close(["ab1", "ab2"])
            return s.answers["ab1"], s.answers["ab2"], s.observer.errors_since(0)

    first, second, errors = conf.run(scenario())
    _require_cancel(errors)
    assert first.complete is not None and first.complete.status in ("cancelled", "completed", None), (
        first.complete
    )
    expect.completed(second, status="cancelled")
    assert second.complete is not None and not second.audio, (
        f"the cancelled ab2 carried {len(second.audio)} bytes"
    )
    if conf.simulated:
        outcomes = conf.target.bidi_outcomes(mark)
        conf.observe(outcomes=outcomes)
        conf.check(
            clauses.CLOSE_1000,
            bool(outcomes) and outcomes[0] == "container-closed: code 1000",
            f"the session ended as: {outcomes}",
        )


@case(
    "4.2.4",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-6a", "R4.2-1", "R1.5-2", "R4.2-2b"),
    requirement="an **active** request: the server MUST stop synthesizing it and send at most the audio it "
    "has already produced for the current chunk (in practice no more than one synthesis segment, about one "
    "sentence)",
    description=f"send the {LONG.count('. ') + 1}-sentence long text of 4.1.10 at speed 2; at its first "
    "audio frame send cancel naming it; compare with the same request uncancelled (the 4.1.10 recording)",
    expectation="the request ends cancelled with at most half the audio of the uncancelled one (about one "
    "segment): a server that acknowledges the cancel but streams the whole request fails",
)
def test_cancel_stops_synthesis(conf: Probe, long_text: Recording) -> None:
    conf.use(long_text)
    whole = long_text.replay().answers.get("long-1")
    assert whole is not None and whole.complete is not None and whole.audio, (
        f"the uncancelled long request was not answered ({long_text.error or 'no error'}): no reference"
    )
    sent_at: list[int] = []

    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-stops") as s:
            await s.request(LONG, request_id="stop-1", speed=FAST)
            await s.began("stop-1")
            sent_at.append(len(s.answers["stop-1"].audio))
            await s.cancel("stop-1")
            answer = await s.answer("stop-1")
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    _require_cancel(errors)
    received, uncancelled = len(answer.audio), len(whole.audio)
    conf.observe(
        audio_before_cancel=sent_at[0],
        audio_bytes=received,
        uncancelled_audio_bytes=uncancelled,
        share=round(received / uncancelled, 3),
    )
    assert received <= 0.5 * uncancelled, (
        f"cancelled at its first audio, the request still carried {received} audio bytes, "
        f"{100 * received / uncancelled:.0f}% of the {uncancelled} bytes of the same request uncancelled "
        f"({received - sent_at[0]} after the cancel): synthesis did not stop"
    )
    status = answer.complete.status if answer.complete else None
    assert answer.complete is not None and status in ("cancelled", None), (
        f"stop-1 ended with status {status!r}, expected cancelled"
    )


WORD_SLACK_S = 0.05
"""Slack between a word's end and the end of the audio sent: resampling and millisecond rounding (§5.3)."""


def _spoken(words: Any) -> list[str]:
    """The words' letters and digits, lower case, punctuation entries left out: how two runs of the same text
    are compared whatever the cut between segments (§10.1)."""
    out = []
    for word in words:
        kept = "".join(c for c in word.word.casefold() if c.isalnum())
        if kept:
            out.append(kept)
    return out


@case(
    "5.3.2",
    "§5.3",
    Level.MUST,
    requirements=("R5.3-4a", "R5.3-4b", "R5.3-3", "R1.5-6", "R4.2-1"),
    requirement="A server that lists `cancel_words` MUST put in the `synthesis_complete` of a cancelled "
    "request in a language with word timings whose `audio_bytes` is above 0 the `words` of the audio it "
    "sent: every word of that audio and no word whose audio it did not send.",
    description="describe; send the long text of 4.1.10 at speed 2; at its first audio frame send cancel "
    "naming it; compare its words with those of the same request uncancelled (the 4.1.10 recording)",
    expectation="status cancelled with words: at least one, each ending by total_duration_s (within "
    f"{WORD_SLACK_S} s), the first words of the uncancelled request in order. UNIMPLEMENTED on a server "
    "without cancel or that does not list cancel_words",
)
def test_cancel_says_the_words_sent(conf: Probe, long_text: Recording) -> None:
    from conformance.engine.describe import ask

    conf.use(long_text)
    whole = long_text.replay().answers.get("long-1")
    assert whole is not None and whole.complete is not None, (
        f"the uncancelled long request was not answered ({long_text.error or 'no error'}): no reference"
    )
    offered: list[Any] = []

    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-words") as s:
            offer = await ask(s, "cw-caps")
            offered.append(None if offer is None else sorted(offer.features))
            if offer is None or "cancel_words" not in offer.features:
                return s.answers.get("none"), []  # type: ignore[return-value]
            await s.request(LONG, request_id="cw-1", speed=FAST)
            await s.began("cw-1")
            await s.cancel("cw-1")
            answer = await s.answer("cw-1")
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    require_features(offered[0] if offered else None, "cancel_words")
    _require_cancel(errors)
    if not whole.complete.words:
        raise Unimplemented("the same request uncancelled carried no words: English has no word timings here")
    complete = answer.complete
    assert complete is not None and complete.status == "cancelled", (
        f"cw-1 ended with status {complete.status if complete else None!r}, expected cancelled"
    )
    sent_s = complete.total_duration_s or 0.0
    words = complete.words
    conf.observe(
        audio_s=sent_s,
        words=None if words is None else [[w.word, w.start_s, w.end_s] for w in words],
        uncancelled_words=len(whole.complete.words),
    )
    if not complete.audio_bytes:
        return  # no audio sent: nothing to say (a server that stopped before the first frame)
    assert words is not None, (
        f"the cancelled request sent {sent_s} s of audio and its synthesis_complete carries no words"
    )
    assert words, f"the cancelled request sent {sent_s} s of audio and its words are empty"
    late = [(w.word, w.end_s) for w in words if w.end_s > sent_s + WORD_SLACK_S]
    assert not late, f"words whose audio was never sent (ending after the {sent_s} s sent): {late[:5]}" + (
        f" and {len(late) - 5} more" if len(late) > 5 else ""
    )
    said, reference = _spoken(words), _spoken(whole.complete.words)
    assert said == reference[: len(said)], (
        f"the words are not the first words of the same request uncancelled: {said[:8]} against "
        f"{reference[: max(8, len(said))][:8]}"
    )


@case(
    "4.2.41",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-2c",),
    requirement="A request named by `request_id` MUST be queued or active and not already cancelled; "
    "otherwise the cancel is refused with `unknown_request`",
    description="send a two-sentence request, then a short one; cancel the short one twice at once (the "
    "second cancel names a request that is still queued but already cancelled)",
    expectation="exactly one error frame, unknown_request naming the short one, for the second cancel; the "
    "short one gets its synthesis_start and synthesis_complete status cancelled",
)
def test_cancel_of_a_cancelled_request(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-twice") as s:
            await s.request(TWO_SENTENCES, request_id="c41a", speed=FAST)
            await s.request(SHORT, request_id="c41b")
            await s.cancel("c41b")
            await s.cancel("c41b")
            await s.answer("c41a")
            second = await s.answer("c41b")
            await s.close()
            await s.drain()
            return second, s.observer.errors_since(0)

    second, errors = conf.run(scenario())
    _require_cancel(errors)
    expect.one_error(conf, errors, "unknown_request", "c41b")
    expect.completed(second, status="cancelled")


@case(
    "4.2.42",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-6c",),
    requirement="then its `synthesis_complete` with `status` `cancelled` and `audio_bytes` counting the "
    "audio frames it did send",
    description="send the long text of 4.1.10 at speed 2; at its first audio frame send cancel naming it; "
    "add up the audio frames of its bracket",
    expectation="synthesis_complete status cancelled whose audio_bytes is the number of audio bytes its "
    "bracket carried",
)
def test_cancelled_audio_bytes(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, list[Any]]:
        async with conf.session("cancel-bytes") as s:
            await s.request(LONG, request_id="c42", speed=FAST)
            await s.began("c42", or_complete=False)
            await s.cancel("c42")
            answer = await s.answer("c42")
            await s.close()
            await s.drain()
            return answer, s.observer.errors_since(0)

    answer, errors = conf.run(scenario())
    _require_cancel(errors)
    expect.completed(answer, status="cancelled")
    assert answer.complete is not None and answer.complete.audio_bytes == sum(answer.frames), (
        f"audio_bytes {answer.complete.audio_bytes if answer.complete else None}; the bracket carried "
        f"{sum(answer.frames)} audio bytes"
    )


@case(
    "4.2.43",
    "§4.2",
    Level.MUST,
    requirements=("R4.2-5a", "R4.2-5b"),
    requirement="**Every cancelled request MUST still get exactly one `synthesis_start` and one "
    '`synthesis_complete`**, the latter with `"status": "cancelled"`',
    description="send the long text of 4.1.10 at speed 2 and a short request behind it; at the first's first "
    "audio frame (it is active, the second queued) send cancel naming each; then a third request; close and "
    "read to the end",
    expectation="each cancelled request got exactly one synthesis_start and exactly one synthesis_complete, "
    "with status cancelled; the third completes",
)
def test_a_cancelled_request_gets_one_bracket_active_or_queued(conf: Probe) -> None:
    async def scenario() -> tuple[dict[str, int], dict[str, Answer], list[str | None], list[Any]]:
        async with conf.session("cancel-one-bracket") as s:
            await s.request(LONG, request_id="c43a", speed=FAST)
            await s.request(SHORT, request_id="c43q", speed=FAST)
            await s.began("c43a")
            await s.cancel("c43a")
            await s.cancel("c43q")
            await s.request(SHORT, request_id="c43n", speed=FAST)
            answers = {rid: await s.answer(rid) for rid in ("c43a", "c43q", "c43n")}
            await s.close()
            await s.drain()
            starts = {rid: sum(a.request_id == rid for a in s.observer.history) for rid in answers}
            return starts, answers, list(s.observer.orphans), s.observer.errors_since(0)

    starts, answers, orphans, errors = conf.run(scenario())
    _require_cancel(errors)
    conf.observe(starts=starts, orphan_completes=orphans)
    problems = [f"{rid} got {n} synthesis_start frames" for rid, n in starts.items() if n != 1]
    problems += [f"{rid} got a second synthesis_complete" for rid in ("c43a", "c43q") if rid in orphans]
    for rid in ("c43a", "c43q"):
        complete = answers[rid].complete
        status = None if complete is None else complete.status
        if status != "cancelled":
            problems.append(f"{rid}'s synthesis_complete says status {status!r}, not cancelled")
    assert not problems, "; ".join(problems)
    expect.completed(answers["c43n"])

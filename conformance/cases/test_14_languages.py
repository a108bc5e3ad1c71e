"""§4.4 the voice list and §14.1 languages: every voice a server lists is accepted, and every language it
lists is spoken.

Both cases start from ``describe`` (version 1.1). A server that answers it with ``unknown_type`` does not
offer it (§1.5): the cases are then UNIMPLEMENTED.
"""

from __future__ import annotations

from typing import Any

from conformance.engine.audio import check_speech
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.describe import ask
from conformance.engine.probe import Probe
from conformance.engine.stream import Answer, ObservedStream
from conformance.engine.texts import FAST, NATIVE, SHORT
from protocol.messages import Capabilities

UNLISTED_VOICE = "zz_not_listed"
"""A voice name of the §4.1 shape that no server lists."""


async def _describe(session: ObservedStream) -> Capabilities:
    """Send ``describe`` on ``session`` and return the ``capabilities`` it answers (§4.4).

    Raises:
        Unimplemented: the server answered ``unknown_type``: it does not offer describe.
    """
    offer = await ask(session, "voices")
    if offer is None:
        raise Unimplemented(
            "the server answered describe with unknown_type: it does not offer describe (§4.4)"
        )
    return offer.capabilities()


def _text_for(capabilities: Capabilities, code: str) -> str:
    tag = next(language.tag for language in capabilities.languages if language.code == code)
    return NATIVE.get(tag.split("-")[0].lower(), SHORT)


@case(
    "4.4.1",
    "§4.4",
    Level.MUST,
    requirements=("R4.4-5a", "R4.4-5b"),
    requirement="The voice list is exact: a request naming a listed voice MUST NOT be refused with "
    "`invalid_voice`, and one naming any other voice MUST be.",
    description="describe; then, in batches smaller than max_queue, one request per listed voice in its "
    "language followed by cancel (or, without cancel, waiting for each answer); then a request naming "
    f"{UNLISTED_VOICE}",
    expectation="every listed voice's request gets its bracket (completed or cancelled) and no "
    f"invalid_voice; the {UNLISTED_VOICE} request is refused with invalid_voice",
)
def test_every_listed_voice_is_accepted(conf: Probe) -> None:
    async def scenario() -> tuple[Capabilities, dict[str, Answer], list[Any]]:
        async with conf.session("voices") as s:
            capabilities = await _describe(s)
            voices = list(capabilities.voices)
            batch = max(1, min(16, int(capabilities.limits.get("max_queue", 32)) - 1))
            can_cancel = "cancel" in capabilities.features
            sent: dict[str, str] = {}
            for start in range(0, len(voices), batch):
                ids = []
                for voice in voices[start : start + batch]:
                    text = _text_for(capabilities, voice.language)
                    rid = await s.request(text, request_id=f"v-{voice.id}", voice=voice.id, speed=FAST)
                    sent[rid] = voice.id
                    ids.append(rid)
                if can_cancel:
                    await s.cancel()

                def settled(ids: list[str] = ids) -> bool:
                    refused = {error.request_id for _, error in s.observer.errors}
                    return all(
                        rid in refused or (rid in s.answers and s.answers[rid].complete is not None)
                        for rid in ids
                    )

                await s.wait(settled, "every request of the batch answered or refused")
            await s.request(SHORT, request_id="unlisted", voice=UNLISTED_VOICE, speed=FAST)
            await s.wait(
                lambda: (
                    any(error.request_id == "unlisted" for _, error in s.observer.errors)
                    or "unlisted" in s.completes_seen()
                ),
                f"the answer to {UNLISTED_VOICE}",
            )
            await s.close()
            await s.drain()
            return capabilities, dict(s.answers), [error for _, error in s.observer.errors]

    capabilities, answers, errors = conf.run(scenario())
    refused = {error.request_id: error.code for error in errors}
    wrongly = sorted(
        voice.id for voice in capabilities.voices if refused.get(f"v-{voice.id}") == "invalid_voice"
    )
    assert not wrongly, f"listed voices refused with invalid_voice: {wrongly}"
    unanswered = sorted(
        voice.id
        for voice in capabilities.voices
        if f"v-{voice.id}" not in refused and f"v-{voice.id}" not in answers
    )
    assert not unanswered, f"listed voices whose requests got no bracket: {unanswered}"
    # A refusal without a code (R5-1 and R6.3-3, judged by 3.2.1 and 9.2.8) is still a refusal here.
    assert refused.get("unlisted") in ("invalid_voice", None) and "unlisted" in refused, (
        f"a request naming {UNLISTED_VOICE}, which the server does not list, was not refused with "
        f"invalid_voice (got {refused.get('unlisted')!r})"
    )


@case(
    "14.1.1",
    "§14.1",
    Level.MUST,
    requirements=("R14.1-2", "R14.1-1"),
    requirement="A server that lists a language with `word_timings: true` MUST send `words` for every "
    "`completed` request in that language whose audio holds at least one word",
    description="describe; for each language listed, one of its voices speaks a short native sentence "
    "(conformance/engine/texts.py NATIVE) at speed 2",
    expectation="each request completes with plausible speech for the text in that language (length for "
    "its script, not silence); with word_timings true its synthesis_complete has words, in order, within "
    "the audio",
)
def test_every_listed_language_is_spoken(conf: Probe) -> None:
    async def scenario() -> tuple[Capabilities, dict[str, Answer]]:
        async with conf.session("languages") as s:
            capabilities = await _describe(s)
            for language in capabilities.languages:
                voice = next(v.id for v in capabilities.voices if v.language == language.code)
                await s.request(
                    _text_for(capabilities, language.code),
                    request_id=f"lang-{language.code}",
                    voice=voice,
                    speed=FAST,
                )
            await s.close()
            await s.drain()
            return capabilities, dict(s.answers)

    capabilities, answers = conf.run(scenario())
    problems = []
    for language in capabilities.languages:
        answer = answers.get(f"lang-{language.code}")
        text = _text_for(capabilities, language.code)
        if answer is None or answer.complete is None:
            problems.append(f"{language.tag}: no synthesis_complete")
            continue
        if answer.complete.status not in ("completed", None):
            problems.append(f"{language.tag}: status {answer.complete.status!r}")
            continue
        problems += [
            f"{language.tag}: {p}"
            for p in check_speech(bytes(answer.audio), answer.start.sample_rate, text, FAST)
        ]
        if language.word_timings:
            words = answer.complete.words
            if not words:
                problems.append(f"{language.tag}: listed with word_timings true, but no words")
                continue
            starts = [w.start_s for w in words]
            if starts != sorted(starts) or any(w.start_s > w.end_s for w in words):
                problems.append(f"{language.tag}: words out of order or ending before they start")
            if words[-1].end_s > answer.duration_s + 0.05:
                problems.append(f"{language.tag}: words end at {words[-1].end_s} s, after the audio's end")
    assert not problems, "; ".join(problems)

"""Voice blends (§4.1, version 1.1): accepted, echoed in canonical form, mixed in proportion, stable, and
invalid blends refused with ``invalid_voice``.

One recorded session (:func:`conformance.engine.recordings.blends`) asks ``describe``, then speaks one
sentence in af_bella, in af_sky, in the blends ``af_bella(3)+af_sky(1)`` and ``af_bella+af_sky(3)``, and in
the first blend again written ``af_sky(2)+af_bella(6)``, with four invalid blends between them. Voices are
compared by their long-term spectra (:func:`conformance.engine.audio.voice_distance_db`), which do not depend
on the words' timing. Blends are OPTIONAL: a server whose ``capabilities.features`` lack ``voice_blend``, or
that offers no ``describe`` and refuses the blends with ``invalid_voice``, gets ``UNIMPLEMENTED``.
"""

from __future__ import annotations

from conformance.engine.audio import check_speech, voice_distance_db
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.observer import Answer, ErrorView
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import BLEND_CANONICAL, BLEND_REFUSALS, BLENDED

DIFFERENT_DB = 1.0
"""Least voice distance read as a different voice: Kokoro's voices are several dB apart and a 3:1 blend
about 2 dB from its main voice; the same voice twice is 0 dB (a deterministic server) or a fraction."""


def _judge(conf: Probe, blends: Recording) -> tuple[dict[str, Answer], dict[str, ErrorView]]:
    """The blend session's answers and refusals by name; UNIMPLEMENTED when the server offers no blends."""
    conf.use(blends)
    features = blends.extra.get("features")
    if features is not None and "voice_blend" not in features:
        raise Unimplemented("capabilities.features does not list voice_blend: the server offers no blends")
    observer = blends.replay()
    names = {request.request_id: name for name, request in BLENDED.items()}
    names |= {f"bl-x-{name}": f"x-{name}" for name in BLEND_REFUSALS}
    answers = {names[rid]: a for rid, a in observer.answers.items() if rid in names and a.complete}
    refused = {names[e.request_id]: e for e in observer.errors_since(0) if e.request_id in names}
    if features is None and refused.get("ab") is not None and refused["ab"].code == "invalid_voice":
        raise Unimplemented("no describe, and the blend af_bella(3)+af_sky(1) was refused with invalid_voice")
    wanted = [name for name in BLENDED if name not in answers]
    assert not wanted, f"no complete answer to {wanted}" + (
        f" (refused: {[(n, refused[n].code) for n in wanted if n in refused]})" if refused else ""
    )
    return answers, refused


def _pcm(answer: Answer) -> bytes:
    return bytes(answer.audio)


@case(
    "4.1.16",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-15", "R4.1-16a", "R4.1-18", "R5.1-1b"),
    requirement="`synthesis_start.voice` (§5.1; the SSE `synthesis_start`, §11.4) MUST be the request's "
    "blend in canonical form.",
    description="in one session: af_bella, af_sky, af_bella(3)+af_sky(1), af_bella+af_sky(3) and "
    "af_sky(2)+af_bella(6), one sentence each at speed 2",
    expectation="every request is answered (completed); synthesis_start.voice is af_bella, af_sky, "
    "af_bella(0.75)+af_sky(0.25), af_bella(0.25)+af_sky(0.75) and af_bella(0.75)+af_sky(0.25); a server "
    "that does not list voice_blend is UNIMPLEMENTED",
)
def test_blends_are_echoed_in_canonical_form(conf: Probe, blends: Recording) -> None:
    answers, _ = _judge(conf, blends)
    echoed = {name: answers[name].start.obj.get("voice") for name in BLENDED}
    conf.observe(echoed=echoed)
    wrong = {name: voice for name, voice in echoed.items() if voice != BLEND_CANONICAL[name]}
    assert not wrong, f"synthesis_start.voice {wrong}; the canonical forms are {BLEND_CANONICAL}"
    for name, answer in answers.items():
        status = answer.complete.obj.get("status") if answer.complete else None
        assert status == "completed", f"{name}: synthesis_complete status {status}"


@case(
    "4.1.17",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-19a",),
    requirement="The server MUST speak a blend in a voice that mixes its voices in the proportions of the "
    "canonical weights",
    description="compare the long-term spectra of af_bella, af_sky, af_bella(3)+af_sky(1) and "
    "af_bella+af_sky(3) (the same sentence each)",
    expectation=f"each is plausible speech; each blend is at least {DIFFERENT_DB} dB from both voices and "
    "from the other blend; the 3:1 blend is nearer af_bella than the 1:3 blend is, and the 1:3 blend nearer "
    "af_sky than the 3:1 blend is",
)
def test_blends_mix_their_voices_in_proportion(conf: Probe, blends: Recording) -> None:
    answers, _ = _judge(conf, blends)
    text, speed = BLENDED["a"].text, BLENDED["a"].speed
    for name in ("a", "b", "ab", "ba"):
        answer = answers[name]
        problems = check_speech(_pcm(answer), answer.start.sample_rate, text, speed)
        assert not problems, f"{name} ({answer.start.obj.get('voice')}): " + "; ".join(problems)
    rate = answers["a"].start.sample_rate
    pcm = {name: _pcm(answers[name]) for name in ("a", "b", "ab", "ba")}

    def d(x: str, y: str) -> float:
        return round(voice_distance_db(pcm[x], pcm[y], rate), 2)

    distances = {
        f"{x}-{y}": d(x, y) for x, y in (("a", "b"), ("ab", "a"), ("ab", "b"), ("ba", "a"), ("ba", "b"))
    }
    distances["ab-ba"] = d("ab", "ba")
    conf.observe(voice_distance_db=distances)
    same = {pair: dist for pair, dist in distances.items() if pair != "a-b" and dist < DIFFERENT_DB}
    assert not same, (
        f"voices less than {DIFFERENT_DB} dB apart where a blend must differ: {same} (a blend that ignores "
        "its weights, or speaks one of its voices)"
    )
    assert distances["ab-a"] < distances["ba-a"] and distances["ba-b"] < distances["ab-b"], (
        f"the 3:1 blend is not nearer af_bella, or the 1:3 blend not nearer af_sky: {distances}"
    )


@case(
    "4.1.18",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-19b",),
    requirement="MUST speak the same canonical blend in the same voice in every request.",
    description="af_bella(3)+af_sky(1) and af_sky(2)+af_bella(6) (one canonical blend, two requests)",
    expectation="both last as long (within 2 %) and their spectra are at most half as far apart as the 3:1 "
    f"and 1:3 blends' and within {DIFFERENT_DB} dB",
)
def test_the_same_blend_is_the_same_voice(conf: Probe, blends: Recording) -> None:
    answers, _ = _judge(conf, blends)
    first, again, other = answers["ab"], answers["ab-again"], answers["ba"]
    rate = first.start.sample_rate
    same = voice_distance_db(_pcm(first), _pcm(again), rate)
    apart = voice_distance_db(_pcm(first), _pcm(other), rate)
    conf.observe(
        seconds=(round(first.duration_s, 3), round(again.duration_s, 3)),
        same_blend_db=round(same, 2),
        opposite_blend_db=round(apart, 2),
    )
    assert abs(first.duration_s - again.duration_s) <= 0.02 * first.duration_s, (
        f"the same blend lasts {first.duration_s:.3f} s and {again.duration_s:.3f} s"
    )
    assert same <= min(DIFFERENT_DB, apart / 2), (
        f"the same blend twice is {same:.2f} dB apart (the opposite blend {apart:.2f} dB): not the same voice"
    )


@case(
    "4.1.19",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-16b",),
    requirement="MUST refuse every other blend with `invalid_voice`",
    description="af_bella+jf_alpha (two languages), af_bella+zz_nobody, af_bella(0)+af_sky and "
    "af_bella(2+af_sky, each between valid requests of the same session",
    expectation="each is refused with invalid_voice naming its request_id, and gets no bracket; the "
    "requests after them are answered",
)
def test_invalid_blends_are_refused(conf: Probe, blends: Recording) -> None:
    answers, refused = _judge(conf, blends)
    for name, (voice, _) in BLEND_REFUSALS.items():
        assert f"x-{name}" not in answers, f"the invalid blend {voice} was answered, not refused"
        error = refused.get(f"x-{name}")
        assert error is not None and error.code == "invalid_voice", (
            f"the invalid blend {voice} was refused with {error.code if error else None}, not invalid_voice"
        )


@case(
    "4.1.20",
    "§4.1",
    Level.SHOULD,
    requirements=("R4.1-17",),
    requirement="An `invalid_voice` message for a blend SHOULD name the part at fault",
    description="the messages of the invalid_voice errors of 4.1.19",
    expectation="each names its part: jf_alpha, zz_nobody, af_bella(0), af_bella(2",
)
def test_invalid_blend_messages_name_the_part(conf: Probe, blends: Recording) -> None:
    _, refused = _judge(conf, blends)
    unnamed = {
        voice: refused[f"x-{name}"].message
        for name, (voice, part) in BLEND_REFUSALS.items()
        if f"x-{name}" in refused and part not in (refused[f"x-{name}"].message or "")
    }
    assert not unnamed, f"invalid_voice messages that do not name the part at fault: {unnamed}"

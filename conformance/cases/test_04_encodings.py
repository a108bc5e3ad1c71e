"""Audio frame encodings: G.711 μ-law and A-law on the session, and unknown encodings refused (§3.3.1, §4.1).

One recorded session (:func:`conformance.engine.recordings.encodings`) asks for the same sentence at 8 kHz as
PCM16, μ-law, A-law and an encoding no version defines. The G.711 encodings are OPTIONAL: a server that
refuses them with ``unsupported_encoding``, or (as a version 1 server does with every unknown member)
ignores the member and answers in PCM16, gets ``UNIMPLEMENTED``. G.711 audio is decoded with the
library decoder of :mod:`protocol.encodings` (CPython's ``audioop``), whose tables the project's tests
hold to ITU-T G.711.
"""

from __future__ import annotations

import numpy as np

from conformance.engine.audio import check_speech, rms
from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.observer import Answer
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import ENCODED
from conformance.engine.texts import FAST, SENTENCES, TWO_SENTENCES
from protocol.encodings import decode_to_pcm16

RATE = 8000


def _answers(encodings: Recording) -> tuple[dict[str, Answer], dict[str, str]]:
    """The session's answers by request name, and the codes of the refusals by request name."""
    observer = encodings.replay()
    ids = {request.request_id: name for name, request in ENCODED.items()}
    answers = {ids[rid]: answer for rid, answer in observer.answers.items() if rid in ids and answer.complete}
    # A refusal without a code (the frame breaks R5-1 and R6.3-3, judged by 3.2.1 and 9.2.8) reads as "".
    refused = {ids[e.request_id]: e.code or "" for e in observer.errors_since(0) if e.request_id in ids}
    return answers, refused


def _g711(conf: Probe, encodings: Recording, name: str) -> None:
    conf.use(encodings)
    answers, refused = _answers(encodings)
    if refused.get(name) == "unsupported_encoding":
        raise Unimplemented(f"the server does not offer {name} (unsupported_encoding)")
    assert name not in refused, f"the {name} request was refused with {refused[name]}"
    linear, g711 = answers.get("pcm"), answers.get(name)
    assert linear is not None and g711 is not None, f"no answer to the PCM16 and {name} requests"
    # A synthesis_start without encoding breaks its schema (R5-1, judged by 3.2.1): read it as asked.
    declared = g711.start.obj.get("encoding") or name
    if declared == "pcm_s16le":
        raise Unimplemented(f"the server ignored encoding {name} and answered in pcm_s16le (version 1)")
    assert declared == name, f"asked for {name}, synthesis_start says encoding {declared!r}"
    assert g711.complete is not None
    assert g711.complete.obj.get("audio_bytes", len(g711.audio)) == len(g711.audio)
    decoded = decode_to_pcm16(bytes(g711.audio), name)
    problems = check_speech(decoded, RATE, SENTENCES[0], speed=FAST)
    assert not problems, f"{name} decoded with a G.711 decoder: " + "; ".join(problems)
    # The same sentence in PCM16 from the same session: same length and loudness within G.711's error.
    seconds, reference_s = len(g711.audio) / RATE, linear.duration_s
    level_db = 20 * np.log10(max(rms(decoded), 1e-9) / max(rms(bytes(linear.audio)), 1e-9))
    conf.observe(seconds=seconds, pcm16_seconds=reference_s, level_vs_pcm16_db=round(float(level_db), 2))
    assert abs(seconds - reference_s) <= 0.05 * reference_s, (
        f"{seconds:.3f} s of {name} against {reference_s:.3f} s of PCM16 for the same sentence"
    )
    assert abs(level_db) <= 2.0, f"decoded {name} is {level_db:.1f} dB off the PCM16 answer's level"


@case(
    "4.1.14",
    "§4.1",
    Level.MUST,
    requirements=("R3.3.1-5", "R3.3.1-1", "R3.3.2-1", "R4.1-13a", "R4.1-14a", "R5.1-1e", "R5.3-2"),
    requirement="A server that offers a G.711 encoding MUST produce it with the G.711 companding law",
    description="ask for one sentence at speed 2 and 8 kHz in pcm_mulaw, next to the same sentence in "
    "pcm_s16le (one recorded session); decode the μ-law bytes with a G.711 decoder",
    expectation="synthesis_start says pcm_mulaw; frames are whole 1-byte samples, none a JSON object; "
    "audio_bytes counts them; the decoded audio is plausible speech as long and as loud (±2 dB) as the "
    "PCM16 answer; a server without μ-law refuses it with unsupported_encoding or answers PCM16 "
    "(UNIMPLEMENTED)",
)
def test_mulaw(conf: Probe, encodings: Recording) -> None:
    _g711(conf, encodings, "pcm_mulaw")


@case(
    "4.1.15",
    "§4.1",
    Level.MUST,
    requirements=("R3.3.1-5", "R3.3.1-1", "R3.3.2-1", "R4.1-13b", "R4.1-14a", "R5.1-1e", "R5.3-2"),
    requirement="A server that offers a G.711 encoding MUST produce it with the G.711 companding law",
    description="ask for one sentence at speed 2 and 8 kHz in pcm_alaw, next to the same sentence in "
    "pcm_s16le; decode the A-law bytes with a G.711 decoder",
    expectation="as 4.1.14, for A-law",
)
def test_alaw(conf: Probe, encodings: Recording) -> None:
    _g711(conf, encodings, "pcm_alaw")


# Requests whose passes need not hold an even number of samples: at speed 1 and at 22,050 Hz a pass's
# length is whatever the model and the resampler make it, so a G.711 answer (one byte a sample) comes in
# odd-length pieces. The encodings session (4.1.14, 4.1.15) asks at speed 2 and 8 kHz only, where every
# pass of the tone-backed reference server is an even number of samples: a server that cut G.711 audio
# as two-byte samples (and so failed on a pass of odd length) passed it.
ODD_PASSES = (
    ("pcm_mulaw", 8000, TWO_SENTENCES),
    ("pcm_alaw", 22050, SENTENCES[1]),
)


@case(
    "4.1.42",
    "§4.1",
    Level.MUST,
    # Not R4.1-13a/b (the companding law): a law read as the other still decodes to plausible speech, which
    # only 4.1.14/4.1.15 tell apart, by the level of the same sentence in PCM16.
    requirements=("R4.1-14a", "R3.3.1-5"),
    requirement="A server MUST send a request's audio in the request's `encoding`",
    description="in one session ask at speed 1 for two sentences in pcm_mulaw at 8 kHz, then one in pcm_alaw "
    "at 22,050 Hz: rates and speeds whose synthesis passes hold an odd number of samples, so the G.711 "
    "audio (one byte a sample) comes in odd-length pieces",
    expectation="each request completes (no error frame) with synthesis_start declaring its encoding; "
    "audio_bytes counts the bytes sent; decoded with a G.711 decoder each is plausible speech of its text; "
    "a server without G.711 refuses it with unsupported_encoding or answers PCM16 (UNIMPLEMENTED)",
)
def test_g711_of_odd_length_passes(conf: Probe) -> None:
    async def scenario() -> tuple[dict[str, Answer], list[tuple[str | None, str, str]]]:
        async with conf.session("g711-odd") as s:
            ids = []
            for name, rate, text in ODD_PASSES:
                ids.append(await s.request(text, request_id=f"odd-{name}", sample_rate=rate, encoding=name))
            await s.wait(
                lambda: (
                    all(s.observer.completed(i) or s.refusal(i) is not None for i in ids)
                    or any(e.fatal for _, e in s.observer.errors)
                ),
                "every request was answered",
            )
            answers = {i: s.observer.answers[i] for i in ids if s.observer.completed(i)}
            errors = [(e.request_id, e.code or "", e.message) for _, e in s.observer.errors]
            await s.close()
            await s.drain()
            return answers, errors

    answers, errors = conf.run(scenario())
    conf.observe(errors=[(rid, code) for rid, code, _ in errors])
    for name, rate, text in ODD_PASSES:
        request_id = f"odd-{name}"
        refused = [(code, message) for rid, code, message in errors if rid == request_id]
        if refused and refused[0][0] == "unsupported_encoding":
            raise Unimplemented(f"the server does not offer {name} (unsupported_encoding)")
        assert not refused, f"the {name} request at {rate} Hz, speed 1, was refused: {refused[0]}"
        answer = answers.get(request_id)
        assert answer is not None, f"no answer to the {name} request at {rate} Hz ({errors or 'no error'})"
        declared = answer.start.obj.get("encoding") or name
        if declared == "pcm_s16le":
            raise Unimplemented(f"the server ignored encoding {name} and answered in pcm_s16le (version 1)")
        assert declared == name, f"asked for {name}, synthesis_start says encoding {declared!r}"
        assert answer.complete is not None
        sent = answer.complete.obj.get("audio_bytes", len(answer.audio))
        assert sent == len(answer.audio), f"{name}: audio_bytes {sent}, {len(answer.audio)} bytes sent"
        conf.observe(
            **{f"{name}_bytes": len(answer.audio), f"{name}_odd_frames": sum(n % 2 for n in answer.frames)}
        )
        problems = check_speech(decode_to_pcm16(bytes(answer.audio), name), rate, text, speed=1.0)
        assert not problems, f"{name} at {rate} Hz decoded with a G.711 decoder: " + "; ".join(problems)


@case(
    "4.1.13",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-14b", "R4.1-5k"),
    requirement="MUST refuse with `unsupported_encoding` a request whose `encoding` is a string it does "
    "not list",
    description="ask for the sentence in encoding pcm_s24le, which no version defines",
    expectation="an error frame unsupported_encoding naming the request, and no bracket for it; a server "
    "that answered the G.711 requests in PCM16 too (it offers no encodings, as version 1) is "
    "UNIMPLEMENTED",
)
def test_unknown_encoding_is_refused(conf: Probe, encodings: Recording) -> None:
    conf.use(encodings)
    answers, refused = _answers(encodings)
    offers_none = all(
        refused.get(name) == "unsupported_encoding"
        or (name in answers and answers[name].start.obj.get("encoding") == "pcm_s16le")
        for name in ("pcm_mulaw", "pcm_alaw")
    )
    if "unknown" in answers and offers_none:
        raise Unimplemented("the server ignores encoding (it answers every request in pcm_s16le)")
    assert "unknown" not in answers, "a request for encoding pcm_s24le was answered, not refused"
    assert refused.get("unknown") in ("unsupported_encoding", ""), (
        f"pcm_s24le was refused with {refused.get('unknown')!r}, not unsupported_encoding"
    )

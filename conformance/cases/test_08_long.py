"""A long synthesis, judged four ways: §4.1 text beyond Kokoro's single-pass limit, §8 keepalive, §2.2 health
checks while busy, §2.3 handshakes while busy (one recording:
:func:`conformance.engine.recordings.long_text`)."""

from __future__ import annotations

from conformance.engine import expect
from conformance.engine.case import Level, case
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import KEEPALIVE_SETTINGS
from conformance.engine.stream import Answer
from conformance.engine.texts import FAST, LONG, LONG_SECONDS_PER_CHAR_MIN

PING_PROMPT_S = 2.0
"""Slowest ``GET /ping`` answer accepted while the server synthesizes. The spec asks for "well under a
second"; the bound is generous for a loaded two-core machine, and a server whose synthesis blocks its event
loop takes as long as the synthesis."""


def _long_answer(recording: Recording) -> Answer:
    answer = recording.replay().answers.get("long-1")
    assert answer is not None and answer.complete is not None, (
        f"the long request was not completed ({recording.error or 'no error'})"
    )
    return answer


@case(
    "4.1.10",
    "§4.1",
    Level.MUST,
    requirements=("R4.1-1",),
    requirement="MUST NOT refuse text for its content other than as above",
    description=f"send a text of {len(LONG)} characters (839 phoneme tokens, 1.6 times Kokoro's single-pass "
    "limit of 510) at speed 2",
    expectation="it completes with plausible speech, at least "
    f"{LONG_SECONDS_PER_CHAR_MIN * len(LONG) / FAST:.1f} s long (a server that kept only the first 510 "
    "tokens would give about 14.6 s); when word timings are sent, the last one is the text's last word",
)
def test_long_text_spoken_to_the_end(conf: Probe, long_text: Recording) -> None:
    conf.use(long_text)
    answer = _long_answer(long_text)
    expect.spoken(answer, LONG, speed=FAST)
    seconds = answer.duration_s
    least = LONG_SECONDS_PER_CHAR_MIN * len(LONG) / FAST
    conf.observe(audio_s=round(seconds, 3), synthesis_s=long_text.extra.get("synthesis_s"))
    assert seconds >= least, (
        f"{seconds:.2f} s of audio: the text was not spoken to its end (at least {least:.1f} s)"
    )
    words = answer.complete.words if answer.complete else None
    if words:
        assert words[-1].word.strip(".").lower() == "way", f"the last word timing is {words[-1].word!r}"


@case(
    "8.1.1",
    "§8",
    Level.MUST,
    requirements=(
        "R8-1",
        "R8-2",
    ),
    requirement="A server MUST answer WebSocket Ping frames with Pong frames (RFC 6455 §5.5.2) at all times, "
    "including while it synthesizes.",
    description=f"the simulator pings the container every {KEEPALIVE_SETTINGS['ping_interval_s']} s during "
    "the long synthesis and gives up on a pong after "
    f"{KEEPALIVE_SETTINGS['ping_timeout_s']:g} s",
    expectation="every ping is answered, at least one while synthesis runs, and the session ends normally",
)
def test_pings_answered_during_synthesis(conf: Probe, long_text: Recording) -> None:
    conf.use(long_text)
    conf.require_simulator("ping the container and log its pongs")
    logs = [log for log in long_text.wire if log["api"] == "bidi"]
    assert logs, "no wire log of the long session"
    records = logs[0]["records"]
    pings = sum(1 for r in records if r["event"] == "ping")
    pongs = sum(1 for r in records if r["event"] == "pong")
    conf.observe(pings=pings, pongs=pongs, outcome=logs[0]["outcome"])
    assert pings >= 1, "the synthesis ended before the first ping: nothing was observed"
    assert "ping-timeout" not in str(logs[0]["outcome"]), f"the session ended as {logs[0]['outcome']}"
    assert pongs >= pings - 1, f"{pings} pings but only {pongs} pongs"  # the last ping may meet the close
    _long_answer(long_text)


@case(
    "2.2.2",
    "§2.2",
    Level.MUST,
    requirements=("R2.2-2",),
    requirement="The server MUST answer `/ping` promptly (well under a second) at all times, including while "
    "every synthesis slot is busy",
    description="poll GET /ping on the container every 0.25 s during the long synthesis",
    expectation=f"every answer is 200 and comes within {PING_PROMPT_S:g} s",
)
def test_health_check_answered_while_busy(conf: Probe, long_text: Recording) -> None:
    conf.use(long_text)
    conf.require_container("send it GET /ping")
    checks = long_text.extra.get("ping_checks", [])
    assert checks, f"no GET /ping was made ({long_text.error or 'no error'})"
    slowest = max(latency for latency, _ in checks)
    conf.observe(polls=len(checks), slowest_s=slowest)
    failed = [(latency, status) for latency, status in checks if status != 200]
    assert not failed, f"GET /ping did not answer 200: {failed[:5]}"
    assert slowest <= PING_PROMPT_S, f"GET /ping took {slowest:.2f} s while the server synthesized"


@case(
    "2.3.1",
    "§2.3",
    Level.MUST,
    requirements=(
        "R2.3-1",
        "R2.3-2",
    ),
    requirement="It therefore MUST NOT load models, allocate accelerators or wait for a synthesis slot "
    "during the handshake.",
    description="open a second session while the long synthesis runs (the simulator gives the container 250 "
    "ms to accept the WebSocket, as SageMaker does) and send a short request on it",
    expectation="the second session opens and its request completes",
)
def test_handshake_while_busy(conf: Probe, long_text: Recording) -> None:
    conf.use(long_text)
    extra = long_text.extra
    conf.observe(**{k: v for k, v in extra.items() if k.startswith("second")})
    assert "second_error" not in extra, f"the second session failed: {extra['second_error']}"
    assert extra.get("second_completed") and extra.get("second_status") in ("completed", None), (
        f"the second session's request ended as {extra}"
    )

"""§10.1 segmentation: a long request is spoken as it is synthesized, not after its whole text."""

from __future__ import annotations

import time

from conformance.engine.case import Level, case
from conformance.engine.probe import Probe
from conformance.engine.stream import ObservedStream
from conformance.engine.texts import FAST, LONG, STREAMED

FIRST_SENTENCE = LONG.split(". ")[0] + "."
"""The first sentence of :data:`conformance.engine.texts.STREAMED`, spoken alone for comparison."""

STARTS_WITHIN = (4.0, 1.0)
"""The long request's first audio must come within ``4 x`` the first sentence's own first audio ``+ 1 s``:
generous for a loaded machine and for a first segment cut differently, far below the several seconds a
server takes to synthesize 1,000 characters before its first byte."""


async def _first_audio_s(session: ObservedStream, text: str, request_id: str) -> float:
    sent = time.monotonic()
    await session.request(text, request_id=request_id, speed=FAST)
    await session.began(request_id)
    return time.monotonic() - sent


@case(
    "10.1.1",
    "§10.1",
    Level.MUST,
    requirements=("R10.1-8",),
    requirement="A server MUST synthesize a request's text in segments, one pass of its model each, and send "
    "each segment's audio as soon as it exists (§3.3), never waiting for the whole text before the first "
    "audio frame.",
    description=f"on one session, speak the first sentence of a {len(STREAMED)}-character text alone, then "
    "the whole text (both at speed 2), timing each one's first audio; then drop the session (§7.4: the "
    "server stops)",
    expectation=f"the long request's first audio comes within {STARTS_WITHIN[0]:g} x the first sentence's "
    f"own + {STARTS_WITHIN[1]:g} s",
)
def test_long_request_streams_its_first_segment(conf: Probe) -> None:
    async def scenario() -> tuple[float, float]:
        async with conf.session("streaming") as s:
            alone = await _first_audio_s(s, FIRST_SENTENCE, "first-sentence")
            await s.answer("first-sentence")
            whole = await _first_audio_s(s, STREAMED, "whole-text")
        # Leaving the block ends the input: SageMaker drops the WebSocket and the server stops (§7.4).
        return alone, whole

    alone, whole = conf.run(scenario())
    bound = STARTS_WITHIN[0] * alone + STARTS_WITHIN[1]
    conf.observe(first_sentence_first_audio_s=round(alone, 3), long_first_audio_s=round(whole, 3))
    assert whole <= bound, (
        f"the {len(STREAMED)}-character request's first audio took {whole:.2f} s, the first sentence's alone "
        f"{alone:.2f} s (bound {bound:.2f} s): the server waits for the whole text before speaking"
    )

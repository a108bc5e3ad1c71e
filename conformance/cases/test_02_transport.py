"""§2 Transport and routes, §3.1 client frames: both frame types, multibyte UTF-8, fragmented messages."""

from __future__ import annotations

import json

import httpx

from conformance.engine import deadline, expect
from conformance.engine.case import Level, case
from conformance.engine.probe import Probe
from conformance.engine.texts import FAST, SENTENCES, SHORT

BOTH = "A server MUST accept both and MUST treat them identically"


@case(
    "2.1.1",
    "§2.1",
    Level.MUST,
    requirements=("R2.1-2",),
    requirement="A server MUST ignore query-string parameters it does not know.",
    description="open a session with X-Amzn-SageMaker-Model-Query-String 'conformance=1&probe=yes' (the "
    "container sees /invocations-bidirectional-stream?conformance=1&probe=yes) and send a request",
    expectation="the session opens and the request completes with audio",
)
def test_unknown_query_string_is_ignored(conf: Probe) -> None:
    async def scenario() -> None:
        async with conf.session("query", model_query_string="conformance=1&probe=yes") as s:
            answer = await s.answer(await s.request(SHORT, speed=FAST))
            expect.completed(answer)
            await s.close()
            await s.drain()

    conf.run(scenario())


@case(
    "2.2.1",
    "§2.2",
    Level.MUST,
    requirements=("R2.2-1a",),
    requirement="The server MUST answer `200` once it can synthesize (model loaded)",
    description="GET /ping on the container once the suite's first session works",
    expectation="HTTP 200",
)
def test_ping_answers_200(conf: Probe) -> None:
    url = conf.require_container("send it GET /ping")
    response = conf.blocking(
        lambda: httpx.get(f"{url}/ping", timeout=deadline.bound(10.0)), "GET /ping answered"
    )
    conf.observe(status=response.status_code, body=response.text[:200])
    assert response.status_code == 200, f"GET /ping answered {response.status_code}: {response.text[:200]!r}"


@case(
    "2.3.2",
    "§2.3",
    Level.MUST,
    requirements=("R2.3-3",),
    requirement="No subprotocol is used; a server MUST NOT require `Sec-WebSocket-Protocol`.",
    description="open a session whose upgrade request carries no Sec-WebSocket-Protocol header (the "
    "simulator opens the container's WebSocket without one) and send a request",
    expectation="the session opens and the request completes with audio",
)
def test_no_subprotocol_needed(conf: Probe) -> None:
    async def scenario() -> None:
        async with conf.session("no-subprotocol") as s:
            expect.completed(await s.answer(await s.request(SHORT, speed=FAST)))
            await s.close()
            await s.drain()

    conf.run(scenario())


@case(
    "3.1.1",
    "§3.1",
    Level.MUST,
    requirements=("R3.1-1",),
    requirement=BOTH,
    description="send a synthesis request in a BINARY message (DataType BINARY)",
    expectation="synthesis_start, audio, synthesis_complete with status completed; the audio is plausible "
    "speech of the text",
)
def test_request_in_binary_frame(conf: Probe) -> None:
    async def scenario() -> None:
        async with conf.session("binary") as s:
            answer = await s.answer(await s.request(SENTENCES[0], speed=FAST, data_type="BINARY"))
            expect.spoken(answer, SENTENCES[0], speed=FAST)
            await s.close()
            await s.drain()

    conf.run(scenario())


@case(
    "3.1.2",
    "§3.1",
    Level.MUST,
    requirements=("R3.1-1",),
    requirement=BOTH,
    description="send the same request in a BINARY message, then in a TEXT message (DataType UTF8)",
    expectation="both complete; the two synthesis_start frames agree on sample_rate, voice and speed, and "
    "the two answers' audio lengths differ by at most 5%",
)
def test_request_in_text_frame(conf: Probe) -> None:
    async def scenario() -> None:
        async with conf.session("text") as s:
            binary = await s.answer(await s.request(SENTENCES[0], speed=FAST, data_type="BINARY"))
            text = await s.answer(await s.request(SENTENCES[0], speed=FAST, data_type="UTF8"))
            await s.close()
            await s.drain()
        expect.spoken(text, SENTENCES[0], speed=FAST)
        for name in ("sample_rate", "voice", "speed"):
            assert getattr(text.start, name) == getattr(binary.start, name), (
                f"{name} differs between frame types"
            )
        conf.observe(binary_bytes=len(binary.audio), text_bytes=len(text.audio))
        assert abs(len(text.audio) - len(binary.audio)) <= 0.05 * len(binary.audio), (
            f"the TEXT request gave {len(text.audio)} audio bytes, the BINARY one {len(binary.audio)}"
        )

    conf.run(scenario())


@case(
    "3.1.3",
    "§3.1",
    Level.MUST,
    requirements=("R3.1-1",),
    requirement="Each client message is exactly one JSON text (RFC 8259) in UTF-8 whose value is an object.",
    description="send a request whose text holds multibyte UTF-8 characters, unescaped, in a BINARY message "
    "(speed 2)",
    expectation="the request completes with plausible speech of the text",
)
def test_multibyte_utf8_in_binary_frame(conf: Probe) -> None:
    text = "Café crème, naïve résumé — déjà vu."

    async def scenario() -> None:
        async with conf.session("utf8") as s:
            message = {"text": text, "request_id": "utf8-1", "speed": FAST}
            frame = json.dumps(message, ensure_ascii=False).encode("utf-8")
            assert len(frame) > len(text) + 25  # multibyte characters really are on the wire
            s.expect("utf8-1")
            await s.send(frame, data_type="BINARY")
            expect.spoken(await s.answer("utf8-1"), text, speed=FAST)
            await s.close()
            await s.drain()

    conf.run(scenario())


@case(
    "3.1.4",
    "§2.5",
    Level.MUST,
    requirements=("R2.5-1",),
    requirement="the WebSocket layer reassembles fragments (RFC 6455 §5.4) and nothing in this protocol "
    "depends on fragmentation",
    description="send one request as three PayloadParts (PARTIAL, PARTIAL, COMPLETE), cut inside a multibyte "
    "character, so that the container receives one TEXT message in three WebSocket fragments",
    expectation="the request completes with plausible speech of the text",
)
def test_fragmented_request(conf: Probe) -> None:
    text = "Café au lait, please."

    async def scenario() -> None:
        async with conf.session("fragments") as s:
            message = {"text": text, "request_id": "frag-1", "speed": FAST}
            frame = json.dumps(message, ensure_ascii=False).encode("utf-8")
            inside = frame.index("é".encode()) + 1  # between the two bytes of "é"
            s.expect("frag-1")
            await s.send_in_parts(frame, [7, inside], data_type="UTF8")
            expect.spoken(await s.answer("frag-1"), text, speed=FAST)
            await s.close()
            await s.drain()

    conf.run(scenario())

"""The official bidi client through the in-process transport, in front of in-process containers.

No socket anywhere: the client's real serializer, signer and event-stream decoder talk to the
simulator's ASGI app, which talks ASGI to the container. Fast, so the bridge rules are tested here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aws_sdk_sagemaker_runtime_http2.models import (
    InputValidationError,
    InternalServerError,
    InternalStreamFailure,
    ModelError,
    ModelStreamError,
    ServiceUnavailableError,
)
from containers import crash_app, text_only_app, tone_app, tone_pcm
from sim_support import SENTENCES, Transcript, run, speak
from smithy_core.exceptions import CallError

from sagemaker_transport.client import open_bidi_stream
from simulator import AsgiContainer, FaultPlan, Simulator, SimulatorSettings, SplitPolicy


def _simulator(app: Any = None, **settings: Any) -> Simulator:
    return Simulator(AsgiContainer(app or tone_app()), SimulatorSettings(**settings), listen=False)


async def _speak(sim: Simulator, texts: tuple[str, ...] = SENTENCES, **kwargs: Any) -> Transcript:
    async with open_bidi_stream("tts-endpoint", transport=sim.transport(), timeout=20, **kwargs) as session:
        return await speak(session, texts)


def _assert_complete(transcript: Transcript, texts: tuple[str, ...] = SENTENCES) -> None:
    assert transcript.started == transcript.completed == [f"c{i + 1}" for i in range(len(texts))]
    assert not transcript.errors
    for i, text in enumerate(texts):
        assert bytes(transcript.audio[f"c{i + 1}"]) == tone_pcm(text)


def test_three_sentence_session() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            transcript = await _speak(sim)
            _assert_complete(transcript)
            # Control frames arrive as UTF8, audio as BINARY; every part is a whole message here.
            kinds = {(p.data_type, p.completion_state) for p in transcript.parts}
            assert kinds == {("UTF8", "COMPLETE"), ("BINARY", "COMPLETE")}
            (log,) = sim.wire_logs
            assert log.outcome == "container-closed: code 1000"

    run(main())


@pytest.mark.parametrize("policy", ["fixed:1000", "random:1-700", "byte", "misaligned", "misaligned:1-7"])
def test_split_policies_keep_the_session_intact(policy: str) -> None:
    async def main() -> None:
        # One part per byte costs the client ~0.2 ms: keep the finest policies to short texts.
        texts = ("Hi.", "OK.") if policy in ("byte", "misaligned:1-7") else SENTENCES[:2]
        async with _simulator(split=SplitPolicy.parse(policy), seed=7) as sim:
            transcript = await _speak(sim, texts)
            _assert_complete(transcript, texts)
            message, cuts = 0, []
            for part in transcript.parts:
                message += len(part.data)
                if part.is_complete:
                    message = 0
                else:
                    cuts.append(message)
            assert cuts, "the policy should have cut some messages"
            if policy == "byte":
                assert all(len(p.data) == 1 for p in transcript.parts)
            if policy.startswith("fixed"):
                assert all(len(p.data) <= 1000 for p in transcript.parts)
            if policy.startswith("misaligned"):
                assert all(cut % 2 == 1 for cut in cuts)

    run(main(), timeout=120)


def test_split_is_reproducible_from_the_seed() -> None:
    async def main() -> list[list[int]]:
        sizes = []
        async with _simulator(split=SplitPolicy.parse("random:1-300"), seed=42) as sim:
            for _ in range(2):
                transcript = await _speak(sim, SENTENCES[:1])
                # synthesis_complete carries elapsed_s, so only the messages before it are identical.
                *before, _complete = _messages(transcript)
                sizes.append([len(p.data) for message in before for p in message])
        return sizes

    first, second = run(main())
    assert first == second


def _messages(transcript: Transcript) -> list[list[Any]]:
    """The output parts grouped into messages by CompletionState."""
    messages: list[list[Any]] = [[]]
    for part in transcript.parts:
        messages[-1].append(part)
        if part.is_complete:
            messages.append([])
    return messages[:-1]


def test_utf8_requests_arrive_as_text_frames() -> None:
    async def main() -> None:
        async with (
            _simulator() as sim,
            open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session,
        ):
            _assert_complete(await speak(session, SENTENCES[:1], data_type="UTF8"), SENTENCES[:1])
            frames = [r.event for r in sim.wire_logs[0].select(leg="container", direction="out")]
            assert frames[1:] == ["text", "text"]  # after "connect": the request and the close

    run(main())


def test_text_only_container_fails_as_on_sagemaker() -> None:
    """BINARY (or absent) DataType reaches the container as a BINARY frame: receive_text() dies."""

    async def main() -> None:
        async with _simulator(text_only_app()) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "Hello there.", "request_id": "r1"}')  # DataType BINARY
                with pytest.raises(ModelStreamError) as caught:
                    async for _ in session:
                        pass
            assert caught.value.error_code == "StreamBroken"
            assert "KeyError('text')" in (sim.wire_logs[0].outcome or "")
            # The same container works while every frame is TEXT (UTF8).
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send_text('{"text": "Hello there.", "request_id": "r1"}')
                part = await session.receive()
                assert part is not None and b"synthesis_start" in part.data

    run(main())


def test_container_crash_is_a_model_stream_error() -> None:
    async def main() -> None:
        async with _simulator(crash_app()) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "x"}')
                received = []
                with pytest.raises(ModelStreamError):
                    async for part in session:
                        received.append(part)
            assert [p.data_type for p in received] == ["UTF8", "BINARY"]
            assert "RuntimeError" in (sim.wire_logs[0].outcome or "")

    run(main())


def test_container_that_accepts_late_is_a_model_error_424() -> None:
    async def main() -> None:
        async with _simulator(tone_app(accept_delay_s=1.0)) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(ModelError) as caught:
                    await session.opened()
            assert "250 ms" in (caught.value.message or "")
            assert sim.wire_logs[0].outcome == "424 ModelError"

    run(main())


def test_container_refusing_the_route_is_a_model_error_with_its_status() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            async with open_bidi_stream(
                "ep", transport=sim.transport(), model_invocation_path="/no-such-route", timeout=20
            ) as session:
                with pytest.raises(ModelError) as caught:
                    await session.receive()
            assert caught.value.original_status_code == 403

    run(main())


def test_invocation_path_and_query_reach_the_container() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            async with open_bidi_stream(
                "ep",
                transport=sim.transport(),
                model_invocation_path="invocations-bidirectional-stream",
                model_query_string="voice=af_heart",
                timeout=20,
            ) as session:
                _assert_complete(await speak(session, SENTENCES[:1]), SENTENCES[:1])
            (connect,) = sim.wire_logs[0].select(event="connect")
            assert connect.note == "/invocations-bidirectional-stream?voice=af_heart"

    run(main())


def test_unknown_endpoint_name_is_an_input_validation_error() -> None:
    async def main() -> None:
        async with _simulator(endpoint_name="tts") as sim:
            async with open_bidi_stream("other", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(InputValidationError):
                    await session.opened()

    run(main())


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("unavailable", ServiceUnavailableError),
        ("internal", InternalServerError),
        ("model_error", ModelError),
        ("throttle", CallError),  # ThrottlingException is not in the client's model: an unmodeled 400
    ],
)
def test_pre_stream_faults_raise_the_service_errors(fault: str, error: type[Exception]) -> None:
    async def main() -> None:
        async with _simulator(faults=FaultPlan.parse([fault])) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(error) as caught:
                    await session.opened()
            if fault == "throttle":
                assert "ThrottlingException" in str(caught.value)
                assert "status: 400" in str(caught.value)

    run(main())


def test_fault_times_limits_the_invocations_hit() -> None:
    async def main() -> None:
        async with _simulator(faults=FaultPlan.parse(["unavailable*1"])) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(ServiceUnavailableError):
                    await session.opened()
            _assert_complete(await _speak(sim))

    run(main())


@pytest.mark.parametrize(
    ("fault", "error", "split"),
    [
        ("model_stream_error@5000", ModelStreamError, "none"),
        ("model_stream_error:ModelInvocationTimeExceeded@0", ModelStreamError, "none"),
        ("internal_stream_failure@3333", InternalStreamFailure, "random:1-999"),
    ],
)
def test_mid_stream_faults_fire_after_exactly_k_bytes(fault: str, error: type[Exception], split: str) -> None:
    after = int(fault.split("@")[1])

    async def main() -> None:
        settings = {"faults": FaultPlan.parse([fault]), "split": SplitPolicy.parse(split)}
        async with _simulator(**settings) as sim:
            received = bytearray()
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "This is a deployment check."}')
                with pytest.raises(error) as caught:
                    async for part in session:
                        received += part.data
            assert len(received) == after
            if error is ModelStreamError:
                expected = fault.split(":")[1].split("@")[0] if ":" in fault else "StreamBroken"
                assert caught.value.error_code == expected  # type: ignore[attr-defined]

    run(main())


def test_end_of_input_tears_the_websocket_down() -> None:
    """Closing the input right after the last send loses the answer (REFERENCE §1)."""

    async def main() -> None:
        async with _simulator(tone_app(frame_delay_s=0.5)) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "Hello there."}')
                await session.close_input()
                parts = [part async for part in session]
            assert not any(b"synthesis_complete" in p.data for p in parts)
            log = sim.wire_logs[0]
            assert log.outcome == "input-ended: end of client input"
            assert log.select(leg="container", direction="out", event="close")[-1].note == "code 1000"

    run(main())


def test_idle_timeout_ends_the_session() -> None:
    async def main() -> None:
        async with _simulator(idle_timeout_s=0.3) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(ModelStreamError) as caught:
                    await session.receive()  # nothing sent, so nothing ever comes back
            assert caught.value.error_code == "ModelInvocationTimeExceeded"

    run(main())


def test_session_length_limit_ends_the_session() -> None:
    async def main() -> None:
        async with _simulator(tone_app(frame_delay_s=0.2), max_session_s=0.5) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "A sentence long enough to outlast the limit."}')
                with pytest.raises(ModelStreamError) as caught:
                    async for _ in session:
                        pass
            assert caught.value.error_code == "ModelInvocationTimeExceeded"
            assert sim.wire_logs[0].outcome == "session-timeout: session longer than 0.5 s"

    run(main())


def test_input_part_above_the_limit_is_refused() -> None:
    async def main() -> None:
        async with _simulator(max_part_bytes=16) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "this request is longer than sixteen bytes"}')
                with pytest.raises(InternalStreamFailure):
                    await session.receive()

    run(main())


def test_output_parts_respect_the_part_limit_and_latency() -> None:
    async def main() -> None:
        async with _simulator(max_part_bytes=512, part_latency_s=0.0005) as sim:
            transcript = await _speak(sim, SENTENCES[:1])
            _assert_complete(transcript, SENTENCES[:1])
            assert max(len(p.data) for p in transcript.parts) == 512

    run(main())


def test_wire_log_shows_both_legs() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            await _speak(sim, SENTENCES[:1])
            log = sim.wire_logs[0]
            events = [(r.leg, r.direction, r.event) for r in log.records]
            assert events[:3] == [
                ("container", "out", "connect"),
                ("client", "out", "http-response"),
                ("client", "in", "PayloadPart"),
            ]
            audio_in = log.select(leg="container", direction="in", event="binary")
            audio_out = [
                r
                for r in log.select(leg="client", direction="out", event="PayloadPart")
                if r.data_type == "BINARY"
            ]
            assert (
                sum(r.length for r in audio_in)
                == sum(r.length for r in audio_out)
                == len(tone_pcm(SENTENCES[0]))
            )
            assert all(r.completion_state == "COMPLETE" for r in audio_out)
            assert log.select(leg="container", direction="in", event="close")[0].note == "code 1000"

    run(main())


def test_concurrent_sessions_are_independent() -> None:
    async def main() -> None:
        async with _simulator(split=SplitPolicy.parse("random:1-500")) as sim:
            results = await asyncio.gather(*[_speak(sim, SENTENCES[i : i + 1]) for i in range(3)])
            for i, transcript in enumerate(results):
                _assert_complete(transcript, SENTENCES[i : i + 1])
            assert len(sim.wire_logs) == 3

    run(main())


def test_client_going_away_closes_the_container_websocket() -> None:
    async def main() -> None:
        async with _simulator(tone_app(frame_delay_s=0.3)) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                await session.send(b'{"text": "Hello there."}')
                assert await session.receive() is not None
                await session.client.close()  # the client vanishes mid-answer
            log = sim.wire_logs[0]
            assert log.outcome == "client-gone: client disconnected"
            assert log.select(leg="container", direction="out", event="close")[-1].note == "code 1001"

    run(main())


def test_the_simulator_logs_one_line_per_session_start_and_end(caplog: pytest.LogCaptureFixture) -> None:
    """Sessions, not HTTP calls or PayloadParts, are what the simulator's log is about (issue 17)."""
    caplog.set_level("DEBUG")

    async def main() -> None:
        async with _simulator() as sim:
            await _speak(sim)

    run(main())
    lines = [(r.name, r.getMessage(), getattr(r, "kokoro_fields", {})) for r in caplog.records]
    sessions = [(message, fields) for name, message, fields in lines if name == "simulator"]
    assert [message for message, _ in sessions] == ["session start", "session end"]
    start, end = sessions[0][1], sessions[1][1]
    assert (start["session"], start["api"], start["endpoint"]) == ("s1", "bidi", "tts-endpoint")
    assert end["outcome"] == "container-closed: code 1000"
    assert end["parts_in"] == len(SENTENCES) + 1  # the requests and the close
    assert end["parts_out"] > 2 * len(SENTENCES) and end["bytes_out"] > end["bytes_in"] > 0
    assert end["duration_s"] >= 0


def test_a_request_for_no_sagemaker_operation_gets_the_one_error_shape() -> None:
    """The simulator's own refusal (not an imitation of SageMaker's) answers as PROTOCOL.md §11.6 says."""
    import httpx

    from protocol import schemas

    async def main() -> None:
        async with _simulator() as sim:
            transport = httpx.ASGITransport(app=sim.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
                response = await client.get("/endpoints/e/invocations")
        assert response.status_code == 404
        assert response.headers["x-amzn-errortype"] == "UnknownOperationException"
        schemas.validate("http_error", response.json())
        error = response.json()["error"]
        assert error == {
            "code": "unknown_operation",
            "message": "no SageMaker runtime operation at GET /endpoints/e/invocations",
        }

    run(main())

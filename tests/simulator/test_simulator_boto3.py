"""boto3 against the HTTP/1.1 door: InvokeEndpoint and InvokeEndpointWithResponseStream."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from botocore.exceptions import ClientError, EventStreamError
from containers import invocation_body, tone_app
from sim_support import SENTENCES, run

from sagemaker_transport.client import iter_response_stream, runtime_client
from simulator import AsgiContainer, FaultPlan, Simulator, SimulatorSettings, SplitPolicy, UrlContainer

TEXT = SENTENCES[2]


def _simulator(container: Any = None, **settings: Any) -> Simulator:
    return Simulator(container or AsgiContainer(tone_app()), SimulatorSettings(**settings))


async def _stream(sim: Simulator, body: dict[str, Any], *, max_attempts: int = 1) -> list[bytes]:
    """The PayloadPart payloads boto3 yields (boto3 is synchronous: run it off the loop)."""
    client = runtime_client(sim.http1_url, max_attempts=max_attempts, read_timeout=20)
    return await asyncio.to_thread(lambda: list(iter_response_stream(client, "tts-endpoint", body)))


def _cuts(sizes: list[int]) -> list[int]:
    cuts, total = [], 0
    for size in sizes[:-1]:
        total += size
        cuts.append(total)
    return cuts


@pytest.mark.parametrize(
    "policy", ["none", "fixed:4096", "random:1-3000", "byte", "misaligned", "misaligned:1-9"]
)
@pytest.mark.parametrize("fmt", ["wav", "pcm"])
def test_audio_reassembles_byte_identical_under_every_split(policy: str, fmt: str) -> None:
    text = "Hi." if policy == "byte" else TEXT  # one event per byte is slow to parse in botocore

    async def main() -> None:
        async with _simulator(split=SplitPolicy.parse(policy), seed=11) as sim:
            parts = await _stream(sim, {"text": text, "format": fmt})
            assert b"".join(parts) == invocation_body(text, fmt)
            sizes = [len(p) for p in parts]
            chunk_ends = set(_cuts([r.length for r in sim.wire_logs[0].select(event="http-chunk")] + [0]))
            if policy == "byte":
                assert set(sizes) == {1}
            if policy.startswith("misaligned"):
                assert len(parts) > 1
                for cut in _cuts(sizes):
                    assert cut % 2 == 1 and cut not in chunk_ends

    run(main())


def test_response_stream_headers() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=20)
            response = await asyncio.to_thread(
                client.invoke_endpoint_with_response_stream,
                EndpointName="ep",
                Body=b'{"text": "Hi."}',
                ContentType="application/json",
            )
            assert response["ContentType"] == "audio/wav"
            assert response["InvokedProductionVariant"] == "AllTraffic"
            assert await asyncio.to_thread(lambda: [e for e in response["Body"]])

    run(main())


@pytest.mark.parametrize(
    ("fault", "code"),
    [("model_stream_error@1000", "ModelStreamError"), ("internal_stream_failure@1", "InternalStreamFailure")],
)
def test_mid_stream_faults_surface_in_boto3(fault: str, code: str) -> None:
    after = int(fault.split("@")[1])

    async def main() -> None:
        async with _simulator(
            faults=FaultPlan.parse([fault]), split=SplitPolicy.parse("random:1-700")
        ) as sim:
            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=20)
            received = bytearray()

            def consume() -> None:
                for part in iter_response_stream(client, "ep", {"text": TEXT}):
                    received.extend(part)

            with pytest.raises(EventStreamError) as caught:
                await asyncio.to_thread(consume)
            assert caught.value.response["Error"]["Code"] == code
            assert bytes(received) == invocation_body(TEXT)[:after]

    run(main())


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ("throttle", 400, "ThrottlingException"),
        ("unavailable", 503, "ServiceUnavailable"),
        ("internal", 500, "InternalFailure"),
        ("model_error", 424, "ModelError"),
    ],
)
def test_pre_stream_faults_surface_in_boto3(fault: str, status: int, code: str) -> None:
    async def main() -> None:
        async with _simulator(faults=FaultPlan.parse([fault])) as sim:
            with pytest.raises(ClientError) as caught:
                await _stream(sim, {"text": TEXT})
            error = caught.value.response
            assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (status, code)

    run(main())


def test_throttled_call_succeeds_on_retry() -> None:
    async def main() -> None:
        async with _simulator(faults=FaultPlan.parse(["throttle*1"])) as sim:
            parts = await _stream(sim, {"text": "Hi."}, max_attempts=2)
            assert b"".join(parts) == invocation_body("Hi.")
            assert [log.outcome for log in sim.wire_logs] == ["400 ThrottlingException", "completed"]

    run(main())


def test_container_error_is_a_model_error_with_the_original_answer() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            with pytest.raises(ClientError) as caught:
                await _stream(sim, {"text": ""})
            error = caught.value.response
            assert error["Error"]["Code"] == "ModelError"
            assert error["OriginalStatusCode"] == 400
            assert "text_required" in error["OriginalMessage"]

    run(main())


def test_container_failing_mid_body_is_a_model_stream_error() -> None:
    async def main() -> None:
        async with _simulator() as sim:
            with pytest.raises(EventStreamError) as caught:
                await _stream(sim, {"text": TEXT, "break_after": 2000})
            assert caught.value.response["Error"]["Code"] == "ModelStreamError"

    run(main())


def test_invoke_endpoint_returns_the_whole_body(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="simulator")

    async def main() -> None:
        async with _simulator(split=SplitPolicy.parse("byte")) as sim:  # no effect without a stream
            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=20)
            response = await asyncio.to_thread(
                client.invoke_endpoint, EndpointName="ep", Body=b'{"text": "Hi.", "format": "pcm"}'
            )
            assert response["ContentType"].startswith("audio/pcm")
            assert response["Body"].read() == invocation_body("Hi.", "pcm")

    run(main())
    (end,) = [getattr(r, "kokoro_fields", {}) for r in caplog.records if r.getMessage() == "session end"]
    # The session line counts the bodies' bytes (no PayloadParts in InvokeEndpoint).
    assert end["api"] == "invoke" and end["parts_in"] == end["parts_out"] == 0
    assert end["bytes_in"] == len(b'{"text": "Hi.", "format": "pcm"}')
    assert end["bytes_out"] == len(invocation_body("Hi.", "pcm"))


def test_unknown_endpoint_and_oversized_body_are_validation_errors() -> None:
    async def main() -> None:
        async with _simulator(endpoint_name="tts", max_request_bytes=100) as sim:
            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=20)
            for name, body in (("other", b"{}"), ("tts", b"{" + b" " * 200 + b"}")):
                with pytest.raises(ClientError) as caught:
                    await asyncio.to_thread(client.invoke_endpoint, EndpointName=name, Body=body)
                assert caught.value.response["Error"]["Code"] == "ValidationError"

    run(main())


def test_unreachable_container_is_a_model_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def main() -> None:
        async with _simulator(UrlContainer(f"http://127.0.0.1:{port}")) as sim:
            with pytest.raises(ClientError) as caught:
                await _stream(sim, {"text": "Hi."})
            assert caught.value.response["Error"]["Code"] == "ModelError"

    run(main())


def _big_body_app(size: int) -> Any:
    """A container whose every invocation answers ``size`` bytes of PCM at once."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def invocations(request: Any) -> Response:
        await request.body()
        return Response(bytes(size), media_type="audio/pcm;rate=8000;encoding=s16le;channels=1")

    async def ping(request: Any) -> Response:
        return JSONResponse({"status": "Healthy"})

    return Starlette(routes=[Route("/invocations", invocations, methods=["POST"]), Route("/ping", ping)])


def test_a_byte_split_body_the_client_abandons_ends_with_max_session_s() -> None:
    """Two megabytes split byte by byte are two million events: the stream must still end at
    ``max_session_s`` (sends that never suspend once held the loop for minutes) and its wire log must stay
    bounded (it once grew to gigabytes)."""

    async def main() -> None:
        settings = {"split": SplitPolicy.parse("byte"), "max_session_s": 1.0}
        async with _simulator(AsgiContainer(_big_body_app(2 << 20)), **settings) as sim:
            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=20)

            def read_a_little() -> int:
                response = client.invoke_endpoint_with_response_stream(EndpointName="ep", Body=b"{}")
                stream = response["Body"]
                parts = 0
                for event in stream:
                    parts += "PayloadPart" in event
                    if parts == 10:
                        break
                stream.close()
                return parts

            assert await asyncio.to_thread(read_a_little) == 10
            (log,) = sim.wire_logs
            for _ in range(40):  # the session's own limit is 1 s
                if log.outcome is not None:
                    break
                await asyncio.sleep(0.1)
            assert log.outcome is not None, "the stream was still being split 4 s after its 1 s limit"
            assert len(log.records) <= log.max_records

    run(main())

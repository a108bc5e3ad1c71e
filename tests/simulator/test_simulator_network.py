"""Real sockets: the official CRT client over TLS + HTTP/2, and containers behind real WebSockets."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
from typing import Any

import httpx
import pytest
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    ModelError,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from containers import FragmentEchoServer, UvicornThread, inline_app, text_only_app, tone_app, tone_pcm
from sim_support import SENTENCES, Transcript, run, speak_through

from sagemaker_transport.client import LOCAL_CREDENTIALS, crt_transport, open_bidi_stream
from simulator import AsgiContainer, Simulator, SimulatorSettings, SplitPolicy, UrlContainer


def _assert_complete(transcript: Transcript, texts: tuple[str, ...] = SENTENCES) -> None:
    assert transcript.started == transcript.completed == [f"c{i + 1}" for i in range(len(texts))]
    for i, text in enumerate(texts):
        assert bytes(transcript.audio[f"c{i + 1}"]) == tone_pcm(text)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_official_client_over_tls_h2() -> None:
    """The acceptance check: unmodified client, CRT transport, TLS + ALPN h2, three sentences."""

    async def main() -> None:
        async with Simulator(AsgiContainer(tone_app())) as sim:
            transcript = await speak_through(endpoint_url=sim.endpoint_url, ca_file=sim.ca_file)
            _assert_complete(transcript)
            assert sim.wire_logs[0].outcome == "container-closed: code 1000"

    run(main())


def test_official_client_over_tls_with_misaligned_parts_and_real_socket_container() -> None:
    async def main() -> None:
        settings = SimulatorSettings(split=SplitPolicy.parse("misaligned:1-4000"), seed=3)
        with UvicornThread(tone_app()) as container:
            async with Simulator(UrlContainer(container.url), settings) as sim:
                transcript = await speak_through(endpoint_url=sim.endpoint_url, ca_file=sim.ca_file)
                _assert_complete(transcript)
                assert any(p.completion_state == "PARTIAL" for p in transcript.parts)

    run(main())


def test_tls_door_speaks_only_http2() -> None:
    """Like the real service, the bidi door is HTTP/2 only: an HTTP/1.1 client is turned away."""

    async def main() -> None:
        async with Simulator(AsgiContainer(tone_app())) as sim:
            async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=sim.ca_file)) as client:
                with pytest.raises(httpx.RemoteProtocolError):
                    await client.post(f"{sim.endpoint_url}/endpoints/ep/invocations-bidirectional-stream")
            assert sim.wire_logs == []

    run(main())


def test_response_may_end_before_the_request_on_one_connection() -> None:
    """RFC 9113 §8.1: after the container closed, the client may still send on its request; the
    connection survives and serves the next stream."""

    async def main() -> None:
        async with Simulator(AsgiContainer(tone_app())) as sim:
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
                endpoint_uri=sim.endpoint_url,
                region="us-east-1",
                transport=crt_transport(sim.ca_file),
                aws_access_key_id=LOCAL_CREDENTIALS[0],
                aws_secret_access_key=LOCAL_CREDENTIALS[1],
            )
            client = AsyncSageMakerRuntimeHTTP2Client(config=config)
            try:
                for _ in range(2):
                    stream = await client.invoke_endpoint_with_bidirectional_stream(
                        InvokeEndpointWithBidirectionalStreamInput(endpoint_name="ep")
                    )
                    for body in (b'{"text": "Hi."}', b'{"type": "close"}'):
                        part = RequestPayloadPart(bytes_=body, data_type="BINARY")
                        await stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
                    _, receiver = await asyncio.wait_for(stream.await_output(), 10)
                    events = []
                    while (event := await asyncio.wait_for(receiver.receive(), 10)) is not None:
                        events.append(event)
                    assert b"synthesis_complete" in events[-1].value.bytes_
                    # Still sending after the response ended: accepted and discarded by the server.
                    part = RequestPayloadPart(bytes_=b'{"text": "late"}', data_type="BINARY")
                    await stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
                    await stream.input_stream.close()
            finally:
                await client.close()
            assert [log.outcome for log in sim.wire_logs] == ["container-closed: code 1000"] * 2

    run(main())


def test_partial_parts_arrive_as_continuation_fragments() -> None:
    async def main() -> None:
        with FragmentEchoServer() as echo:
            async with Simulator(UrlContainer(echo.url), listen=False) as sim:
                async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                    await session.send(b"he", data_type="UTF8", completion_state="PARTIAL")
                    await session.send(b"ll", data_type="UTF8", completion_state="PARTIAL")
                    await session.send(b"o", data_type="UTF8", completion_state="COMPLETE")
                    await session.send(b"\x00\x01\x02", data_type="BINARY")
                    await session.send(b"\xff", data_type=None)  # absent DataType means BINARY
                    await session.send(b"abc", data_type="BINARY", completion_state="PARTIAL")
                    await session.send(b"de", data_type="BINARY", completion_state="COMPLETE")
                    reports = []
                    for _ in range(4):
                        part = await session.receive()
                        assert part is not None and part.data_type == "UTF8"
                        reports.append(json.loads(part.data))
        # One frame per PayloadPart; python-websockets then ends a fragmented message with an empty
        # final frame (FIN), the trailing 0 below. The container reassembles the same message.
        assert [(r["text"], r["fragments"], bytes.fromhex(r["data"])) for r in reports] == [
            (True, [2, 2, 1, 0], b"hello"),
            (False, [3], b"\x00\x01\x02"),
            (False, [1], b"\xff"),
            (False, [3, 2, 0], b"abcde"),
        ]

    run(main())


def test_container_that_stops_answering_pings_fails_the_session() -> None:
    async def main() -> str | None:
        settings = SimulatorSettings(ping_interval_s=0.2, ping_timeout_s=0.5)
        with FragmentEchoServer() as echo:
            async with Simulator(UrlContainer(echo.url), settings, listen=False) as sim:
                async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                    await session.send(b"stall:2")
                    with pytest.raises(ModelStreamError) as caught:
                        await session.receive()
                    assert caught.value.error_code == "StreamBroken"
                return sim.wire_logs[0].outcome

    assert run(main()) == "ping-timeout: no pong within 0.5 s"


def test_healthy_container_answers_pings() -> None:
    async def main() -> list[str]:
        settings = SimulatorSettings(ping_interval_s=0.05, ping_timeout_s=5)
        with UvicornThread(tone_app(frame_delay_s=0.05)) as container:
            async with Simulator(UrlContainer(container.url), settings, listen=False) as sim:
                _assert_complete(await speak_through(SENTENCES[:1], transport=sim.transport()), SENTENCES[:1])
                return [r.event for r in sim.wire_logs[0].select(leg="container")]

    events = run(main())
    assert "pong" in events


def test_container_that_stops_reading_during_synthesis_fails_the_ping_check() -> None:
    """A handler with no reader task: uvicorn leaves the next message (and the ping) unread."""

    async def main() -> str | None:
        # The container is not reading, so it will not answer the closing handshake either.
        settings = SimulatorSettings(ping_interval_s=0.1, ping_timeout_s=0.3, close_timeout_s=0.2)
        with UvicornThread(inline_app(frame_delay_s=0.5)) as container:
            async with Simulator(UrlContainer(container.url), settings, listen=False) as sim:
                async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                    await session.send(b'{"text": "Hello there."}')
                    await session.send(b'{"type": "close"}')
                    with pytest.raises(ModelStreamError):
                        async for _ in session:
                            pass
                return sim.wire_logs[0].outcome

    assert run(main()) == "ping-timeout: no pong within 0.3 s"


def test_unreachable_container_is_a_model_error() -> None:
    async def main() -> None:
        async with Simulator(UrlContainer(f"http://127.0.0.1:{_closed_port()}"), listen=False) as sim:
            async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                with pytest.raises(ModelError) as caught:
                    await session.opened()
            assert "could not be reached" in (caught.value.message or "")

    run(main())


@pytest.mark.parametrize("data_type", ["BINARY", None])
def test_text_only_container_behind_a_real_socket(data_type: Any) -> None:
    """uvicorn drops the connection when the handler raises KeyError('text'): ModelStreamError."""

    async def main() -> str | None:
        with UvicornThread(text_only_app()) as container:
            async with Simulator(UrlContainer(container.url), listen=False) as sim:
                async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                    await session.send(b'{"text": "Hello there."}', data_type=data_type)
                    with pytest.raises(ModelStreamError):
                        async for _ in session:
                            pass
                return sim.wire_logs[0].outcome

    outcome = run(main())
    assert outcome is not None and outcome.startswith("container-failed")


def test_client_dropping_the_tls_connection_ends_the_session() -> None:
    async def main() -> str | None:
        async with Simulator(AsgiContainer(tone_app(frame_delay_s=0.3))) as sim:
            async with open_bidi_stream(
                "ep", endpoint_url=sim.endpoint_url, ca_file=sim.ca_file, timeout=20
            ) as s:
                await s.send(b'{"text": "Hello there."}')
                assert await s.receive() is not None
                await s.client.close()
            for _ in range(100):  # the server notices the dropped connection on its own schedule
                if sim.wire_logs[0].outcome is not None:
                    break
                await asyncio.sleep(0.05)
            return sim.wire_logs[0].outcome

    assert run(main()) == "client-gone: client disconnected"


def _nodelay_by_connection() -> dict[tuple[tuple[str, int], tuple[str, int]], int]:
    """TCP_NODELAY of every connected TCP socket of this process, keyed by (local, peer) address."""
    found = {}
    for entry in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{entry}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(entry)))
        except OSError:
            continue
        with sock:
            try:
                if sock.type != socket.SOCK_STREAM or sock.family != socket.AF_INET:
                    continue
                key = (sock.getsockname()[:2], sock.getpeername()[:2])
                found[key] = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            except OSError:
                continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")
def test_both_ends_of_the_bidi_connection_turn_nagle_off() -> None:
    """REFERENCE.md §8: with Nagle on, a small PayloadPart waits up to 40 ms for a delayed ACK. The
    simulator's end sets TCP_NODELAY itself; the CRT client's end does not (awscrt has no option for
    it: it reads 0 unless ``open_bidi_stream`` turns it on, which it does by default)."""

    async def ends(tcp_nodelay: bool) -> list[int]:
        async with Simulator(AsgiContainer(tone_app())) as sim:
            async with open_bidi_stream(
                "ep", endpoint_url=sim.endpoint_url, ca_file=sim.ca_file, timeout=30, tcp_nodelay=tcp_nodelay
            ) as session:
                await session.opened()
                door = ("127.0.0.1", sim.port)
                connections = _nodelay_by_connection()
                client = [v for (_, peer), v in connections.items() if peer == door]
                server = [v for (local, _), v in connections.items() if local == door]
                assert len(client) == 1 and len(server) == 1
                return [client[0], server[0]]

    assert run(ends(True)) == [1, 1]
    assert run(ends(False)) == [0, 1]  # the official client's own default: Nagle on


def test_a_polite_session_leaves_no_unretrieved_task_exception() -> None:
    """Issue 15: the CRT's body writer fails once the response has ended (HTTP-stream has completed);
    sagemaker_transport.client ends the input without asyncio reporting "Task exception was never
    retrieved"."""
    import gc

    reports: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reports.append(context))
        async with Simulator(AsgiContainer(tone_app())) as sim:
            for _ in range(2):
                transcript = await speak_through(endpoint_url=sim.endpoint_url, ca_file=sim.ca_file)
                _assert_complete(transcript)
            await asyncio.sleep(0.2)  # the writers' last writes fail now
            gc.collect()  # unretrieved exceptions are reported when their task is collected

    run(main())
    gc.collect()
    assert [str(r.get("exception") or r.get("message")) for r in reports] == []

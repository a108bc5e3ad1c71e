"""sagemaker_transport.client: the one client of the bidirectional stream, without a network.

:class:`BidiStream` runs here over a fake of the official client's stream (its ``await_output``, input
publisher and output receiver), so the opening, the errors, the end of input and the drain are checked
without the SDK's transport; the simulator's tests (tests/simulator) run the same class end to end through
the real client. The agent's adapter (reference_agent.sagemaker_tts) is checked on the same fake. Last,
the layering this package exists for: it imports protocol only, and the simulator never imports the agent.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
from aws_sdk_sagemaker_runtime_http2.models import (
    ModelStreamError,
    ResponsePayloadPart,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    ResponseStreamEventUnknown,
)

from reference_agent.sagemaker_tts import SageMakerTtsStream
from reference_agent.tts import TtsUnavailable
from sagemaker_transport.client import BidiStream, ReceivedPart, endpoint_address, set_tcp_nodelay

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 10.0


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, GUARD_S))


class FakeInput:
    def __init__(self) -> None:
        self.sent: list[object] = []
        self.closed = False

    async def send(self, event: object) -> None:
        self.sent.append(event)

    async def close(self) -> None:
        self.closed = True


class FakeReceiver:
    def __init__(self, events: list[object]) -> None:
        self.events = list(events)
        self.closed = False

    async def receive(self) -> object | None:
        await asyncio.sleep(0)
        return self.events.pop(0) if self.events else None

    async def close(self) -> None:
        self.closed = True


class FakeStream:
    """The parts of smithy's DuplexEventStream that BidiStream uses."""

    def __init__(self, events: list[object] = (), *, error: BaseException | None = None) -> None:
        self.input_stream = FakeInput()
        self.receiver = FakeReceiver(list(events))
        self.error = error
        self.answer = asyncio.get_running_loop().create_future()
        self.awaited = 0

    def answer_now(self) -> None:
        if self.error is not None:
            self.answer.set_exception(self.error)
        else:
            self.answer.set_result(("output", self.receiver))

    async def await_output(self):
        self.awaited += 1
        return await self.answer


def part(data: bytes, completion_state: str | None = None, data_type: str | None = None) -> object:
    value = ResponsePayloadPart(bytes_=data, data_type=data_type, completion_state=completion_state)
    return ResponseStreamEventPayloadPart(value=value)


def test_the_opening_is_awaited_from_the_start_and_parts_come_back_with_the_api_defaults():
    async def scenario():
        fake = FakeStream([part(b"a", "PARTIAL", "UTF8"), part(b"b")])
        bidi = BidiStream(fake, timeout=5)
        await asyncio.sleep(0)
        assert fake.awaited == 1 and bidi.failure() is None  # pending, not failed
        fake.answer_now()
        assert await bidi.opened() == "output"
        parts = [p async for p in bidi]
        return parts, bidi.failure()

    parts, failure = run(scenario())
    assert parts == [ReceivedPart(b"a", "UTF8", "PARTIAL"), ReceivedPart(b"b", "BINARY", "COMPLETE")]
    assert [p.is_complete for p in parts] == [False, True] and failure is None


def test_sends_are_payload_parts_with_the_given_data_type_and_completion_state():
    async def scenario():
        fake = FakeStream()
        bidi = BidiStream(fake)
        await bidi.send(b"x", data_type=None, completion_state="PARTIAL")
        await bidi.send_json({"type": "close"})
        return [(e.value.bytes_, e.value.data_type, e.value.completion_state) for e in fake.input_stream.sent]

    assert run(scenario()) == [(b"x", None, "PARTIAL"), (b'{"type": "close"}', "UTF8", None)]


def test_unknown_events_raise_unless_skipped_and_stream_errors_are_raised_as_themselves():
    async def scenario():
        unknown = ResponseStreamEventUnknown(tag="SomethingNew")
        strict = BidiStream(FakeStream([unknown]))
        strict.stream.answer_now()
        with pytest.raises(RuntimeError, match="unexpected output event"):
            await strict.receive()
        lenient = BidiStream(FakeStream([unknown, part(b"after")]))
        lenient.stream.answer_now()
        assert await lenient.receive(skip_unknown=True) == ReceivedPart(b"after", "BINARY", "COMPLETE")
        error = ModelStreamError(message="boom", error_code="E")
        failing = BidiStream(FakeStream([ResponseStreamEventModelStreamError(value=error)]))
        failing.stream.answer_now()
        with pytest.raises(ModelStreamError):
            await failing.receive()

    run(scenario())


def test_a_refused_stream_raises_from_opened_and_its_input_is_not_ended():
    async def scenario():
        fake = FakeStream(error=ConnectionError("refused"))
        bidi = BidiStream(fake, timeout=5)
        fake.answer_now()
        with pytest.raises(ConnectionError):
            await bidi.receive()
        assert isinstance(bidi.failure(), ConnectionError)
        assert await bidi.close_input() is False
        return fake.input_stream.closed

    assert run(scenario()) is False


def test_an_opening_past_the_timeout_is_given_up():
    async def scenario():
        bidi = BidiStream(FakeStream(), timeout=0.01)
        with pytest.raises(TimeoutError):
            await bidi.opened()
        return bidi.failure()

    assert isinstance(run(scenario()), asyncio.CancelledError)


def test_aclose_ends_the_input_drains_the_response_and_releases_it():
    async def scenario():
        fake = FakeStream([part(b"late"), part(b"later")])
        bidi = BidiStream(fake)
        fake.answer_now()
        await bidi.opened()
        await bidi.aclose()
        await bidi.aclose()  # once only
        return fake.input_stream.closed, fake.receiver.events, fake.receiver.closed

    assert run(scenario()) == (True, [], True)


def test_aclose_of_a_stream_still_opening_gives_the_opening_up():
    async def scenario():
        fake = FakeStream()
        bidi = BidiStream(fake)
        await asyncio.sleep(0)
        await bidi.aclose()
        return bidi.failure(), fake.input_stream.closed

    failure, input_closed = run(scenario())
    # The request is on its way while it opens: its input is ended as usual, then the opening given up.
    assert isinstance(failure, asyncio.CancelledError) and input_closed is True


def test_the_agents_adapter_speaks_the_tts_session_protocol_over_it():
    async def scenario():
        fake = FakeStream([part(b"one", "PARTIAL"), part(b"two"), part(b"three", "SOMETHING")])
        tts = SageMakerTtsStream(BidiStream(fake))
        await tts.send(b'{"type": "close"}')
        fake.answer_now()
        received = [item async for item in tts.receive()]
        sent = fake.input_stream.sent[0].value
        await tts.aclose()
        return received, (sent.bytes_, sent.data_type, sent.completion_state)

    received, sent = run(scenario())
    # Only PARTIAL continues a message: an absent or unknown CompletionState ends it (REFERENCE.md §1).
    assert received == [(b"one", False), (b"two", True), (b"three", True)]
    assert sent == (b'{"type": "close"}', "UTF8", "COMPLETE")


def test_the_agents_adapter_reports_a_stream_that_cannot_open_as_tts_unavailable():
    async def scenario():
        fake = FakeStream(error=ConnectionError("refused"))
        tts = SageMakerTtsStream(BidiStream(fake))
        fake.answer_now()
        with pytest.raises(TtsUnavailable, match="ConnectionError: refused"):
            [item async for item in tts.receive()]
        with pytest.raises(TtsUnavailable, match="ConnectionError: refused"):
            await tts.send(b"{}")
        given_up = SageMakerTtsStream(BidiStream(FakeStream()))
        await given_up.aclose()
        with pytest.raises(TtsUnavailable, match="closed before it opened"):
            await given_up.send(b"{}")

    run(scenario())


# --- TCP_NODELAY on the official client's connection ------------------------------------------------


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="needs Linux /proc")
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", None])
def test_set_tcp_nodelay_turns_nagle_off_on_connections_to_that_peer_only(host):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener, socket.socket() as other_listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        other_listener.bind(("127.0.0.1", 0))
        other_listener.listen(1)
        port = listener.getsockname()[1]
        with socket.socket() as client, socket.socket() as bystander:
            client.connect(("127.0.0.1", port))
            bystander.connect(other_listener.getsockname())
            nodelay = (socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert client.getsockopt(*nodelay) == 0  # proto 0: nothing set it
            assert set_tcp_nodelay(host, port) == 1
            assert client.getsockopt(*nodelay) == 1
            assert bystander.getsockopt(*nodelay) == 0
            assert set_tcp_nodelay(host, port) == 0  # already off: nothing to change


def test_endpoint_address_of_an_override_and_of_the_regional_endpoint():
    assert endpoint_address("https://127.0.0.1:8443") == ("127.0.0.1", 8443)
    assert endpoint_address("https://example.test") == ("example.test", 443)
    assert endpoint_address(None, "us-east-1") == ("runtime.sagemaker.us-east-1.amazonaws.com", 8443)
    assert endpoint_address(None) == (None, 8443)


# --- layering ---------------------------------------------------------------------------------------


def imported_packages(package: str) -> dict[str, set[str]]:
    """Top-level names each module of ``package`` imports (module path -> names)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


PROJECT_PACKAGES = {"protocol", "speech", "simulator", "reference_server", "reference_agent", "conformance"}


def test_sagemaker_transport_imports_no_project_package_but_protocol():
    upward = {
        module: sorted(names & (PROJECT_PACKAGES - {"protocol"}))
        for module, names in imported_packages("sagemaker_transport").items()
    }
    assert not {module: names for module, names in upward.items() if names}


def test_the_simulator_never_imports_the_agent():
    back = [module for module, names in imported_packages("simulator").items() if "reference_agent" in names]
    assert not back


def test_nagle_is_turned_off_again_once_the_stream_has_opened(monkeypatch):
    """The official client can return the stream before the CRT has connected; a first
    :func:`set_tcp_nodelay` then finds no socket, and the stream tries once more when the response headers
    prove the connection exists (seen as a flaky read of 0 on a loaded machine)."""
    import sagemaker_transport.client as client_module

    calls: list[tuple[str | None, int]] = []
    monkeypatch.setattr(client_module, "set_tcp_nodelay", lambda host, port: calls.append((host, port)) or 1)

    class Stream:
        async def await_output(self):
            await asyncio.sleep(0)
            return "output", object()

    async def main() -> list[tuple[str | None, int]]:
        retried = BidiStream(Stream(), 5, nodelay_peer=("127.0.0.1", 8443))
        assert await retried.opened() == "output" and await retried.opened() == "output"
        assert await BidiStream(Stream(), 5).opened() == "output"  # the first try found its socket
        return calls

    assert asyncio.run(main()) == [("127.0.0.1", 8443)]

"""The agent's TTS leg over SageMaker: :mod:`sagemaker_transport.client` seen as a :class:`TtsStream`.

The official-client glue (building the client, the stream, ending the input quietly, Nagle) is
:mod:`sagemaker_transport.client`'s, shared with the simulator's tests and the conformance suite; this
module only adapts it to the agent's TTS protocol (:mod:`reference_agent.tts`): whole messages out as
UTF8 PayloadParts, ``(bytes, complete)`` back, and :class:`~reference_agent.tts.TtsUnavailable` for a
stream that cannot open.

One client per event loop and endpoint URL is kept by :class:`SageMakerTtsConnector` and shared by
every stream: invocations reuse its HTTP/2 connection (no TLS handshake per reply), and no connection
is closed under a stream whose end of input the CRT is still writing (:meth:`BidiStream.close_input
<sagemaker_transport.client.BidiStream.close_input>` waits for that write).

The SDK is imported on first use, so importing the agent's app costs no SDK import.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from reference_agent.tts import TtsEndpoint, TtsUnavailable

if TYPE_CHECKING:
    from sagemaker_transport.client import BidiStream

__all__ = ["SageMakerTtsConnector", "SageMakerTtsStream"]


class SageMakerTtsStream:
    """One ``InvokeEndpointWithBidirectionalStream`` call as a :class:`~reference_agent.tts.TtsStream`.

    Opened by :class:`SageMakerTtsConnector`; closing it leaves the shared client open.

    Args:
        bidi: the open stream (no timeouts: the agent's :class:`~reference_agent.tts.Speaker` bounds its
            waits itself).
    """

    def __init__(self, bidi: BidiStream) -> None:
        self._bidi = bidi

    def _failure(self) -> BaseException | None:
        """Why the stream never opened, once that is known (``None`` while open or pending)."""
        failure = self._bidi.failure()
        if isinstance(failure, asyncio.CancelledError):
            return TtsUnavailable("the TTS stream was closed before it opened")
        return failure

    async def send(self, data: bytes) -> None:
        """Send one whole message as a PayloadPart with DataType ``UTF8``, CompletionState ``COMPLETE``.

        Raises:
            TtsUnavailable: the stream failed to open.
        """
        if (failure := self._failure()) is not None:
            raise TtsUnavailable(_describe(failure))
        await self._bidi.send(data, data_type="UTF8", completion_state="COMPLETE")

    async def receive(self) -> AsyncIterator[tuple[bytes, bool]]:
        """Yield ``(bytes, complete)`` per response PayloadPart until the stream ends.

        Raises:
            TtsUnavailable: the stream failed to open (connection, TLS, HTTP error).
            ModelStreamError, InternalStreamFailure: the service ended the stream with an exception.
        """
        try:
            await self._bidi.opened()
        except Exception as exc:
            raise TtsUnavailable(_describe(exc)) from exc
        # Unknown union members are skipped, as the service's forward-compatibility rules ask.
        while (part := await self._bidi.receive(skip_unknown=True)) is not None:
            # Missing CompletionState means COMPLETE (REFERENCE.md §1).
            yield part.data, part.completion_state != "PARTIAL"

    async def close_input(self) -> None:
        """End the input stream (:meth:`sagemaker_transport.client.BidiStream.close_input`)."""
        await self._bidi.close_input()

    async def aclose(self) -> None:
        """End the input, let the service end the response, release the stream; never raises."""
        await self._bidi.aclose()


def _describe(exc: BaseException) -> str:
    return f"cannot open the TTS stream: {type(exc).__name__}: {exc}"


class SageMakerTtsConnector:
    """A :data:`~reference_agent.tts.TtsConnect` over the official client.

    Keeps one client per event loop and per (endpoint URL, region), created on first use inside the
    loop that uses it (``BedrockAgentCoreApp`` runs handlers on its own worker loop, REFERENCE.md §5).

    Args:
        transport_factory: builds the client's HTTP transport; default a new ``AWSCRTHTTPClient``
            (the local stack passes one that trusts the simulator's CA; tests may pass an in-process
            transport).
        credentials: ``(access key id, secret key)`` to sign with; default the client's credential
            chain (environment, profile, container or instance role).
        tcp_nodelay: turn Nagle's algorithm off on the client's connection once a stream is open
            (:func:`sagemaker_transport.client.set_tcp_nodelay`: without it a sentence sent right after
            another small write waits up to 40 ms for the endpoint's delayed ACK).
    """

    def __init__(
        self,
        *,
        transport_factory: Callable[[], Any] | None = None,
        credentials: tuple[str, str] | None = None,
        tcp_nodelay: bool = True,
    ) -> None:
        self._transport_factory = transport_factory
        self._credentials = credentials
        self._tcp_nodelay = tcp_nodelay
        # loop -> (endpoint URL, region) -> client; a loop that is gone takes its clients with it.
        self._clients: weakref.WeakKeyDictionary[Any, dict[tuple[str | None, str | None], Any]] = (
            weakref.WeakKeyDictionary()
        )

    async def _client(self, endpoint: TtsEndpoint) -> Any:
        from sagemaker_transport.client import bidi_client

        clients = self._clients.setdefault(asyncio.get_running_loop(), {})
        key = (endpoint.url, endpoint.region)
        if key not in clients:
            client = await bidi_client(
                endpoint_url=endpoint.url,
                transport=self._transport_factory() if self._transport_factory is not None else None,
                region=endpoint.region,
                credentials=self._credentials,
            )
            clients.setdefault(key, client)
        return clients[key]

    async def __call__(self, endpoint: TtsEndpoint) -> SageMakerTtsStream:
        """Start ``InvokeEndpointWithBidirectionalStream`` on ``endpoint.name``.

        Failures to connect may surface later, from ``send`` or ``receive``, as
        :class:`~reference_agent.tts.TtsUnavailable`.

        Raises:
            TtsUnavailable: the call could not be started (bad configuration, no credentials).
        """
        from sagemaker_transport.client import endpoint_address, invoke_bidi_stream

        peer = endpoint_address(endpoint.url, endpoint.region) if self._tcp_nodelay else None
        try:
            client = await self._client(endpoint)
            bidi = await invoke_bidi_stream(client, endpoint.name, tcp_nodelay_peer=peer)
        except Exception as exc:
            raise TtsUnavailable(_describe(exc)) from exc
        return SageMakerTtsStream(bidi)

    async def aclose(self) -> None:
        """Close the clients of the running loop (call from the loop that used them)."""
        clients = self._clients.pop(asyncio.get_running_loop(), {})
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.close()

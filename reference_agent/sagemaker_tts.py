"""TTS sessions over the official SageMaker bidirectional-streaming client.

``aws-sdk-sagemaker-runtime-http2`` 0.12.0 (REFERENCE.md §1, verified facts this module relies on):

* the config must be built with ``await AsyncSageMakerRuntimeHTTP2Config.resolve(...)``;
* the default aiohttp transport cannot stream both ways: the CRT transport (``[awscrt]`` extra) is
  used, which speaks HTTP/2 only over TLS with ALPN ``h2`` — the simulator serves exactly that;
* connection failures and HTTP errors before the stream (``ModelError`` 424, throttling 400, 5xx)
  surface from ``await_output()``, and ``ModelStreamError`` / ``InternalStreamFailure`` are raised by
  ``receive()``;
* an untrusted certificate makes the client hang silently, so the caller bounds every wait.

The same code reaches the simulator (``endpoint_uri=https://127.0.0.1:PORT`` and a transport that
trusts its CA) and a live endpoint (no URL: the regional endpoint and the default credential chain).

One client per event loop and endpoint URL is kept by :class:`SageMakerTtsConnector` and shared by
every session: invocations reuse its HTTP/2 connection (no TLS handshake per reply), and no connection
is closed under a stream whose end of input the CRT is still writing — closing the client right after
the input ends makes the CRT's body-writer task fail with ``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED``
(asyncio then logs "Task exception was never retrieved"); :meth:`SageMakerTtsSession.close_input`
waits for that write (:func:`sagemaker_transport.aws_crt.end_input`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from reference_agent.tts import TtsEndpoint, TtsUnavailable
from sagemaker_transport.aws_crt import absorb_completed_stream_writes, end_input

__all__ = [
    "DRAIN_TIMEOUT_S",
    "SageMakerTtsConnector",
    "SageMakerTtsSession",
    "endpoint_address",
    "set_tcp_nodelay",
]

DRAIN_TIMEOUT_S = 2.0
"""Longest wait, when a session closes, for the service to end the response after the input ended."""


def set_tcp_nodelay(host: str | None, port: int) -> int:
    """Turn Nagle's algorithm off on this process's TCP connections to ``host:port``; return how many changed.

    Why: the CRT transport of the official client does not set ``TCP_NODELAY`` on its sockets, and
    ``awscrt.io.SocketOptions`` has no field for it (verified, awscrt 0.32: ``getsockopt`` reads 0 on its
    connected socket). With Nagle on, a small write (a PayloadPart carrying one sentence) is held until
    the client's previous small write (an HTTP/2 SETTINGS ACK or WINDOW_UPDATE) is acknowledged, and a
    Linux peer with nothing to send delays that ACK by up to 40 ms (REFERENCE.md §8: measured through the
    simulator as +43 ms on the client → endpoint leg of first audio while the simulator's own frames were
    also held back). Production clients can pay it against SageMaker too.

    The sockets are found by their peer address in ``/proc/self/fd`` (Linux; elsewhere nothing is
    changed and 0 is returned) and changed through a duplicate descriptor, so the CRT's own descriptor
    is untouched. Call it after a connection exists (after the stream opened); a later new connection
    needs another call.

    Args:
        host: the peer's host name or address; ``None`` matches any peer on ``port``.
        port: the peer's port (443 or 8443 for SageMaker, the simulator's port locally).
    """
    fd_dir = "/proc/self/fd"
    if not os.path.isdir(fd_dir):
        return 0
    addresses: set[str] | None = None
    if host is not None:
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
        except OSError:
            return 0
    changed = 0
    for entry in os.listdir(fd_dir):
        try:
            if not os.readlink(f"{fd_dir}/{entry}").startswith("socket:"):
                continue
            duplicate = os.dup(int(entry))
        except (OSError, ValueError):
            continue  # closed meanwhile by another thread, or not a descriptor
        try:
            sock = socket.socket(fileno=duplicate)
        except OSError:  # the descriptor was reused for something else meanwhile
            os.close(duplicate)
            continue
        with sock:
            try:
                if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                peer_host, peer_port = sock.getpeername()[:2]
                if peer_port != port or (addresses is not None and peer_host not in addresses):
                    continue
                if not sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    changed += 1
            except OSError:
                continue  # not connected, or not TCP
    return changed


def endpoint_address(endpoint_url: str | None, region: str | None = None) -> tuple[str | None, int]:
    """``(host, port)`` the official bidi client connects to for ``endpoint_url`` (``None``: the
    regional SageMaker runtime endpoint, port 8443, REFERENCE.md §1; any host when the region is unknown)."""
    if endpoint_url is None:
        host = f"runtime.sagemaker.{region}.amazonaws.com" if region else None
        return host, 8443
    parts = urlsplit(endpoint_url)
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


class SageMakerTtsSession:
    """One ``InvokeEndpointWithBidirectionalStream`` call as a :class:`~reference_agent.tts.TtsSession`.

    Opened by :class:`SageMakerTtsConnector`; closing it leaves the shared client open.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._input_closed = False
        self._closed = False
        # The initial response is awaited in the background: the request is already on its way, and a
        # service that answers headers only after the first input event must not stall the opener.
        self._output = asyncio.ensure_future(stream.await_output())

    def _failure(self) -> BaseException | None:
        """Why the stream never opened, once that is known (``None`` while open or pending)."""
        if not self._output.done():
            return None
        if self._output.cancelled():
            return TtsUnavailable("the TTS stream was closed before it opened")
        return self._output.exception()

    async def send(self, data: bytes) -> None:
        """Send one whole message as a PayloadPart with DataType ``UTF8``, CompletionState ``COMPLETE``.

        Raises:
            TtsUnavailable: the stream failed to open.
        """
        from aws_sdk_sagemaker_runtime_http2.models import RequestPayloadPart, RequestStreamEventPayloadPart

        if (failure := self._failure()) is not None:
            raise TtsUnavailable(_describe(failure))
        part = RequestPayloadPart(bytes_=data, data_type="UTF8", completion_state="COMPLETE")
        await self._stream.input_stream.send(RequestStreamEventPayloadPart(value=part))

    async def receive(self) -> AsyncIterator[tuple[bytes, bool]]:
        """Yield ``(bytes, complete)`` per response PayloadPart until the stream ends.

        Raises:
            TtsUnavailable: the stream failed to open (connection, TLS, HTTP error).
            ModelStreamError, InternalStreamFailure: the service ended the stream with an exception.
        """
        from aws_sdk_sagemaker_runtime_http2.models import (
            ResponseStreamEventInternalStreamFailure,
            ResponseStreamEventModelStreamError,
            ResponseStreamEventPayloadPart,
        )

        try:
            _, receiver = await self._output
        except Exception as exc:
            raise TtsUnavailable(_describe(exc)) from exc
        stream_errors = ResponseStreamEventModelStreamError | ResponseStreamEventInternalStreamFailure
        while (event := await receiver.receive()) is not None:
            if isinstance(event, ResponseStreamEventPayloadPart):
                part = event.value
                # Missing CompletionState means COMPLETE (REFERENCE.md §1).
                yield part.bytes_ or b"", part.completion_state != "PARTIAL"
            elif isinstance(event, stream_errors):
                # 0.12.0 raises these itself; a client that returns them instead gets the same outcome.
                raise event.value
            # Unknown union members are skipped, as the service's forward-compatibility rules ask.
        absorb_completed_stream_writes()  # the response ended: its body writer may now fail

    async def close_input(self) -> None:
        """End the input stream (the signed empty end-of-input envelope, then END_STREAM).

        Waits until the CRT has written END_STREAM (:func:`sagemaker_transport.aws_crt.end_input`), so nothing
        closing the connection next can cut that write off and asyncio prints no traceback for it.
        """
        if self._input_closed:
            return
        self._input_closed = True
        absorb_completed_stream_writes()
        if self._failure() is not None:
            # The request never reached a server; closing its body would wait forever for a reader.
            return
        await end_input(self._stream.input_stream)

    async def aclose(self) -> None:
        """End the input, let the service end the response, release the stream; never raises."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self.close_input()
        if self._output.done() and self._failure() is None:
            _, receiver = self._output.result()
            # The service ends the response once the input has ended (REFERENCE.md §1).
            with contextlib.suppress(Exception):
                async with asyncio.timeout(DRAIN_TIMEOUT_S):
                    while await receiver.receive() is not None:
                        pass
            with contextlib.suppress(Exception):
                await receiver.close()
        else:
            self._output.cancel()
            with contextlib.suppress(BaseException):
                await self._output


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
            (:func:`set_tcp_nodelay`: without it a sentence sent right after another small write waits
            up to 40 ms for the endpoint's delayed ACK).
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
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config

        clients = self._clients.setdefault(asyncio.get_running_loop(), {})
        key = (endpoint.url, endpoint.region)
        if key not in clients:
            if self._transport_factory is not None:
                transport = self._transport_factory()
            else:
                from smithy_http.aio.crt import AWSCRTHTTPClient

                transport = AWSCRTHTTPClient()
            overrides: dict[str, Any] = {"transport": transport}
            if endpoint.url is not None:
                overrides["endpoint_uri"] = endpoint.url
            if endpoint.region is not None:
                overrides["region"] = endpoint.region
            if self._credentials is not None:
                overrides["aws_access_key_id"], overrides["aws_secret_access_key"] = self._credentials
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(**overrides)
            clients.setdefault(key, AsyncSageMakerRuntimeHTTP2Client(config=config))
        return clients[key]

    async def __call__(self, endpoint: TtsEndpoint) -> SageMakerTtsSession:
        """Start ``InvokeEndpointWithBidirectionalStream`` on ``endpoint.name``.

        Failures to connect may surface later, from ``send`` or ``receive``, as
        :class:`~reference_agent.tts.TtsUnavailable`.

        Raises:
            TtsUnavailable: the call could not be started (bad configuration, no credentials).
        """
        from aws_sdk_sagemaker_runtime_http2.models import InvokeEndpointWithBidirectionalStreamInput

        try:
            client = await self._client(endpoint)
            stream = await client.invoke_endpoint_with_bidirectional_stream(
                InvokeEndpointWithBidirectionalStreamInput(endpoint_name=endpoint.name)
            )
        except Exception as exc:
            raise TtsUnavailable(_describe(exc)) from exc
        if self._tcp_nodelay:
            # In a thread: a host name is resolved (getaddrinfo blocks) and /proc is read.
            await asyncio.to_thread(set_tcp_nodelay, *endpoint_address(endpoint.url, endpoint.region))
        return SageMakerTtsSession(stream)

    async def aclose(self) -> None:
        """Close the clients of the running loop (call from the loop that used them)."""
        clients = self._clients.pop(asyncio.get_running_loop(), {})
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.close()

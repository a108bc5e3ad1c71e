"""The one client of SageMaker's bidirectional stream over the official, unmodified AWS clients.

``InvokeEndpointWithBidirectionalStream`` (PROTOCOL.md §12) through ``aws-sdk-sagemaker-runtime-http2``
0.12.0 on its CRT transport, the only duplex transport the client ships (REFERENCE.md §1), for every
caller in this repository: the simulator's tests, the conformance suite (simulator and live targets), the
benchmarks and the reference agent's TTS leg (``reference_agent.sagemaker_tts``, a thin adapter).

* :func:`bidi_client` builds the official client for a target: endpoint, transport, region, credentials;
  :func:`crt_transport` is its CRT transport, trusting a given CA;
* :func:`invoke_bidi_stream` starts one stream on a client and gives a :class:`BidiStream`: send
  PayloadParts, read them back as :class:`ReceivedPart`, end the input quietly
  (:func:`sagemaker_transport.aws_crt.end_input`), drain and release;
* :func:`open_bidi_stream` does both for one stream, as an async context manager that closes the client on
  exit, against one of three targets:

  - the simulator over TLS + HTTP/2: ``endpoint_url=sim.endpoint_url, ca_file=sim.ca_file``;
  - the simulator in-process: ``transport=sim.transport()``;
  - a live endpoint: neither (region, credentials and endpoint from the default AWS chain).

* :func:`set_tcp_nodelay` turns Nagle's algorithm off on the CRT's connection (:func:`endpoint_address`
  names its peer).

Only the client's settings are chosen here; the request, signing and event-stream decoding are the
client's own. Verified facts of 0.12.0 this module relies on (REFERENCE.md §1): the config is built with
``await AsyncSageMakerRuntimeHTTP2Config.resolve(...)``; the CRT transport speaks HTTP/2 only over TLS with
ALPN ``h2``; connection failures and HTTP errors before the stream (``ModelError`` 424, throttling 400,
5xx) surface from ``await_output()``, and ``ModelStreamError`` / ``InternalStreamFailure`` from
``receive()``; an untrusted certificate makes the client hang silently, so callers bound every wait.

Response stream: :func:`runtime_client` and :func:`iter_response_stream` wrap boto3's
``sagemaker-runtime`` ``invoke_endpoint_with_response_stream`` (boto3 is imported only when used).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
)
from smithy_http.aio.crt import AWSCRTHTTPClient

from sagemaker_transport.aws_crt import END_INPUT_TIMEOUT_S, absorb_completed_stream_writes, end_input

__all__ = [
    "DRAIN_TIMEOUT_S",
    "LOCAL_CREDENTIALS",
    "BidiStream",
    "ReceivedPart",
    "bidi_client",
    "crt_transport",
    "endpoint_address",
    "invoke_bidi_stream",
    "iter_response_stream",
    "open_bidi_stream",
    "runtime_client",
    "set_tcp_nodelay",
]

#: Credentials for local targets: the simulator checks no signatures, but the clients sign anyway.
LOCAL_CREDENTIALS = ("SIMULATORACCESSKEY", "simulator-secret-key")

DRAIN_TIMEOUT_S = 2.0
"""Longest wait of :meth:`BidiStream.aclose` for the service to end the response after the input ended."""

_ENV_LOCK = threading.Lock()
_STREAM_ERRORS = (ResponseStreamEventModelStreamError, ResponseStreamEventInternalStreamFailure)


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


def crt_transport(ca_file: str | Path | None = None) -> AWSCRTHTTPClient:
    """The official client's CRT transport; with ``ca_file``, one that trusts that CA.

    The CRT reads ``SSL_CERT_FILE`` when its TLS context is built, in the transport's constructor
    (verified with awscrt 0.32), so the variable is set only around that call (under a lock, and
    restored after) rather than for the whole process.
    """
    if ca_file is None:
        return AWSCRTHTTPClient()
    with _ENV_LOCK:
        previous = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = str(ca_file)
        try:
            return AWSCRTHTTPClient()
        finally:
            if previous is None:
                del os.environ["SSL_CERT_FILE"]
            else:
                os.environ["SSL_CERT_FILE"] = previous


@dataclass(frozen=True)
class ReceivedPart:
    """One output PayloadPart, with the API defaults applied (absent DataType → ``BINARY``,
    absent CompletionState → ``COMPLETE``)."""

    data: bytes
    data_type: str
    completion_state: str

    @property
    def is_complete(self) -> bool:
        """This part ends a message."""
        return self.completion_state == "COMPLETE"


def _retrieve(opening: asyncio.Future[Any]) -> None:
    """Done-callback: mark the opening's failure retrieved (:meth:`BidiStream.opened` raises it again)."""
    if not opening.cancelled():
        opening.exception()


class BidiStream:
    """One open ``InvokeEndpointWithBidirectionalStream`` call through the official client.

    Made by :func:`invoke_bidi_stream` (or :func:`open_bidi_stream`). Send PayloadParts with :meth:`send` /
    :meth:`send_text` / :meth:`send_json`; read them with :meth:`receive` or ``async for``. The initial
    response is awaited in the background from the start (a service that answers the headers only after
    the first input event must not stall the opener); :meth:`opened` waits for it.

    The official client's errors come through unchanged: ``ModelError`` (424) and the other HTTP errors
    from :meth:`opened` (so from the first :meth:`receive`), ``ModelStreamError`` and
    ``InternalStreamFailure`` from :meth:`receive` mid-stream.

    Keep the input open until the output is drained: SageMaker tears the container's WebSocket down when
    the input ends (REFERENCE.md §1). Then :meth:`close_input` ends the input without a traceback, and
    :meth:`aclose` also drains and releases the response. Neither closes the client.

    Args:
        stream: what ``client.invoke_endpoint_with_bidirectional_stream`` returned (a smithy
            ``DuplexEventStream``).
        timeout: seconds any single send, receive or the opening may wait (None: forever).
        client: the official client the stream belongs to, kept as :attr:`client` for callers that
            close it themselves (tests that make the client vanish mid-answer).
        nodelay_peer: ``(host, port)`` whose connection :func:`set_tcp_nodelay` found no socket to yet
            (the CRT may still be connecting when the call returns): tried once more when the response
            headers prove the connection exists, in :meth:`opened`.
    """

    def __init__(
        self,
        stream: Any,
        timeout: float | None = None,
        *,
        client: Any = None,
        nodelay_peer: tuple[str | None, int] | None = None,
    ) -> None:
        self.client = client
        self._nodelay_peer = nodelay_peer
        self.stream = stream
        self.timeout = timeout
        self.output: Any = None
        """The operation's initial response (production variant), once :meth:`opened` returned."""
        self._receiver: Any = None
        self._input_closed = False
        self._open_failed = False
        self._closed = False
        self._opening: asyncio.Future[Any] = asyncio.ensure_future(stream.await_output())
        self._opening.add_done_callback(_retrieve)

    def failure(self) -> BaseException | None:
        """Why the stream never opened, once that is known: the client's exception (``ModelError``, a
        connection error ...), ``asyncio.CancelledError`` when the opening was given up (a timeout,
        :meth:`aclose`); ``None`` while it is pending or opened."""
        if not self._opening.done():
            return None
        if self._opening.cancelled():
            return asyncio.CancelledError("the stream was closed before it opened")
        return self._opening.exception()

    async def opened(self) -> Any:
        """Wait for the response headers; return the operation output (production variant).

        Raises:
            TimeoutError: no answer within the stream's timeout (the opening is then given up).
            ModelError, InputValidationError, ...: the service's HTTP error, if the stream was refused.
        """
        if self._receiver is None:
            try:
                self.output, self._receiver = await asyncio.wait_for(self._opening, self.timeout)
            except BaseException:
                self._open_failed = True
                raise
            if self._nodelay_peer is not None:
                peer, self._nodelay_peer = self._nodelay_peer, None
                await asyncio.to_thread(set_tcp_nodelay, *peer)
        return self.output

    async def send(
        self, data: bytes, *, data_type: str | None = "BINARY", completion_state: str | None = None
    ) -> None:
        """Send one PayloadPart (``data_type`` ``BINARY``/``UTF8``/None; ``completion_state``
        ``PARTIAL``/``COMPLETE``/None: absent means COMPLETE to the service, PROTOCOL.md §12.3).

        Raises:
            TimeoutError: the client did not take the part within the stream's timeout.
        """
        part = RequestPayloadPart(bytes_=data, data_type=data_type, completion_state=completion_state)
        await asyncio.wait_for(
            self.stream.input_stream.send(RequestStreamEventPayloadPart(value=part)), self.timeout
        )

    async def send_text(self, text: str) -> None:
        """Send ``text`` as one UTF8 PayloadPart (a WebSocket TEXT frame at the container)."""
        await self.send(text.encode("utf-8"), data_type="UTF8")

    async def send_json(self, message: dict[str, Any], *, data_type: str = "UTF8") -> None:
        """Send a JSON control message (PROTOCOL.md §4) as one PayloadPart."""
        await self.send(json.dumps(message).encode("utf-8"), data_type=data_type)

    async def receive(self, *, skip_unknown: bool = False) -> ReceivedPart | None:
        """The next output PayloadPart, or None when the output stream ended.

        Args:
            skip_unknown: skip output events of a kind this client version does not know, as the
                service's forward-compatibility rules ask, instead of raising RuntimeError.

        Raises:
            TimeoutError: nothing arrived within the stream's timeout.
            ModelStreamError, InternalStreamFailure, ModelError, ...: as the official client raises them
                (0.12.0 raises the stream errors itself; one returned as an event is raised the same).
            RuntimeError: an output event of an unknown kind (unless ``skip_unknown``).
        """
        await self.opened()
        while True:
            event = await asyncio.wait_for(self._receiver.receive(), self.timeout)
            if event is None:
                absorb_completed_stream_writes()  # the response ended: its body writer may now fail
                return None
            if isinstance(event, ResponseStreamEventPayloadPart):
                value = event.value
                return ReceivedPart(
                    value.bytes_ or b"", value.data_type or "BINARY", value.completion_state or "COMPLETE"
                )
            if isinstance(event, _STREAM_ERRORS):
                raise event.value
            if not skip_unknown:
                raise RuntimeError(f"unexpected output event {event!r}")

    def __aiter__(self) -> AsyncIterator[ReceivedPart]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ReceivedPart]:
        while (part := await self.receive()) is not None:
            yield part

    async def close_input(self) -> bool:
        """End the input (the signed empty envelope, then END_STREAM); returns whether END_STREAM was
        written (:func:`sagemaker_transport.aws_crt.end_input`).

        Quiet and safe right before closing the client: it waits until the CRT transport has written
        END_STREAM, so the client's close cannot cut that write off and asyncio prints no "Task
        exception was never retrieved" (``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED``), whether or not the
        endpoint has already ended the response. Skipped when the stream never opened: nothing would
        ever carry the bytes, and closing its body would wait for a reader that never comes.
        """
        if self._input_closed:
            return False
        self._input_closed = True
        absorb_completed_stream_writes()
        if self._open_failed or self.failure() is not None:
            return False
        return await end_input(self.stream.input_stream, timeout_s=self.timeout or END_INPUT_TIMEOUT_S)

    async def aclose(self, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """End the input, let the service end the response (waiting up to ``drain_timeout_s``), release
        the response stream; an opening still pending is given up. Never raises; the client stays open.
        """
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self.close_input()
        if self._opening.done() and self.failure() is None:
            _, receiver = self._opening.result()
            # The service ends the response once the input has ended (REFERENCE.md §1).
            with contextlib.suppress(Exception):
                async with asyncio.timeout(drain_timeout_s):
                    while await receiver.receive() is not None:
                        pass
            with contextlib.suppress(Exception):
                await receiver.close()
        else:
            self._opening.cancel()
            with contextlib.suppress(BaseException):
                await self._opening


async def bidi_client(
    *,
    endpoint_url: str | None = None,
    transport: Any = None,
    ca_file: str | Path | None = None,
    region: str | None = None,
    credentials: tuple[str, str] | None = None,
) -> AsyncSageMakerRuntimeHTTP2Client:
    """The official bidirectional-streaming client, configured for one target; close it when done.

    Settings left as None are the client's own resolution (environment, profile, instance role): no
    local defaults are applied here (:func:`open_bidi_stream` applies them).

    Args:
        endpoint_url: endpoint override (``https://127.0.0.1:PORT`` for the simulator); None uses
            ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` or the regional endpoint.
        transport: the HTTP transport (for example :meth:`simulator.Simulator.transport`); None builds
            the CRT one with :func:`crt_transport` (trusting ``ca_file`` when given).
        ca_file: CA certificate to trust when the transport is built here.
        region: signing region.
        credentials: ``(access key id, secret key)`` to sign with.
    """
    overrides: dict[str, Any] = {"transport": transport if transport is not None else crt_transport(ca_file)}
    if endpoint_url is not None:
        overrides["endpoint_uri"] = endpoint_url
    if region is not None:
        overrides["region"] = region
    if credentials is not None:
        overrides["aws_access_key_id"], overrides["aws_secret_access_key"] = credentials
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(**overrides)
    return AsyncSageMakerRuntimeHTTP2Client(config=config)


async def invoke_bidi_stream(
    client: AsyncSageMakerRuntimeHTTP2Client,
    endpoint_name: str,
    *,
    model_invocation_path: str | None = None,
    model_query_string: str | None = None,
    target_variant: str | None = None,
    timeout: float | None = None,
    tcp_nodelay_peer: tuple[str | None, int] | None = None,
) -> BidiStream:
    """Start ``InvokeEndpointWithBidirectionalStream`` on ``endpoint_name`` with ``client``.

    Args:
        client: from :func:`bidi_client`; several streams may share it (and its HTTP/2 connection).
        endpoint_name: the SageMaker endpoint name.
        model_invocation_path, model_query_string, target_variant: the optional request headers.
        timeout: seconds the start and then any single send/receive of the stream may wait (None: forever).
        tcp_nodelay_peer: ``(host, port)`` of the connection to turn Nagle's algorithm off on once the
            stream is open (:func:`set_tcp_nodelay`, :func:`endpoint_address`); None leaves it on.

    Raises:
        TimeoutError: the start took longer than ``timeout``.
        Exception: the client's own, when the call cannot be started (configuration, credentials).
    """
    request = InvokeEndpointWithBidirectionalStreamInput(
        endpoint_name=endpoint_name,
        model_invocation_path=model_invocation_path,
        model_query_string=model_query_string,
        target_variant=target_variant,
    )
    stream = await asyncio.wait_for(client.invoke_endpoint_with_bidirectional_stream(request), timeout)
    retry = None
    if tcp_nodelay_peer is not None:
        # In a thread: a host name is resolved (getaddrinfo blocks) and /proc is read. The call can return
        # before the CRT has connected; then the stream tries again once it has opened.
        if await asyncio.to_thread(set_tcp_nodelay, *tcp_nodelay_peer) == 0:
            retry = tcp_nodelay_peer
    return BidiStream(stream, timeout, client=client, nodelay_peer=retry)


@contextlib.asynccontextmanager
async def open_bidi_stream(
    endpoint_name: str,
    *,
    endpoint_url: str | None = None,
    transport: Any = None,
    ca_file: str | Path | None = None,
    region: str | None = None,
    credentials: tuple[str, str] | None = None,
    model_invocation_path: str | None = None,
    model_query_string: str | None = None,
    target_variant: str | None = None,
    timeout: float | None = 60.0,
    tcp_nodelay: bool = True,
) -> AsyncIterator[BidiStream]:
    """Open one ``InvokeEndpointWithBidirectionalStream`` stream on a client of its own.

    Args:
        endpoint_name: the SageMaker endpoint name.
        endpoint_url: endpoint override (``https://127.0.0.1:PORT`` for the simulator); None uses
            the client's default resolution (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` or the
            regional endpoint).
        transport: a transport instance (for example :meth:`Simulator.transport`); None builds the
            CRT transport (trusting ``ca_file`` when given).
        ca_file: CA certificate to trust (the simulator's :attr:`Simulator.ca_file`).
        region: signing region; None = the default chain, or ``us-east-1`` for local targets.
        credentials: ``(access key, secret)``; None = :data:`LOCAL_CREDENTIALS` for local targets
            (``endpoint_url`` or ``transport`` given) and the default credential chain otherwise.
        model_invocation_path, model_query_string, target_variant: the optional request headers.
        timeout: seconds any single send/receive may wait (None: forever). Tests keep it finite:
            an untrusted certificate makes the CRT client hang silently (REFERENCE §1).
        tcp_nodelay: turn Nagle's algorithm off on the CRT's connection once the stream is open
            (:func:`set_tcp_nodelay`); without it each small send may wait 40 ms for a delayed ACK.

    The stream's input is ended (:meth:`BidiStream.close_input`) and the client closed on exit.
    """
    local = endpoint_url is not None or transport is not None
    client_url = endpoint_url
    if client_url is None and transport is not None:
        client_url = "https://simulator.local"  # any name: the in-process transport routes nothing
    client_region = region
    if client_region is None and local:
        client_region = "us-east-1"
    if credentials is None and local:
        credentials = LOCAL_CREDENTIALS
    client = await bidi_client(
        endpoint_url=client_url,
        transport=transport,
        ca_file=ca_file,
        region=client_region,
        credentials=credentials,
    )
    nagle_peer = endpoint_address(endpoint_url, region) if transport is None and tcp_nodelay else None
    try:
        bidi = await invoke_bidi_stream(
            client,
            endpoint_name,
            model_invocation_path=model_invocation_path,
            model_query_string=model_query_string,
            target_variant=target_variant,
            timeout=timeout,
            tcp_nodelay_peer=nagle_peer,
        )
        try:
            yield bidi
        finally:
            with contextlib.suppress(Exception):
                await bidi.close_input()
    finally:
        await client.close()
        absorb_completed_stream_writes()  # a stream abandoned early: its body writer ends failing too


def runtime_client(
    endpoint_url: str | None = None,
    *,
    region: str | None = None,
    credentials: tuple[str, str] | None = None,
    max_attempts: int | None = None,
    read_timeout: float = 70.0,
) -> Any:
    """A boto3 ``sagemaker-runtime`` client (InvokeEndpoint, InvokeEndpointWithResponseStream).

    Args:
        endpoint_url: the simulator's :attr:`Simulator.http1_url`; None = the default endpoint.
        region, credentials: as for :func:`open_bidi_stream` (local defaults when
            ``endpoint_url`` is given).
        max_attempts: botocore's total attempts (``retries={"total_max_attempts": ...,
            "mode": "standard"}``); None keeps botocore's default retry behaviour.
        read_timeout: socket read timeout; AWS advises over 60 s for InvokeEndpoint.
    """
    # boto3 is heavy to import; only callers of this helper pay for it.
    import boto3
    from botocore.config import Config

    local = endpoint_url is not None
    if credentials is None and local:
        credentials = LOCAL_CREDENTIALS
    options: dict[str, Any] = {"read_timeout": read_timeout}
    if max_attempts is not None:
        options["retries"] = {"total_max_attempts": max_attempts, "mode": "standard"}
    kwargs: dict[str, Any] = {"config": Config(**options)}
    if endpoint_url is not None:
        kwargs["endpoint_url"] = endpoint_url
    if region is not None or local:
        kwargs["region_name"] = region or "us-east-1"
    if credentials is not None:
        kwargs["aws_access_key_id"], kwargs["aws_secret_access_key"] = credentials
    return boto3.client("sagemaker-runtime", **kwargs)


def iter_response_stream(
    client: Any,
    endpoint_name: str,
    body: bytes | dict[str, Any],
    *,
    content_type: str = "application/json",
    accept: str | None = None,
    custom_attributes: str | None = None,
) -> Iterator[bytes]:
    """Yield the PayloadPart bytes of ``invoke_endpoint_with_response_stream``, in order.

    ``body`` may be a dict (sent as JSON). Raises botocore's errors unchanged: ``ClientError``
    (``ModelError``, ``ValidationError``, ``ThrottlingException`` ...) before the stream opens,
    ``EventStreamError`` (``ModelStreamError``, ``InternalStreamFailure``) mid-stream.
    """
    payload = json.dumps(body).encode() if isinstance(body, dict) else body
    kwargs: dict[str, Any] = {"EndpointName": endpoint_name, "Body": payload, "ContentType": content_type}
    if accept is not None:
        kwargs["Accept"] = accept
    if custom_attributes is not None:
        kwargs["CustomAttributes"] = custom_attributes
    response = client.invoke_endpoint_with_response_stream(**kwargs)
    for event in response["Body"]:
        part = event.get("PayloadPart")
        if part is not None:
            yield part["Bytes"]

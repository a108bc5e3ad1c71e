"""Client helpers over the official, unmodified AWS clients (reused by conformance and the agent).

Bidirectional stream: :func:`open_bidi_session` opens ``InvokeEndpointWithBidirectionalStream`` with
``aws-sdk-sagemaker-runtime-http2`` against one of three targets:

* the simulator over TLS + HTTP/2: ``endpoint_url=sim.endpoint_url, ca_file=sim.ca_file``;
* the simulator in-process: ``transport=sim.transport()``;
* a live endpoint: neither (region, credentials and endpoint from the default AWS chain).

It only chooses the client's settings: endpoint, transport (the CRT one, the only duplex
transport the client ships; REFERENCE §1), trust store and credentials. The request, signing and
event-stream decoding are the client's own.

Response stream: :func:`runtime_client` and :func:`iter_response_stream` wrap boto3's
``sagemaker-runtime`` ``invoke_endpoint_with_response_stream``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventPayloadPart,
)
from smithy_http.aio.crt import AWSCRTHTTPClient

from reference_agent.sagemaker_tts import endpoint_address, set_tcp_nodelay
from sagemaker_transport.aws_crt import END_INPUT_TIMEOUT_S, absorb_completed_stream_writes, end_input

__all__ = [
    "LOCAL_CREDENTIALS",
    "BidiSession",
    "ReceivedPart",
    "crt_transport",
    "iter_response_stream",
    "open_bidi_session",
    "runtime_client",
]

#: Credentials for local targets: the simulator checks no signatures, but the clients sign anyway.
LOCAL_CREDENTIALS = ("SIMULATORACCESSKEY", "simulator-secret-key")

_ENV_LOCK = threading.Lock()


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


class BidiSession:
    """An open bidirectional stream through the official client.

    Send with :meth:`send` / :meth:`send_text`; read with :meth:`receive` or ``async for``. The
    official client raises the service's errors unchanged: ``ModelError`` (424) and the other HTTP
    errors from the first :meth:`receive` (or :meth:`opened`), ``ModelStreamError`` and
    ``InternalStreamFailure`` from :meth:`receive` mid-stream.

    Keep the input open until the output is drained: SageMaker tears the container's WebSocket down
    when the input ends (REFERENCE §1). Then :meth:`close_input` ends the session without a traceback
    (:func:`open_bidi_session` calls it on exit).
    """

    def __init__(self, client: AsyncSageMakerRuntimeHTTP2Client, stream: Any, timeout: float | None) -> None:
        self.client = client
        self.stream = stream
        self.timeout = timeout
        self._receiver: Any = None
        self.output: Any = None
        self._input_closed = False
        self._open_failed = False

    async def opened(self) -> Any:
        """Wait for the response headers; return the operation output (production variant).

        Raises the service's HTTP error (``ModelError``, ``InputValidationError`` ...) if the
        stream was refused.
        """
        if self._receiver is None:
            try:
                self.output, self._receiver = await asyncio.wait_for(self.stream.await_output(), self.timeout)
            except BaseException:
                self._open_failed = True
                raise
        return self.output

    async def send(
        self, data: bytes, *, data_type: str | None = "BINARY", completion_state: str | None = None
    ) -> None:
        """Send one PayloadPart (``data_type`` ``BINARY``/``UTF8``/None; ``completion_state``
        ``PARTIAL``/``COMPLETE``/None)."""
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

    async def receive(self) -> ReceivedPart | None:
        """The next output PayloadPart, or None when the output stream ended.

        Raises:
            TimeoutError: nothing arrived within the session's timeout.
            ModelStreamError, InternalStreamFailure, ModelError, ...: as the official client does.
        """
        await self.opened()
        event = await asyncio.wait_for(self._receiver.receive(), self.timeout)
        if event is None:
            absorb_completed_stream_writes()  # the response ended: its body writer may now fail
            return None
        if not isinstance(event, ResponseStreamEventPayloadPart):
            raise RuntimeError(f"unexpected output event {event!r}")
        value = event.value
        return ReceivedPart(
            value.bytes_ or b"", value.data_type or "BINARY", value.completion_state or "COMPLETE"
        )

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
        ever carry the bytes.
        """
        if self._input_closed:
            return False
        self._input_closed = True
        absorb_completed_stream_writes()
        if self._open_failed:
            return False
        return await end_input(self.stream.input_stream, timeout_s=self.timeout or END_INPUT_TIMEOUT_S)


@contextlib.asynccontextmanager
async def open_bidi_session(
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
) -> AsyncIterator[BidiSession]:
    """Open an ``InvokeEndpointWithBidirectionalStream`` session with the official client.

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

    The session's input is closed and the client closed on exit.
    """
    local = endpoint_url is not None or transport is not None
    overrides: dict[str, Any] = {"transport": transport if transport is not None else crt_transport(ca_file)}
    if endpoint_url is not None:
        overrides["endpoint_uri"] = endpoint_url
    elif transport is not None:
        overrides["endpoint_uri"] = "https://simulator.local"
    if region is not None or local:
        overrides["region"] = region or "us-east-1"
    if credentials is None and local:
        credentials = LOCAL_CREDENTIALS
    if credentials is not None:
        overrides["aws_access_key_id"], overrides["aws_secret_access_key"] = credentials
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(**overrides)
    client = AsyncSageMakerRuntimeHTTP2Client(config=config)
    try:
        request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=endpoint_name,
            model_invocation_path=model_invocation_path,
            model_query_string=model_query_string,
            target_variant=target_variant,
        )
        stream = await asyncio.wait_for(client.invoke_endpoint_with_bidirectional_stream(request), timeout)
        if transport is None and tcp_nodelay:
            await asyncio.to_thread(set_tcp_nodelay, *endpoint_address(endpoint_url, region))
        session = BidiSession(client, stream, timeout)
        try:
            yield session
        finally:
            with contextlib.suppress(Exception):
                await session.close_input()
    finally:
        await client.close()
        absorb_completed_stream_writes()  # a session abandoned early: its body writer ends failing too


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
        region, credentials: as for :func:`open_bidi_session` (local defaults when
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

"""The simulated endpoint as one ASGI application: the three SageMaker runtime operations.

* ``POST /endpoints/{name}/invocations-bidirectional-stream`` (HTTP/2 door):
  InvokeEndpointWithBidirectionalStream, for ``aws-sdk-sagemaker-runtime-http2``;
* ``POST /endpoints/{name}/invocations-response-stream`` (HTTP/1.1 door):
  InvokeEndpointWithResponseStream, for boto3 ``invoke_endpoint_with_response_stream``;
* ``POST /endpoints/{name}/invocations`` (HTTP/1.1 door): InvokeEndpoint, for boto3
  ``invoke_endpoint``.

The same app runs under :mod:`simulator.h2server` (TLS + HTTP/2, for the official bidi client),
under hypercorn (plain HTTP/1.1, for boto3) and under :class:`simulator.transport.InProcessTransport`
(no socket). It is a thin shell:
framing is :mod:`sagemaker_transport.eventstream`, the rules are :mod:`simulator.bridge`,
:mod:`simulator.splitting` and :mod:`simulator.faults`, and the container is a
:class:`simulator.container.Container`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.logs import log_event
from sagemaker_transport.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    PayloadPart,
    exception_message,
    parse_payload_part,
    payload_part_message,
    unwrap_envelope,
)
from simulator.bridge import (
    COMPLETE,
    PARTIAL,
    BridgeError,
    Ending,
    EndReason,
    Fragment,
    InputBridge,
    OutputBridge,
    container_path,
)
from simulator.container import Container, ContainerClosed, ContainerSocket, ContainerUnavailable
from simulator.errors import Api, ErrorKind, ServiceError, StreamError, StreamErrorKind
from simulator.faults import Fault, FaultCursor, FaultKind
from simulator.settings import SimulatorSettings
from simulator.splitting import MessageSplitter, StreamSplitter
from simulator.wirelog import WireLog

__all__ = ["SimulatorApp", "WireLogBook"]

logger = logging.getLogger("simulator")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_ROUTE = re.compile(
    r"^/endpoints/(?P<name>[^/]+)/(?P<op>invocations(?:-bidirectional-stream|-response-stream)?)$"
)
_EVENTSTREAM = b"application/vnd.amazon.eventstream"

YIELD_EVERY_PARTS = 256
"""A response stream split into many parts gives the event loop a turn every this many parts: an ASGI
``send`` that only buffers never suspends, so without it a body split byte by byte held the loop (and the
session's ``max_session_s``) for minutes."""

# Request headers SageMaker forwards to the container on POST /invocations (InvokeEndpoint API).
_FORWARDED_HEADERS = {
    "content-type": "Content-Type",
    "accept": "Accept",
    "x-amzn-sagemaker-custom-attributes": "X-Amzn-SageMaker-Custom-Attributes",
}


class WireLogBook:
    """The wire logs of recent sessions, in start order; writes each finished one to disk if asked.

    It also logs one line when a session starts and one when it ends (:mod:`protocol.logs`): the
    simulator's log is about sessions, never about each HTTP call or PayloadPart (those are in the wire
    log). The end line carries the outcome, the PayloadParts and payload bytes each way and the duration.
    """

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._logs: deque[WireLog] = deque()

    def open(self, api: str, endpoint: str, settings: SimulatorSettings) -> WireLog:
        """Start the log of a new session (``s1``, ``s2`` ...)."""
        log = WireLog(f"s{next(self._counter)}", api, endpoint, head_bytes=settings.wire_log_head_bytes)
        log_event(logger, "session start", session=log.session_id, api=api, endpoint=endpoint)
        self._logs.append(log)
        while len(self._logs) > settings.wire_log_keep:
            self._logs.popleft()
        return log

    def close(self, log: WireLog, outcome: str, settings: SimulatorSettings) -> None:
        """Record how the session ended; write it to ``wire_log_dir`` when set."""
        log.outcome = outcome
        parts_in = log.select(leg="client", direction="in", event="PayloadPart")
        parts_out = log.select(leg="client", direction="out", event="PayloadPart")
        # InvokeEndpoint has no PayloadParts: its bytes are the request and response bodies.
        bodies_in = parts_in or log.select(leg="client", direction="in", event="http-request")
        bodies_out = parts_out or log.select(leg="client", direction="out", event="http-response")
        log_event(
            logger,
            "session end",
            session=log.session_id,
            api=log.api,
            outcome=outcome,
            parts_in=len(parts_in),
            parts_out=len(parts_out),
            bytes_in=sum(r.length for r in bodies_in),
            bytes_out=sum(r.length for r in bodies_out),
            duration_s=round(log.clock() - log.started_at, 3),
        )
        if settings.wire_log_dir is not None:
            settings.wire_log_dir.mkdir(parents=True, exist_ok=True)
            (settings.wire_log_dir / f"{log.session_id}.jsonl").write_text(log.to_jsonl())

    @property
    def logs(self) -> list[WireLog]:
        """Kept logs, oldest first."""
        return list(self._logs)


def _headers(scope: Scope) -> dict[str, str]:
    # Repeated headers are not used by these APIs; the last value wins.
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _fault_error(fault: Fault) -> ServiceError:
    """The HTTP error an armed pre-stream fault answers with."""
    kind = {
        FaultKind.THROTTLE: ErrorKind.THROTTLING,
        FaultKind.UNAVAILABLE: ErrorKind.UNAVAILABLE,
        FaultKind.INTERNAL: ErrorKind.INTERNAL,
        FaultKind.MODEL_ERROR: ErrorKind.MODEL_ERROR,
    }[fault.kind]
    message = "Rate exceeded" if kind is ErrorKind.THROTTLING else f"(simulator) injected fault {fault}"
    return ServiceError(kind, message, error_code=fault.error_code)


class SimulatorApp:
    """ASGI 3 application of the simulated endpoint.

    Args:
        container: the model container behind the endpoint.
        settings: a callable returning the current settings; each invocation reads them once at its
            start, so :meth:`simulator.server.Simulator.update` never changes a running session.
        logbook: where session wire logs go.
    """

    def __init__(
        self, container: Container, settings: Callable[[], SimulatorSettings], logbook: WireLogBook
    ) -> None:
        self.container = container
        self._settings = settings
        self.logbook = logbook
        self._invocations = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no WebSocket front door: SageMaker has none
        match = _ROUTE.match(scope["path"])
        if match is None or scope["method"] != "POST":
            # Not an imitation of a documented SageMaker error: the simulator's own refusal, in the
            # project's one HTTP error shape (PROTOCOL.md §11.6); the error-type header still lets an
            # AWS SDK name it.
            message = f"no SageMaker runtime operation at {scope['method']} {scope['path']}"
            body = json.dumps({"error": {"code": "unknown_operation", "message": message}})
            await _reply(send, 404, [(b"x-amzn-errortype", b"UnknownOperationException")], body.encode())
            return
        name, operation = match["name"], match["op"]
        if operation == "invocations-bidirectional-stream":
            await self._bidi(scope, receive, send, name)
        else:
            await self._runtime(scope, receive, send, name, streaming=operation != "invocations")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # The container's life is the Simulator's business, not the server's.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _check_endpoint(self, settings: SimulatorSettings, name: str) -> None:
        if settings.endpoint_name is not None and name != settings.endpoint_name:
            raise ServiceError(ErrorKind.VALIDATION, f"Endpoint {name} not found. (simulator)")

    # --- InvokeEndpointWithBidirectionalStream ------------------------------------------------

    async def _bidi(self, scope: Scope, receive: Receive, send: Send, name: str) -> None:
        settings = self._settings()
        invocation = next(self._invocations)
        log = self.logbook.open("bidi", name, settings)
        headers = _headers(scope)
        request_id = str(uuid.uuid4())
        try:
            self._check_endpoint(settings, name)
            if scope.get("http_version") != "2":
                raise ServiceError(
                    ErrorKind.VALIDATION, "InvokeEndpointWithBidirectionalStream requires HTTP/2. (simulator)"
                )
            fault = settings.faults.before_stream(invocation)
            if fault is not None:
                raise _fault_error(fault)
            path = container_path(
                headers.get("x-amzn-sagemaker-model-invocation-path"),
                headers.get("x-amzn-sagemaker-model-query-string"),
            )
            log.add("container", "out", "connect", note=path)
            try:
                socket = await self.container.connect(
                    path, open_timeout=settings.accept_timeout_s, close_timeout=settings.close_timeout_s
                )
            except ContainerUnavailable as exc:
                raise ServiceError(
                    ErrorKind.MODEL_ERROR,
                    f"(simulator) failed to open the WebSocket to the model container: {exc}",
                    original_status_code=exc.status,
                    original_message=str(exc),
                ) from exc
        except ServiceError as error:
            rendered = error.render(Api.BIDI, request_id=request_id)
            log.add(
                "client", "out", "http-response", rendered.body, note=f"{rendered.status} {rendered.shape}"
            )
            await _reply(send, rendered.status, rendered.headers, rendered.body)
            self.logbook.close(log, f"{rendered.status} {rendered.shape}", settings)
            return

        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", _EVENTSTREAM),
                    (b"x-amzn-requestid", request_id.encode()),
                    (b"x-amzn-invoked-production-variant", settings.production_variant.encode()),
                ],
            }
        )
        log.add("client", "out", "http-response", note="200")
        relay = _BidiRelay(settings, socket, receive, send, log, settings.faults.cursor(invocation))
        ending = await relay.run()
        self.logbook.close(log, f"{ending.reason}: {ending.note}" if ending.note else ending.reason, settings)

    # --- InvokeEndpoint and InvokeEndpointWithResponseStream ---------------------------------

    async def _runtime(
        self, scope: Scope, receive: Receive, send: Send, name: str, *, streaming: bool
    ) -> None:
        settings = self._settings()
        invocation = next(self._invocations)
        log = self.logbook.open("response-stream" if streaming else "invoke", name, settings)
        headers = _headers(scope)
        request_id = str(uuid.uuid4())
        try:
            body = await _read_body(receive, settings.max_request_bytes)
            log.add("client", "in", "http-request", body)
            self._check_endpoint(settings, name)
            fault = settings.faults.before_stream(invocation)
            if fault is not None:
                raise _fault_error(fault)
            forwarded = [(wire, headers[key]) for key, wire in _FORWARDED_HEADERS.items() if key in headers]
            async with self.container.invoke(
                body, forwarded, timeout=settings.response_timeout_s
            ) as response:
                if not 200 <= response.status < 300:
                    text = (await _read_limited(response.body, 64 * 1024)).decode("utf-8", "replace")
                    kind = "client" if response.status < 500 else "server"
                    raise ServiceError(
                        ErrorKind.MODEL_ERROR,
                        f"Received {kind} error ({response.status}) from model with message "
                        f'"{text}". (simulator)',
                        original_status_code=response.status,
                        original_message=text,
                    )
                content_type = response.header("content-type") or "application/octet-stream"
                common = [
                    (b"x-amzn-requestid", request_id.encode()),
                    (b"x-amzn-invoked-production-variant", settings.production_variant.encode()),
                ]
                if streaming:
                    outcome = await self._stream_out(
                        send, response.body, content_type, common, settings, invocation, log
                    )
                else:
                    data = await _read_limited(response.body, None)
                    log.add("container", "in", "http-body", data)
                    await _reply(send, 200, [(b"content-type", content_type.encode()), *common], data)
                    log.add("client", "out", "http-response", data, note="200")
                    outcome = "200"
        except ContainerUnavailable as exc:
            # The container's own answer never came: SageMaker reports that as ModelError 424.
            error = ServiceError(ErrorKind.MODEL_ERROR, f"(simulator) {exc}", original_message=str(exc))
            outcome = await self._runtime_error(send, error, request_id, log)
        except ServiceError as error:
            outcome = await self._runtime_error(send, error, request_id, log)
        self.logbook.close(log, outcome, settings)

    async def _runtime_error(self, send: Send, error: ServiceError, request_id: str, log: WireLog) -> str:
        rendered = error.render(Api.RUNTIME, request_id=request_id)
        log.add("client", "out", "http-response", rendered.body, note=f"{rendered.status} {rendered.shape}")
        await _reply(send, rendered.status, rendered.headers, rendered.body)
        return f"{rendered.status} {rendered.shape}"

    async def _stream_out(
        self,
        send: Send,
        body: Any,
        content_type: str,
        common: list[tuple[bytes, bytes]],
        settings: SimulatorSettings,
        invocation: int,
        log: WireLog,
    ) -> str:
        """Relay the container's body as PayloadPart events (the response stream)."""
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", _EVENTSTREAM),
                    (b"x-amzn-sagemaker-content-type", content_type.encode()),
                    *common,
                ],
            }
        )
        log.add("client", "out", "http-response", note="200")
        splitter = StreamSplitter(settings.split, settings.seed, max_part_bytes=settings.max_part_bytes)
        cursor = settings.faults.cursor(invocation)

        async def emit(parts: list[bytes]) -> Fault | None:
            for n, part in enumerate(parts, 1):
                size, fault = cursor.take(len(part))
                if size or fault is None:
                    if settings.part_latency_s:
                        await asyncio.sleep(settings.part_latency_s)
                    elif n % YIELD_EVERY_PARTS == 0:
                        await asyncio.sleep(0)  # sends that never suspend would let no timeout fire
                    # botocore's PayloadPart has Bytes only: no DataType/CompletionState headers.
                    await _body(send, payload_part_message(part[:size]))
                    log.add("client", "out", "PayloadPart", part[:size])
                if fault is not None:
                    return fault
            return None

        error: StreamError | None = None
        outcome = "completed"
        try:
            async with asyncio.timeout(settings.max_session_s):
                fault = None
                async for chunk in body:
                    log.add("container", "in", "http-chunk", chunk)
                    fault = await emit(splitter.feed(chunk))
                    if fault is not None:
                        break
                else:
                    fault = await emit(splitter.flush()) or cursor.at_end()
                if fault is not None:
                    ending = Ending.fault(fault, cursor.delivered)
                    error, outcome = ending.stream_error, ending.note
        except ContainerClosed as exc:
            error = StreamError(
                StreamErrorKind.MODEL_STREAM_ERROR,
                f"(simulator) the model container's response broke off: {exc.reason}",
                "StreamBroken",
            )
            outcome = f"container-failed: {exc.reason}"
        except TimeoutError:
            ending = Ending.timeout(EndReason.SESSION_TIMEOUT, settings.max_session_s or 0)
            error, outcome = ending.stream_error, ending.note
        if error is not None:
            await _body(send, exception_message(error.kind.value, error.payload()))
            log.add("client", "out", error.kind.value, error.payload(), note=error.message)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return outcome


class _ClientGone(Exception):
    """The client's HTTP stream can no longer be written to."""


class _BidiRelay:
    """One open bidirectional stream: pumps both ways until an :class:`Ending` is decided.

    Four tasks race: the input pump (client → container), the output pump (container → client),
    the keepalive (pings) and the watchdog (idle and session limits). The first to decide an ending
    wins; the others are cancelled; then :meth:`_finish` sends the exception event if any, ends the
    HTTP response and tears the WebSocket down.
    """

    def __init__(
        self,
        settings: SimulatorSettings,
        socket: ContainerSocket,
        receive: Receive,
        send: Send,
        log: WireLog,
        cursor: FaultCursor,
    ) -> None:
        self.settings = settings
        self.socket = socket
        self._receive = receive
        self._send = send
        self.log = log
        self.cursor = cursor
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._last_activity = self._started
        self._client_gone = False
        self._fragments: asyncio.Queue[bytes | None] | None = None
        self._fragment_send: asyncio.Task[None] | None = None

    def _touch(self) -> None:
        self._last_activity = self._loop.time()

    async def run(self) -> Ending:
        """Run the session to its end and return how it ended."""
        # Order = priority when several tasks finish in the same loop iteration.
        tasks = [asyncio.create_task(self._pump_output()), asyncio.create_task(self._pump_input())]
        if self.settings.ping_interval_s is not None:
            tasks.append(asyncio.create_task(self._keepalive(self.settings.ping_interval_s)))
        if self.settings.idle_timeout_s is not None or self.settings.max_session_s is not None:
            tasks.append(asyncio.create_task(self._watchdog()))
        ending: Ending | None = None
        pending = set(tasks)
        try:
            while ending is None and pending:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    if task.done() and ending is None:
                        ending = self._result(task)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._fragment_send is not None:
                self._fragment_send.cancel()
                await asyncio.gather(self._fragment_send, return_exceptions=True)
        if ending is None:  # every task finished without deciding: cannot happen with a live output pump
            ending = Ending.container_closed(None, "session ended without a decision")
        await self._finish(ending)
        return ending

    def _result(self, task: asyncio.Task[Ending | None]) -> Ending | None:
        if task.cancelled():
            return None
        exc = task.exception()
        if exc is not None:
            logger.error("simulator session task failed", exc_info=exc)
            return Ending.internal(exc)
        return task.result()

    async def _finish(self, ending: Ending) -> None:
        if ending.reason is EndReason.CLIENT_GONE:
            self._client_gone = True
        if ending.stream_error is not None and not self._client_gone:
            error = ending.stream_error
            with contextlib.suppress(_ClientGone):
                await self._emit(exception_message(error.kind.value, error.payload()))
                self.log.add("client", "out", error.kind.value, error.payload(), note=error.message)
        if not self._client_gone:
            with contextlib.suppress(Exception):
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        if ending.close_code is not None:
            self.log.add("container", "out", "close", note=f"code {ending.close_code}")
            with contextlib.suppress(Exception):
                await self.socket.close(ending.close_code)

    async def _emit(self, data: bytes) -> None:
        try:
            await self._send({"type": "http.response.body", "body": data, "more_body": True})
        except OSError as exc:
            # The HTTP/2 stream is gone (the client reset it or the connection dropped).
            self._client_gone = True
            raise _ClientGone from exc

    # --- client → container -----------------------------------------------------------------

    async def _pump_input(self) -> Ending | None:
        decoder = EventStreamDecoder()
        bridge = InputBridge(max_part_bytes=self.settings.max_part_bytes)
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return Ending.client_gone()
            try:
                events = decoder.feed(message.get("body", b""))
                for event in events:
                    inner = unwrap_envelope(event)
                    if inner is None:
                        self.log.add("client", "in", "end-of-input")
                        return Ending.input_ended()
                    part = self._log_input(inner)
                    self._touch()
                    await self._forward(bridge.feed(part))
                if not message.get("more_body", False):
                    # END_STREAM without the empty envelope still ends the input.
                    self.log.add("client", "in", "end-of-input", note="END_STREAM")
                    return Ending.input_ended()
            except EventStreamError as exc:
                return Ending.bad_input(BridgeError(f"malformed input event stream: {exc}"))
            except BridgeError as exc:
                return Ending.bad_input(exc)
            except ContainerClosed as exc:
                return Ending.container_closed(exc.code, exc.reason)

    def _log_input(self, inner: EventStreamMessage) -> PayloadPart:
        part = parse_payload_part(inner)
        raw = inner.headers
        self.log.add(
            "client",
            "in",
            "PayloadPart",
            part.data,
            data_type=raw.get("DataType") if isinstance(raw.get("DataType"), str) else None,
            completion_state=raw.get("CompletionState")
            if isinstance(raw.get("CompletionState"), str)
            else None,
        )
        return part

    async def _forward(self, fragment: Fragment) -> None:
        if self.settings.part_latency_s:
            await asyncio.sleep(self.settings.part_latency_s)
        data_type = "UTF8" if fragment.text else "BINARY"
        if fragment.first and fragment.last:
            self.log.add(
                "container", "out", "text" if fragment.text else "binary", fragment.data, data_type=data_type
            )
            await self.socket.send(fragment.data, text=fragment.text)
            return
        note = "first" if fragment.first else "last" if fragment.last else "continuation"
        self.log.add("container", "out", "fragment", fragment.data, data_type=data_type, note=note)
        if fragment.first:
            # Bounded: a fragment waits here until the WebSocket send has taken the one before, so a
            # container that does not read stops the input pump, and with it HTTP/2 flow control stops
            # the client (simulator.h2server), instead of fragments piling up in memory.
            self._fragments = asyncio.Queue(maxsize=1)
            self._fragment_send = asyncio.create_task(
                self.socket.send(self._drain_fragments(self._fragments), text=fragment.text)
            )
        assert self._fragments is not None and self._fragment_send is not None
        await self._put_fragment(fragment.data)
        if fragment.last:
            await self._put_fragment(None)
            task, self._fragment_send, self._fragments = self._fragment_send, None, None
            await task

    async def _put_fragment(self, data: bytes | None) -> None:
        """Queue ``data`` for the fragmented send, or raise what ended that send (the container left)."""
        assert self._fragments is not None and self._fragment_send is not None
        put = asyncio.ensure_future(self._fragments.put(data))
        await asyncio.wait({put, self._fragment_send}, return_when=asyncio.FIRST_COMPLETED)
        if not put.done():
            put.cancel()
            await self._fragment_send  # finished first: raises its error (or returns, which cannot be)
            raise ContainerClosed(None, "the container stopped taking the fragmented message")

    @staticmethod
    async def _drain_fragments(queue: asyncio.Queue[bytes | None]):
        while (chunk := await queue.get()) is not None:
            yield chunk

    # --- container → client -----------------------------------------------------------------

    async def _pump_output(self) -> Ending:
        splitter = MessageSplitter(
            self.settings.split, self.settings.seed, max_part_bytes=self.settings.max_part_bytes
        )
        bridge = OutputBridge(splitter)
        while True:
            try:
                message = await self.socket.recv()
            except ContainerClosed as exc:
                self.log.add("container", "in", "close", note=f"code {exc.code} {exc.reason}".strip())
                fault = self.cursor.at_end()
                if fault is not None:
                    return Ending.fault(fault, self.cursor.delivered)
                return Ending.container_closed(exc.code, exc.reason)
            self._touch()
            data_type = "UTF8" if message.text else "BINARY"
            self.log.add(
                "container", "in", "text" if message.text else "binary", message.data, data_type=data_type
            )
            for part in bridge.parts(message.data, text=message.text):
                size, fault = self.cursor.take(len(part.data))
                if size or fault is None:
                    # A part cut short by a fault no longer ends its message.
                    state = part.completion_state if size == len(part.data) else PARTIAL
                    try:
                        await self._send_part(part.data[:size], part.data_type, state)
                    except _ClientGone:
                        return Ending.client_gone()
                if fault is not None:
                    return Ending.fault(fault, self.cursor.delivered)

    async def _send_part(self, data: bytes, data_type: str, completion_state: str) -> None:
        if self.settings.part_latency_s:
            await asyncio.sleep(self.settings.part_latency_s)
        await self._emit(payload_part_message(data, data_type, completion_state))
        self._touch()
        self.log.add(
            "client",
            "out",
            "PayloadPart",
            data,
            data_type=data_type,
            completion_state=completion_state or COMPLETE,
        )

    # --- liveness -----------------------------------------------------------------------------

    async def _keepalive(self, interval: float) -> Ending | None:
        timeout = self.settings.ping_timeout_s
        while True:
            await asyncio.sleep(interval)
            try:
                pong = await self.socket.ping()
                self.log.add("container", "out", "ping")
                await asyncio.wait_for(pong, timeout)
            except TimeoutError:
                return Ending.ping_timeout(timeout)
            except Exception:
                # The connection closed under the ping; the output pump reports how.
                return None
            self.log.add("container", "in", "pong")

    async def _watchdog(self) -> Ending:
        idle, longest = self.settings.idle_timeout_s, self.settings.max_session_s
        while True:
            now = self._loop.time()
            if longest is not None and now >= self._started + longest:
                return Ending.timeout(EndReason.SESSION_TIMEOUT, longest)
            if idle is not None and now >= self._last_activity + idle:
                return Ending.timeout(EndReason.IDLE_TIMEOUT, idle)
            deadlines = []
            if longest is not None:
                deadlines.append(self._started + longest)
            if idle is not None:
                deadlines.append(self._last_activity + idle)
            await asyncio.sleep(max(0.0, min(deadlines) - now) + 0.001)


async def _reply(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """A complete, non-streamed HTTP response."""
    if not any(k == b"content-type" for k, _ in headers):
        headers = [(b"content-type", b"application/json"), *headers]
    if not any(k == b"content-length" for k, _ in headers):
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _body(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body.

    Raises:
        ServiceError: VALIDATION when it exceeds ``limit`` bytes (InvokeEndpoint: 6 MiB).
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ServiceError(
                ErrorKind.VALIDATION,
                f"Request body of more than {limit} bytes exceeds the limit. (simulator)",
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _read_limited(body: Any, limit: int | None) -> bytes:
    """Read an async byte iterator to the end, keeping at most ``limit`` bytes (None: all)."""
    data = bytearray()
    async for chunk in body:
        if limit is None or len(data) < limit:
            data += chunk
    return bytes(data if limit is None else data[:limit])

"""The model container behind the simulated endpoint, reached the way SageMaker reaches it.

SageMaker talks to a container on port 8080: ``GET /ping``, ``POST /invocations`` and the WebSocket
route ``/invocations-bidirectional-stream`` (PROTOCOL.md §2, REFERENCE §1). A :class:`Container`
offers exactly those three operations to the simulator; three kinds exist:

* :class:`UrlContainer`: a container already running at a URL (``docker run -p 8080:8080 ...``).
* :class:`CommandContainer`: a command the simulator starts, waits for (``/ping``) and stops.
* :class:`simulator.asgi_container.AsgiContainer`: an ASGI app in this process, for fast tests.

The first two use real sockets: python-websockets for the WebSocket (so the container's own
WebSocket stack answers pings, validates UTF-8 and fragments exactly as in production) and httpx for
HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from dataclasses import dataclass

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from simulator.container_command import DEFAULT_CONTAINER_URL, PORT_PLACEHOLDER, container_command, free_port

__all__ = [
    "DEFAULT_CONTAINER_URL",
    "PORT_PLACEHOLDER",
    "CommandContainer",
    "Container",
    "ContainerClosed",
    "ContainerMessage",
    "ContainerResponse",
    "ContainerSocket",
    "ContainerStartError",
    "ContainerUnavailable",
    "UrlContainer",
    "container_command",
    "free_port",
]


class ContainerUnavailable(Exception):
    """The container could not be reached, refused, or did not accept in time.

    Attributes:
        status: the HTTP status of a refused WebSocket handshake, if there was one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContainerClosed(Exception):
    """The container's WebSocket (or streamed HTTP body) ended.

    Attributes:
        code: the close code the container sent; None when the connection dropped without a
            closing handshake (RFC 6455 §7.1.5 calls that 1006).
        reason: the close reason or the error seen.
    """

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"container closed: code {code}, {reason!r}")
        self.code = code
        self.reason = reason


class ContainerStartError(Exception):
    """A container command exited or never answered ``GET /ping``."""


@dataclass(frozen=True)
class ContainerMessage:
    """One whole WebSocket message from the container: ``text`` is True for a TEXT message."""

    data: bytes
    text: bool


@dataclass
class ContainerResponse:
    """The container's answer to ``POST /invocations``: status, headers and the body as it streams.

    ``body`` raises :class:`ContainerClosed` if the connection breaks mid-body.
    """

    status: int
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


class ContainerSocket(ABC):
    """One WebSocket session with the container."""

    @abstractmethod
    async def send(self, data: bytes | AsyncIterable[bytes], *, text: bool) -> None:
        """Send one message; an async iterable sends its items as fragments of one message.

        Raises:
            ContainerClosed: the connection is closed.
        """

    @abstractmethod
    async def recv(self) -> ContainerMessage:
        """The next whole message.

        Raises:
            ContainerClosed: the container closed or the connection dropped.
        """

    @abstractmethod
    async def ping(self) -> Awaitable[object]:
        """Send a ping; return an awaitable that completes when the pong arrives.

        Raises:
            ContainerClosed: the connection is closed.
        """

    @abstractmethod
    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the WebSocket (waits for the closing handshake up to the close timeout)."""


class Container(ABC):
    """The operations SageMaker performs on a model container."""

    #: A short human description for logs and the CLI banner.
    description: str = "container"

    async def start(self) -> None:  # noqa: B027 - optional hook, most containers have nothing to do
        """Make the container ready (start it, run its lifespan). Default: nothing."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release the container (stop what :meth:`start` started). Default: nothing."""

    @abstractmethod
    async def ping(self) -> bool:
        """``GET /ping`` answered 200."""

    @abstractmethod
    async def connect(self, path: str, *, open_timeout: float, close_timeout: float) -> ContainerSocket:
        """Open the WebSocket at ``path`` (path plus optional query).

        Raises:
            ContainerUnavailable: refused, unreachable, or not accepted within ``open_timeout``.
        """

    @abstractmethod
    def invoke(
        self, body: bytes, headers: list[tuple[str, str]], *, timeout: float
    ) -> contextlib.AbstractAsyncContextManager[ContainerResponse]:
        """``POST /invocations``; the context yields the response once its headers arrived.

        Raises:
            ContainerUnavailable: unreachable, or no response headers within ``timeout``.
        """


class _WebSocketsSocket(ContainerSocket):
    """A :class:`ContainerSocket` over a python-websockets client connection."""

    def __init__(self, connection: ClientConnection) -> None:
        self._ws = connection

    @staticmethod
    def _closed(exc: ConnectionClosed) -> ContainerClosed:
        if exc.rcvd is not None:
            return ContainerClosed(exc.rcvd.code, exc.rcvd.reason)
        return ContainerClosed(None, str(exc))

    async def send(self, data: bytes | AsyncIterable[bytes], *, text: bool) -> None:
        try:
            await self._ws.send(data, text=text)
        except ConnectionClosed as exc:
            raise self._closed(exc) from exc

    async def recv(self) -> ContainerMessage:
        try:
            message = await self._ws.recv()
        except ConnectionClosed as exc:
            raise self._closed(exc) from exc
        if isinstance(message, str):
            # websockets validated the UTF-8; re-encoding gives back the exact bytes.
            return ContainerMessage(message.encode(), True)
        return ContainerMessage(bytes(message), False)

    async def ping(self) -> Awaitable[object]:
        try:
            return await self._ws.ping()
        except ConnectionClosed as exc:
            raise self._closed(exc) from exc

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._ws.close(code, reason)


class UrlContainer(Container):
    """A container already listening at ``url`` (for example ``http://127.0.0.1:8080``).

    Args:
        url: the container's base URL (``http://host:port``).
    """

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.description = f"container at {self.url}"
        self._http: httpx.AsyncClient | None = None

    @property
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # No overall timeout: bodies stream for as long as the container speaks.
            self._http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(None, connect=5.0))
        return self._http

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def ping(self) -> bool:
        try:
            response = await self._client.get("/ping", timeout=5.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def connect(self, path: str, *, open_timeout: float, close_timeout: float) -> ContainerSocket:
        ws_url = "ws" + self.url.removeprefix("http") + path
        try:
            connection = await connect(
                ws_url,
                open_timeout=open_timeout,
                close_timeout=close_timeout,
                # The simulator runs its own ping loop so a missing pong is reported as such.
                ping_interval=None,
                max_size=None,
                # Frames go through unchanged, as SageMaker's router is not known to compress.
                compression=None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise ContainerUnavailable(
                f"the container refused the WebSocket with HTTP {status}", status=status
            ) from exc
        except TimeoutError:
            raise ContainerUnavailable(
                f"the container did not accept the WebSocket within {open_timeout * 1000:g} ms"
            ) from None
        except (OSError, InvalidHandshake) as exc:
            raise ContainerUnavailable(f"the container could not be reached: {exc}") from exc
        return _WebSocketsSocket(connection)

    @contextlib.asynccontextmanager
    async def invoke(
        self, body: bytes, headers: list[tuple[str, str]], *, timeout: float
    ) -> AsyncIterator[ContainerResponse]:
        request = self._client.build_request("POST", "/invocations", content=body, headers=headers)
        try:
            response = await asyncio.wait_for(self._client.send(request, stream=True), timeout)
        except TimeoutError:
            raise ContainerUnavailable(f"the container did not answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise ContainerUnavailable(f"the container could not be reached: {exc}") from exc

        async def body_chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            except httpx.HTTPError as exc:
                raise ContainerClosed(None, f"response body broken: {exc!r}") from exc

        try:
            yield ContainerResponse(response.status_code, list(response.headers.items()), body_chunks())
        finally:
            await response.aclose()


class CommandContainer(UrlContainer):
    """A container the simulator starts with ``command`` and stops when it stops.

    The command runs in its own process group (so a shell wrapper and its children stop together)
    with the simulator's stdout and stderr. :meth:`start` polls ``GET /ping`` until it answers 200.

    Args:
        command: the command line (split with :func:`shlex.split`; no shell). ``{port}`` in it is
            replaced as :func:`container_command` says: by a free loopback port, or by ``url``'s port.
        url: where the started container listens; default: ``http://127.0.0.1:{port}`` when the
            command holds ``{port}``, else ``http://127.0.0.1:8080`` (the SageMaker port).
        startup_timeout_s: how long ``/ping`` may take to answer 200.
        env: extra environment variables for the command.

    Raises:
        ValueError: ``{port}`` is used with a URL that names no port.
    """

    def __init__(
        self,
        command: str,
        url: str | None = None,
        *,
        startup_timeout_s: float = 300.0,
        env: dict[str, str] | None = None,
    ) -> None:
        command, url = container_command(command, url)
        super().__init__(url)
        self.command = command
        self.startup_timeout_s = startup_timeout_s
        self.env = env
        self.description = f"command {command!r} at {self.url}"
        self._process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        """The started process's id, while it runs."""
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the command and wait until ``GET /ping`` answers 200.

        Raises:
            ContainerStartError: the command exited first, or did not become healthy in time.
        """
        env = {**os.environ, **(self.env or {})}
        try:
            self._process = await asyncio.create_subprocess_exec(
                *shlex.split(self.command), env=env, start_new_session=True
            )
        except (OSError, ValueError) as exc:
            raise ContainerStartError(f"cannot run container command {self.command!r}: {exc}") from exc
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout_s
        while not await self.ping():
            if self._process.returncode is not None:
                code = self._process.returncode
                await self.stop()
                raise ContainerStartError(f"container command exited with status {code} before /ping")
            if loop.time() > deadline:
                await self.stop()
                raise ContainerStartError(
                    f"container did not answer /ping within {self.startup_timeout_s:g} s"
                )
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Stop the command's process group: SIGTERM, then SIGKILL after 10 s."""
        await super().stop()
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                # The group id is the pid of the process we started (start_new_session=True).
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), wait_s)
                return
            except TimeoutError:
                continue

"""The :class:`Simulator`: a local SageMaker endpoint in front of one container.

It owns the container's life, the ASGI app (:mod:`simulator.app`), the TLS material and two
listeners on 127.0.0.1:

* the HTTP/2 door: TLS with ALPN ``h2`` (:mod:`simulator.h2server`), for the official bidi client;
* the HTTP/1.1 door: plain HTTP served by hypercorn, for boto3 (``endpoint_url``).

Started with ``listen=False`` it opens no socket at all: use :meth:`Simulator.transport` to give
the official client an in-process transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Self

from hypercorn.asyncio import serve
from hypercorn.config import Config

from simulator.app import SimulatorApp, WireLogBook
from simulator.certs import TlsFiles, make_tls_files
from simulator.container import Container
from simulator.h2server import H2Server, server_ssl_context
from simulator.settings import SimulatorSettings
from simulator.transport import InProcessTransport
from simulator.wirelog import WireLog

__all__ = ["ENV_ENDPOINT_HTTP2", "ENV_ENDPOINT_RUNTIME", "Simulator"]

logger = logging.getLogger("simulator")

#: Endpoint override the official bidi client reads (REFERENCE §1).
ENV_ENDPOINT_HTTP2 = "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"
#: Service-specific endpoint override boto3 reads for ``sagemaker-runtime``.
ENV_ENDPOINT_RUNTIME = "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"


def _listening_socket(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets
    # whose proto says TCP, and accepted sockets inherit it. With Nagle on, a small PayloadPart (a
    # synthesis_start) followed by audio waits for the client's delayed ACK: 40 ms on Linux
    # (REFERENCE.md §8; measured: bench simulator_overhead, the "simulator → client" leg).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening now means clients can connect as soon as start() returns, before hypercorn accepts.
    sock.listen(128)
    return sock


class Simulator:
    """A simulated SageMaker endpoint.

    Use as ``async with Simulator(container) as sim:``; then point the clients at
    :attr:`endpoint_url` (official bidi client, with ``SSL_CERT_FILE`` = :attr:`ca_file`) and
    :attr:`http1_url` (boto3), or use :meth:`transport` in-process. :meth:`environment` gives the
    variables for a client in another process.

    Args:
        container: the model container; started in :meth:`start`, stopped in :meth:`stop`.
        settings: behaviour (:class:`SimulatorSettings`); change it later with :meth:`update`.
        listen: open the two network doors; False runs in-process only (no socket, no TLS).
        host: bind address. Keep 127.0.0.1: the simulator checks no signatures (PROTOCOL.md §13).
        port: TLS/HTTP/2 port (0 = pick a free one).
        http1_port: plain HTTP/1.1 port (0 = pick a free one).
        tls_dir: where the CA and server certificate are written (default: a temporary directory
            removed on :meth:`stop`).
    """

    def __init__(
        self,
        container: Container,
        settings: SimulatorSettings | None = None,
        *,
        listen: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        http1_port: int = 0,
        tls_dir: Path | None = None,
    ) -> None:
        self.container = container
        self._settings = settings or SimulatorSettings()
        self.listen = listen
        self.host = host
        self._requested_ports = (port, http1_port)
        self._tls_dir = tls_dir
        self._own_tls_dir: Path | None = None
        self.tls: TlsFiles | None = None
        self.port: int | None = None
        self.http1_port: int | None = None
        self.logbook = WireLogBook()
        self.app = SimulatorApp(container, lambda: self._settings, self.logbook)
        self._h2: H2Server | None = None
        self._shutdown: asyncio.Event | None = None
        self._serve_task: asyncio.Task[None] | None = None

    @property
    def settings(self) -> SimulatorSettings:
        """The current settings (each new session reads them once, at its start)."""
        return self._settings

    def update(self, **changes: Any) -> SimulatorSettings:
        """Replace settings fields for sessions that start from now on; returns the new settings."""
        self._settings = dataclasses.replace(self._settings, **changes)
        return self._settings

    @property
    def wire_logs(self) -> list[WireLog]:
        """Wire logs of recent sessions, oldest first (see :mod:`simulator.wirelog`)."""
        return self.logbook.logs

    async def start(self) -> None:
        """Start the container, then the listeners (when ``listen``)."""
        await self.container.start()
        if not self.listen:
            return
        try:
            await self._start_listeners()
        except BaseException:
            await self.container.stop()
            raise

    async def _start_listeners(self) -> None:
        if self._tls_dir is None:
            self._own_tls_dir = Path(tempfile.mkdtemp(prefix="sagemaker-simulator-"))
        self.tls = make_tls_files(self._tls_dir or self._own_tls_dir)  # type: ignore[arg-type]
        secure = _listening_socket(self.host, self._requested_ports[0])
        insecure = _listening_socket(self.host, self._requested_ports[1])
        self.port, self.http1_port = secure.getsockname()[1], insecure.getsockname()[1]
        self._h2 = H2Server(
            self.app,
            server_ssl_context(self.tls.server_chain, self.tls.server_key),
            input_window_bytes=self._settings.input_window_bytes,
        )
        await self._h2.start(secure)
        config = Config()
        # hypercorn adopts the descriptor; detach() so our socket object never closes it twice.
        config.bind = [f"fd://{insecure.detach()}"]  # plain HTTP: no certfile, so "bind" is insecure
        # hypercorn's "Running on ..." names a descriptor, not a URL; the CLI prints the real addresses.
        door_log = logging.getLogger("simulator.hypercorn")
        if not door_log.isEnabledFor(logging.DEBUG):
            door_log.setLevel(logging.WARNING)
        config.errorlog = door_log
        config.accesslog = None
        config.include_server_header = False
        config.graceful_timeout = 2.0
        self._shutdown = asyncio.Event()
        self._serve_task = asyncio.create_task(
            serve(self.app, config, shutdown_trigger=self._shutdown.wait), name="simulator-http1"
        )

    async def stop(self) -> None:
        """Stop the listeners, then the container; remove temporary TLS files."""
        try:
            if self._h2 is not None:
                h2_server, self._h2 = self._h2, None
                await h2_server.stop()
            if self._serve_task is not None and self._shutdown is not None:
                self._shutdown.set()
                task, self._serve_task = self._serve_task, None
                try:
                    await asyncio.wait_for(task, 10.0)
                except TimeoutError:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                except Exception:
                    logger.warning("the HTTP/1.1 door stopped with an error", exc_info=True)
        finally:
            await self.container.stop()
            if self._own_tls_dir is not None:
                shutil.rmtree(self._own_tls_dir, ignore_errors=True)
                self._own_tls_dir = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def endpoint_url(self) -> str:
        """``https://127.0.0.1:PORT``: the HTTP/2 door for the official bidi client."""
        if self.port is None:
            raise RuntimeError("the simulator is not listening")
        return f"https://{self.host}:{self.port}"

    @property
    def http1_url(self) -> str:
        """``http://127.0.0.1:PORT``: the HTTP/1.1 door for boto3's ``endpoint_url``."""
        if self.http1_port is None:
            raise RuntimeError("the simulator is not listening")
        return f"http://{self.host}:{self.http1_port}"

    @property
    def ca_file(self) -> Path:
        """The CA certificate to trust (``SSL_CERT_FILE``)."""
        if self.tls is None:
            raise RuntimeError("the simulator is not listening")
        return self.tls.ca_cert

    def environment(self) -> dict[str, str]:
        """Environment variables that point unmodified clients in another process at this simulator.

        ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` and ``SSL_CERT_FILE`` for the official bidi
        client; ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` for boto3's ``sagemaker-runtime``.
        """
        return {
            ENV_ENDPOINT_HTTP2: self.endpoint_url,
            "SSL_CERT_FILE": str(self.ca_file),
            ENV_ENDPOINT_RUNTIME: self.http1_url,
        }

    def transport(self) -> InProcessTransport:
        """An in-process transport for the official client (no socket, no TLS)."""
        return InProcessTransport(self.app)

"""The parts under measurement, started the way a deployment starts them.

* :class:`ReferenceServer`: ``python -m reference_server`` as a child process on a free loopback port,
  the container's own entry point, started through the simulator's
  :class:`~simulator.container.CommandContainer` (which waits for ``GET /ping`` to answer 200).
* :class:`ServerPool`: one server per (backend, look-ahead), started on first use and kept for every
  benchmark after, so ``make bench`` loads each model once.
* :func:`simulated_endpoint`: the SageMaker simulator (TLS + HTTP/2 for the official bidi client,
  HTTP/1.1 for boto3) in front of a running server.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from protocol.limits import Limits
from simulator.container import CommandContainer, UrlContainer

__all__ = ["DEFAULT_LOOKAHEAD", "HOST", "ReferenceServer", "ServerPool", "simulated_endpoint"]

HOST = "127.0.0.1"
"""Everything binds loopback only: the simulator checks no signatures (PROTOCOL.md §13)."""

DEFAULT_LOOKAHEAD = Limits().lookahead
"""The server's default look-ahead (PROTOCOL.md §10); every server here is started with an explicit one."""

STARTUP_TIMEOUT_S = 600.0
"""Longest wait for a server's ``GET /ping``: loading torch on a busy 2-core machine takes minutes."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ReferenceServer:
    """``python -m reference_server`` in a child process.

    Args:
        backend: ``"onnx"`` or ``"torch"``.
        lookahead: the server's ``--lookahead`` (requests synthesized ahead of the one being sent,
            PROTOCOL.md §10); ``None`` keeps the server's default.
        log_level: the server's log level (``warning`` keeps benchmark output readable).
        segmentation, scheduling: the server's ``--segmentation`` (``deadline`` or ``sentence``, §10.1)
            and ``--scheduling`` (``deadline`` or ``fifo``, §10.2); ``None`` keeps its default.
        lead_in: the server's ``--lead-in`` (``early`` or ``off``); ``None`` keeps its default.
        abort_on_cancel: the server's ``--abort-on-cancel`` (``yes`` or ``no``); ``None`` keeps its default.
        first_audio_budget_s: the server's ``--first-audio-budget-s`` (admission by latency, PROTOCOL.md
            §10.2); ``None`` keeps its default.
        extra_args: more command-line flags, as given (``("--onnx-threads", "1")``).

    Use ``async with ReferenceServer(...) as server``; :attr:`url` is ``http://127.0.0.1:PORT``.
    """

    def __init__(
        self,
        backend: str = "onnx",
        *,
        lookahead: int | None = None,
        log_level: str = "warning",
        segmentation: str | None = None,
        scheduling: str | None = None,
        lead_in: str | None = None,
        abort_on_cancel: str | None = None,
        first_audio_budget_s: float | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.extra_args = tuple(extra_args)
        self.first_audio_budget_s = first_audio_budget_s
        self.lead_in = lead_in
        self.abort_on_cancel = abort_on_cancel
        self.lookahead = lookahead
        self.segmentation = segmentation
        self.scheduling = scheduling
        self.port = _free_port()
        self.url = f"http://{HOST}:{self.port}"
        argv = [sys.executable, "-m", "reference_server", "--host", HOST, "--port", str(self.port)]
        argv += ["--backend", backend, "--log-level", log_level]
        if lookahead is not None:
            argv += ["--lookahead", str(lookahead)]
        if segmentation is not None:
            argv += ["--segmentation", segmentation]
        if scheduling is not None:
            argv += ["--scheduling", scheduling]
        if lead_in is not None:
            argv += ["--lead-in", lead_in]
        if abort_on_cancel is not None:
            argv += ["--abort-on-cancel", abort_on_cancel]
        if first_audio_budget_s is not None:
            argv += ["--first-audio-budget-s", f"{first_audio_budget_s:g}"]
        argv += self.extra_args
        self.command = shlex.join(argv)
        self._container = CommandContainer(self.command, self.url, startup_timeout_s=STARTUP_TIMEOUT_S)
        self.startup_s: float | None = None

    @property
    def ws_url(self) -> str:
        """The WebSocket route SageMaker opens (PROTOCOL.md §2)."""
        return f"ws://{HOST}:{self.port}/invocations-bidirectional-stream"

    def settings(self) -> dict[str, Any]:
        """What this server runs with, for a result's ``config``."""
        return {
            "backend": self.backend,
            "lookahead": self.lookahead,
            "segmentation": self.segmentation,
            "scheduling": self.scheduling,
            "lead_in": self.lead_in,
            "abort_on_cancel": self.abort_on_cancel,
            "first_audio_budget_s": self.first_audio_budget_s,
            "extra_args": list(self.extra_args),
            "command": self.command,
        }

    @property
    def pid(self) -> int | None:
        """The server process's id, while it runs."""
        return self._container.pid

    async def start(self) -> None:
        """Start the process and wait until the model is loaded and warmed up (``/ping`` 200).

        Raises:
            simulator.container.ContainerStartError: the process exited or never became healthy.
        """
        started = time.perf_counter()
        await self._container.start()
        self.startup_s = round(time.perf_counter() - started, 2)

    async def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL)."""
        await self._container.stop()

    async def __aenter__(self) -> ReferenceServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class ServerPool:
    """Reference servers shared by the benchmarks of one run, keyed by (backend, look-ahead).

    Args:
        log: called with one line when a server starts (progress for the person running the bench).
    """

    def __init__(self, log: Callable[[str], None] = print) -> None:
        self._servers: dict[tuple[str, int | None], ReferenceServer] = {}
        self._log = log

    async def get(self, backend: str = "onnx", lookahead: int | None = None) -> ReferenceServer:
        """The running server for ``backend`` and ``lookahead``, started now if need be.

        Raises:
            simulator.container.ContainerStartError: it did not start.
        """
        if lookahead is None:
            lookahead = DEFAULT_LOOKAHEAD  # one server for "the default" and "1"
        key = (backend, lookahead)
        server = self._servers.get(key)
        if server is None:
            server = ReferenceServer(backend, lookahead=lookahead)
            self._log(f"  starting reference server: backend {backend}, lookahead {lookahead} ...")
            await server.start()
            self._log(f"  ... ready in {server.startup_s:.1f} s at {server.url}")
            self._servers[key] = server
        return server

    async def release(self, backend: str, lookahead: int | None = None) -> None:
        """Stop one server (frees its memory and CPU for the benchmarks after)."""
        if lookahead is None:
            lookahead = DEFAULT_LOOKAHEAD
        server = self._servers.pop((backend, lookahead), None)
        if server is not None:
            await server.stop()

    async def aclose(self) -> None:
        """Stop every server."""
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            await server.stop()


@contextlib.asynccontextmanager
async def simulated_endpoint(server: ReferenceServer, **settings: Any) -> AsyncIterator[Any]:
    """A listening :class:`simulator.Simulator` in front of ``server``; ``settings`` are
    :class:`simulator.SimulatorSettings` fields (``part_latency_s=...``).

    The simulator reaches the server through a :class:`~simulator.container.UrlContainer`, so stopping
    the simulator leaves the shared server running.
    """
    from simulator import Simulator, SimulatorSettings

    simulator = Simulator(UrlContainer(server.url), SimulatorSettings(**settings))
    async with simulator:
        yield simulator

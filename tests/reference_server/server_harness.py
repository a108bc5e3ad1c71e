"""The reference server tests' harness: the real server on a real loopback socket.

Test modules import from here (``from server_harness import ...``), never from ``conftest``: without
packages, every ``conftest.py`` is the module ``conftest``, and which one an import finds depends on the
order pytest collected the directories. ``conftest.py`` holds only the fixtures.

``ServerThread`` runs :func:`reference_server.app.create_server` (the same code path as
``python -m reference_server``) in a thread on a free 127.0.0.1 port; ``ServerProcess`` (the
``kokoro_server`` fixture) runs the entry command itself in a subprocess with the real ONNX backend, once
per test session. Clients are the ``websockets`` and ``httpx`` libraries, checked by
:class:`protocol.client_session.ClientSession`.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from reference_server.app import create_app, create_server
from reference_server.runtime import Readiness, Runtime
from reference_server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 60.0
KOKORO_MAX_SESSIONS = 5
"""Generous timeout that only guards against hangs; no test asserts on time."""


def wait_for(predicate: Callable[[], bool], timeout: float = GUARD_S, what: str = "condition") -> None:
    """Poll ``predicate`` until it holds; fail the test after ``timeout`` seconds (a hang guard)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


class ServerThread:
    """The reference server in a background thread of the test process, on a loopback socket."""

    def __init__(self, settings: Settings, backend: Any) -> None:
        self.settings = settings
        self.app = create_app(settings, backend=backend)
        self.server = create_server(settings, self.app)
        self.runtime: Runtime = self.app.state.runtime
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait_ready: bool = True) -> ServerThread:
        self._thread.start()
        wait_for(lambda: self.server.started, what="server start")
        if wait_ready:
            wait_for(lambda: self.runtime.readiness is not Readiness.LOADING, what="model ready")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(GUARD_S)
        self._socket.close()
        assert not self._thread.is_alive(), "server thread did not stop"


def run(coro: Any) -> Any:
    """Run a coroutine to completion in a fresh event loop (tests are plain functions)."""
    return asyncio.run(coro)


# --- the real entry command, real Kokoro ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``python -m reference_server`` in a subprocess (the container's entry command) on a loopback port."""

    COMMAND_PREFIX: ClassVar[list[str]] = ["-m", "reference_server"]
    """What follows the interpreter in the containers' ENTRYPOINT too (test_dockerfiles.py checks)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        command = [
            sys.executable,
            *self.COMMAND_PREFIX,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *args,
        ]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"reference-server-{self.port}.log"
        self._log = self.log_path.open("wb")
        environ = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=environ
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, timeout: float = 300.0) -> None:
        """Poll GET /ping until 200 (the model is loaded and warmed up)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"server exited with {self.process.returncode}:\n{self.log()[-4000:]}")
            try:
                if httpx.get(f"{self.http_url}/ping", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server not healthy after {timeout} s:\n{self.log()[-4000:]}")
            time.sleep(0.2)

    def rss_kib(self) -> int:
        """Resident set size of the server process, from /proc (kB)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        assert match, "no VmRSS in /proc status"
        return int(match.group(1))

    def stop(self) -> int:
        """SIGTERM, as a container runtime does; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(GUARD_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self.log_path.unlink(missing_ok=True)
        return self.process.returncode


def kokoro_assets_available() -> str | None:
    try:
        from reference_server import assets

        assets.locate()
    except Exception as exc:
        return f"Kokoro assets not available ({exc}); run `make assets`"
    return None

"""Fixtures for the reference server tests (the harness they use is server_harness.py).

``serve(backend, ...)`` runs :func:`reference_server.app.create_server` in a thread on a free 127.0.0.1 port;
``kokoro_server`` runs the entry command itself in a subprocess with the real ONNX backend, once per test
session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from server_harness import KOKORO_MAX_SESSIONS, ServerProcess, ServerThread, kokoro_assets_available

from protocol.limits import Limits
from reference_server.settings import Settings


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """Factory: ``serve(backend, limits=Limits(...), wait_ready=True, **settings)`` → a running server."""
    servers: list[ServerThread] = []

    def start(
        backend: Any, *, limits: Limits | None = None, wait_ready: bool = True, **fields: Any
    ) -> ServerThread:
        settings = replace(Settings(), port=0, log_level="warning", limits=limits or Limits(), **fields)
        server = ServerThread(settings, backend)
        servers.append(server)
        return server.start(wait_ready=wait_ready)

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def kokoro_server() -> Iterator[ServerProcess]:
    """The real server with the real ONNX Kokoro backend, started once for the whole test session."""
    missing = kokoro_assets_available()
    if missing:
        pytest.fail(missing)
    # A small session limit makes a leaked session slot visible (test_soak.py).
    server = ServerProcess("--backend", "onnx", "--max-sessions", str(KOKORO_MAX_SESSIONS))
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()

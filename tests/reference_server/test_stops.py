"""How the real server stops and what it leaves (issue #25): every stop removes its temporary files and exits
with the documented status, and no log line at any level carries request text (PROTOCOL.md §13).

Each test starts ``python -m reference_server`` with the real ONNX backend in a subprocess whose ``TMPDIR``
is a folder of its own, so what the process leaves there is what a stop leaves behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from server_harness import GUARD_S, ROOT, free_port, kokoro_assets_available
from websockets.sync.client import connect

pytestmark = pytest.mark.skipif(kokoro_assets_available() is not None, reason="Kokoro assets not installed")


_REUSED = frozenset({"jieba.cache", ".ses"})


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], int, Path, Path]:
    """The server with ``TMPDIR`` = ``tmp_path/tmp`` and its stdout+stderr in ``tmp_path/server.log``."""
    port = free_port()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log = tmp_path / "server.log"
    environ = {**os.environ, "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1"}
    environ.pop("KOKORO_LOG_FORMAT", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "reference_server", "--port", str(port), *args],
            cwd=ROOT,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, port, tmp, log


def _wait_healthy(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = GUARD_S * 5
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        assert process.poll() is None, log.read_text(errors="replace")[-4000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail("server not healthy")


def _speak(port: int, text: str) -> None:
    """One WebSocket session and one POST /invocations, each synthesizing ``text`` to the end."""
    with connect(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream", open_timeout=GUARD_S) as ws:
        ws.send(json.dumps({"text": text, "request_id": "leak-check"}))
        ws.send(json.dumps({"type": "close"}))
        kinds = []
        while True:
            try:
                message = ws.recv(timeout=GUARD_S)
            except Exception:  # the server closed after draining (§7.1)
                break
            if isinstance(message, str):
                kinds.append(json.loads(message).get("type"))
        assert "synthesis_complete" in kinds, kinds
    answer = httpx.post(
        f"http://127.0.0.1:{port}/invocations",
        json={"text": text, "format": "pcm", "stream": False},
        timeout=GUARD_S,
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stop_by_signal_exits_as_documented_and_leaves_no_temporary_files(tmp_path, signum, status):
    process, port, tmp, log = _start(tmp_path, "--log-level", "debug")
    try:
        _wait_healthy(process, port, log)
        # The G2P libraries did make their temporary copies while the server runs: the test sees them go.
        assert any(tmp.iterdir()), "expected the espeak-ng copies in TMPDIR while serving"
        marker = f"Quokka {uuid.uuid4().hex[:10]} says hello."
        _speak(port, marker)
        process.send_signal(signum)
        assert process.wait(GUARD_S) == status, log.read_text(errors="replace")[-4000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # Files of a fixed name that every start rewrites rather than adds to are no leak: jieba's dictionary
    # cache and onnxruntime's ".ses" (a session id). Nothing else may stay.
    left = sorted(p.name for p in tmp.iterdir() if p.name not in _REUSED)
    assert left == [], f"left behind in TMPDIR: {left}"
    text = log.read_text(errors="replace")
    assert " DEBUG " in text, "the log was not at debug level"
    word = marker.split()[1]
    assert word not in text, [line for line in text.splitlines() if word in line][:5]

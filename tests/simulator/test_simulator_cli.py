"""``python -m simulator serve``: a started container, the printed variables, unmodified clients, Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from containers import invocation_body
from sim_support import run
from smithy_http.aio.crt import AWSCRTHTTPClient

from simulator.__main__ import build_parser, main, settings_from_args
from simulator.faults import FaultKind
from simulator.splitting import SplitKind

REPO = Path(__file__).resolve().parents[2]
CONTAINER_SCRIPT = REPO / "tests" / "simulator" / "containers.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_exports(process: subprocess.Popen[str], timeout: float) -> dict[str, str]:
    """The ``export NAME=VALUE`` lines ``serve`` prints, read until its last banner line."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    exports: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            raise AssertionError("serve exited before printing its variables")
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").strip().partition("=")
            exports[name] = value
        if line.startswith("# Any credentials"):
            return exports


@pytest.fixture
def served(tmp_path: Path):
    """``serve`` running in front of a container command it started."""
    port = _free_port()
    command = f"{sys.executable} {CONTAINER_SCRIPT} --app tone --port {port}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [
        sys.executable, "-m", "simulator", "serve",
        "--container-cmd", command, "--container-url", f"http://127.0.0.1:{port}",
        "--port", "0", "--http1-port", "0", "--split", "misaligned", "--wire-log-dir", str(tmp_path / "logs"),
    ]  # fmt: skip
    with (tmp_path / "serve.log").open("w") as log:
        process = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            yield process, _read_exports(process, timeout=60), port, tmp_path / "logs"
        finally:
            if process.poll() is None:
                # SIGINT first, so serve stops the container it started; SIGKILL only as a last resort.
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def test_serve_prints_variables_that_point_unmodified_clients_at_it(
    served, monkeypatch: pytest.MonkeyPatch
) -> None:
    process, exports, container_port, log_dir = served
    assert set(exports) == {
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2",
        "SSL_CERT_FILE",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
    }
    for name, value in exports.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "any")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "any")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    # boto3, configured by the environment only.
    client = boto3.client("sagemaker-runtime")
    response = client.invoke_endpoint_with_response_stream(
        EndpointName="tts", Body=b'{"text": "Hello there."}'
    )
    assert b"".join(e["PayloadPart"]["Bytes"] for e in response["Body"]) == invocation_body("Hello there.")

    # The official bidi client, configured by the environment only (endpoint and trust store).
    async def bidi() -> bytes:
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(transport=AWSCRTHTTPClient())
        bidi_client = AsyncSageMakerRuntimeHTTP2Client(config=config)
        try:
            stream = await bidi_client.invoke_endpoint_with_bidirectional_stream(
                InvokeEndpointWithBidirectionalStreamInput(endpoint_name="tts")
            )
            for body in (b'{"text": "Hello there."}', b'{"type": "close"}'):
                part = RequestPayloadPart(bytes_=body)
                await stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
            _, receiver = await asyncio.wait_for(stream.await_output(), 20)
            data = bytearray()
            while (event := await asyncio.wait_for(receiver.receive(), 20)) is not None:
                data += event.value.bytes_ or b""
            return bytes(data)
        finally:
            await bidi_client.close()

    received = run(bidi())
    assert b"synthesis_start" in received and b"synthesis_complete" in received

    # Ctrl-C stops the simulator and the container it started.
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", container_port), timeout=2):
        pass
    logs = sorted(log_dir.glob("*.jsonl"))
    assert len(logs) == 2
    headers = [json.loads(path.read_text().splitlines()[0]) for path in logs]
    assert {h["api"] for h in headers} == {"response-stream", "bidi"}


def test_arguments_become_settings(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "serve", "--split", "random:1-9", "--seed", "5", "--fault", "throttle*2",
            "--fault", "model_stream_error@10", "--latency-ms", "20", "--accept-timeout-ms", "500",
            "--ping-interval-s", "0", "--max-part-bytes", "4096", "--endpoint-name", "tts",
        ]
    )  # fmt: skip
    settings = settings_from_args(args)
    assert settings.split.kind is SplitKind.RANDOM and (settings.split.low, settings.split.high) == (1, 9)
    assert settings.seed == 5 and settings.endpoint_name == "tts" and settings.max_part_bytes == 4096
    assert [f.kind for f in settings.faults.faults] == [FaultKind.THROTTLE, FaultKind.MODEL_STREAM_ERROR]
    assert settings.part_latency_s == pytest.approx(0.02)
    assert settings.accept_timeout_s == pytest.approx(0.5)
    assert settings.ping_interval_s is None


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--fault", "explode", "--port", "0", "--http1-port", "0"]) == 2
    assert "unknown fault" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--split", "sometimes"])


def test_container_command_that_cannot_start_is_reported() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "serve", "--container-cmd", "/nonexistent/container-binary",
         "--port", "0", "--http1-port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot run container command" in result.stderr

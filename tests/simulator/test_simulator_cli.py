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
    """The ``export NAME=VALUE`` lines ``serve`` prints, read until its last banner line; the container's
    URL from the first banner line is returned as ``CONTAINER_URL``."""
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
        if line.startswith("# SageMaker simulator in front of "):
            exports["CONTAINER_URL"] = line.rsplit(" at ", 1)[1].strip()
        if line.startswith("# Any credentials"):
            return exports


@pytest.fixture
def served(tmp_path: Path):
    """``serve`` running in front of a container command it started on a free port (``{port}``)."""
    command = f"{sys.executable} {CONTAINER_SCRIPT} --app tone --port {{port}}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("KOKORO_LOG_FORMAT", None)
    args = [
        sys.executable, "-m", "simulator", "serve", "--container-cmd", command,
        "--port", "0", "--http1-port", "0", "--split", "misaligned", "--wire-log-dir", str(tmp_path / "logs"),
    ]  # fmt: skip
    with (tmp_path / "serve.log").open("w") as log:
        process = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            exports = _read_exports(process, timeout=60)
            port = int(exports.pop("CONTAINER_URL").rsplit(":", 1)[1])
            yield process, exports, port, tmp_path / "logs"
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

    # What a newcomer sees on stderr: one line per session start and end, no traceback, no per-call noise.
    stderr = (log_dir.parent / "serve.log").read_text()
    assert "Traceback" not in stderr and "Task exception" not in stderr and "HTTP Request" not in stderr
    simulator_lines = [line for line in stderr.splitlines() if " simulator: " in line]
    assert [line.split(" simulator: ")[1].split(" session=")[0] for line in simulator_lines] == [
        "session start",
        "session end",
        "session start",
        "session end",
    ]
    assert container_port != 8080  # {port} became a free port, and serve waited there


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


def test_options_also_come_from_the_environment() -> None:
    environ = {
        "SAGEMAKER_SIMULATOR_SEED": "7",
        "SAGEMAKER_SIMULATOR_FAULT": "throttle*2, internal",
        "SAGEMAKER_SIMULATOR_PING_INTERVAL_S": "0",
        "SAGEMAKER_SIMULATOR_LATENCY_MS": "20",
        "SAGEMAKER_SIMULATOR_ENDPOINT_NAME": "tts",
    }
    args = build_parser(environ).parse_args(["serve", "--seed", "9"])
    settings = settings_from_args(args)
    assert settings.seed == 9  # a flag wins over the environment
    assert [f.kind for f in settings.faults.faults] == [FaultKind.THROTTLE, FaultKind.INTERNAL]
    assert settings.ping_interval_s is None and settings.endpoint_name == "tts"
    assert settings.part_latency_s == pytest.approx(0.02)
    serve_help = build_parser({})._subparsers._group_actions[0].choices["serve"].format_help()
    assert "[env SAGEMAKER_SIMULATOR_STARTUP_TIMEOUT_S]" in " ".join(serve_help.split())


def test_a_malformed_environment_variable_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser({"SAGEMAKER_SIMULATOR_PORT": "eighty"})
    assert stopped.value.code == 2
    assert "SAGEMAKER_SIMULATOR_PORT='eighty'" in capsys.readouterr().err


def test_the_console_script_prints_its_own_name() -> None:
    script = Path(sys.executable).with_name("sagemaker-simulator")
    if not script.exists():
        pytest.skip("the console script is not installed in this environment")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(script), "serve", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: sagemaker-simulator serve ")
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("usage: python -m simulator ")


def test_port_placeholder_is_filled_one_way_everywhere() -> None:
    from simulator.container import CommandContainer, container_command

    command, url = container_command("server --port {port} --metrics {port}")
    port = int(url.rsplit(":", 1)[1])
    assert command == f"server --port {port} --metrics {port}" and url == f"http://127.0.0.1:{port}"
    assert container_command("server --port {port}", "http://127.0.0.1:9001/") == (
        "server --port 9001",
        "http://127.0.0.1:9001",
    )
    assert container_command("docker run img") == ("docker run img", "http://127.0.0.1:8080")
    with pytest.raises(ValueError, match="names no port"):
        container_command("server --port {port}", "http://localhost")
    container = CommandContainer("server --port {port}")
    assert container.command == f"server --port {container.url.rsplit(':', 1)[1]}"
    # The conformance suite's --container-cmd takes the same path.
    from conformance.engine.target import ContainerProcess

    process = ContainerProcess("server --port {port}", Path("unused.log"))
    assert process.command == f"server --port {process.port}" and process.url.endswith(f":{process.port}")
    assert ContainerProcess("docker run img", Path("unused.log")).url == "http://127.0.0.1:8080"


def test_a_placeholder_with_a_portless_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--container-cmd", "x --port {port}", "--container-url", "http://localhost"]) == 2
    assert "names no port" in capsys.readouterr().err

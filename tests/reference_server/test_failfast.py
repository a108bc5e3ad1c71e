"""Fail fast, fail clearly (PROTOCOL.md §2.2): ``python -m reference_server`` without its verified model files
exits non-zero before it listens, with one line that names the file and the command that fixes it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from server_harness import ROOT, free_port

from reference_server import assets
from reference_server.__main__ import EXIT_ASSETS

GUARD_S = 60.0


def _start(tmp_path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    port = free_port()
    environ = {
        **os.environ,
        "KOKORO_ASSETS_DIR": str(tmp_path / "cache"),  # the newcomer's deleted cache
        "SM_MODEL_DIR": str(tmp_path / "no-model-dir"),
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    if "KOKORO_LOG_FORMAT" not in env:
        environ.pop("KOKORO_LOG_FORMAT", None)
    done = subprocess.run(
        [sys.executable, "-m", "reference_server", "--port", str(port), *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )
    return done, port


def _nothing_listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _real_assets():
    try:
        return assets.locate()
    except assets.AssetError:
        pytest.skip("the Kokoro assets are not installed (make assets)")


def test_a_deleted_cache_is_one_line_with_the_fix(tmp_path):
    done, port = _start(tmp_path)
    assert done.returncode == EXIT_ASSETS
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    (line,) = lines
    assert " ERROR reference_server: cannot serve: " in line
    assert f"{tmp_path / 'cache' / assets.ONNX_MODEL.name} is missing" in line
    # KOKORO_ASSETS_DIR is the default directory here, so the fix needs no --dir.
    assert line.endswith("run: python -m reference_server.assets fetch")
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert _nothing_listens(port)


def test_a_file_with_other_bytes_is_refused_with_the_fix(tmp_path):
    real = _real_assets()
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / assets.ONNX_MODEL.name).symlink_to(real.onnx_model)
    voices = model_dir / assets.VOICES.name
    corrupt = bytearray(real.voices.read_bytes())
    corrupt[len(corrupt) // 2] ^= 0xFF  # right size, one byte off
    voices.write_bytes(bytes(corrupt))
    done, _ = _start(tmp_path, "--model-dir", str(model_dir), KOKORO_LOG_FORMAT="json")
    assert done.returncode == EXIT_ASSETS
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    entry = json.loads(line)
    assert entry["level"] == "error" and entry["logger"] == "reference_server"
    message = entry["message"]
    assert message.startswith(f"cannot serve: {voices}: sha256 ")
    assert f"does not match the expected {assets.VOICES.sha256}; refusing to use it" in message
    assert message.endswith(f"run: python -m reference_server.assets fetch --dir {model_dir}")


def test_the_torch_backend_without_its_weights_names_the_torch_fetch(tmp_path):
    real = _real_assets()
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for path in (real.onnx_model, real.voices):
        (model_dir / path.name).symlink_to(path)
    done, _ = _start(tmp_path, "--model-dir", str(model_dir), "--backend", "torch")
    assert done.returncode == EXIT_ASSETS
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.endswith(
        f"no torch weights in {model_dir}; run: python -m reference_server.assets fetch "
        f"--dir {model_dir} --torch yes"
    )


def test_fix_command_is_as_short_as_the_directory_allows(tmp_path, monkeypatch):
    monkeypatch.setenv("KOKORO_ASSETS_DIR", str(tmp_path))
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path / "sm"))
    assert assets.fix_command() == assets.fix_command(tmp_path) == "python -m reference_server.assets fetch"
    assert (
        assets.fix_command(tmp_path / "x y")
        == f"python -m reference_server.assets fetch --dir '{tmp_path}/x y'"
    )
    assert assets.fix_command(tmp_path, torch=True).endswith("fetch --torch yes")
    assert "rebuild model.tar.gz" in assets.fix_command(tmp_path / "sm")


def test_a_taken_port_exits_1_with_the_fix_not_the_assets_status():
    """uvicorn exits 3 when it cannot listen; 3 is this server's status for missing model files (§2.2)."""
    _real_assets()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "reference_server", "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            text=True,
            timeout=GUARD_S,
        )
    assert done.returncode == 1, done.stderr
    assert f"could not listen on 127.0.0.1:{port}" in done.stderr and "choose another --port" in done.stderr

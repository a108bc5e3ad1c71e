"""The live path stays tested: ``--target live`` through the official clients, pointed at the simulator.

A deployed endpoint is reached with the default AWS credential chain and the official clients; here the
same code reaches the SageMaker simulator (in front of the tone mutant server) through ``--endpoint-url``,
``--runtime-endpoint-url`` and ``--ca-file``, with dummy credentials in the environment, and runs from another
directory through ``python -m conformance``, as an installed suite would. A subset of cases keeps it cheap;
one broken server proves the live verdicts still have teeth.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.engine.target import ContainerProcess, SimulatorTarget

ROOT = Path(__file__).resolve().parents[2]
LIVE_CASES = ("3.1.1", "4.0.1", "4.1.2", "6.2.1", "9.1.31", "11.2.1", "11.6.1", "4.2.3")
"""A bidi request in each frame type, ids, order, a refusal, a streamed WAV, an HTTP refusal, cancel."""


@pytest.fixture(params=["base", "error-without-id"])
def endpoint(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, SimulatorTarget]]:
    """The simulator in front of a tone mutant (``base``: the unbroken control)."""
    command = f"{shlex.quote(sys.executable)} -m conformance.mutants {request.param} --port {{port}}"
    process = ContainerProcess(command, tmp_path / "container.log", startup_timeout_s=60.0)
    process.start()
    try:
        simulator = SimulatorTarget(process.url, process)
    except BaseException:
        process.stop()
        raise
    try:
        yield request.param, simulator
    finally:
        simulator.stop()
        process.stop()


def run_live(simulator: SimulatorTarget, cases: tuple[str, ...], report: Path, cwd: Path) -> dict[str, Any]:
    sim = simulator.simulator
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ACCESS_KEY_ID": "AKIDCONFORMANCE",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    env.pop("AWS_PROFILE", None)
    command = [sys.executable, "-m", "conformance", "--target", "live", "--endpoint-name", "my-endpoint"]
    command += ["--region", "us-east-1", "--endpoint-url", sim.endpoint_url, "--ca-file", str(sim.ca_file)]
    command += ["--runtime-endpoint-url", sim.http1_url, "--cases", ",".join(cases), "--report", str(report)]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    index = json.loads((report / "index.json").read_text())
    index["returncode"], index["output"] = done.returncode, done.stdout[-4000:] + done.stderr[-2000:]
    return index


def test_live_target_through_the_official_clients(
    endpoint: tuple[str, SimulatorTarget], tmp_path: Path
) -> None:
    name, simulator = endpoint
    cases = LIVE_CASES if name == "base" else ("9.2.8",)
    index = run_live(simulator, cases, tmp_path / "report", cwd=tmp_path)
    verdicts = {case_id: entry["verdict"] for case_id, entry in index["cases"].items()}
    assert index["target"] == "live" and index["endpoint_name"] == "my-endpoint", index["output"]
    if name == "base":
        assert verdicts == dict.fromkeys(cases, "OK"), index["output"]
        assert index["returncode"] == 0
    else:
        assert verdicts == {"9.2.8": "FAILED"}, index["output"]
        assert index["returncode"] == 1
    assert (tmp_path / "report" / "index.html").exists() and (tmp_path / "report" / "junit.xml").exists()

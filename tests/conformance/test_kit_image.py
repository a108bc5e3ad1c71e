"""The kit in a server author's CI: the kit image's entry command, the composite action, the example workflow.

There is no Docker engine here, so the image's entry command (``ENTRYPOINT`` of conformance/Dockerfile) runs
as it would in the image, outside it: from a folder that is not the checkout, against a server given by URL,
once conforming (the unbroken tone server) and once broken (a mutant), and its exit status and report are
what the action's last step reads. The static checks of the image itself are in
tests/reference_server/test_dockerfiles.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "conformance" / "action.yml"
EXAMPLE = ROOT / "conformance" / "examples" / "certify.yml"
CASES = "3.1.*"
"""A few cheap cases: what is checked here is the entry command, not the suite."""


def _entrypoint() -> list[str]:
    text = (ROOT / "conformance" / "Dockerfile").read_text(encoding="utf-8")
    (argv,) = re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.MULTILINE)
    return json.loads(argv)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(mutant: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "conformance.mutants", mutant, "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"mutant {mutant} did not answer /ping")


def _kit(tmp_path: Path, url: str) -> tuple[int, dict, str]:
    """Run the image's entry command with the arguments the action passes; (status, index.json, output)."""
    command = _entrypoint()
    executable = shutil.which(command[0], path=str(Path(sys.executable).parent))
    assert executable, f"{command[0]} is not installed beside {sys.executable}"
    report = tmp_path / "report"
    done = subprocess.run(
        [executable, *command[1:], "--container-url", url, "--cases", CASES, "--report", str(report)],
        cwd=tmp_path,  # the image's WORKDIR is /report, not a checkout
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    index = json.loads((report / "index.json").read_text()) if (report / "index.json").exists() else {}
    return done.returncode, index, done.stdout + done.stderr


@pytest.mark.parametrize(("mutant", "status"), [("base", 0), ("close-after-first", 1)])
def test_the_images_entry_command_certifies_a_server_by_url(tmp_path: Path, mutant: str, status: int) -> None:
    process, url = _serve(mutant)
    try:
        code, index, output = _kit(tmp_path, url)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert code == status, output[-3000:]
    verdicts = {entry["verdict"] for entry in index["cases"].values()}
    assert index["cases"] and all(re.fullmatch(r"3\.1\.[0-9A-Z]+", case) for case in index["cases"])
    assert ("FAILED" in verdicts) == (status == 1)


def test_the_action_installs_the_kit_from_its_lock_and_fails_on_failed() -> None:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    scripts = "\n".join(step.get("run", "") for step in steps)
    assert '--require-hashes -r "$GITHUB_ACTION_PATH/../locks/kit.txt"' in scripts
    assert (ACTION.parent / ".." / "locks" / "kit.txt").resolve().is_file()
    assert "kokoro-conformance" in scripts
    for name in ("container-url", "container-cmd", "expect", "cases", "strict", "report"):
        assert name in action["inputs"], name
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()", "the report is uploaded when the run fails, above all"
    last = steps[-1]
    assert last["if"] == "steps.run.outputs.status != '0'" and "exit 1" in last["run"]


def test_the_example_workflow_uses_the_action_against_a_started_server() -> None:
    workflow = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    (certify,) = [s for s in job["steps"] if s.get("uses", "").split("@")[0].endswith("/conformance")]
    assert certify["uses"].endswith("/conformance@main"), "the action is this repository's conformance/"
    assert certify["with"]["container-url"].startswith("http://127.0.0.1:")
    assert set(certify["with"]) <= set(yaml.safe_load(ACTION.read_text())["inputs"])

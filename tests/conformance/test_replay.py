"""``kokoro-conformance replay``: a recorded case sent again agrees with a server that answers the same, shows
frame by frame where a broken server answers otherwise, and refuses bad input in one line (exit 2).

One short run of the suite against the unbroken tone server records the cases; each replay then runs the
command as a user would, from the report's folder.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_kit_image import ROOT, _serve

CASES = ("3.1.2", "4.2.1")
"""A two-request session and a cancel at the first audio frame (a send that waits for an answer)."""


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Iterator[Path]:
    """A report of CASES against the unbroken tone server."""
    folder = tmp_path_factory.mktemp("replay")
    process, url = _serve("base")
    try:
        done = _cli(folder, "--container-url", url, "--cases", ",".join(CASES), "--report", "report", "-q")
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    yield folder


@pytest.mark.parametrize("case", CASES)
def test_the_same_server_gives_the_same_answers(recorded: Path, case: str) -> None:
    process, url = _serve("base")
    try:
        done = _cli(recorded, "replay", f"report/cases/{case}.json", "--container-url", url)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "same answers" in done.stdout and "differ" not in done.stdout


def test_a_broken_server_differs_frame_by_frame(recorded: Path) -> None:
    """close-after-first ends the session after its first answer: the second request's frames are missing."""
    process, url = _serve("close-after-first")
    try:
        done = _cli(recorded, "replay", "report/cases/3.1.2.json", "--container-url", url)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "frame 3: recorded synthesis_start(request_id='text-2'); now nothing" in done.stdout


def test_sent_messages_are_recorded_byte_for_byte(recorded: Path) -> None:
    case = json.loads((recorded / "report" / "cases" / "3.1.2.json").read_text())
    sends = [e for s in case["client_log"] for e in s["entries"] if e["dir"] == "send"]
    assert sends and all(len(base64.b64decode(e["payload"])) == e["bytes"] for e in sends)


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        ("missing.json", "no such file"),
        ("report/index.json", "not a case file"),
        ("old.json", "written by another version of the suite"),
        ("garbage.json", "not a case file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(recorded: Path, argument: str, says: str) -> None:
    case = json.loads((recorded / "report" / "cases" / "3.1.2.json").read_text())
    case.pop("format")
    (recorded / "old.json").write_text(json.dumps(case))
    (recorded / "garbage.json").write_bytes(b"\xff\xfe not json")
    done = _cli(recorded, "replay", argument, "--container-url", "http://127.0.0.1:1")
    assert done.returncode == 2
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_server_is_bad_input(recorded: Path) -> None:
    done = _cli(recorded, "replay", "report/cases/3.1.2.json", "--container-url", "http://127.0.0.1:1")
    assert done.returncode == 2 and "does not answer" in done.stderr


def test_a_case_of_shared_recordings_is_not_replayable_and_its_page_says_nothing_of_replay() -> None:
    from conformance.engine.htmlreport import render_case
    from conformance.engine.replay import replayable

    shared = {
        "format": "kokoro-conformance-case/1",
        "id": "3.3.1",
        "client_log": [
            {"session": "long", "recorded": True, "entries": [{"dir": "send", "t": 0, "bytes": 2}]}
        ],
    }
    assert not replayable(shared)
    assert "kokoro-conformance replay" not in render_case(shared, {})
    own = {
        **shared,
        "client_log": [{"session": "s", "entries": [{"dir": "send", "t": 0, "payload": "e30="}]}],
    }
    assert replayable(own) and "kokoro-conformance replay cases/3.3.1.json" in render_case(own, {})


def test_a_container_command_that_cannot_run_is_one_line(tmp_path: Path) -> None:
    done = _cli(tmp_path, "--container-cmd", "no-such-program --port {port}", "--cases", "4.2.1")
    assert done.returncode == 4, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "ERROR: --container-cmd: the container command cannot be run" in output
    assert "INTERNALERROR" not in output and "Traceback" not in output


def test_a_container_url_that_nothing_answers_is_one_line(tmp_path: Path) -> None:
    """An unreachable --container-url is a usage error before any case, not a FAILED 2.1.1 and a traceback."""
    done = _cli(tmp_path, "--container-url", "http://127.0.0.1:1", "--startup-timeout", "0.5")
    output = done.stdout + done.stderr
    assert done.returncode == 4, output
    assert "ERROR: --container-url: nothing answered GET http://127.0.0.1:1/ping within 0.5 s" in output
    assert "INTERNALERROR" not in output and "Traceback" not in output and "FAILED" not in output


def test_a_container_command_whose_port_is_taken_is_refused(tmp_path: Path) -> None:
    """Without {port} the container is reached on 8080 (or the port its URL names): when something already
    listens there, the suite refuses to start rather than certify that other server."""
    import socket

    from conformance.engine.target import ContainerProcess, ContainerStartError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = ContainerProcess(f"{sys.executable} -m http.server {port}", tmp_path / "c.log")
        process.url = f"http://127.0.0.1:{port}"  # as a command without {port} would be reached
        with pytest.raises(ContainerStartError, match="already answers before the container command"):
            process.launch()
    process = ContainerProcess(f"{sys.executable} -c pass", tmp_path / "d.log")
    process.url = f"http://127.0.0.1:{port}"  # free again
    process.launch()
    process.stop()

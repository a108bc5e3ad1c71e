"""``--expect`` in whole runs: a run passes when exactly the listed cases and clauses fail, a listed one that
passes fails it, and the report (index.json, junit.xml, badge.svg, index.html) says which is which.

Each run is the kit's own command against a one-defect tone server, on a few cheap cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from test_kit_image import ROOT, _serve


def _run(tmp_path: Path, mutant: str, cases: str, expect: str | None) -> tuple[int, dict, str]:
    process, url = _serve(mutant)
    args = ["--container-url", url, "--cases", cases, "--report", "report", "-q"]
    if expect is not None:
        (tmp_path / "expect.toml").write_text(expect, encoding="utf-8")
        args += ["--expect", "expect.toml"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "conformance", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
    index_path = tmp_path / "report" / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    return done.returncode, index, done.stdout + done.stderr


def _junit(tmp_path: Path) -> dict[str, str]:
    """testcase name (first word) → 'failure', 'skipped' or 'passed', from the report's junit.xml."""
    root = ElementTree.parse(tmp_path / "report" / "junit.xml").getroot()
    out = {}
    for case in root.iter("testcase"):
        kind = "passed"
        if case.find("failure") is not None:
            kind = "failure"
        elif case.find("skipped") is not None:
            kind = "skipped"
        out[case.get("name", "").split()[0]] = kind
    return out


def test_a_listed_failure_is_expected_and_the_run_passes(tmp_path: Path) -> None:
    """close-after-first fails 3.1.2 and, seen there, R7-1 (it ends the session itself); both listed, the
    run exits 0 and the badge says so."""
    listed = '[cases."3.1.2"]\nreason = "ends the session early"\n[clauses."R7-1"]\nreason = "same"\n'
    code, index, output = _run(tmp_path, "close-after-first", "3.1.2", listed)
    assert code == 0, output[-3000:]
    assert index["cases"]["3.1.2"]["verdict"] == "FAILED"
    assert index["cases"]["3.1.2"]["known"] == "expected failure"
    assert index["expectations"]["passed"] is True
    assert sorted(index["expectations"]["expected"]) == ["3.1.2", "R7-1"]
    assert index["passed"] is True
    assert _junit(tmp_path)["3.1.2"] == "skipped"
    badge = (tmp_path / "report" / "badge.svg").read_text()
    assert "kokoro-bidi v1.1" in badge and "2 expected" in badge
    assert "expected failure(s)" in output and "the run passes" in output
    assert "3.1.2      MUST   FAILED (exp)" in output, "the verdict table says the failure was expected"
    html = (tmp_path / "report" / "index.html").read_text()
    assert 'id="expectations"' in html and "ends the session early" in html


def test_an_unlisted_failure_still_fails_the_run(tmp_path: Path) -> None:
    code, index, output = _run(
        tmp_path, "close-after-first", "3.1.2,3.1.1", '[cases."3.1.1"]\nreason = "listed by mistake"\n'
    )
    assert code == 1, output[-3000:]
    assert index["expectations"]["unexpected_failures"] == ["3.1.2", "R7-1"]
    assert "3.1.1" in index["expectations"]["unexpected_passes"], "3.1.1 passed although listed"
    assert index["cases"]["3.1.1"]["known"] == "unexpected pass"
    assert "3.1.1      MUST   OK (unexp)" in output
    junit = _junit(tmp_path)
    assert junit["3.1.2"] == "failure" and junit["3.1.1"] == "failure"
    assert "FAILED" in (tmp_path / "report" / "badge.svg").read_text()


def test_a_listed_clause_failed_by_the_run_is_expected(tmp_path: Path) -> None:
    """cancel-then-stream breaks R6.1-2 only where its own cases do not look (issue 30): the clause fails the
    run; listed, it is an expected failure and the run passes."""
    cases = "4.2.1,7.2.1"
    code, index, output = _run(tmp_path, "cancel-then-stream", cases, None)
    assert code == 1 and "R6.1-2" in index["failed_clauses"], output[-3000:]
    code, index, output = _run(
        tmp_path, "cancel-then-stream", cases, '[clauses."R6.1-2"]\nreason = "audio after the bracket"\n'
    )
    assert code == 0, output[-3000:]
    assert list(index["expectations"]["expected"]) == ["R6.1-2"]
    assert _junit(tmp_path)["R6.1-2"] == "skipped"


def test_a_listed_clause_that_holds_is_an_unexpected_pass(tmp_path: Path) -> None:
    code, index, output = _run(tmp_path, "base", "4.2.1", '[clauses."R6.1-2"]\nreason = "fixed since"\n')
    assert code == 1, output[-3000:]
    assert list(index["expectations"]["unexpected_passes"]) == ["R6.1-2"]
    assert "UNEXPECTED PASS" in output
    assert _junit(tmp_path)["R6.1-2"] == "failure"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "no such expectations file"),
        ('[cases."99.9.9"]\nreason = "x"\n', "there is no case '99.9.9'"),
        ('[cases."3.1.2"]\n', "needs a reason"),
    ],
)
def test_a_bad_expectations_file_is_one_line_and_exit_2(tmp_path: Path, text: str | None, says: str) -> None:
    if text is not None:
        (tmp_path / "expect.toml").write_text(text, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance",
            "--expect",
            "expect.toml",
            "--container-url",
            "http://127.0.0.1:1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr

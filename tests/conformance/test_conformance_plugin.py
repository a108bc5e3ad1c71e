"""The pytest plugin (conformance/conftest.py): verdicts, --strict, --cases, --report, --junitxml, live skips.

A small case module that needs no server runs under the plugin in a subprocess, as the suite does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

CASES = """
import pytest
from conformance.engine.case import Case, Level, Unimplemented, case, param
from conformance.engine.observer import Finding

C = ("R1-901",)


def _case(id, level, what):
    return Case(id, "§1", level, "requirement", what, "expectation", requirements=C)


class Seen:
    def __init__(self, findings):
        self._findings = findings

    def findings(self):
        return self._findings


@pytest.fixture
def conf(request):
    return Seen([Finding(clause, "seen " + clause, "s", 3, "<2 bytes: 01 02>") for clause in request.param])


@case("1.0.1", "§1", Level.MUST, requirement="r", description="passes", expectation="e", requirements=C)
def test_ok():
    pass


@case("1.0.2", "§1", Level.MUST, requirement="r", description="fails", expectation="e", requirements=C)
def test_must_fails():
    assert False, "broken rule"


@case("1.0.3", "§1", Level.SHOULD, requirement="r", description="fails", expectation="e", requirements=C)
def test_should_fails():
    assert False, "not recommended"


@case("1.0.4", "§1", Level.MAY, requirement="r", description="fails", expectation="e", requirements=C)
def test_may_fails():
    assert False


@case("1.0.5", "§1", Level.MAY, requirement="r", description="optional", expectation="e", requirements=C)
def test_unimplemented():
    raise Unimplemented("no MP3 here")


ROWS = [param(1, _case("1.1.1", Level.MUST, "row one")), param(2, _case("1.1.2", Level.MUST, "row two"))]


@pytest.mark.parametrize("n", ROWS)
def test_rows(n):
    assert n == 1


@pytest.mark.parametrize("conf", [("R1-901", "R2-902")], indirect=True)
@case("1.2.1", "§1", Level.MUST, requirement="r", description="own finding", expectation="e", requirements=C)
def test_own_finding_fails(conf):
    pass


@pytest.mark.parametrize("conf", [("R2-902",)], indirect=True)
@case("1.2.2", "§1", Level.MUST, requirement="r", description="a note", expectation="e", requirements=C)
def test_note_does_not_fail(conf):
    pass


@case("1.2.3", "§1", Level.MUST, requirement="r", description="suite bug", expectation="e", requirements=C)
def test_suite_error():
    {}["missing"]
"""


NOTES = """
import pytest
from conformance.engine.case import case
from conformance.engine.observer import Finding


class Seen:
    def __init__(self, findings):
        self._findings = findings

    def findings(self):
        return self._findings


@pytest.fixture
def conf(request):
    clause, level = request.param
    message = "4 audio bytes outside any synthesis bracket"
    return Seen([Finding(clause, message, "cancel", 7, "<4 bytes>", level)])


@case("6.1.1", "§6.1", "MUST", requirement="r", description="brackets", expectation="e",
      requirements=("R6.1-2",))
def test_owner_passes():
    pass


@case("3.2.4", "§3.2", "SHOULD", requirement="r", description="compact", expectation="e",
      requirements=("R3.2-3",))
def test_should_owner_passes():
    pass


@pytest.mark.parametrize("conf", [("R6.1-2", None)], indirect=True)
@case("4.2.1", "§4.2", "MUST", requirement="r", description="cancel", expectation="e",
      requirements=("R4.2-1",))
def test_sees_a_must_note(conf):
    pass


@pytest.mark.parametrize("conf", [("R3.2-3", None)], indirect=True)
@case("4.2.2", "§4.2", "MUST", requirement="r", description="cancel", expectation="e",
      requirements=("R4.2-1",))
def test_sees_a_should_note(conf):
    pass
"""
"""Cases that all pass, two of them seeing a finding on a clause they do not own (a note): on R6.1-2, a MUST
sentence of the spec, and on R3.2-3, a SHOULD; the owners of both pass."""


def run(tmp_path: Path, *options: str, cases: str = CASES) -> tuple[int, str, dict[str, Any] | None]:
    (tmp_path / "test_sample_cases.py").write_text(cases)
    report = tmp_path / "report"
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(tmp_path),
        "-p",
        "conformance.conftest",
        "-p",
        "no:cacheprovider",
    ]
    command += ["--report", str(report), *options]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    index = json.loads((report / "index.json").read_text()) if (report / "index.json").exists() else None
    return done.returncode, done.stdout + done.stderr, index


def verdicts(index: dict[str, Any] | None) -> dict[str, str]:
    assert index is not None
    return {case_id: entry["verdict"] for case_id, entry in index["cases"].items()}


def test_verdicts_follow_the_levels(tmp_path: Path) -> None:
    code, output, index = run(tmp_path)
    assert verdicts(index) == {
        "1.0.1": "OK",
        "1.0.2": "FAILED",
        "1.0.3": "NON-STRICT",
        "1.0.4": "INFORMATIONAL",
        "1.0.5": "UNIMPLEMENTED",
        "1.1.1": "OK",
        "1.1.2": "FAILED",
        "1.2.1": "FAILED",
        "1.2.2": "OK",
        "1.2.3": "FAILED",
    }
    assert code == 1, output  # MUST failures fail the run; the SHOULD and MAY ones do not
    assert index is not None and index["suite_errors"] == ["1.2.3"]
    assert "conformance verdicts" in output and "1.0.3      SHOULD NON-STRICT" in output
    detail = json.loads((tmp_path / "report" / "cases" / "1.0.2.json").read_text())
    assert detail["verdict"] == "FAILED" and "broken rule" in detail["message"]
    assert detail["requirement"] == "r" and detail["level"] == "MUST"


def test_findings_on_own_clauses_fail_a_case_and_others_are_notes(tmp_path: Path) -> None:
    _, _, index = run(tmp_path)
    assert index is not None
    own = json.loads((tmp_path / "report" / "cases" / "1.2.1.json").read_text())
    assert [f["clause"] for f in own["findings"]] == ["R1-901"] and [n["clause"] for n in own["notes"]] == [
        "R2-902"
    ]
    assert "seen R1-901" in own["message"] and "<2 bytes: 01 02>" in own["message"]
    note = json.loads((tmp_path / "report" / "cases" / "1.2.2.json").read_text())
    assert note["verdict"] == "OK" and [n["clause"] for n in note["notes"]] == ["R2-902"]
    defects = {d["clause"]: d for d in index["defects"]}
    assert defects["R1-901"]["failed"] == ["1.0.2", "1.0.3", "1.0.4", "1.1.2", "1.2.1"]
    assert defects["R2-902"]["cases"] == ["1.2.1", "1.2.2"] and defects["R2-902"]["failed"] == []
    assert defects["R2-902"]["excerpt"] == "<2 bytes: 01 02>" and index["defect_count"] == len(defects)
    # The note is judged at run level all the same: R2-902 is not in the matrix, so its level is the case's.
    assert defects["R2-902"]["verdict"] == "FAILED" and not defects["R2-902"]["carried"]
    assert defects["R2-902"]["per_case"] == {"1.2.1": 1, "1.2.2": 1} and defects["R2-902"]["findings"] == 2
    assert defects["R1-901"]["carried"] and index["failed_clauses"] == ["R1-901", "R2-902"]
    # A SHOULD case's own failed assertion breaks a SHOULD, a MAY case's a MAY: only the MUST ones are MUST.
    assert defects["R1-901"]["level"] == "MUST"
    suite = json.loads((tmp_path / "report" / "cases" / "1.2.3.json").read_text())
    assert suite["suite_error"] and "KeyError" in suite["message"]


def test_strict_makes_should_cases_fail(tmp_path: Path) -> None:
    _, _, index = run(tmp_path, "--strict")
    seen = verdicts(index)
    assert (seen["1.0.3"], seen["1.0.4"]) == ("FAILED", "INFORMATIONAL")


def test_cases_option_selects_by_pattern(tmp_path: Path) -> None:
    code, output, index = run(tmp_path, "--cases", "1.0.1, 1.1.*")
    assert set(verdicts(index)) == {"1.0.1", "1.1.1", "1.1.2"}
    assert code == 1 and "7 deselected" in output


def test_junitxml_works_alongside(tmp_path: Path) -> None:
    run(tmp_path, "--junitxml", str(tmp_path / "junit.xml"))
    xml = (tmp_path / "junit.xml").read_text()
    assert xml.count("<testcase") == 11  # the ten cases and the clause R2-902, seen only in notes
    assert 'classname="conformance.clauses" name="R2-902"' in xml


def test_a_must_finding_seen_only_as_a_note_fails_the_run(tmp_path: Path) -> None:
    """Issue 30: every case passes, and the run fails on the clause that a case saw outside its own clauses;
    the case keeps its own verdict (no cascade), the clause is named, with where it was seen."""
    code, output, index = run(tmp_path, "--junitxml", str(tmp_path / "pytest.xml"), cases=NOTES)
    assert index is not None and set(verdicts(index).values()) == {"OK"}
    assert code == 1, output
    assert index["passed"] is False and index["failed_clauses"] == ["R6.1-2"]
    rows = {d["clause"]: d for d in index["defects"]}
    must, should = rows["R6.1-2"], rows["R3.2-3"]
    assert (must["level"], must["verdict"], must["owners"], must["failed"]) == (
        "MUST",
        "FAILED",
        ["6.1.1"],
        [],
    )
    assert must["sentence"].startswith("Audio frames MUST appear only between") and must["per_case"] == {
        "4.2.1": 1
    }
    assert (should["level"], should["verdict"]) == ("SHOULD", "NON-STRICT")
    assert "conformance/clauses::R6.1-2" in output and "1 failed, 4 passed" in output
    assert "the run FAILED on 1 clause(s)" in output and "observed in case 4.2.1 (1)" in output
    assert "wire: <4 bytes>" in output
    pytest_xml = (tmp_path / "pytest.xml").read_text()
    assert pytest_xml.count("<failure") == 1 and 'name="R6.1-2"' in pytest_xml
    ours = (tmp_path / "report" / "junit.xml").read_text()
    assert ours.count("<failure") == 1 and ours.count("<skipped") == 1  # R3.2-3: NON-STRICT
    page = (tmp_path / "report" / "index.html").read_text()
    assert "the run FAILED" in page and 'href="cases/4.2.1.html">4.2.1</a> (1)' in page


def test_a_should_finding_seen_only_as_a_note_fails_only_a_strict_run(tmp_path: Path) -> None:
    code, output, index = run(tmp_path, "--cases", "3.2.4,4.2.2", cases=NOTES)
    assert code == 0 and index is not None and index["passed"] is True, output
    assert [(d["clause"], d["verdict"]) for d in index["defects"]] == [("R3.2-3", "NON-STRICT")]
    code, output, index = run(tmp_path, "--cases", "3.2.4,4.2.2", "--strict", cases=NOTES)
    assert code == 1 and index is not None and index["failed_clauses"] == ["R3.2-3"], output


def test_a_run_without_findings_has_no_clause_rows(tmp_path: Path) -> None:
    code, output, index = run(tmp_path, "--cases", "6.1.1,3.2.4", cases=NOTES)
    assert code == 0 and index is not None, output
    assert index["defects"] == [] and index["passed"] is True and "clauses::" not in output


def test_live_target_without_endpoint_skips_every_case_with_a_reason(tmp_path: Path) -> None:
    code, output, index = run(tmp_path, "--target", "live", "-rs")
    assert set(verdicts(index).values()) == {"SKIPPED"}
    assert "the live target needs --endpoint-name and --region" in output
    assert code == 0


@pytest.mark.parametrize("missing", ["--region", "--endpoint-name"])
def test_live_target_names_what_is_missing(tmp_path: Path, missing: str) -> None:
    given = {"--region": ["--endpoint-name", "tts"], "--endpoint-name": ["--region", "us-east-1"]}[missing]
    _, output, _ = run(tmp_path, "--target", "live", "-rs", *given)
    assert f"the live target needs {missing}" in output


def test_the_command_line_help_is_the_suites() -> None:
    """``kokoro-conformance --help`` is the suite's usage and options, not pytest's page of 200 options;
    ``--pytest-help`` still gives pytest's."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def run_cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "conformance", *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    ours = run_cli("--help")
    assert ours.startswith("usage: kokoro-conformance [options]")
    for option in ("--container-cmd", "--container-url", "--target", "--cases", "--report", "--case-timeout"):
        assert option in ours, option
    assert "pytest.main()" not in ours and "--junit-prefix" not in ours
    everything = run_cli("--pytest-help")
    assert "--junit-prefix" in everything and "--container-cmd" in everything


UNATTACHED = """
import pytest
from conformance.engine.case import case
from conformance.engine.observer import Finding


@pytest.fixture(scope="module")
def shared(unattached):
    yield
    unattached("the shared session, outside its cases", [Finding("R7.1-3", "closed with 1011", "shared", 9)])


@case("9.1.5", "§9.1", "MUST", requirement="r", description="row", expectation="e",
      requirements=("R6.3-2",))
def test_row(shared):
    pass
"""


def test_a_finding_no_case_adopts_fails_the_run(tmp_path: Path) -> None:
    """A session shared by cases ends after the last of them: what it shows then is judged by the run."""
    code, output, index = run(tmp_path, cases=UNATTACHED)
    assert index is not None and verdicts(index) == {"9.1.5": "OK"}
    assert code == 1 and index["failed_clauses"] == ["R7.1-3"], output
    row = index["defects"][0]
    assert row["per_case"] == {"the shared session, outside its cases": 1} and row["failed"] == []
    assert "observed in the shared session, outside its cases (1)" in output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "the shared session, outside its cases (1)" in page and 'href="cases/the shared' not in page

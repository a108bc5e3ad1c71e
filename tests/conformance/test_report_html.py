"""The HTML report (conformance.engine.htmlreport): defects named once each, a page per case, JUnit XML, and
the page rendered by a real headless Chromium from disk (conformance.screenshot)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from conformance.engine import htmlreport
from conformance.screenshot import CHROMIUM, render

MATRIX = {
    "R6.3-3": {"level": "MUST", "text": "Error frames MUST carry `code` and, when known, `request_id`."},
    "R6.3-2": {"level": "MUST", "text": "A refused message MUST produce exactly one error frame."},
    "R3.3.1-1": {"level": "MUST", "text": "has an even length of at least 2 bytes"},
    "R3.2-3": {"level": "SHOULD", "text": "A server SHOULD write compact JSON."},
}

LOG = [
    {
        "session": "bad-inputs-1",
        "entries": [
            {
                "t": 0.0,
                "dir": "send",
                "data_type": "BINARY",
                "bytes": 30,
                "json": {"text": "", "request_id": "b1"},
            },
            {
                "t": 0.01,
                "dir": "recv",
                "kind": "control",
                "data_type": "UTF8",
                "bytes": 90,
                "json": {"type": "error", "code": "text_required", "request_id": None, "fatal": False},
            },
            {"t": 0.02, "dir": "recv", "kind": "audio", "data_type": "BINARY", "bytes": 32768},
        ],
    }
]


def _case(case_id: str, verdict: str, requirements: list[str], level: str = "MUST", **extra: Any) -> dict:
    return {
        "id": case_id,
        "section": "§" + ".".join(case_id.split(".")[:2]),
        "level": level,
        "requirement": "quoted",
        "description": f"does {case_id}",
        "expectation": "something",
        "requirements": requirements,
        "verdict": verdict,
        "message": None if verdict == "OK" else f"AssertionError: {case_id} broke",
        "duration_s": 0.5,
        "observations": {},
        "client_log": LOG if verdict == "FAILED" else [],
        "wire_log": [],
        **extra,
    }


def _report(directory: Path, cases: list[dict]) -> Path:
    (directory / "cases").mkdir(parents=True)
    index = {
        "target": "simulator",
        "container_cmd": "python -m my_server --port 4242",
        "started": "2026-12-01T00:00:00Z",
        "duration_s": 12.5,
        "counts": {},
        "cases": {},
    }
    for case in cases:
        (directory / "cases" / f"{case['id']}.json").write_text(json.dumps(case))
        index["counts"][case["verdict"]] = index["counts"].get(case["verdict"], 0) + 1
        index["cases"][case["id"]] = {
            k: case[k] for k in ("verdict", "level", "section", "duration_s", "description", "requirements")
        } | {"report": f"cases/{case['id']}.json"}
    (directory / "index.json").write_text(json.dumps(index))
    return directory


CASES = [
    # Three refusal rows fail for the same missing request_id: one defect, R6.3-3, not three.
    _case("9.1.31", "FAILED", ["R4.1-5", "R6.3-2", "R6.3-3"]),
    _case("9.1.40", "FAILED", ["R4.1-5", "R6.3-2", "R6.3-3"]),
    _case("9.1.5", "FAILED", ["R3.1-3", "R6.3-2", "R6.3-3"]),
    _case("9.1.6", "OK", ["R3.1-3", "R6.3-2"]),
    _case("3.3.2", "FAILED", ["R3.3.1-1"]),
    _case("3.2.4", "NON-STRICT", ["R3.2-3"], level="SHOULD"),
    _case("11.5.1", "UNIMPLEMENTED", ["R11.5-1"], level="MAY"),
    _case("2.1.1", "OK", ["R2.1-2"]),
]


def test_failed_cases_are_grouped_into_distinct_defects() -> None:
    cases = {c["id"]: c for c in CASES}
    index = {
        "cases": {
            c["id"]: {"verdict": c["verdict"], "section": c["section"], "level": c["level"]} for c in CASES
        }
    }
    found = htmlreport.defects(index, cases, MATRIX)
    assert [(d.clause, d.cases) for d in found] == [
        ("R6.3-3", ["9.1.31", "9.1.40", "9.1.5"]),
        ("R3.3.1-1", ["3.3.2"]),
    ]
    assert found[0].sentence.startswith("Error frames MUST carry") and found[0].level == "MUST"
    assert found[0].excerpt[0] == "# session bad-inputs-1"
    assert any(line.startswith('S: {"type":"error"') for line in found[0].excerpt)


def test_findings_and_listed_defects_take_precedence() -> None:
    finding = {"clause": "R6.3-2", "message": "two error frames for one message"}
    cases = {"9.1.5": _case("9.1.5", "FAILED", ["R3.1-3", "R6.3-2"], findings=[finding])}
    index = {"cases": {"9.1.5": {"verdict": "FAILED", "section": "§9.1", "level": "MUST"}}}
    found = htmlreport.defects(index, cases, MATRIX)
    assert [(d.clause, d.message) for d in found] == [("R6.3-2", "two error frames for one message")]
    listed = {**index, "defects": [{"clause": "R3.1-3", "cases": ["9.1.5"], "excerpt": ["C: x", "S: y"]}]}
    found = htmlreport.defects(listed, cases, MATRIX)
    assert [(d.clause, d.cases, d.excerpt) for d in found] == [("R3.1-3", ["9.1.5"], ["C: x", "S: y"])]


def test_write_makes_pages_and_junit(tmp_path: Path) -> None:
    directory = _report(tmp_path / "report", CASES)
    page = htmlreport.write(directory)
    text = page.read_text()
    assert "2 distinct defects" in text and 'href="cases/9.1.31.html"' in text
    assert (
        "<script" not in text and "http://" not in text.replace("http://127", "") and "https://" not in text
    )
    case_page = (directory / "cases" / "9.1.31.html").read_text()
    assert "AssertionError: 9.1.31 broke" in case_page and "# session bad-inputs-1" in case_page
    suite = ElementTree.parse(directory / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("8", "4", "2")
    failed = [t for t in suite.iter("testcase") if t.find("failure") is not None]
    assert {t.get("name", "").split()[0] for t in failed} == {"9.1.31", "9.1.40", "9.1.5", "3.3.2"}
    properties = {p.get("value") for p in suite.iter("property") if p.get("name") == "requirement"}
    assert "R6.3-3" in properties


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} is not installed (make installs it)")
def test_chromium_renders_the_summary_from_disk(tmp_path: Path) -> None:
    directory = _report(tmp_path / "report", CASES)
    htmlreport.write(directory)
    shown = render(directory / "index.html", directory / "index.png")
    assert shown.title == "Conformance report"
    assert shown.headline.startswith("2 2 distinct defects"), shown.headline
    assert "4 FAILED" in shown.headline and "1 NON-STRICT" in shown.headline
    assert shown.defects == 2 and shown.case_rows == len(CASES)
    assert shown.requests == [], "the report must not load anything: it opens from disk"
    png = (directory / "index.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_a_case_page_lists_its_notes_linked_to_their_defects(tmp_path: Path) -> None:
    """Issue 30: a finding on a clause the case does not own is the run's; the case's page shows it, linked
    to the clause's row on the index."""
    note = {"clause": "R6.1-2", "message": "32768 audio bytes outside any synthesis bracket", "session": "c"}
    note |= {"index": 4, "excerpt": "<32768 bytes: 00 00>"}
    case = _case("4.2.1", "OK", ["R4.2-6"], notes=[note])
    page = htmlreport.render_case(case, MATRIX)
    assert 'href="../index.html#defect-R6.1-2">R6.1-2</a> 32768 audio bytes outside' in page
    assert "[c #4]" in page and "&lt;32768 bytes: 00 00&gt;" in page
    assert "Notes" not in htmlreport.render_case(_case("4.2.2", "OK", ["R4.2-6"]), MATRIX)

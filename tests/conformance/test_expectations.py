"""Expectations files (``--expect``): what they accept, what they refuse in one line, how a run is judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.engine.expectations import ExpectationsError, judge, known_ids, load

KNOWN = ({"3.1.2", "4.2.1", "4.2.4"}, {"R6.1-2", "R7.1-3"})


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "expect.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_of_cases_and_clauses_reads_with_reasons_and_issues(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[cases."4.2.4"]\nreason = "not interrupted yet"\nissue = "https://example.org/1"\n'
        '[clauses."R6.1-2"]\nreason = "audio after the bracket"\n',
    )
    expectations = load(path, KNOWN)
    assert expectations.cases["4.2.4"].reason == "not interrupted yet"
    assert expectations.cases["4.2.4"].issue == "https://example.org/1"
    assert expectations.clauses["R6.1-2"].issue is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[cases."9.9.9"]\nreason = "x"\n', "there is no case '9.9.9' in this suite"),
        ('[clauses."R99-1"]\nreason = "x"\n', "there is no clause 'R99-1' in this suite"),
        ('[cases."4.2.4"]\nissue = "https://example.org"\n', "needs a reason"),
        ('[cases."4.2.4"]\nreason = "  "\n', "needs a reason"),
        ('[cases."4.2.4"]\nreason = "x"\nbecause = "y"\n', "unknown key 'because'"),
        ('[tests."4.2.4"]\nreason = "x"\n', "unknown table 'tests'"),
        ("[cases\nreason = ", "not TOML"),
        ('cases = "4.2.4"\n', "must be a table"),
    ],
)
def test_bad_files_are_refused_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ExpectationsError) as raised:
        load(_write(tmp_path, text), KNOWN)
    assert says in str(raised.value) and "\n" not in str(raised.value)
    assert str(tmp_path) in str(raised.value), "the message names the file"


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExpectationsError, match="no such expectations file"):
        load(tmp_path / "none.toml", KNOWN)


def test_the_ids_are_the_suites() -> None:
    cases, clauses = known_ids()
    assert {"3.1.2", "4.2.1", "7.2.1"} <= cases and len(cases) >= 200
    assert {"R6.1-2", "R7.1-3"} <= clauses


def test_a_run_passes_when_exactly_the_expected_fail(tmp_path: Path) -> None:
    expectations = load(
        _write(tmp_path, '[cases."4.2.4"]\nreason = "a"\n[clauses."R6.1-2"]\nreason = "b"\n'), KNOWN
    )
    ran = ["3.1.2", "4.2.1", "4.2.4"]
    exact = judge(
        expectations,
        failed_cases=["4.2.4"],
        ran_cases=ran,
        failed_clauses=["R6.1-2"],
        judged_clauses=["R6.1-2"],
    )
    assert exact.passed and exact.expected == ["4.2.4", "R6.1-2"]
    more = judge(
        expectations,
        failed_cases=["4.2.4", "3.1.2"],
        ran_cases=ran,
        failed_clauses=["R6.1-2"],
        judged_clauses=["R6.1-2"],
    )
    assert not more.passed and more.unexpected_failures == ["3.1.2"]
    fixed = judge(expectations, failed_cases=[], ran_cases=ran, failed_clauses=[], judged_clauses=["R6.1-2"])
    assert not fixed.passed and fixed.unexpected_passes == ["4.2.4", "R6.1-2"]
    not_run = judge(expectations, failed_cases=[], ran_cases=["3.1.2"], failed_clauses=[], judged_clauses=[])
    assert not_run.passed, "a listed case that did not run is neither expected nor an unexpected pass"

"""Verdicts and reports: a JSON index plus one file per case, and the terminal summary table.

Like Autobahn|Testsuite's reports, ``--report DIR`` writes:

* ``DIR/index.json``: the run (target, container, start time, duration, the case deadline, counts per
  verdict), per case id its ``verdict``, ``level``, ``section``, ``clauses``, ``duration_s``, counts of its
  ``findings`` and ``notes``, ``suite_error`` and ``report`` (the case file's path relative to ``DIR``), and
  ``defects``: the findings grouped by clause, one entry per distinct defect with its run-level verdict
  (:meth:`Results.defects`), ``failed_clauses``, ``clause_counts`` and ``passed`` (the run's own verdict: no
  ``FAILED`` case and no ``FAILED`` clause);
* ``DIR/cases/<id>.json``: the case (requirement, description, expectation, level, section, clauses), its
  verdict, the failure message, its findings (on its own clauses) and notes (findings on other clauses),
  observations the case recorded, the client-side log of its sessions and the simulator's wire log of what
  crossed it during the case;
* ``DIR/index.html``, ``DIR/cases/<id>.html`` and ``DIR/junit.xml``: the same for people and for CI
  (:mod:`conformance.engine.htmlreport`).

Nothing here does network I/O; :class:`Results` is filled by the pytest plugin (``conftest.py``).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.engine import clauses
from conformance.engine.badge import badge_svg
from conformance.engine.case import Case, Level, Verdict, verdict_for
from conformance.engine.expectations import Expectations, Judgement, judge
from conformance.engine.ids import label
from conformance.engine.observer import Finding
from conformance.engine.shipped import load_matrix
from protocol.messages import PROTOCOL_VERSION

CASE_FORMAT = "kokoro-conformance-case/1"
"""The ``format`` member of every case file: what ``kokoro-conformance replay`` checks before it sends a
recorded case again (:mod:`conformance.engine.replay`). Change it when a case file's client log changes
shape."""

__all__ = ["CaseResult", "Results"]

_LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}

FINDINGS_PER_CASE = 200
"""Findings (and notes) kept per case file; the rest are counted (a hostile server can cause thousands)."""


@dataclass
class CaseResult:
    """Everything known about one case after it ran.

    Attributes:
        case: the case.
        nodeid: the pytest node id.
        verdict: the verdict (``None`` until the case ran).
        message: why it did not pass (failure, skip reason), if it did not.
        duration_s: seconds of setup plus call.
        observations: values the case recorded (measurements, ids).
        client_log: per session, the client-side log entries during the case.
        wire_log: the simulator's wire-log records during the case, per simulator session.
        findings: deviations on the case's own clauses (each makes the case fail).
        notes: deviations on other clauses seen during the case: they do not change its verdict, and are
            judged by the cases owning them and by the run, on their clause (:meth:`Results.defects`).
        suite_error: the case ended on an exception of the suite itself (a bug of the suite, not a
            verdict on the server).
    """

    case: Case
    nodeid: str
    verdict: Verdict | None = None
    message: str | None = None
    duration_s: float = 0.0
    observations: dict[str, Any] = field(default_factory=dict)
    client_log: list[dict[str, Any]] = field(default_factory=list)
    wire_log: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    suite_error: bool = False
    known: str | None = None
    """With ``--expect``: ``"expected failure"`` or ``"unexpected pass"``
    (:mod:`conformance.engine.expectations`).
    """

    def to_dict(self) -> dict[str, Any]:
        """The case file's content."""
        return {
            "format": CASE_FORMAT,
            **self.case.to_dict(),
            "verdict": self.verdict.value if self.verdict else None,
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
            "nodeid": self.nodeid,
            "suite_error": self.suite_error,
            "known": self.known,
            "findings": [f.to_dict() for f in self.findings[:FINDINGS_PER_CASE]],
            "findings_omitted": max(0, len(self.findings) - FINDINGS_PER_CASE),
            "notes": [f.to_dict() for f in self.notes[:FINDINGS_PER_CASE]],
            "notes_omitted": max(0, len(self.notes) - FINDINGS_PER_CASE),
            "observations": self.observations,
            "client_log": self.client_log,
            "wire_log": self.wire_log,
        }


class Results:
    """The results of one run, in collection order."""

    def __init__(self) -> None:
        self.by_node: dict[str, CaseResult] = {}
        self.started = time.time()
        self.meta: dict[str, Any] = {}
        self.unattached: list[tuple[str, Finding]] = []
        """Findings seen outside any case (a session shared by cases, after their parts): ``(where, it)``."""
        self.expectations: Expectations | None = None
        """The ``--expect`` file's known failures, if one was given."""

    def add_unattached(self, where: str, findings: list[Finding]) -> None:
        """Keep findings that no case judged, seen ``where`` (a shared session's close after its last case):
        they count in the clause rows like a case's notes (:meth:`defects`)."""
        self.unattached += [(where, finding) for finding in findings]

    def add(self, case: Case, nodeid: str) -> CaseResult:
        """Register a selected case (before it runs)."""
        result = CaseResult(case, nodeid)
        self.by_node[nodeid] = result
        return result

    def get(self, nodeid: str) -> CaseResult | None:
        """The result of a node, if it is a case."""
        return self.by_node.get(nodeid)

    @property
    def ran(self) -> list[CaseResult]:
        """Results that have a verdict."""
        return [r for r in self.by_node.values() if r.verdict is not None]

    def counts(self) -> Counter[str]:
        """Number of cases per verdict."""
        return Counter(r.verdict.value for r in self.ran if r.verdict is not None)

    def suite_errors(self) -> list[CaseResult]:
        """Cases that ended on an exception of the suite itself."""
        return [r for r in self.ran if r.suite_error]

    def defects(self, *, strict: bool = False) -> list[dict[str, Any]]:
        """The findings of the run grouped by clause: one entry per distinct defect, a *clause row*.

        A clause row is judged over the whole run, wherever its findings were seen: a finding on a clause
        is a defect of the server whether the case that saw it owns the clause or only keeps it as a note
        (its own verdict stays its own: no cascade). Each entry:

        * ``clause``; ``level`` (the strongest level its findings break: the sentence's level from the
          traceability matrix, or a finding's own, :attr:`conformance.engine.observer.Finding.level`) and
          ``sentence`` (the spec's, '' when unknown);
        * ``verdict``: ``FAILED`` for a MUST (and for a SHOULD under ``--strict``), ``NON-STRICT`` for a
          SHOULD, ``INFORMATIONAL`` for a MAY (:func:`conformance.engine.case.verdict_for`);
        * ``cases``, the ids of the cases that saw it (on their own clauses or as a note); ``owners``, the
          cases of the run that declare the clause; ``failed``, the owners whose verdict it decided (the
          clause is theirs and they did not pass); ``carried``: a ``FAILED`` owner already fails the run for
          it (otherwise only the clause row does: ``pytest_runtestloop`` in ``conftest.py``);
        * ``findings``, how many distinct findings (a recording judged by several cases counts once),
          ``per_case`` (case id -> how many it saw; findings seen outside any case, :meth:`add_unattached`,
          under where they were seen); ``message`` and ``excerpt``, the first finding's
          (``excerpt``: a short wire excerpt of the message concerned; ``where``: its session and index).
        """
        matrix = load_matrix()
        owners: dict[str, list[str]] = {}
        for r in self.ran:
            for clause in r.case.clauses:
                owners.setdefault(clause, []).append(r.case.id)
        groups: dict[str, dict[str, Any]] = {}
        seen: set[int] = set()  # a recording judged by several cases gives each the same Finding objects
        sightings: list[tuple[CaseResult | None, str, Finding]] = [
            (r, r.case.id, finding) for r in self.ran for finding in [*r.findings, *r.notes]
        ]
        sightings += [(None, where, finding) for where, finding in self.unattached]
        for r, case_id, finding in sightings:
            row = matrix.get(finding.clause, {})
            group = groups.setdefault(
                finding.clause,
                {
                    "clause": finding.clause,
                    "level": None,
                    "verdict": None,
                    "sentence": row.get("text", ""),
                    "cases": [],
                    "owners": owners.get(finding.clause, []),
                    "failed": [],
                    "carried": False,
                    "findings": 0,
                    "per_case": {},
                    "message": finding.message,
                    "excerpt": finding.excerpt,
                    "where": {"session": finding.session, "index": finding.index},
                },
            )
            level = finding.level or row.get("level") or (r.case.level.value if r is not None else "MUST")
            if group["level"] is None or _LEVEL_ORDER.get(level, 3) < _LEVEL_ORDER.get(group["level"], 3):
                group["level"] = level
            group["findings"] += id(finding) not in seen
            seen.add(id(finding))
            group["per_case"][case_id] = group["per_case"].get(case_id, 0) + 1
            if not group["excerpt"] and finding.excerpt:
                group["excerpt"], group["message"] = finding.excerpt, finding.message
                group["where"] = {"session": finding.session, "index": finding.index}
            if case_id not in group["cases"]:
                group["cases"].append(case_id)
            if r is None:
                continue  # seen outside any case: judged by the run alone
            owned = finding.clause in r.case.clauses and r.verdict not in (Verdict.OK, Verdict.SKIPPED)
            if owned and case_id not in group["failed"]:
                group["failed"].append(case_id)
            if finding.clause in r.case.clauses and r.verdict is Verdict.FAILED:
                group["carried"] = True
        for group in groups.values():
            group["verdict"] = verdict_for(Level(group["level"]), False, strict=strict).value
        return sorted(groups.values(), key=lambda g: _clause_order(g["clause"]))

    def clause_failures(self, *, strict: bool = False) -> list[dict[str, Any]]:
        """The clause rows (:meth:`defects`) whose run-level verdict is ``FAILED``: each fails the run."""
        return [d for d in self.defects(strict=strict) if d["verdict"] == Verdict.FAILED.value]

    def uncarried_failures(self, *, strict: bool = False) -> list[dict[str, Any]]:
        """The ``FAILED`` clause rows that no ``FAILED`` case of their own shows: without their own failure
        (a JUnit test case, pytest's exit status 1) the run would pass."""
        return [d for d in self.clause_failures(strict=strict) if not d["carried"]]

    def failed(self, *, strict: bool = False) -> bool:
        """Whether the run fails: a ``FAILED`` case, or a ``FAILED`` clause row (a finding that breaks a MUST,
        wherever it was seen). With ``--expect``: a failure the file does not list, or a listed one that
        passed (:meth:`judgement`)."""
        if self.expectations is not None:
            return not self.judgement(strict=strict).passed
        return any(r.verdict is Verdict.FAILED for r in self.ran) or bool(self.clause_failures(strict=strict))

    def judgement(self, *, strict: bool = False) -> Judgement:
        """The run held against ``--expect`` (:func:`conformance.engine.expectations.judge`).

        A clause failure that a ``FAILED`` case of its own carries counts through that case, unless the file
        lists the clause itself. A listed clause counts as judged when a case of it ran, it has a row, or
        the observer checks it on every session
        (:data:`conformance.engine.clauses.OBSERVED_ON_EVERY_SESSION`).
        """
        assert self.expectations is not None
        listed = set(self.expectations.clauses)
        rows = self.clause_failures(strict=strict)
        failed_clauses = [d["clause"] for d in rows if not d["carried"] or d["clause"] in listed]
        judged = {c for r in self.ran for c in r.case.clauses}
        judged |= {d["clause"] for d in self.defects(strict=strict)}
        if self.ran:
            judged |= clauses.OBSERVED_ON_EVERY_SESSION
        return judge(
            self.expectations,
            failed_cases=[r.case.id for r in self.ran if r.verdict is Verdict.FAILED],
            ran_cases=[r.case.id for r in self.ran if r.verdict not in (Verdict.SKIPPED, None)],
            failed_clauses=failed_clauses,
            judged_clauses=judged,
        )

    def expectation_lines(self, *, strict: bool = False) -> list[str]:
        """The run against ``--expect``, for the terminal (empty without it)."""
        if self.expectations is None:
            return []
        j = self.judgement(strict=strict)
        lines = [
            f"expectations {self.expectations.path}: {len(j.expected)} expected failure(s), "
            f"{len(j.unexpected_failures)} unexpected failure(s), "
            f"{len(j.unexpected_passes)} unexpected pass(es) -> the run {'passes' if j.passed else 'FAILED'}"
        ]
        entries = {**self.expectations.cases, **self.expectations.clauses}
        lines += [f"  expected   {i}: {entries[i].reason}" for i in j.expected]
        lines += [f"  UNEXPECTED failure {i}" for i in j.unexpected_failures]
        lines += [
            f"  UNEXPECTED pass {i}: listed ({entries[i].reason}) but did not fail: remove it from the file"
            for i in j.unexpected_passes
        ]
        return lines

    def badge(self, protocol: str, *, strict: bool = False) -> str:
        """``badge.svg`` of the run (:mod:`conformance.engine.badge`): cases and clause rows that fail the
        run, those that passed, and the expected failures."""
        ok = sum(1 for r in self.ran if r.verdict is Verdict.OK)
        if self.expectations is not None:
            j = self.judgement(strict=strict)
            failed, expected = len(j.unexpected_failures) + len(j.unexpected_passes), len(j.expected)
        else:
            failed = sum(1 for r in self.ran if r.verdict is Verdict.FAILED)
            failed += len(self.uncarried_failures(strict=strict))
            expected = 0
        return badge_svg(protocol, ok=ok, failed=failed, expected=expected)

    def must_failures(self) -> list[CaseResult]:
        """MUST cases whose verdict is ``FAILED``."""
        return [r for r in self.ran if r.case.level is Level.MUST and r.verdict is Verdict.FAILED]

    def table(self, width: int = 110) -> list[str]:
        """The summary table, one line per case: id, level, verdict, seconds, description. With ``--expect``
        a listed case's verdict says so: ``FAILED (exp)`` (an expected failure) or ``OK (unexp)``."""
        lines = [f"{'case':<10} {'level':<6} {'verdict':<13} {'time':>7}  description"]
        for r in self.ran:
            assert r.verdict is not None
            shown = r.verdict.value + {"expected failure": " (exp)", "unexpected pass": " (unexp)"}.get(
                r.known or "", ""
            )
            text = f"{r.case.id:<10} {r.case.level.value:<6} {shown:<13} {r.duration_s:>6.2f}s  "
            lines.append((text + r.case.description)[:width])
        counts = self.counts()
        lines.append(
            ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts[v.value])
            + f" ({len(self.ran)} cases, {time.time() - self.started:.0f} s)"
        )
        return lines

    def defect_lines(self, width: int = 110, *, strict: bool = False) -> list[str]:
        """The distinct defects, one line each: clause, level, run-level verdict, the cases it failed (or
        where it was seen, when no case of the clause failed), the first finding."""
        defects = self.defects(strict=strict)
        lines = [f"{len(defects)} distinct defect(s) (findings grouped by clause)"]
        for d in defects:
            if d["failed"]:
                where = ", ".join(d["failed"][:6]) + (" ..." if len(d["failed"]) > 6 else "")
            else:
                where = "seen in " + ", ".join(d["cases"][:4]) + (" ..." if len(d["cases"]) > 4 else "")
            lines.append(
                f"  {d['clause']:<10} {d['level']:<6} {d['verdict']:<13} [{where}] {d['message']}"[:width]
            )
        return lines

    def failure_lines(self, *, strict: bool = False, limit: int = 8) -> list[str]:
        """The clauses that fail the run although no ``FAILED`` case of their own shows them, each with its
        sentence, where it was seen and one wire excerpt (empty when there are none; ``--expect``'s listed
        clauses are in :meth:`expectation_lines` instead)."""
        listed = self.expectations.clauses if self.expectations is not None else {}
        rows = [d for d in self.uncarried_failures(strict=strict) if d["clause"] not in listed]
        if not rows:
            return []
        lines = [
            f"the run FAILED on {len(rows)} clause(s) that no case of their own failed "
            "(findings seen in other cases: each is a defect of the server all the same)"
        ]
        for d in rows[:limit]:
            seen = ", ".join(f"{label(c)} ({n})" for c, n in list(d["per_case"].items())[:8])
            more = " ..." if len(d["per_case"]) > 8 else ""
            owners = ", ".join(d["owners"][:6]) or "none in this run"
            lines += [
                f"  {d['clause']} {d['level']} FAILED: {d['sentence'][:300] or '(sentence unknown)'}",
                f"    observed in {seen}{more}; {d['findings']} finding(s); its own cases: {owners}",
                f"    first: {d['message'][:300]}"
                + (
                    f" [{d['where']['session']} #{d['where']['index']}]"
                    if d["where"]["index"] is not None
                    else ""
                ),
            ]
            if d["excerpt"]:
                lines.append(f"    wire: {d['excerpt'][:300]}")
        if len(rows) > limit:
            lines.append(f"  ... and {len(rows) - limit} more (the report's defects list has them all)")
        return lines

    def write(self, directory: Path, *, strict: bool = False) -> Path:
        """Write ``index.json`` and ``cases/<id>.json`` under ``directory``; return the index's path.

        Besides the counts per case verdict, ``clause_counts`` counts the clause rows per run-level verdict
        and ``failed_clauses`` names the ``FAILED`` ones; ``passed`` is false when the run fails (a
        ``FAILED`` case or clause row, :meth:`failed`)."""
        cases_dir = directory / "cases"
        cases_dir.mkdir(parents=True, exist_ok=True)
        defects = self.defects(strict=strict)
        failed_clauses = [d["clause"] for d in defects if d["verdict"] == Verdict.FAILED.value]
        index: dict[str, Any] = {
            **self.meta,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.time() - self.started, 1),
            "counts": dict(self.counts()),
            "suite_errors": [r.case.id for r in self.suite_errors()],
            "passed": not self.failed(strict=strict),
            "clause_counts": dict(Counter(d["verdict"] for d in defects)),
            "failed_clauses": failed_clauses,
            "defect_count": len(defects),
            "defects": defects,
            "cases": {},
        }
        if self.expectations is not None:
            j = self.judgement(strict=strict)
            entries = {**self.expectations.cases, **self.expectations.clauses}
            index["expectations"] = {
                "file": self.expectations.path,
                "passed": j.passed,
                "expected": {i: entries[i].to_dict() for i in j.expected},
                "unexpected_failures": j.unexpected_failures,
                "unexpected_passes": {i: entries[i].to_dict() for i in j.unexpected_passes},
            }
            for d in defects:
                if d["clause"] in j.expected:
                    d["known"] = "expected failure"
                elif d["clause"] in j.unexpected_passes:
                    d["known"] = "unexpected pass"
        for r in self.ran:
            assert r.verdict is not None
            name = f"cases/{r.case.id}.json"
            (directory / name).write_text(json.dumps(r.to_dict(), indent=1, default=str) + "\n")
            index["cases"][r.case.id] = {
                "verdict": r.verdict.value,
                "level": r.case.level.value,
                "section": r.case.section,
                "clauses": list(r.case.clauses),
                "duration_s": round(r.duration_s, 3),
                "findings": len(r.findings),
                "notes": len(r.notes),
                "suite_error": r.suite_error,
                "known": r.known,
                "description": r.case.description,
                "report": name,
            }
        path = directory / "index.json"
        path.write_text(json.dumps(index, indent=1) + "\n")
        (directory / "badge.svg").write_text(self.badge(PROTOCOL_VERSION, strict=strict), encoding="utf-8")
        return path


def _clause_order(clause: str) -> tuple[Any, ...]:
    """Sort key of a requirement id: numerically by section, then number (``R3.3.1-2`` before ``R11.2-1``)."""
    match = re.fullmatch(r"R([\d.]+|[A-Z])-(\d+)", clause)
    if match is None:
        return ((10_000,), clause)
    section = tuple(int(n) if n.isdigit() else 10_000 for n in match.group(1).split("."))
    return (section, int(match.group(2)))

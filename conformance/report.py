"""Verdicts and reports: a JSON index plus one file per case, and the terminal summary table.

Like Autobahn|Testsuite's reports, ``--report DIR`` writes:

* ``DIR/index.json``: the run (target, container, start time, duration, the case deadline, counts per
  verdict), per case id its ``verdict``, ``level``, ``section``, ``clauses``, ``duration_s``, counts of its
  ``findings`` and ``notes``, ``suite_error`` and ``report`` (the case file's path relative to ``DIR``), and
  ``defects``: the findings grouped by clause, one entry per distinct defect (:meth:`Results.defects`);
* ``DIR/cases/<id>.json``: the case (requirement, description, expectation, level, section, clauses), its
  verdict, the failure message, its findings (on its own clauses) and notes (findings on other clauses),
  observations the case recorded, the client-side log of its sessions and the simulator's wire log of what
  crossed it during the case;
* ``DIR/index.html``, ``DIR/cases/<id>.html`` and ``DIR/junit.xml``: the same for people and for CI
  (:mod:`conformance.htmlreport`).

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

from conformance.cases import Case, Level, Verdict
from conformance.observer import Finding

CASE_FORMAT = "kokoro-conformance-case/1"
"""The ``format`` member of every case file: what ``kokoro-conformance replay`` checks before it sends a
recorded case again (:mod:`conformance.replay`). Change it when a case file's client log changes shape."""

__all__ = ["CaseResult", "Results"]

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
        notes: deviations on other clauses seen during the case (judged by the cases owning them).
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

    def defects(self) -> list[dict[str, Any]]:
        """The findings of the run grouped by clause: one entry per distinct defect, by clause.

        Each entry: ``clause``; ``cases``, the ids of the cases that saw it (on their own clauses or as a
        note); ``failed``, those among them whose verdict it decided (the clause is theirs and they did
        not pass); ``findings``, how many findings; ``message`` and ``excerpt``, the first finding's
        (``excerpt``: a short wire excerpt of the message concerned; ``where``: its session and index).
        """
        groups: dict[str, dict[str, Any]] = {}
        for r in self.ran:
            for finding in [*r.findings, *r.notes]:
                group = groups.setdefault(
                    finding.clause,
                    {
                        "clause": finding.clause,
                        "cases": [],
                        "failed": [],
                        "findings": 0,
                        "message": finding.message,
                        "excerpt": finding.excerpt,
                        "where": {"session": finding.session, "index": finding.index},
                    },
                )
                group["findings"] += 1
                if not group["excerpt"] and finding.excerpt:
                    group["excerpt"], group["message"] = finding.excerpt, finding.message
                    group["where"] = {"session": finding.session, "index": finding.index}
                if r.case.id not in group["cases"]:
                    group["cases"].append(r.case.id)
                owned = finding.clause in r.case.clauses and r.verdict not in (Verdict.OK, Verdict.SKIPPED)
                if owned and r.case.id not in group["failed"]:
                    group["failed"].append(r.case.id)
        return sorted(groups.values(), key=lambda g: _clause_order(g["clause"]))

    def must_failures(self) -> list[CaseResult]:
        """MUST cases whose verdict is ``FAILED``."""
        return [r for r in self.ran if r.case.level is Level.MUST and r.verdict is Verdict.FAILED]

    def table(self, width: int = 110) -> list[str]:
        """The summary table, one line per case: id, level, verdict, seconds, description."""
        lines = [f"{'case':<10} {'level':<6} {'verdict':<13} {'time':>7}  description"]
        for r in self.ran:
            assert r.verdict is not None
            text = f"{r.case.id:<10} {r.case.level.value:<6} {r.verdict.value:<13} {r.duration_s:>6.2f}s  "
            lines.append((text + r.case.description)[:width])
        counts = self.counts()
        lines.append(
            ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts[v.value])
            + f" ({len(self.ran)} cases, {time.time() - self.started:.0f} s)"
        )
        return lines

    def defect_lines(self, width: int = 110) -> list[str]:
        """The distinct defects, one line each: clause, the cases it failed, the first finding."""
        defects = self.defects()
        lines = [f"{len(defects)} distinct defect(s) (findings grouped by clause)"]
        for d in defects:
            failed = ", ".join(d["failed"][:6]) + (" ..." if len(d["failed"]) > 6 else "") or "notes only"
            lines.append(f"  {d['clause']:<34} [{failed}] {d['message']}"[:width])
        return lines

    def write(self, directory: Path) -> Path:
        """Write ``index.json`` and ``cases/<id>.json`` under ``directory``; return the index's path."""
        cases_dir = directory / "cases"
        cases_dir.mkdir(parents=True, exist_ok=True)
        defects = self.defects()
        index: dict[str, Any] = {
            **self.meta,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.time() - self.started, 1),
            "counts": dict(self.counts()),
            "suite_errors": [r.case.id for r in self.suite_errors()],
            "defect_count": len(defects),
            "defects": defects,
            "cases": {},
        }
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
                "description": r.case.description,
                "report": name,
            }
        path = directory / "index.json"
        path.write_text(json.dumps(index, indent=1) + "\n")
        return path


def _clause_order(clause: str) -> tuple[Any, ...]:
    """Sort key of a requirement id: numerically by section, then number (``R3.3.1-2`` before ``R11.2-1``)."""
    match = re.fullmatch(r"R([\d.]+|[A-Z])-(\d+)", clause)
    if match is None:
        return ((10_000,), clause)
    section = tuple(int(n) if n.isdigit() else 10_000 for n in match.group(1).split("."))
    return (section, int(match.group(2)))

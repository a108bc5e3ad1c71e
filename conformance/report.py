"""Verdicts and reports: a JSON index plus one file per case, and the terminal summary table.

Like Autobahn|Testsuite's reports, ``--report DIR`` writes:

* ``DIR/index.json``: the run (target, container, start time, duration, counts per verdict) and, per case
  id, ``verdict``, ``level``, ``section``, ``duration_s`` and ``report`` (the case file's path relative to
  ``DIR``);
* ``DIR/cases/<id>.json``: the case (requirement, description, expectation, level, section), its verdict,
  the failure message, observations the case recorded, the client-side log of its sessions and the
  simulator's wire log of what crossed it during the case.

Nothing here does network I/O; :class:`Results` is filled by the pytest plugin (``conftest.py``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.cases import Case, Level, Verdict

__all__ = ["CaseResult", "Results"]


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
    """

    case: Case
    nodeid: str
    verdict: Verdict | None = None
    message: str | None = None
    duration_s: float = 0.0
    observations: dict[str, Any] = field(default_factory=dict)
    client_log: list[dict[str, Any]] = field(default_factory=list)
    wire_log: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The case file's content."""
        return {
            **self.case.to_dict(),
            "verdict": self.verdict.value if self.verdict else None,
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
            "nodeid": self.nodeid,
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

    def write(self, directory: Path) -> Path:
        """Write ``index.json`` and ``cases/<id>.json`` under ``directory``; return the index's path."""
        cases_dir = directory / "cases"
        cases_dir.mkdir(parents=True, exist_ok=True)
        index: dict[str, Any] = {
            **{k: v for k, v in self.meta.items() if k != "startup_charged"},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.time() - self.started, 1),
            "counts": dict(self.counts()),
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
                "duration_s": round(r.duration_s, 3),
                "description": r.case.description,
                "report": name,
            }
        path = directory / "index.json"
        path.write_text(json.dumps(index, indent=1) + "\n")
        return path

"""Certify mutants, several at once: are they caught by their cases, and by their cases only?

Each mutant is certified the way a user certifies a container: ``python -m pytest conformance
--container-cmd "python -m conformance.mutants NAME --port {port}"`` in a subprocess, its verdicts read from
the run's ``index.json``. Runs go on concurrently (``jobs``), each with its own free ports.

Two checks:

* **caught** (fast; ``tests/conformance/test_teeth.py``): only the mutant's ``caught_by`` cases run, and every
  one must be ``FAILED`` (``NON-STRICT`` for a SHOULD case).
* **isolation** (slow; ``python -m conformance.mutants.teeth --isolation [NAME ...]``, a minute or two per
  mutant on two cores): the whole suite runs against each mutant and the cases that are ``FAILED`` are
  recorded in ``conformance/mutants/isolation.json``; the traceability matrix shows, per mutant, whether only
  the cases of the requirements it breaks failed. Each entry keeps a fingerprint of the mutant's row, so a
  test tells when a row changed since it was recorded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "ISOLATION",
    "caught_verdict",
    "certify",
    "certify_many",
    "isolation_record",
    "main",
    "mutant_cmd",
    "row_fingerprint",
    "verdicts",
]

ISOLATION = Path(__file__).resolve().parent / "isolation.json"
"""Where ``--isolation`` records which cases each mutant fails under the whole suite."""

RUN_TIMEOUT_S = 900.0
"""Guard against a hung run only: a mutant's family runs in seconds, the whole suite in a minute or two."""


def mutant_cmd(name: str) -> str:
    """The ``--container-cmd`` that serves mutant ``name`` on ``{port}``."""
    return f"{shlex.quote(sys.executable)} -m conformance.mutants {name} --port {{port}}"


def certify(
    container_cmd: str | None,
    cases: tuple[str, ...] = (),
    *,
    report: Path | None = None,
    extra: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run the suite in a subprocess; return its ``index.json`` with ``returncode``, ``output`` and
    ``report_dir``.

    Raises:
        AssertionError: the run wrote no report (it crashed before the first case).
    """
    report = report or Path(tempfile.mkdtemp(prefix="conformance-teeth-"))
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider"]
    command += ["--report", str(report), *extra]
    if container_cmd is not None:
        command += ["--container-cmd", container_cmd]
    if cases:
        command += ["--cases", ",".join(cases)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    root = cwd or Path(__file__).resolve().parents[2]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = done.stdout[-6000:] + done.stderr[-3000:]
    index_path = report / "index.json"
    assert index_path.exists(), f"the run wrote no report (exit {done.returncode}):\n{output}"
    index = json.loads(index_path.read_text())
    index["returncode"], index["output"], index["report_dir"] = done.returncode, output, report
    return index


def verdicts(index: dict[str, Any]) -> dict[str, str]:
    """Case id -> verdict of a run's index."""
    return {case_id: entry["verdict"] for case_id, entry in index["cases"].items()}


def certify_many(names: list[str], *, jobs: int = 2, whole_suite: bool = False) -> dict[str, dict[str, Any]]:
    """Certify each mutant (its ``caught_by`` cases, or the whole suite), ``jobs`` runs at a time.

    A run that crashes before writing its report gives that mutant an index with no cases, ``returncode``
    None and the crash in ``output``.
    """
    from conformance.mutants import MUTANTS

    def one(name: str) -> dict[str, Any]:
        cases = () if whole_suite else MUTANTS[name].caught_by
        with tempfile.TemporaryDirectory(prefix=f"teeth-{name}-") as tmp:
            try:
                index = certify(mutant_cmd(name), cases, report=Path(tmp) / "report")
            except (AssertionError, subprocess.SubprocessError) as exc:
                # One run's crash is that mutant's result, not every mutant's.
                return {"cases": {}, "returncode": None, "output": str(exc)}
            index.pop("report_dir")
            return index

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {name: pool.submit(one, name) for name in names}
        return {name: future.result() for name, future in futures.items()}


def row_fingerprint(mutant: Any) -> str:
    """A digest of one mutant's row (name, requirements, cases): its isolation record is stale when it
    changes."""
    material = [mutant.name, list(mutant.requirements), list(mutant.caught_by), mutant.breaks]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:12]


def isolation_record(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What ``--isolation`` records per mutant: its row's fingerprint and the cases the suite FAILED."""
    from conformance.mutants import MUTANTS

    return {
        name: {
            "row": row_fingerprint(MUTANTS[name]),
            "failed": sorted(case_id for case_id, verdict in verdicts(index).items() if verdict == "FAILED"),
        }
        for name, index in sorted(results.items())
    }


def caught_verdict(level: str) -> str:
    """The verdict that shows a case caught its mutant: FAILED, or NON-STRICT for a SHOULD case (runs are
    not ``--strict``)."""
    return "NON-STRICT" if level == "SHOULD" else "FAILED"


def main(argv: list[str] | None = None) -> int:
    """``python -m conformance.mutants.teeth [--isolation] [--jobs N] [NAME ...]``; returns the exit code."""
    from conformance.cases import catalogue
    from conformance.mutants import MUTANTS

    parser = argparse.ArgumentParser(prog="python -m conformance.mutants.teeth", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutants (default: every mutant with cases to catch it)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--isolation", action="store_true", help=f"run the whole suite per mutant and write {ISOLATION.name}"
    )
    args = parser.parse_args(argv)
    names = args.names or [n for n, m in MUTANTS.items() if m.caught_by]
    results = certify_many(names, jobs=args.jobs, whole_suite=args.isolation)
    missed = 0
    levels = {case.id: case.level.value for case in catalogue()}
    for name, index in results.items():
        seen = verdicts(index)
        wanted = MUTANTS[name].caught_by
        not_caught = [c for c in wanted if seen.get(c) != caught_verdict(levels.get(c, "MUST"))]
        failed = sorted(c for c, v in seen.items() if v == "FAILED")
        missed += bool(not_caught)
        print(
            f"{name:28} {'caught' if not not_caught else 'NOT CAUGHT by ' + ','.join(not_caught)}; "
            f"{len(failed)} FAILED: {' '.join(failed[:12])}{' ...' if len(failed) > 12 else ''}"
        )
    if args.isolation:
        previous = json.loads(ISOLATION.read_text()) if ISOLATION.exists() else {"mutants": {}}
        kept = {name: row for name, row in previous.get("mutants", {}).items() if name in MUTANTS}
        record = {"mutants": dict(sorted({**kept, **isolation_record(results)}.items()))}
        ISOLATION.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {ISOLATION}; now run `python -m conformance.matrix`")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Certify mutants, several at once: are they caught by their cases, and by their cases only?

Each mutant is certified the way a user certifies a container: the suite runs with
``--container-cmd "python -m conformance.mutants NAME --port {port}"`` and its verdicts are read from the
run's ``index.json``. Runs go on concurrently (``jobs`` worker processes, each with its own free ports). A
worker runs one pytest session per mutant, one after the other, in the same process (``pytest.main``):
starting Python and collecting the suite once per worker instead of once per mutant saves about three
CPU-seconds a mutant. That sessions leave nothing behind for the next is checked: each worker ends with the
unbroken control, which must pass every case the worker's mutants failed (:func:`certify_many`).

Two checks:

* **caught** (fast; ``tests/conformance/test_teeth.py``): only the mutant's ``caught_by`` cases run, those
  that cite a requirement or condition it breaks (:func:`must_catch`), and every one must be ``FAILED``
  (``NON-STRICT`` for a SHOULD case). A mutant that breaks its clauses only on a path
  their own cases do not take (``observed_by``, issue 30) is caught by the run: only its ``observed_by``
  cases run, and the run must fail on each clause it breaks (:func:`missed_clauses`).
* **isolation** (slow; ``python -m conformance.mutants.teeth --isolation [NAME ...]``, about two minutes per
  mutant, mostly waiting, so ``--jobs 6`` on two cores): the whole suite runs against each mutant and the
  cases that are ``FAILED`` are recorded in ``conformance/mutants/isolation.json``; the traceability matrix
  shows, per mutant, whether only the cases of the requirements it breaks failed. Each entry keeps a
  fingerprint of the mutant's row, so a test tells when a row changed since it was recorded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import io
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from conformance.engine.deadline import TONE_CASE_TIMEOUT_S
from conformance.mutants.catching import must_catch

__all__ = [
    "CONTROL",
    "ISOLATION",
    "cases_to_run",
    "caught_verdict",
    "certify",
    "certify_many",
    "isolation_record",
    "main",
    "missed_clauses",
    "must_catch",
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


CONTROL = "base"
"""The unbroken control: it must pass every case."""


def _suite_args(
    container_cmd: str | None, cases: tuple[str, ...], report: Path, extra: tuple[str, ...]
) -> list[str]:
    args = ["conformance", "-q", "-p", "no:cacheprovider", "--report", str(report), *extra]
    if container_cmd is not None:  # a tone-backed mutant
        if "--case-timeout" not in extra:
            args += ["--case-timeout", f"{TONE_CASE_TIMEOUT_S:g}"]
        args += ["--container-cmd", container_cmd]
    if cases:
        args += ["--cases", ",".join(cases)]
    return args


def _read_index(report: Path, returncode: int | None, output: str) -> dict[str, Any]:
    index_path = report / "index.json"
    assert index_path.exists(), f"the run wrote no report (exit {returncode}):\n{output}"
    index = json.loads(index_path.read_text())
    index["returncode"], index["output"], index["report_dir"] = returncode, output, report
    return index


def certify(
    container_cmd: str | None,
    cases: tuple[str, ...] = (),
    *,
    report: Path | None = None,
    extra: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run the suite in a subprocess (``python -m pytest conformance ...``, as a user does); return its
    ``index.json`` with ``returncode``, ``output`` (the run's last lines) and ``report_dir``.

    Raises:
        AssertionError: the run wrote no report (it crashed before the first case).
        subprocess.TimeoutExpired: the run took more than :data:`RUN_TIMEOUT_S`.
    """
    report = report or Path(tempfile.mkdtemp(prefix="conformance-teeth-"))
    command = [sys.executable, "-m", "pytest", *_suite_args(container_cmd, cases, report, extra)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    root = cwd or Path(__file__).resolve().parents[2]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    return _read_index(report, done.returncode, done.stdout[-6000:] + done.stderr[-3000:])


def certify_in_process(name: str, cases: tuple[str, ...], report: Path) -> dict[str, Any]:
    """Certify mutant ``name`` with a pytest session in this process (``pytest.main``), its output captured;
    the result is :func:`certify`'s. The process's working directory must be the project's root.

    Raises:
        AssertionError: the session wrote no report.
    """
    import pytest

    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        code = pytest.main(_suite_args(mutant_cmd(name), cases, report, ()))
    return _read_index(report, int(code), output.getvalue()[-9000:])


def verdicts(index: dict[str, Any]) -> dict[str, str]:
    """Case id -> verdict of a run's index."""
    return {case_id: entry["verdict"] for case_id, entry in index["cases"].items()}


def certify_many(names: list[str], *, jobs: int = 2, whole_suite: bool = False) -> dict[str, dict[str, Any]]:
    """Certify each mutant (its ``caught_by`` cases, or the whole suite) in ``jobs`` worker processes that
    take the next mutant as they finish one (see the module's docstring).

    Returns:
        mutant name -> its index (as :func:`certify`'s, without ``report_dir``). A session that crashes
        before writing its report gives that mutant an index with no cases, ``returncode`` None and the
        crash in ``output``. Each worker then certifies :data:`CONTROL` against every case
        its mutants failed, under the key ``"base#<worker>"``: those must all be OK, or one session left
        something behind that failed the next.
    """
    from conformance.mutants import MUTANTS

    todo: queue.SimpleQueue[str] = queue.SimpleQueue()
    for name in names:
        todo.put(name)
    results: dict[str, dict[str, Any]] = {}
    root = Path(__file__).resolve().parents[2]

    def worker(number: int) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        command = [sys.executable, "-m", "conformance.mutants.teeth", "--worker"]
        with tempfile.TemporaryDirectory(prefix="teeth-") as tmp:
            process = subprocess.Popen(
                command,
                cwd=root,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            assert process.stdin is not None and process.stdout is not None
            failed: set[str] = set()

            def ask(name: str, cases: tuple[str, ...]) -> dict[str, Any]:
                out = Path(tmp) / f"{name}.json"
                request = {
                    "name": name,
                    "cases": list(cases),
                    "report": str(Path(tmp) / name),
                    "out": str(out),
                }
                try:
                    process.stdin.write(json.dumps(request) + "\n")
                    process.stdin.flush()
                    answer = process.stdout.readline()
                except OSError as exc:
                    answer = f"worker gone: {exc}"
                if not out.exists():
                    return {"cases": {}, "returncode": None, "output": f"worker {number}: {answer.strip()}"}
                return json.loads(out.read_text())

            try:
                while True:
                    try:
                        name = todo.get_nowait()
                    except queue.Empty:
                        break
                    index = ask(name, () if whole_suite else cases_to_run(MUTANTS[name]))
                    failed |= {c for c, v in verdicts(index).items() if v in ("FAILED", "NON-STRICT")}
                    results[name] = index
                if failed:
                    results[f"{CONTROL}#{number}"] = ask(CONTROL, tuple(sorted(failed)))
            finally:
                process.stdin.close()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(worker, n) for n in range(jobs)]:
            future.result()
    return {name: results[name] for name in [*names, *sorted(set(results) - set(names))]}


def _worker(commands: TextIO, answers: TextIO) -> int:
    """``--worker``: certify one mutant per JSON line read from ``commands`` (``name``, ``cases``, ``report``,
    ``out``), write its index to ``out`` and a line to ``answers``; stop at end of input."""
    for line in commands:
        request = json.loads(line)
        try:
            index = certify_in_process(request["name"], tuple(request["cases"]), Path(request["report"]))
            index.pop("report_dir")
        except Exception as exc:  # one session's crash is that mutant's result, not the worker's end
            index = {"cases": {}, "returncode": None, "output": f"{type(exc).__name__}: {exc}"}
        Path(request["out"]).write_text(json.dumps(index))
        answers.write(f"done {request['name']}\n")
        answers.flush()
    return 0


def cases_to_run(mutant: Any) -> tuple[str, ...]:
    """The cases that certify ``mutant``: its ``caught_by``, or for a mutant caught by the run only, the
    ``observed_by`` cases that take the path where it breaks its clauses."""
    return tuple(mutant.caught_by) or tuple(mutant.observed_by)


def missed_clauses(mutant: Any, index: dict[str, Any]) -> list[str]:
    """The clauses of a run-level mutant (``observed_by``) that its run did not fail on, and ``exit`` when
    it exited otherwise than with status 1 (empty: caught)."""
    missed = [rid for rid in mutant.requirements if rid not in index.get("failed_clauses", [])]
    return missed + ([] if index.get("returncode") == 1 else ["exit"])


def row_fingerprint(mutant: Any) -> str:
    """A digest of one mutant's row (its name and what it breaks, in words): its isolation record, which
    cases FAILED under the whole suite, is stale when it changes. The ids it names are not part of it: naming
    a finer condition changes no verdict, and the cases that must catch it follow from those ids."""
    material = [mutant.name, mutant.breaks]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:12]


def isolation_record(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What ``--isolation`` records per mutant: its row's fingerprint and the cases the suite FAILED, and for
    a mutant caught by the run only (``observed_by``), the clauses the run FAILED on."""
    from conformance.mutants import MUTANTS

    record: dict[str, Any] = {}
    for name, index in sorted(results.items()):
        entry: dict[str, Any] = {
            "row": row_fingerprint(MUTANTS[name]),
            "failed": sorted(case_id for case_id, verdict in verdicts(index).items() if verdict == "FAILED"),
        }
        if MUTANTS[name].observed_by:
            entry["failed_clauses"] = list(index.get("failed_clauses", []))
        record[name] = entry
    return record


def caught_verdict(level: str) -> str:
    """The verdict that shows a case caught its mutant: FAILED, or NON-STRICT for a SHOULD case (runs are
    not ``--strict``)."""
    return "NON-STRICT" if level == "SHOULD" else "FAILED"


def main(argv: list[str] | None = None) -> int:
    """``python -m conformance.mutants.teeth [--isolation] [--jobs N] [NAME ...]``; returns the exit code."""
    from conformance.engine import kills
    from conformance.engine.case import catalogue
    from conformance.mutants import MUTANTS

    parser = argparse.ArgumentParser(prog="python -m conformance.mutants.teeth", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutants (default: every mutant with cases to catch it)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--isolation", action="store_true", help=f"run the whole suite per mutant and write {ISOLATION.name}"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        # The answers go to the real stdout; pytest's output to a buffer per session.
        answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _worker(sys.stdin, answers)
    names = args.names or [n for n, m in MUTANTS.items() if m.caught_by or m.observed_by]
    results = certify_many(names, jobs=args.jobs, whole_suite=args.isolation)
    controls = {n: i for n, i in results.items() if n.startswith(f"{CONTROL}#")}
    results = {n: i for n, i in results.items() if n not in controls}
    missed = 0
    levels = {case.id: case.level.value for case in catalogue()}
    for name, index in results.items():
        seen = verdicts(index)
        wanted = MUTANTS[name].caught_by
        not_caught = [c for c in wanted if seen.get(c) != caught_verdict(levels.get(c, "MUST"))]
        if not wanted and MUTANTS[name].observed_by and not args.isolation:
            not_caught = [f"the run on {c}" for c in missed_clauses(MUTANTS[name], index)]
        failed = sorted(c for c, v in seen.items() if v == "FAILED")
        missed += bool(not_caught)
        print(
            f"{name:28} {'caught' if not not_caught else 'NOT CAUGHT by ' + ','.join(not_caught)}; "
            f"{len(failed)} FAILED: {' '.join(failed[:12])}{' ...' if len(failed) > 12 else ''}"
        )
    for name, index in controls.items():
        wrong = {c: v for c, v in verdicts(index).items() if v != "OK"}
        missed += bool(wrong) or not index["cases"]
        print(f"{name:28} (the control, after that worker's mutants) {'passed' if not wrong else wrong}")
    if args.isolation:
        previous = json.loads(ISOLATION.read_text()) if ISOLATION.exists() else {"mutants": {}}
        kept = {name: row for name, row in previous.get("mutants", {}).items() if name in MUTANTS}
        changes = kills.load_changes(ISOLATION.parents[2] / kills.CHANGES)  # a kill set shrinks with a reason
        merged, lost = kills.keep_hand_kills(kept, isolation_record(results), changes)
        for shrink in lost:
            print(f"LOST KILL: {shrink.mutant} by {shrink.case} ({shrink.reason or 'no reason: kept'})")
        missed += sum(1 for shrink in lost if not shrink.reason)
        record = {"mutants": dict(sorted(merged.items()))}
        ISOLATION.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {ISOLATION}; now run `python -m conformance.matrix`")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

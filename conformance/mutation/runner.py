"""Certify mutants of the shipped server: each one runs the conformance suite as any server does.

A mutant is the reference server on the tone synthesizer, started from the mutated tree
(:mod:`conformance.mutation.tree`) with ``MUTANT_UNDER_TEST`` naming it; the suite runs from the checkout
(its client, simulator and checks are never mutated). Only the cases that make the server run the mutated
line are selected (:func:`conformance.mutation.covered.cases_for`), and every one of them runs (no ``-x``), so
the outcome names every case that kills the mutant (its kill set, :mod:`conformance.engine.kills`), at a
fraction of one whole run. Without a selection the whole suite runs; ``fail_fast`` stops it at the first
``FAILED`` case (``-x``: the only cost is a kill set of one). Runs go on concurrently (``jobs``), each with
its own free port.

Outcomes (:class:`Outcome`): ``killed`` (the run failed, under ``--strict``: a case, a SHOULD case
included, or a clause row of §1.6's run-wide judgement), ``startup`` (the mutant did not answer
``GET /ping`` or exited: a server that cannot start fails certification, so it counts as killed),
``timeout`` (the run exceeded its limit: killed, as mutmut counts it) and ``survived`` (the run passed).
``error`` is an exit status the suite should never give (an internal error): neither killed nor survived,
to be looked at.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conformance.engine.deadline import TONE_CASE_TIMEOUT_S
from conformance.mutation import ROOT
from conformance.mutation.tree import MUTANT_ENV

__all__ = ["KILLED", "Outcome", "certify", "certify_all", "server_command"]

KILLED = frozenset({"killed", "startup", "timeout"})
"""The outcomes that count as a kill."""

SERVER_ARGS = ("--backend", "tone", "--utterance-idle-timeout-s", "2")
"""The tone synthesizer; utterances idle out in 2 s, so case 15.5.3 waits 2 s, not the default 20."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the suite made of one mutant.

    Attributes:
        name: the mutant (``None``: the unmutated tree, the control).
        status: ``killed``, ``startup``, ``timeout``, ``survived`` or ``error`` (module docstring).
        killed_by: the FAILED case ids, then the FAILED clause rows of the run (with ``-x``, only the first
            case that failed).
        cases: the cases the run selected (``None``: the whole suite).
        clauses: the clause rows of §1.6's run-wide judgement that the run FAILED (also in ``killed_by``).
        seconds: the run's wall time.
        detail: the tail of the suite's output when the status is ``startup`` or ``error``.
    """

    name: str | None
    status: str
    killed_by: tuple[str, ...] = ()
    seconds: float = 0.0
    cases: tuple[str, ...] | None = None
    clauses: tuple[str, ...] = ()
    detail: str = field(default="", repr=False)

    @property
    def killed(self) -> bool:
        """Whether the outcome counts as a kill (:data:`KILLED`)."""
        return self.status in KILLED


def server_command(tree: Path, mutant: str | None) -> str:
    """The ``--container-cmd`` that serves ``mutant`` (``None``: no mutant) from ``tree`` on ``{port}``."""
    # The tree's packages first; the packages it does not hold from this checkout, not from whatever checkout
    # the environment has installed (a tree of protocol/ alone ran another checkout's reference_server).
    path = f"PYTHONPATH={tree}{os.pathsep}{ROOT}"
    env = [path, *([f"{MUTANT_ENV}={mutant}"] if mutant is not None else [])]
    # -P: `python -m` would put the working directory (the checkout, unmutated) before PYTHONPATH.
    command = [
        "env",
        *env,
        sys.executable,
        "-P",
        "-m",
        "reference_server",
        "--host",
        "127.0.0.1",
        *SERVER_ARGS,
    ]
    return shlex.join(command) + " --port {port}"


STOP_GRACE_S = 30.0
"""How long a suite past its limit has to tear its fixtures down (and so stop the mutant server it started
in a session of its own) after ``SIGINT``, before it is killed."""


def _run_suite(
    args: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str] | None:
    """Run the suite's command line ``args``; ``None`` when it exceeded ``timeout_s``.

    A run past its limit is interrupted (``SIGINT``: pytest then tears its fixtures down, which stops the
    mutant server, started in a process group of its own) and killed only if it has not ended within
    :data:`STOP_GRACE_S`: killing it at once would leave the server running.
    """
    with subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                process.communicate(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            return None
    return subprocess.CompletedProcess(list(args), process.returncode, stdout, stderr)


def certify(
    tree: Path,
    mutant: str | None,
    *,
    cases: Sequence[str] | None = None,
    timeout_s: float = 600.0,
    fail_fast: bool = False,
) -> Outcome:
    """Run the suite against one mutant of ``tree`` (``None``: the unmutated control).

    Args:
        tree: the mutated tree (:func:`conformance.mutation.tree.build`).
        mutant: its name, as ``MUTANT_UNDER_TEST`` takes it; ``"fail"`` makes every mutated function raise.
        cases: the case ids to run (``None``: the whole suite).
        timeout_s: the whole run's limit, seconds.
        fail_fast: stop at the first FAILED case (``-x``); ``False`` runs every case (the full kill set).
    """
    started = time.monotonic()
    selected = None if cases is None else tuple(cases)
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        report = Path(scratch) / "report"
        # --strict: a SHOULD case that fails is FAILED, not NON-STRICT. A mutant that breaks only a SHOULD
        # is a defect the suite saw; the unbroken tone-backed server passes every case under --strict.
        args = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--strict"]
        args += ["-x"] if fail_fast else []
        args += [] if selected is None else ["--cases", ",".join(selected)]
        args += ["--report", str(report), "--startup-timeout", "60"]
        args += ["--case-timeout", f"{TONE_CASE_TIMEOUT_S:g}"]
        args += ["--container-cmd", server_command(tree, mutant)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        env.pop(MUTANT_ENV, None)  # the suite's own process is never a mutant
        done = _run_suite(args, env, timeout_s)
        if done is None:
            return Outcome(mutant, "timeout", (), time.monotonic() - started, cases=selected)
        seconds = time.monotonic() - started
        output = done.stdout[-3000:] + done.stderr[-2000:]
        failed: tuple[str, ...] = ()
        clauses: tuple[str, ...] = ()
        index = report / "index.json"
        if index.exists():
            data = json.loads(index.read_text(encoding="utf-8"))
            ids = sorted(c for c, e in data.get("cases", {}).items() if e.get("verdict") == "FAILED")
            clauses = tuple(sorted(data.get("failed_clauses", [])))
            failed = (*ids, *clauses)
    if done.returncode == 0:
        return Outcome(mutant, "survived", (), seconds, cases=selected)
    if done.returncode == 1:
        return Outcome(mutant, "killed", failed, seconds, cases=selected, clauses=clauses)
    if done.returncode == 4 and "--container-cmd" in output:
        return Outcome(mutant, "startup", (), seconds, output, cases=selected)
    return Outcome(mutant, "error", failed, seconds, f"exit {done.returncode}\n{output}", cases=selected)


def certify_all(
    tree: Path,
    mutants: Sequence[str | None],
    *,
    cases: Mapping[str | None, Sequence[str] | None] | None = None,
    fail_fast: Sequence[str | None] = (),
    jobs: int = 2,
    timeout_s: float = 600.0,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """:func:`certify` each of ``mutants``, ``jobs`` at a time; outcomes in the order of ``mutants``.

    Args:
        cases: mutant → the cases to run it against (absent or ``None``: the whole suite).
        fail_fast: the mutants whose run stops at the first FAILED case (``-x``).

    Raises:
        ValueError: ``jobs`` is less than 1.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [
            pool.submit(
                certify,
                tree,
                mutant,
                cases=(cases or {}).get(mutant),
                timeout_s=timeout_s,
                fail_fast=mutant in fail_fast,
            )
            for mutant in mutants
        ]
        for future in concurrent.futures.as_completed(futures):
            if progress is not None:
                progress(future.result())
        return [future.result() for future in futures]

"""Which lines of the server the suite runs, and which case makes it run each one.

A mutant on a line that no case makes the server run can never be killed: it is either code of the other
role (``protocol/`` holds the client's side too: ``ClientSession``, the frame reader, request encoders),
or a path of the server that no case reaches. Both are counted and listed in the report
("not run by the suite"), not mutated and not scored. A mutant on a line that some cases run is certified
by those cases only (:func:`cases_for`), every one of them (no ``-x``), so its whole kill set is known.

The lines come from one run of the whole suite against the unmutated, tone-backed server of the checkout,
the server measured by coverage.py (``python -m conformance.mutation.covered DATA -- ARGS`` wraps
``python -m reference_server ARGS``). The server runs in its own process, so what it runs is charged to a
case by time: its coverage is kept in slices of :data:`SLICE_S` (coverage.py dynamic contexts, each named by
the ``time.monotonic()`` it began at), and the suite, with :mod:`conformance.mutation.windows`, records when
each case ran and when each shared fixture (a recording judged by several cases) was set up. A slice belongs
to the cases whose window it overlaps (a case's window stretched by :data:`AFTER_S`, for work the server
finishes after the client has moved on), and to every user of a shared fixture set up while it ran; a slice
that belongs to no case (the server starting or stopping) belongs to all of them.
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.mutation import ROOT

__all__ = [
    "AFTER_S",
    "ALL",
    "SLICE_S",
    "CoverageRunFailed",
    "Measured",
    "cases_for",
    "changed_lines",
    "measure",
    "owners_of_slices",
    "serve",
]

SLICE_S = 0.05
"""The length of one slice of the server's coverage, seconds."""

AFTER_S = 0.5
"""How long after a case ends the server's work is still charged to it, seconds."""

ALL = "*"
"""A line's owners when a slice that belongs to no case ran it (startup, shutdown): every case."""


class CoverageRunFailed(RuntimeError):
    """The suite did not pass against the unmutated server while coverage measured it."""


@dataclass(frozen=True, slots=True)
class Measured:
    """What one run of the suite under coverage found.

    Attributes:
        lines: path → the sorted line numbers the server ran.
        owners: path → line → the sorted case ids that made the server run it, or ``[ALL]``.
    """

    lines: dict[str, list[int]]
    owners: dict[str, dict[int, list[str]]]


def _slice_contexts(measured: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        measured.switch_context(f"{time.monotonic():.3f}")
        stop.wait(SLICE_S)


def serve(data_file: Path, paths: Sequence[str], args: Sequence[str]) -> int:
    """Run ``python -m reference_server ARGS`` under coverage.py and save what it ran to ``data_file``, in
    slices of :data:`SLICE_S` (contexts named by the ``time.monotonic()`` each began at).

    Args:
        data_file: coverage.py's data file to write.
        paths: the files to measure, relative to the checkout.
        args: the server's own arguments.

    Returns:
        The server's exit status (0 after SIGTERM, as documented).
    """
    import coverage

    from reference_server.__main__ import main

    measured = coverage.Coverage(data_file=str(data_file), include=[str(ROOT / p) for p in paths])
    measured.start()
    stop = threading.Event()
    slicer = threading.Thread(target=_slice_contexts, args=(measured, stop), daemon=True)
    slicer.start()
    try:
        return main(list(args))
    finally:
        stop.set()
        slicer.join(1)
        measured.stop()
        measured.save()


def owners_of_slices(starts: Sequence[float], windows: Mapping[str, Any]) -> list[list[str]]:
    """The cases each slice of the server's coverage belongs to (module docstring).

    Args:
        starts: the slices' starts, ``time.monotonic()`` seconds, ascending; each ends where the next begins
            (the last after :data:`SLICE_S`).
        windows: what :mod:`conformance.mutation.windows` wrote: ``cases`` (id → ``[start, end]``) and
            ``fixtures`` (``[start, end, [case ids]]``).

    Returns:
        Per slice, the sorted case ids it belongs to, or ``[ALL]``.
    """
    cases = sorted((s, e + AFTER_S, c) for c, (s, e) in windows["cases"].items())
    fixtures = [(s, e, users) for s, e, users in windows["fixtures"] if users]
    ends = [*starts[1:], starts[-1] + SLICE_S] if starts else []
    found = []
    for start, end in zip(starts, ends, strict=True):
        owners = {c for s, e, c in cases if s < end and start < e}
        for s, e, users in fixtures:
            if s < end and start < e:
                owners.update(users)
        found.append(sorted(owners) if owners else [ALL])
    return found


def _owners(data: Any, paths: Sequence[str], windows: Mapping[str, Any]) -> dict[str, dict[int, list[str]]]:
    labels = sorted((float(c), c) for c in data.measured_contexts() if c)
    of_label = dict(
        zip((c for _, c in labels), owners_of_slices([t for t, _ in labels], windows), strict=True)
    )
    result: dict[str, dict[int, list[str]]] = {}
    for path in paths:
        by_line = data.contexts_by_lineno(str(ROOT / path))
        owned: dict[int, list[str]] = {}
        for line, contexts in sorted(by_line.items()):
            union: set[str] = set()
            for context in contexts:
                union.update(of_label.get(context, [ALL]))  # "": before the first slice (startup)
            owned[line] = [ALL] if ALL in union else sorted(union)
        result[path] = owned
    return result


def measure(paths: Sequence[str], server_args: Sequence[str], *, timeout_s: float = 900.0) -> Measured:
    """The lines of each of ``paths`` that the server runs during the whole suite, and the cases that make
    it run each one.

    Args:
        paths: files relative to the checkout.
        server_args: the server's arguments besides host and port (the tone backend's).
        timeout_s: the run's limit, seconds.

    Raises:
        CoverageRunFailed: a case failed, or the run did not finish.
    """
    import json

    import coverage

    with tempfile.TemporaryDirectory(prefix="mutation-coverage-") as scratch:
        data, windows = Path(scratch) / "coverage.data", Path(scratch) / "windows.json"
        wrapper = [sys.executable, "-m", "conformance.mutation.covered", str(data), *paths, "--"]
        command = shlex.join([*wrapper, "--host", "127.0.0.1", *server_args]) + " --port {port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        args = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider"]
        args += ["-p", "conformance.mutation.windows", "--case-windows", str(windows)]
        try:
            done = subprocess.run(
                [*args, "--container-cmd", command],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CoverageRunFailed(f"the coverage run took over {timeout_s:g} s") from None
        if done.returncode != 0 or not data.exists() or not windows.exists():
            raise CoverageRunFailed(
                f"the unmutated server failed the suite under coverage (exit {done.returncode}):\n"
                + done.stdout[-1500:]
            )
        found = coverage.CoverageData(basename=str(data))
        found.read()
        lines = {p: sorted(found.lines(str(ROOT / p)) or ()) for p in paths}
        return Measured(lines, _owners(found, paths, json.loads(windows.read_text(encoding="utf-8"))))


def changed_lines(diff: str, def_line: int) -> list[int]:
    """The lines of the checkout's file that a mutant's diff removes or rewrites.

    Args:
        diff: the mutant's unified diff of its function (:func:`conformance.mutation.tree.diffs`: line 1 is
            the ``def`` line).
        def_line: the line of that ``def`` in the checkout's file.
    """
    lines, old = [], 0
    for text in diff.splitlines():
        if text.startswith("@@"):
            old = int(text.split()[1].lstrip("-").split(",")[0])
        elif text.startswith(("---", "+++")):
            continue
        elif text.startswith("-"):
            lines.append(def_line + old - 1)
            old += 1
        elif text.startswith(" "):
            old += 1
    return lines


def _statement_lines(source: str, lines: Sequence[int]) -> tuple[list[int], ast.AST | None]:
    """The first line of the innermost statement holding each of ``lines`` (what coverage.py reports for a
    statement over several lines), and the function holding them when one is its ``def`` (a default)."""
    tree = ast.parse(source)
    found, signature = [], None
    for line in lines:
        inner: ast.AST | None = None
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
                if inner is None or node.lineno >= inner.lineno:  # type: ignore[attr-defined]
                    inner = node
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
            signature = inner
        elif inner is not None:
            found.append(inner.lineno)  # type: ignore[attr-defined]
    return found, signature


def cases_for(
    owners: Mapping[int, Sequence[str]], source: str, diff: str, def_line: int
) -> tuple[str, ...] | None:
    """The cases that make the server run a mutant's change: those that run its lines, or, for a change of
    the ``def`` (a default), any line of its function. ``None``: every case (a line run at startup, or a
    change no line of the map holds).

    Args:
        owners: line → case ids (or ``[ALL]``) of the mutated file (:attr:`Measured.owners`).
        source: the checkout's file.
        diff: the mutant's diff (``Mutant.diff``).
        def_line: the line of its function's ``def`` (``Mutant.line``).
    """
    statements, signature = _statement_lines(source, changed_lines(diff, def_line))
    if signature is not None:
        body = signature.body
        statements += [
            line for line in owners if body[0].lineno <= line <= (signature.end_lineno or body[0].lineno)
        ]
    chosen: set[str] = set()
    for line in statements:
        ids = owners.get(line, ())
        if ALL in ids:
            return None
        chosen.update(ids)
    return tuple(sorted(chosen)) or None


if __name__ == "__main__":
    # python -m conformance.mutation.covered DATA PATH... -- SERVER_ARGS
    split = sys.argv.index("--")
    data_file, *files = sys.argv[1:split]
    sys.exit(serve(Path(data_file), files, sys.argv[split + 1 :]))

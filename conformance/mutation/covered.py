"""Which lines of the server the suite runs: only those are worth mutating.

A mutant on a line that no case makes the server run can never be killed: it is either code of the other
role (``protocol/`` holds the client's side too: ``ClientSession``, the frame reader, request encoders),
or a path of the server that no case reaches. Both are counted and listed in the report
("not run by the suite"), not mutated and not scored.

The lines come from one run of the whole suite against the unmutated, tone-backed server of the checkout,
the server measured by coverage.py (``python -m conformance.mutation.covered DATA -- ARGS`` wraps
``python -m reference_server ARGS``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from conformance.mutation import ROOT

__all__ = ["CoverageRunFailed", "measure", "serve"]


class CoverageRunFailed(RuntimeError):
    """The suite did not pass against the unmutated server while coverage measured it."""


def serve(data_file: Path, paths: Sequence[str], args: Sequence[str]) -> int:
    """Run ``python -m reference_server ARGS`` under coverage.py and save what it ran to ``data_file``.

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
    try:
        return main(list(args))
    finally:
        measured.stop()
        measured.save()


def measure(
    paths: Sequence[str], server_args: Sequence[str], *, timeout_s: float = 900.0
) -> dict[str, list[int]]:
    """The lines of each of ``paths`` that the server runs during the whole suite.

    Args:
        paths: files relative to the checkout.
        server_args: the server's arguments besides host and port (the tone backend's).
        timeout_s: the run's limit, seconds.

    Returns:
        path → sorted line numbers run.

    Raises:
        CoverageRunFailed: a case failed, or the run did not finish.
    """
    import coverage

    with tempfile.TemporaryDirectory(prefix="mutation-coverage-") as scratch:
        data = Path(scratch) / "coverage.data"
        wrapper = [sys.executable, "-m", "conformance.mutation.covered", str(data), *paths, "--"]
        command = shlex.join([*wrapper, "--host", "127.0.0.1", *server_args]) + " --port {port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        args = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider"]
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
        if done.returncode != 0 or not data.exists():
            raise CoverageRunFailed(
                f"the unmutated server failed the suite under coverage (exit {done.returncode}):\n"
                + done.stdout[-1500:]
            )
        found = coverage.CoverageData(basename=str(data))
        found.read()
        return {p: sorted(found.lines(str(ROOT / p)) or ()) for p in paths}


if __name__ == "__main__":
    # python -m conformance.mutation.covered DATA PATH... -- SERVER_ARGS
    split = sys.argv.index("--")
    data_file, *files = sys.argv[1:split]
    sys.exit(serve(Path(data_file), files, sys.argv[split + 1 :]))

"""``kokoro-conformance [OPTIONS]`` (or ``python -m conformance``): run the suite from any directory.

Runs pytest on the installed ``conformance`` package with its plugin (``conformance/conftest.py``), so the
suite works the same from a source checkout and from ``pip install 'kokoro-bidi-tts[conformance]'``. Every
option is pytest's or the suite's (``--container-cmd``, ``--container-url``, ``--target``, ``--cases``,
``--report``, ``--strict``; ``kokoro-conformance --help`` lists the suite's, ``--pytest-help`` all of them).
Paths such as ``--report DIR`` are relative to the current directory.

Examples::

    kokoro-conformance --container-cmd "docker run --rm -p 127.0.0.1:{port}:8080 my-tts" --report report
    kokoro-conformance --container-url http://127.0.0.1:8080 --cases "9.1.*"
    kokoro-conformance --target live --endpoint-name my-endpoint --region us-east-1
    kokoro-conformance --container-url http://127.0.0.1:8080 --expect known-failures.toml
    kokoro-conformance replay report/cases/4.2.1.json --container-url http://127.0.0.1:8080
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["main", "pytest_args"]


def pytest_args(argv: list[str]) -> list[str]:
    """The pytest command line that runs the installed suite with ``argv`` appended.

    The cache plugin is off: the package directory may be read-only (site-packages), and the suite keeps no
    state between runs.
    """
    package = Path(__file__).resolve().parent
    return [str(package), "-p", "no:cacheprovider", "--rootdir", str(package), *argv]


SECTION = "conformance suite (spec/PROTOCOL.md):"
"""The heading of the suite's own options in pytest's help (``conformance/conftest.py``)."""

USAGE = """usage: kokoro-conformance [options]

Certify a TTS container against spec/PROTOCOL.md: by default the reference server, through the SageMaker
simulator and the official AWS clients. Exit status 1 when a case is FAILED, or a clause: a finding that
breaks a MUST, wherever the suite saw it (--expect FILE: unless the file lists it as a known failure).

  kokoro-conformance --container-cmd "docker run --rm -p 127.0.0.1:{port}:8080 my-tts" --report report
  kokoro-conformance --container-url http://127.0.0.1:8080 --cases "9.1.*"
  kokoro-conformance --container-url http://127.0.0.1:8080 --expect known-failures.toml
  kokoro-conformance --target live --endpoint-name my-endpoint --region us-east-1
  kokoro-conformance replay report/cases/4.2.1.json --container-url http://127.0.0.1:8080
                     (send one recorded case again; kokoro-conformance replay --help)
"""


def help_text() -> str:
    """``kokoro-conformance --help``: :data:`USAGE`, then the suite's own options as pytest's help lists
    them, then where pytest's own options are (``--pytest-help``)."""
    import contextlib
    import io

    import pytest

    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        pytest.main(pytest_args(["--help"]))
    blocks = captured.getvalue().split("\n\n")
    ours = next((block for block in blocks if block.lstrip().startswith(SECTION)), None)
    if ours is None:  # a pytest that lays its help out otherwise: all of it
        return f"{USAGE}\n{captured.getvalue()}"
    return (
        f"{USAGE}\n{ours.strip()}\n\nEvery pytest option works too (-q, -x, --junitxml ...); "
        "kokoro-conformance --pytest-help lists them.\n"
    )


def _expectations_problem(args: list[str]) -> str | None:
    """What is wrong with the ``--expect`` file in ``args`` (one line), or ``None``: checked before pytest
    starts, so that a missing file or an unknown case id is one line and exit status 2."""
    from conformance.engine.expectations import ExpectationsError, load

    for i, arg in enumerate(args):
        if arg == "--expect" or arg.startswith("--expect="):
            path = arg.partition("=")[2] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            if not path:
                return "--expect needs a file"
            try:
                load(path)
            except ExpectationsError as exc:
                return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run pytest on the suite; returns pytest's exit status (1 when a case or a clause is FAILED: the plugin
    gives a clause that fails the run a failed test report of its own, which pytest counts).

    ``-h``/``--help`` prints :func:`help_text`; ``--pytest-help`` prints pytest's whole help.
    """
    import pytest

    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["replay"]:
        from conformance.engine.replay import main as replay

        return replay(args[1:])
    problem = _expectations_problem(args)
    if problem is not None:
        print(f"kokoro-conformance: {problem}", file=sys.stderr)
        return 2
    if "-h" in args or "--help" in args:
        print(help_text(), end="")
        return 0
    if "--pytest-help" in args:
        args = ["--help" if arg == "--pytest-help" else arg for arg in args]
    return int(pytest.main(pytest_args(args)))


if __name__ == "__main__":
    sys.exit(main())

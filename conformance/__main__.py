"""``kokoro-conformance [OPTIONS]`` (or ``python -m conformance``): run the suite from any directory.

Runs pytest on the installed ``conformance`` package with its plugin (``conformance/conftest.py``), so the
suite works the same from a source checkout and from ``pip install 'kokoro-bidi-tts[conformance]'``. Every
option is pytest's or the suite's (``--container-cmd``, ``--container-url``, ``--target``, ``--cases``,
``--report``, ``--strict``; ``kokoro-conformance --help`` lists them under "conformance"). Paths such as
``--report DIR`` are relative to the current directory.

Examples::

    kokoro-conformance --container-cmd "docker run --rm -p 127.0.0.1:{port}:8080 my-tts" --report report
    kokoro-conformance --container-url http://127.0.0.1:8080 --cases "9.1.*"
    kokoro-conformance --target live --endpoint-name my-endpoint --region us-east-1
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


def main(argv: list[str] | None = None) -> int:
    """Run pytest on the suite; returns pytest's exit status (1 when a case is FAILED)."""
    import pytest

    return int(pytest.main(pytest_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())

"""Console-script entry points: ``speech-infra`` and ``agent-infra`` (declared in pyproject.toml).

Each tool lives in its own module (infra.speech_cli, infra.agent_cli); the imports are deferred so
that one tool's start-up never pays for the other's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from protocol.logs import ENV_LOG_LEVEL, configure_logging


def _logging() -> None:
    # The tools print what they do; library records (the demo's local stack, botocore's warnings) use the
    # project's one format, at warning unless KOKORO_LOG_LEVEL says otherwise.
    try:
        configure_logging(os.environ.get(ENV_LOG_LEVEL) or "warning")
    except ValueError as exc:  # a malformed KOKORO_LOG_* variable: say so, log at warning anyway
        print(f"warning: {exc}", file=sys.stderr)
        configure_logging("warning", "text")


def speech_main(argv: Sequence[str] | None = None) -> int:
    """Run ``speech-infra`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from infra.speech_cli import main

    _logging()
    return main(argv)


def agent_main(argv: Sequence[str] | None = None) -> int:
    """Run ``agent-infra`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from infra.agent_cli import main

    _logging()
    return main(argv)

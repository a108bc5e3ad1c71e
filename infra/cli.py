"""Console-script entry points: ``speech-infra`` and ``agent-infra`` (declared in pyproject.toml).

Each tool lives in its own module (infra.speech_cli, infra.agent_cli); the imports are deferred so
that one tool's start-up never pays for the other's.
"""

from __future__ import annotations

from collections.abc import Sequence


def speech_main(argv: Sequence[str] | None = None) -> int:
    """Run ``speech-infra`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from infra.speech_cli import main

    return main(argv)


def agent_main(argv: Sequence[str] | None = None) -> int:
    """Run ``agent-infra`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from infra.agent_cli import main

    return main(argv)

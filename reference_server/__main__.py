"""``python -m reference_server``: run the Kokoro reference server (the containers' entry point too).

    python -m reference_server [--host H] [--port P] [--backend onnx|torch] [--max-sessions N] ...

Binds 127.0.0.1:8080 by default; every flag can also come from a ``KOKORO_<NAME>`` environment
variable (see ``--help`` and :mod:`reference_server.settings`).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from protocol.logs import configure_logging
from reference_server.assets import AssetError
from reference_server.settings import SettingsError, load_settings

EXIT_ASSETS = 3
"""Exit status when the model files are missing or do not match their pinned sha256."""


class _Terminated(Exception):
    """SIGTERM arrived: the process stops by returning from :func:`main`, not by the signal."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextmanager
def _sigterm_returns() -> Iterator[None]:
    """SIGTERM raises :class:`_Terminated` in the main thread while the block runs (previous handler after).

    uvicorn catches SIGTERM while it serves, shuts down (sessions closed with 1001, §7.3) and then raises
    the signal again against the handler that was there before it; without this one that is the
    default action, which ends the process by the signal (status 143) before ``atexit`` runs, so the
    temporary copies of the espeak-ng library that phonemizer makes per G2P backend (removed at exit)
    stayed on disk, 14 folders per start. With it the process exits through :func:`main`'s return.
    """
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (main() called from a test's thread): nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, build the server with :func:`~reference_server.app.create_server` and serve.

    Returns the process exit status: 0 after a clean shutdown, SIGTERM's included; 1 if the server could
    not start (the port is taken) or its model failed to load; 2 for bad settings; 3 when the model files
    are missing or are not the pinned ones (the line logged says which file and the command that fixes
    it); 130 after Ctrl-C (the server shuts down as for SIGTERM first, §7.3). SageMaker treats a
    container that exits as one that cannot serve (PROTOCOL.md §2.2). Either signal ends the process
    through this return, so ``atexit`` runs and the temporary files of the G2P libraries are removed
    (a SIGKILL still leaves them: nothing runs after it).
    """
    with _sigterm_returns():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    server: Any = None
    try:
        try:
            settings = load_settings(argv)
        except SettingsError as exc:
            print(f"reference_server: {exc}", file=sys.stderr)
            return 2
        configure_logging(settings.log_level, settings.log_format)
        from reference_server.app import create_server  # the web and model stacks: seconds to import

        try:
            server = create_server(settings)
        except AssetError as exc:
            logging.getLogger("reference_server").error("cannot serve: %s", exc)
            return EXIT_ASSETS
        try:
            server.run()
        except SystemExit as exc:
            # uvicorn exits with its STARTUP_FAILURE (3) when it cannot listen, after logging why; here 3
            # means missing model files, so a port that is taken is 1, with the fix.
            logging.getLogger("reference_server").error(
                "could not listen on %s:%s (exit %s, see above); choose another --port (0: any free port)",
                settings.host,
                settings.port,
                exc.code,
            )
            return 1
    except KeyboardInterrupt:
        # uvicorn has shut down (sessions closed with 1001) and re-raised the Ctrl-C it caught; or it
        # came while the stacks loaded. Either way there is nothing to report.
        return 130
    except _Terminated:
        # The same for SIGTERM (the way a container runtime stops a container): a clean shutdown, unless
        # the model had failed to load before it came.
        return 1 if getattr(server, "load_failed", False) else 0
    if getattr(server, "load_failed", False) or not server.started:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

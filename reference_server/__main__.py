"""``python -m reference_server``: run the Kokoro reference server (the containers' entry point too).

    python -m reference_server [--host H] [--port P] [--backend onnx|torch] [--max-sessions N] ...

Binds 127.0.0.1:8080 by default; every flag can also come from a ``KOKORO_<NAME>`` environment
variable (see ``--help`` and :mod:`reference_server.settings`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from protocol.logs import configure_logging
from reference_server.assets import AssetError
from reference_server.settings import SettingsError, load_settings

EXIT_ASSETS = 3
"""Exit status when the model files are missing or do not match their pinned sha256."""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, build the server with :func:`~reference_server.app.create_server` and serve.

    Returns the process exit status: 0 after a clean shutdown; 1 if the server could not start (the port
    is taken) or its model failed to load; 2 for bad settings; 3 when the model files are missing or are
    not the pinned ones (the line logged says which file and the command that fixes it); 130 after
    Ctrl-C (the server shuts down as for SIGTERM first, §7.3). SageMaker treats a container that exits as
    one that cannot serve (PROTOCOL.md §2.2).
    """
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
    if getattr(server, "load_failed", False) or not server.started:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

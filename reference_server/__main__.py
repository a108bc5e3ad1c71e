"""``python -m reference_server``: run the Kokoro reference server (the containers' entry point too).

    python -m reference_server [--host H] [--port P] [--backend onnx|torch] [--max-sessions N] ...

Binds 127.0.0.1:8080 by default; every flag can also come from a ``KOKORO_<NAME>`` environment
variable (see ``--help`` and :mod:`reference_server.settings`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from protocol.logs import configure_logging
from reference_server.app import create_server
from reference_server.settings import SettingsError, load_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, build the server with :func:`~reference_server.app.create_server` and serve.

    Returns the process exit status: 0 after a clean shutdown, 2 for bad settings, 1 if the server
    could not start (for example, the port is taken).
    """
    try:
        settings = load_settings(argv)
    except SettingsError as exc:
        print(f"reference_server: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    server = create_server(settings)
    server.run()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())

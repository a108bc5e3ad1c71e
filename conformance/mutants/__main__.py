"""``python -m conformance.mutants NAME --port P``: serve one mutant (or ``base``) on 127.0.0.1, in the
shipped server's uvicorn (:meth:`conformance.mutants.base.ToneServer.shipped_server`)."""

from __future__ import annotations

import argparse
import sys

from conformance.mutants import MUTANTS
from protocol.logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve until SIGINT/SIGTERM; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m conformance.mutants", description=__doc__)
    parser.add_argument("name", choices=sorted(MUTANTS), help="the mutant (base: the unbroken control)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1", help="keep the loopback address (PROTOCOL.md §13)")
    args = parser.parse_args(argv)
    configure_logging("warning")
    server = MUTANTS[args.name].server().shipped_server(args.host, args.port)
    server.run()  # the shipped server's uvicorn (reference_server.app.create_server)
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())

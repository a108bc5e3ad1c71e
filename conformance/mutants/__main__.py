"""``python -m conformance.mutants NAME --port P``: serve one mutant (or ``base``) on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from conformance.mutants import MUTANTS


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve until SIGINT/SIGTERM; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m conformance.mutants", description=__doc__)
    parser.add_argument("name", choices=sorted(MUTANTS), help="the mutant (base: the unbroken control)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1", help="keep the loopback address (PROTOCOL.md §13)")
    args = parser.parse_args(argv)
    server = MUTANTS[args.name].server()
    uvicorn.run(
        server.app(), host=args.host, port=args.port, log_level="warning", ws_per_message_deflate=False
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

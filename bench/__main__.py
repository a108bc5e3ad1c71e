"""``python -m bench``: run the benchmarks and write bench/RESULTS.md (what ``make bench`` does).

    python -m bench                         run every CPU benchmark, then the report
    python -m bench run [NAME ...] [--smoke] [--results DIR]
    python -m bench report [--results DIR] [--output FILE]
    python -m bench NAME [--smoke]          run one benchmark by name, then the report (e.g. intelligibility)

``run`` saves ``<results>/<name>.json`` and ``.png`` per benchmark as each finishes; ``report`` reads
every JSON file there (the GPU one too, when ``bench/gpu.sh`` has produced it) and writes RESULTS.md.
Exit status: 0, or 1 when a benchmark crashed (its traceback is printed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.record import RESULTS_DIR
from bench.runner import BENCHMARKS, ON_REQUEST, run_benchmarks

RESULTS_MD = Path(__file__).with_name("RESULTS.md")


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run benchmarks and save their results")
    run.add_argument(
        "names", nargs="*", metavar="NAME", help="benchmarks to run (default all): " + ", ".join(BENCHMARKS)
    )
    run.add_argument("--smoke", action="store_true", help="tiny configurations (what CI runs)")
    run.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder")
    report = commands.add_parser("report", help="write RESULTS.md from the saved results")
    report.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder")
    report.add_argument("--output", type=Path, default=RESULTS_MD, help="the Markdown file to write")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from bench.report import write_report

    argv = list(sys.argv[1:] if argv is None else argv)
    by_name = bool(argv) and argv[0] in (*BENCHMARKS, *ON_REQUEST)
    if by_name:  # `python -m bench NAME`: `run NAME`, then the report
        argv = ["run", *argv]
    args = build_parser().parse_args(argv)
    if args.command == "report":
        path = write_report(args.results, args.output)
        print(f"wrote {path}")
        return 0
    names = tuple(getattr(args, "names", None) or BENCHMARKS)
    unknown = [name for name in names if name not in (*BENCHMARKS, *ON_REQUEST)]
    if unknown:
        known = ", ".join((*BENCHMARKS, *ON_REQUEST))
        print(f"python -m bench: unknown benchmark {', '.join(unknown)}; choose from {known}")
        return 2
    results = getattr(args, "results", RESULTS_DIR)
    started = time.perf_counter()
    run_benchmarks(names, smoke=getattr(args, "smoke", False), results_dir=results)
    print(f"benchmarks finished in {time.perf_counter() - started:.0f} s", flush=True)
    if args.command is None or (by_name and Path(results).resolve() == RESULTS_DIR.resolve()):
        print(f"wrote {write_report(results, RESULTS_MD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

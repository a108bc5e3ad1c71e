"""``python -m conformance.mutation``: mutation testing of the shipped server (``make mutation``).

    python -m conformance.mutation                          # every mutant of the default modules
    python -m conformance.mutation --sample 20 --seed 7     # 20 of them, drawn at random
    python -m conformance.mutation --module protocol/frames.py --list
    python -m conformance.mutation --sample 40 --seed 7 --record   # and record their kill sets

Each mutant runs against the cases that make the server run its line (measured once, per case, by
coverage: :mod:`conformance.mutation.covered`), every one of them, so the report names every case that kills
it; ``--record`` merges those kill sets into ``conformance/mutation/kills.json``
(:mod:`conformance.engine.kills`), keeping any lost kill that ``conformance/kills-changes.toml`` gives no
reason for. ``--whole-suite`` runs the whole suite per mutant, stopping at the first FAILED case
(the way before).

Exit status: 0 when every mutant run was killed or is triaged equivalent; 1 when a survivor is not
triaged, a triaged kill was lost, a recorded kill was lost without a reason (``--record``), or a run ended
in an error; 2 on bad input (an unknown module, a sample of 0, mutmut not installed, an invalid
``survivors.toml``, ``kills.json`` or ``kills-changes.toml``, ``--record`` with ``--whole-suite``, a control
that fails).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from conformance.engine import kills
from conformance.mutation import DEFAULT_MODULES, ROOT, SURVIVORS
from conformance.mutation.covered import CoverageRunFailed, Measured, cases_for, measure
from conformance.mutation.report import TriageError, load_triage, summarize, toml_entry, triage_key, write
from conformance.mutation.runner import SERVER_ARGS, Outcome, certify_all
from conformance.mutation.tree import Mutant, MutationToolMissing, load_or_build, stamp


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.mutation",
        description="Mutate the reference server's code (mutmut) and certify each mutant with the "
        "conformance suite, on the tone synthesizer.",
    )
    parser.add_argument(
        "--module",
        action="append",
        metavar="PATH",
        help="a file to mutate, relative to the checkout; repeatable (default: "
        + ", ".join(DEFAULT_MODULES)
        + ")",
    )
    parser.add_argument(
        "--mutant", action="append", metavar="NAME", help="run this mutant (a name --list prints); repeatable"
    )
    parser.add_argument("--sample", type=_positive, metavar="N", help="run N mutants drawn at random")
    parser.add_argument("--seed", type=int, help="the sample's seed (default: chosen and printed)")
    parser.add_argument("--jobs", type=_positive, default=2, help="runs at once (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run (default 600)")
    parser.add_argument(
        "--report", type=Path, default=Path("mutation-report"), help="report folder (default mutation-report)"
    )
    parser.add_argument("--triage", type=Path, default=SURVIVORS, help="the survivors' triage file")
    parser.add_argument(
        "--no-control",
        action="store_true",
        help="skip the two control runs (the unmutated tree passes; MUTANT_UNDER_TEST=fail is killed)",
    )
    parser.add_argument(
        "--every-line",
        action="store_true",
        help="mutate every line, not only those the suite makes the server run (measured once by coverage)",
    )
    parser.add_argument(
        "--whole-suite",
        action="store_true",
        help="run the whole suite per mutant and stop at its first FAILED case (-x), as before kill sets",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="merge the kill sets of the mutants run into the kill record (--kills); a lost kill stays "
        "unless --changes gives it a reason",
    )
    parser.add_argument("--kills", type=Path, default=ROOT / kills.RECORD, help="the kill record (JSON)")
    parser.add_argument(
        "--changes", type=Path, default=ROOT / kills.CHANGES, help="the reasons kill sets may shrink (TOML)"
    )
    parser.add_argument("--list", action="store_true", help="print the mutants that would run, and exit")
    return parser


def _progress(done: list[int], total: int) -> object:
    def show(outcome: Outcome) -> None:
        done[0] += 1
        name = "control (unmutated)" if outcome.name is None else outcome.name
        shown = ", ".join(outcome.killed_by[:6]) + (" ..." if len(outcome.killed_by) > 6 else "")
        killer = f" by {len(outcome.killed_by)}: {shown}" if outcome.killed_by else ""
        killer += "" if outcome.cases is None else f" (of {len(outcome.cases)} case(s) run)"
        print(f"[{done[0]}/{total}] {outcome.status}{killer}: {name} ({outcome.seconds:.0f} s)", flush=True)

    return show


def _covered(modules: tuple[str, ...], report: Path) -> Measured:
    """The lines of ``modules`` the suite runs and the cases that run each (:mod:`conformance.mutation.
    covered`), measured once per change of the server, the suite or the simulator (``report/coverage.json``
    keeps them)."""
    record = report / "coverage.json"
    key = {
        "files": stamp(
            [
                "protocol",
                "speech",
                "reference_server",
                "conformance",
                "simulator",
                "sagemaker_transport",
                "spec",
            ],
            # Not the suite: the records and what is generated from them (--record writes one).
            exclude=(
                "conformance/mutation/kills.json",
                "conformance/mutation/survivors.toml",
                "conformance/kills-changes.toml",
                "conformance/mutants/isolation.json",
                "conformance/matrix.json",
                "conformance/MATRIX.md",
            ),
        ),
        "paths": list(modules),
        "per_case": 1,
    }
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        saved = json.loads(record.read_text(encoding="utf-8"))
        if saved["key"] == key:
            groups = saved["groups"]
            owners = {p: {int(n): groups[g] for n, g in ls.items()} for p, ls in saved["owners"].items()}
            return Measured(saved["lines"], owners)
    print("measuring the lines each case makes the server run (one whole run under coverage) ...", flush=True)
    measured = measure(modules, SERVER_ARGS)
    # Many lines share their owners: each distinct list once, the lines by its index.
    index: dict[tuple[str, ...], int] = {}
    owners = {
        p: {str(n): index.setdefault(tuple(ids), len(index)) for n, ids in lines.items()}
        for p, lines in measured.owners.items()
    }
    report.mkdir(parents=True, exist_ok=True)
    payload = {"key": key, "lines": measured.lines, "groups": [list(g) for g in index], "owners": owners}
    record.write_text(json.dumps(payload), encoding="utf-8")
    return measured


def _selections(mutants: list[Mutant], measured: Measured | None) -> dict[str | None, tuple[str, ...] | None]:
    """Mutant name → the cases that make the server run its change (``None``: the whole suite)."""
    if measured is None:
        return {}
    sources: dict[str, str] = {}
    found: dict[str | None, tuple[str, ...] | None] = {}
    for m in mutants:
        source = sources.setdefault(m.path, (ROOT / m.path).read_text(encoding="utf-8"))
        found[m.name] = cases_for(measured.owners.get(m.path, {}), source, m.diff, m.line)
    return found


def _record(args: argparse.Namespace, chosen: list[Mutant], outcomes: list[Outcome]) -> int:
    """``--record``: merge the kill sets of ``outcomes`` into ``args.kills``; the number of kills lost
    without a reason (kept in the record, printed)."""
    new = {}
    for mutant, outcome in zip(chosen, outcomes, strict=True):
        if outcome.status == "error":
            continue
        cases = [c for c in outcome.killed_by if c not in outcome.clauses]
        new[triage_key(mutant)] = {"status": outcome.status, "cases": cases, "clauses": list(outcome.clauses)}
    merged, lost = kills.merge(kills.load_record(args.kills), new, kills.load_changes(args.changes))
    about = (
        "Kill sets of automatic mutants (python -m conformance.mutation --record): per mutant, every case "
        "(and run-level clause row) that FAILED against it, from the cases that run its line."
    )
    kills.write_record(args.kills, merged, about)
    unexplained = [s for s in lost if not s.reason]
    for shrink in lost:
        why = shrink.reason or f"no reason in {args.changes}: kept in the record"
        print(f"LOST KILL: {shrink.mutant} by {shrink.case} ({why})")
    print(f"recorded {len(new)} mutant(s) in {args.kills} ({len(merged)} in all)")
    return len(unexplained)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    modules = tuple(args.module or DEFAULT_MODULES)
    for module in modules:
        if not module.endswith(".py") or not (ROOT / module).is_file():
            parser.error(f"--module {module}: not a Python file of {ROOT}")
    if args.record and args.whole_suite:
        parser.error("--record needs every case that kills a mutant: --whole-suite stops at the first")
    try:
        triage = load_triage(args.triage)
        if args.record:
            kills.load_record(args.kills)
            kills.load_changes(args.changes)
        measured = None if args.every_line else _covered(modules, args.report)
        covered = None if measured is None else measured.lines
        tree = load_or_build(modules, args.report / "tree", covered=covered)
    except (TriageError, kills.KillsError, MutationToolMissing, CoverageRunFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    mutants = tree.mutants
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    if args.mutant:
        known = {m.name: m for m in mutants}
        unknown = [name for name in args.mutant if name not in known]
        if unknown:
            print(
                f"error: --mutant {unknown[0]}: not a mutant of {', '.join(modules)} (see --list)",
                file=sys.stderr,
            )
            return 2
        mutants = [known[name] for name in args.mutant]
    chosen = (
        mutants
        if args.sample is None
        else random.Random(seed).sample(mutants, min(args.sample, len(mutants)))
    )
    selections = {} if args.whole_suite else _selections(chosen, measured)
    if args.list:
        for mutant in chosen:
            picked = selections.get(mutant.name)
            cases = "every case" if picked is None else f"{len(picked)} case(s)"
            print(f"{mutant.name}  {mutant.path}:{mutant.line} {mutant.function}  ({cases})")
        return 0
    if args.sample is not None:
        print(
            f"{len(chosen)} of {len(mutants)} mutants, seed {seed} "
            f"(again: --sample {args.sample} --seed {seed})"
        )
    controls: list[str | None] = [] if args.no_control else [None, "fail"]
    names = [*controls, *(m.name for m in chosen)]
    started = time.monotonic()
    outcomes = certify_all(
        args.report / "tree",
        names,
        cases=selections,
        # Without the per-case map (--every-line) the whole suite runs: all of it only to --record kill sets.
        fail_fast=["fail", *(names if args.whole_suite or (measured is None and not args.record) else [])],
        jobs=args.jobs,
        timeout_s=args.timeout,
        progress=_progress([0], len(names)),
    )
    if controls:
        plain, failing = outcomes[0], outcomes[1]
        if plain.status != "survived":
            print(
                f"error: the unmutated server fails the suite ({plain.status}): {plain.detail[-500:]}",
                file=sys.stderr,
            )
            return 2
        if not failing.killed:
            print(
                "error: MUTANT_UNDER_TEST=fail was not killed: the mutants do not reach the server",
                file=sys.stderr,
            )
            return 2
    report = {
        "tool": f"mutmut {version('mutmut')}",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "generated": len(mutants),
        "run": len(chosen),
        "sample": args.sample,
        "seed": seed if args.sample is not None else None,
        "seconds": round(time.monotonic() - started),
        **summarize(mutants, outcomes[len(controls) :], triage, tree.not_run),
    }
    page = write(args.report, report)
    print(
        f"{'module':<32} {'not run':>7} {'run':>5} {'killed':>6} {'surv.':>5} {'equiv.':>6} {'unobs.':>6} "
        f"{'untri.':>6} {'score':>6}"
    )
    for path, row in sorted(report["modules"].items()):
        score = "-" if row["score"] is None else f"{row['score']:.0%}"
        print(
            f"{path:<32} {row['not_run']:>7} {row['run']:>5} {row['killed']:>6} {row['survived']:>5} "
            f"{row['equivalent']:>6} {row['unobservable']:>6} {row['untriaged']:>6} {score:>6}"
        )
    bad = 0
    by_name = {m.name: m for m in mutants}
    for name, entry in sorted(report["mutants"].items()):
        untriaged = entry["status"] == "survived" and entry["triage"] is None
        lost = entry["status"] == "survived" and (entry["triage"] or {}).get("status") == "killed"
        if untriaged or lost or entry["status"] == "error":
            bad += 1
            what = "LOST CATCH" if lost else "SURVIVED" if untriaged else "ERROR"
            print(f"\n{what}: {name} ({entry['path']}:{entry['line']} {entry['function']})\n{entry['diff']}")
            if untriaged:
                print(f"triage it in {args.triage}:\n{toml_entry(by_name[name])}")
    print(f"\nreport: {page}")
    if args.record:
        bad += _record(args, chosen, outcomes[len(controls) :])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

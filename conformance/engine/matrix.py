"""The traceability matrix: every normative sentence of spec/PROTOCOL.md, the cases that test it, the mutant
that breaks it, or why no case can observe it.

Run ``python -m conformance.matrix`` from the repository root after changing the spec, a case's
``requirements``, the mutant table or :mod:`conformance.engine.unobservable`. It

1. gives every untagged MUST/SHOULD/MAY sentence of the spec the next free id of its section
   (:func:`conformance.engine.requirements.tag`; ids are never renumbered or reused) and rewrites the spec;
2. regenerates ``conformance/matrix.json`` (the data, read by reports) and ``conformance/MATRIX.md``
   (the same for people);
3. prints the counts: sentences, by level, covered by cases, with a mutant, unobservable with a reason.

``--check`` changes nothing and exits 1 when the spec has an untagged sentence or either file is stale
(``tests/conformance/test_matrix.py`` does the same); it also reports, on stderr, the observable MUST
conditions that have no case and no mutant proving it (the target is none). On a merge conflict in either
generated file, take either side and run the command again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.engine import kills
from conformance.engine.case import REPO_ROOT, Case
from conformance.engine.ids import CaseId, RequirementId
from conformance.engine.requirements import Requirement, parse, section_titles, tag

__all__ = ["COMMAND", "MATRIX_JSON", "MATRIX_MD", "SPEC", "Generated", "build", "generate", "main"]

COMMAND = "python -m conformance.matrix"
"""The command that tags the spec and regenerates the matrix (run from the repository root)."""

SPEC = "spec/PROTOCOL.md"
"""The spec, relative to the repository root."""

ISOLATION = "conformance/mutants/isolation.json"
MATRIX_JSON = "conformance/matrix.json"
MATRIX_MD = "conformance/MATRIX.md"

_LEVELS = ("MUST", "SHOULD", "MAY")


@dataclass(frozen=True)
class MutantInfo:
    """What the matrix needs of a mutant: its name, what it breaks, the cases that must catch it."""

    name: str
    breaks: str
    requirements: tuple[str, ...]
    caught_by: tuple[str, ...]
    row: str = ""
    """Fingerprint of the mutant's row (:func:`conformance.mutants.teeth.row_fingerprint`)."""
    observed_by: tuple[str, ...] = ()
    """For a mutant caught by the run only: the cases that see its defect without owning its clauses."""


def build(
    requirements: Sequence[Requirement],
    cases: Iterable[Case],
    mutants: Iterable[MutantInfo],
    unobservable: Mapping[str, str],
    *,
    retired: Mapping[str, str] | None = None,
    titles: Mapping[str, str] | None = None,
    isolation: Mapping[str, Mapping[str, Any]] | None = None,
    no_mutant: Mapping[str, str] | None = None,
    recorded: Mapping[str, Sequence[str]] | None = None,
    no_run_mutant: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The matrix as JSON-ready data (deterministic: equal inputs give equal output).

    Each requirement gets a ``status``: ``mutant`` (cases test it and a mutant that breaks it is caught by
    one of them), ``case`` (cases, no such mutant), ``unobservable`` (a reason instead of cases) or
    ``open`` (nothing yet). ``problems`` lists references to unknown ids and mutants not caught by a case
    of the requirement they break; ``gaps`` lists the observable MUST sentences without a case or mutant.

    ``isolation`` (``conformance/mutants/isolation.json``) gives, per mutant, the cases the whole suite
    reported FAILED; a mutant is *isolated* when they are all cases of the requirements it breaks.
    ``no_mutant`` gives, per requirement, why no one-defect mutant can break it (not a gap then).

    ``recorded`` (:func:`conformance.engine.clauses.recorded`) gives the clauses a finding can be recorded on
    in any case, whichever owns them; ``observed_outside`` lists each with its cases and the mutants caught by
    the run only (``observed_by``: they break it on a path its own cases do not take, issue 30), which must
    break requirements that cases test, on cases that do not test them; ``no_run_mutant`` says, per clause,
    why it has none (a clause with neither is a problem).
    """
    no_mutant = no_mutant or {}
    ids = {r.id for r in requirements}
    split = {r.id: r.conditions for r in requirements if r.conditions}
    cases = list(cases)
    mutants = list(mutants)
    by_requirement: dict[RequirementId, list[CaseId]] = {r.id: [] for r in requirements}
    problems: list[str] = []
    for case in cases:
        for rid in case.requirements:
            if rid in split:
                problems.append(
                    f"case {case.id} declares {rid}, which is split: cite {', '.join(split[rid])}"
                )
            elif rid in by_requirement:
                by_requirement[rid].append(case.id)
            else:
                problems.append(f"case {case.id} declares {rid}, which the spec does not have")
    breakers: dict[RequirementId, list[str]] = {r.id: [] for r in requirements}
    run_level: dict[str, list[str]] = {}
    for mutant in mutants:
        for rid in mutant.requirements:
            if rid not in ids:
                problems.append(f"mutant {mutant.name} breaks {rid}, which the spec does not have")
                continue
            if rid in split and not mutant.observed_by:
                problems.append(
                    f"mutant {mutant.name} breaks {rid}, which is split: name {', '.join(split[rid])}"
                )
                continue
            if not mutant.caught_by:  # caught by the run, on the clause, in cases that do not own it
                # Findings are recorded on sentences: a case citing any condition of the sentence owns it.
                owners = [c for cid in (rid, *split.get(rid, ())) for c in by_requirement[cid]]
                owning = set(mutant.observed_by) & set(owners)
                if not owners or owning:
                    problems.append(
                        f"mutant {mutant.name} breaks {rid} on the path of {list(mutant.observed_by)}: "
                        + (
                            f"{sorted(owning)} test {rid} (name them in caught_by)"
                            if owning
                            else "no case tests it"
                        )
                    )
                    continue
                run_level.setdefault(rid, []).append(mutant.name)
                continue
            if not set(mutant.caught_by) & set(by_requirement[rid]):
                problems.append(
                    f"mutant {mutant.name} breaks {rid} but none of its cases {list(mutant.caught_by)} "
                    f"tests {rid}"
                )
                continue
            breakers[rid].append(mutant.name)
    for rid in unobservable:
        if rid in split:
            problems.append(f"conformance/engine/unobservable.py lists {rid}, which is split into conditions")
        elif rid not in ids:
            problems.append(f"conformance/engine/unobservable.py lists {rid}, which the spec does not have")
        elif by_requirement[rid]:
            problems.append(f"{rid} is listed as unobservable but cases {by_requirement[rid]} test it")
    for rid in recorded or {}:
        if rid in split:  # a split clause's cases are those of its conditions
            by_requirement[rid] = [c for cid in split[rid] for c in by_requirement[cid]]
        if not run_level.get(rid) and rid not in (no_run_mutant or {}):
            problems.append(f"{rid} can be seen outside its cases, but no mutant is caught by the run on it")
    rows = []
    for r in requirements:
        reason = unobservable.get(r.id)
        if r.conditions:
            status = "split"  # counted by its conditions, the rows after it
        elif by_requirement[r.id]:
            status = "mutant" if breakers[r.id] else "case"
        else:
            status = "unobservable" if reason else "open"
        row = {
            "id": r.id,
            "section": r.section,
            "level": r.level,
            "keywords": list(r.keywords),
            "text": r.text,
            "cases": by_requirement[r.id],
            "mutants": breakers[r.id],
            "unobservable": reason,
            "no_mutant": no_mutant.get(r.id) if status == "case" else None,
            "status": status,
        }
        if r.sentence:
            row["sentence"] = r.sentence
        if r.conditions:
            row["conditions"] = list(r.conditions)
        rows.append(row)
    gaps = [
        f"{row['id']}: {'no case' if row['status'] == 'open' else 'no mutant'}"
        for row in rows
        if row["level"] == "MUST" and row["status"] in ("open", "case") and not row["no_mutant"]
    ]
    return {
        "generated_by": COMMAND,
        "spec": SPEC,
        "counts": _counts(rows),
        "requirements": rows,
        "mutants": {m.name: _mutant_row(m, by_requirement, (isolation or {}).get(m.name)) for m in mutants},
        "observed_outside": {
            rid: {
                "cases": by_requirement.get(rid, []),
                "run_mutants": run_level.get(rid, []),
                "no_run_mutant": None if run_level.get(rid) else (no_run_mutant or {}).get(rid),
            }
            for rid in sorted(recorded or {}, key=_id_order)
        },
        "sections": {s: t for s, t in (titles or {}).items() if "." not in s},
        "retired": dict(sorted((retired or {}).items())),
        "problems": problems,
        "gaps": gaps,
    }


def _mutant_row(
    mutant: MutantInfo, by_requirement: Mapping[str, list[str]], recorded: Mapping[str, Any] | None
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "breaks": mutant.breaks,
        "requirements": list(mutant.requirements),
        "caught_by": list(mutant.caught_by),
    }
    if mutant.observed_by:
        row["observed_by"] = list(mutant.observed_by)
    if recorded is None or recorded.get("row") != mutant.row:
        row["isolation"] = None  # not recorded for this row: python -m conformance.mutants.teeth --isolation
        return row
    family = {case for rid in mutant.requirements for case in by_requirement.get(rid, ())}
    failed = list(recorded["failed"])
    row["isolation"] = {
        "failed": len(failed),
        "isolated": set(failed) <= family and bool(failed),
        "outside_family": sorted(set(failed) - family),
    }
    if not mutant.caught_by:  # caught by the run: no case may fail, the run must fail on its clauses
        clauses = list(recorded.get("failed_clauses", []))
        row["isolation"]["failed_clauses"] = clauses
        row["isolation"]["isolated"] = not failed and set(mutant.requirements) <= set(clauses)
    return row


def _id_order(rid: str) -> tuple[Any, ...]:
    section, _, number = rid[1:].partition("-")
    return (tuple(int(n) if n.isdigit() else 10_000 for n in section.split(".")), int(number or 0))


def _counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def by_level(selected: Iterable[dict[str, Any]]) -> dict[str, int]:
        counted = Counter(row["level"] for row in selected)
        return {level: counted[level] for level in _LEVELS}

    units = [r for r in rows if r["status"] != "split"]  # conditions and sentences not split
    return {
        "sentences": sum(1 for r in rows if "sentence" not in r),
        "split": sum(1 for r in rows if r["status"] == "split"),
        "conditions": len(units),
        "by_level": by_level(units),
        "with_cases": by_level(r for r in units if r["cases"]),
        "with_mutant": by_level(r for r in units if r["mutants"]),
        "unobservable": by_level(r for r in units if r["status"] == "unobservable"),
        "open": by_level(r for r in units if r["status"] == "open"),
    }


def summary(data: Mapping[str, Any]) -> list[str]:
    """The counts as lines of text (what the command prints and MATRIX.md starts with)."""
    c = data["counts"]

    def levels(key: str) -> str:
        return ", ".join(f"{c[key][level]} {level}" for level in _LEVELS)

    def total(key: str) -> int:
        return sum(c[key].values())

    return [
        f"{c['sentences']} normative sentences, {c['split']} of them split into conditions: "
        f"{c['conditions']} conditions ({levels('by_level')}), counting a sentence not split as one",
        f"{total('with_cases')} covered by cases ({levels('with_cases')})",
        f"{total('with_mutant')} with a mutant caught by their cases ({levels('with_mutant')})",
        f"{total('unobservable')} not observable by a client, with the reason ({levels('unobservable')})",
        f"{total('open')} without case or reason ({levels('open')})",
        f"{len(data['gaps'])} observable MUST conditions without a case or mutant; "
        f"{len(data['problems'])} problems",
        _isolation_line(data["mutants"]),
    ]


def _isolation_line(mutants: Mapping[str, Any]) -> str:
    recorded = [m["isolation"] for m in mutants.values() if m["isolation"] is not None]
    isolated = sum(1 for i in recorded if i["isolated"])  # a mutant caught by the run: no case FAILED
    return (
        f"{len(mutants)} mutants; under the whole suite {len(recorded)} recorded, {isolated} fail only the "
        f"cases of the requirements they break ({len(mutants) - len(recorded)} not recorded)"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(data: Mapping[str, Any]) -> str:
    """MATRIX.md: the summary, then one table per top-level section of the spec."""
    lines = [
        "# Requirements traceability matrix",
        "",
        f"Generated by `{COMMAND}` from [`{SPEC}`](../{SPEC}), the cases' `requirements`, the mutant",
        "table ([`conformance/mutants/`](mutants/)) and "
        "[`conformance/engine/unobservable.py`](engine/unobservable.py).",
        "Do not edit: run the command. Ids are the tags at the end of each sentence in the spec; they never",
        "change.",
        "",
        *(f"- {line}" for line in summary(data)),
        "",
        "Status: **mutant** = cases test it and a one-defect mutant is caught by them; **case** = cases, no",
        "mutant yet; **unobservable** = no client can see it (reason given); **open** = nothing yet;",
        "**split** = a sentence with several conditions, each its own row after it (`R4.2-2a`, spec §1.2):",
        "the conditions are what is counted, cited and broken.",
        "",
    ]
    if data["gaps"] or data["problems"]:
        lines += ["## To do", ""]
        lines += [f"- gap: {g}" for g in data["gaps"]]
        lines += [f"- problem: {p}" for p in data["problems"]]
        lines.append("")
    current = None
    for row in data["requirements"]:
        top = row["section"].split(".")[0]
        if top != current:
            current = top
            title = data["sections"].get(top, "")
            lines += ["", f"## §{top} {title}".rstrip(), ""]
            lines += ["| Id | Level | Sentence | Cases | Mutants | Status |", "|---|---|---|---|---|---|"]
        note = row["status"]
        if row["status"] == "split":
            note = f"split: {', '.join(row['conditions'])}"
        elif row["status"] == "unobservable":
            note = f"unobservable: {row['unobservable']}"
        elif row["no_mutant"]:
            note = f"case; no mutant: {row['no_mutant']}"
        text = f"↳ {row['text']}" if "sentence" in row else row["text"]
        lines.append(
            f"| {row['id']} | {row['level']} | {_cell(text)} | {', '.join(row['cases'])} | "
            f"{', '.join(row['mutants'])} | {_cell(note)} |"
        )
    lines += [
        "",
        "## Mutants",
        "",
        "| Mutant | Breaks | Requirements | Caught by | Whole suite |",
        "|---|---|---|---|---|",
    ]
    for name, m in data["mutants"].items():
        iso = m["isolation"]
        if iso is None:
            whole = "not recorded"
        elif "failed_clauses" in iso:
            clauses = ", ".join(iso["failed_clauses"]) or "none"
            whole = f"{iso['failed']} FAILED; the run fails on {clauses}"
        elif iso["isolated"]:
            whole = f"only its cases ({iso['failed']} FAILED)"
        else:
            outside = ", ".join(iso["outside_family"][:8]) + (
                " ..." if len(iso["outside_family"]) > 8 else ""
            )
            whole = f"{iso['failed']} FAILED, {len(iso['outside_family'])} outside its cases: {outside}"
        caught = ", ".join(m["caught_by"])
        if not caught and m.get("observed_by"):
            caught = f"the run (FAILED clause), seen in {', '.join(m['observed_by'])}"
        lines.append(
            f"| {name} | {_cell(m['breaks'])} | {', '.join(m['requirements'])} | {caught} | {_cell(whole)} |"
        )
    if data.get("observed_outside"):
        lines += [
            "",
            "## Findings outside their own cases",
            "",
            "The clauses a finding can be recorded on in any case (the observer's rules, how a session ends, "
            "the checks",
            "that do not stop a case). Seen in a case that does not own it, a finding is a note on that case "
            "and fails",
            "the run on its clause; each mutant here breaks the clause only on a path its own cases do not "
            "take.",
            "",
            "| Clause | Its cases | Mutants caught by the run |",
            "|---|---|---|",
        ]
        for rid, row in data["observed_outside"].items():
            mutants = ", ".join(row["run_mutants"]) or f"none: {_cell(row['no_run_mutant'] or '?')}"
            lines.append(f"| {rid} | {', '.join(row['cases']) or 'none'} | {mutants} |")
    if data.get("kills"):
        lines += ["", *kills.markdown(data["kills"])]
    if data["retired"]:
        lines += ["", "## Retired ids (never reused)", ""]
        lines += [f"- {rid}: {_cell(text)}" for rid, text in data["retired"].items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Generated:
    """What the command writes: the tagged spec and both matrix files, and the ids it assigned."""

    spec: str
    matrix_json: str
    matrix_md: str
    assigned: list[str]
    data: dict[str, Any]


def _mutant_infos() -> list[MutantInfo]:
    from conformance.mutants import MUTANTS
    from conformance.mutants.teeth import row_fingerprint

    return [
        MutantInfo(
            m.name,
            m.breaks,
            tuple(m.requirements),
            tuple(m.caught_by),
            row_fingerprint(m),
            tuple(m.observed_by),
        )
        for m in MUTANTS.values()
        if m.caught_by or m.observed_by
    ]


def _isolation(root: Path) -> dict[str, Any]:
    path = root / ISOLATION
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")).get("mutants", {}))
    except ValueError:
        return {}


def generate(root: Path = REPO_ROOT) -> Generated:
    """Tag the spec and build the matrix from the files under ``root`` (nothing is written).

    Raises:
        ValueError: the spec is still inconsistent after tagging (a tagged sentence without a key word).
    """
    from conformance.engine.case import catalogue
    from conformance.engine.clauses import recorded
    from conformance.engine.unobservable import NO_MUTANT, NO_RUN_MUTANT, UNOBSERVABLE

    previous: dict[str, Any] = {}
    json_path = root / MATRIX_JSON
    if json_path.exists():
        try:
            previous = json.loads(json_path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}  # a merge conflict left markers: the spec's tags are the truth
    known = {row["id"]: row["text"] for row in previous.get("requirements", [])}
    retired = dict(previous.get("retired", {}))
    spec_text = (root / SPEC).read_text(encoding="utf-8")
    tagged, assigned = tag(spec_text, retired=[*retired, *known], known=known)
    requirements = parse(tagged)
    current = {r.id for r in requirements}
    retired.update({rid: text for rid, text in known.items() if rid not in current})
    # An id back in the spec (a branch merged after a matrix that lacked it) is live again, not retired.
    retired = {rid: text for rid, text in retired.items() if rid not in current}
    data = build(
        requirements,
        catalogue(),
        _mutant_infos(),
        UNOBSERVABLE,
        retired=retired,
        titles=section_titles(tagged),
        isolation=_isolation(root),
        no_mutant=NO_MUTANT,
        recorded=recorded(),
        no_run_mutant=NO_RUN_MUTANT,
    )
    data["kills"] = kills.by_case([case.id for case in catalogue()], root)  # per case: the mutants it kills
    return Generated(
        tagged, json.dumps(data, indent=1, ensure_ascii=False) + "\n", markdown(data), assigned, data
    )


def stale(root: Path = REPO_ROOT) -> list[str]:
    """What ``COMMAND`` would change under ``root``: one line per file (empty when all is current)."""
    generated = generate(root)
    out = []
    if generated.assigned:
        out.append(f"{SPEC}: untagged normative sentences would get {', '.join(generated.assigned)}")
    elif generated.spec != (root / SPEC).read_text(encoding="utf-8"):
        out.append(f"{SPEC}: a requirement id is used twice")
    for name, text in ((MATRIX_JSON, generated.matrix_json), (MATRIX_MD, generated.matrix_md)):
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(f"{name} is stale")
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything is stale")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the repository root")
    args = parser.parse_args(argv)
    if not (args.root / SPEC).exists():
        print(f"{args.root / SPEC} not found: run from a source checkout", file=sys.stderr)
        return 2
    if args.check:
        problems = stale(args.root)
        for line in problems:
            print(line)
        if problems:
            print(f"run `{COMMAND}` and commit the result", file=sys.stderr)
        gaps = generate(args.root).data["gaps"]
        if gaps:  # the target is none; reported, not (yet) a failure of the check
            print(
                f"{len(gaps)} observable MUST conditions without a case and a mutant that proves it: "
                + ", ".join(gaps),
                file=sys.stderr,
            )
        return 1 if problems else 0
    generated = generate(args.root)
    for name, text in (
        (SPEC, generated.spec),
        (MATRIX_JSON, generated.matrix_json),
        (MATRIX_MD, generated.matrix_md),
    ):
        path = args.root / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {name}")
    if generated.assigned:
        print(f"assigned {len(generated.assigned)} ids: {', '.join(generated.assigned)}")
    for line in summary(generated.data):
        print(line)
    return 0

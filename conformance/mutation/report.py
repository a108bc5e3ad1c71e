"""The mutation report: the score per module, the survivors with their diffs, and their triage.

``survivors.toml`` (checked in beside this module) triages surviving mutants, one ``[[survivor]]`` each,
found by the function they change and the change itself (mutmut's numbers move when a function changes;
the change does not)::

    [[survivor]]
    function = "protocol/server_session.py ServerSession.fail"
    change = '''
    -        error = ErrorFrame(code=ErrorCode.INTERNAL_ERROR, message=message, request_id=request_id, ...)
    +        error = ErrorFrame(code=ErrorCode.INTERNAL_ERROR, message=message, ...)'''
    status = "unobservable"   # a defect, but no client can make a conforming server take that path
    reason = "the error frame of a failed synthesis: no request makes a conforming server fail"

``status`` is ``equivalent`` (no defect a client could see; ``reason`` says why), ``unobservable`` (a
defect on a path no black-box client can make a conforming server take; ``reason``) or ``killed`` (by
``case``, a case added since). ``python -m conformance.mutation`` prints a block to fill in for each
survivor it finds untriaged.

The score of a module is ``killed / (mutants run - equivalent - unobservable)``: an equivalent mutant is no
defect, an unobservable one is a defect no black-box client can provoke (counted apart, as the matrix counts
unobservable requirements), and a survivor that is not triaged is a gap of the suite. A mutant triaged
``killed`` that survives a run is a lost catch and is reported as such.
"""

from __future__ import annotations

import html
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.mutation import SURVIVORS
from conformance.mutation.runner import Outcome
from conformance.mutation.tree import Mutant

__all__ = [
    "Triage",
    "TriageError",
    "change_of",
    "load_triage",
    "summarize",
    "toml_entry",
    "triage_key",
    "write",
]

STATUSES = ("equivalent", "unobservable", "killed")

TriageKey = tuple[str, str]
"""``("path function", change)``: what a triage entry and a mutant are matched by."""


class TriageError(ValueError):
    """``survivors.toml`` is not valid: the message names the entry."""


@dataclass(frozen=True, slots=True)
class Triage:
    """One survivor's triage: ``equivalent`` or ``unobservable`` with its ``reason``, or ``killed`` by
    ``case``."""

    status: str
    reason: str = ""
    case: str = ""


def change_of(diff: str) -> str:
    """The lines a unified diff removes and adds (``-``/``+``, headers left out), right-trimmed."""
    lines = diff.splitlines()
    kept = [line.rstrip() for line in lines if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    return "\n".join(kept)


def triage_key(mutant: Mutant) -> TriageKey:
    """What a mutant is triaged by: its file and function, and its change (:func:`change_of`)."""
    return f"{mutant.path} {mutant.function}", change_of(mutant.diff)


def toml_entry(mutant: Mutant) -> str:
    """A ``[[survivor]]`` block for ``mutant`` whose ``status`` and ``reason`` are left to fill in (the change
    as a TOML literal string: no escapes)."""
    where, change = triage_key(mutant)
    return (
        f"[[survivor]]\nfunction = \"{where}\"\nchange = '''\n{change}'''\n"
        'status = "equivalent | unobservable | killed"\nreason = ""\n'
    )


def load_triage(path: Path = SURVIVORS) -> dict[TriageKey, Triage]:
    """The triage file (module docstring); a missing file is an empty triage.

    Raises:
        TriageError: not TOML, or an entry without ``function`` and ``change``, without a known ``status``,
            an ``equivalent`` or ``unobservable`` one without a ``reason`` or a ``killed`` one without a
            ``case``, or two entries for the same change.
    """
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TriageError(f"{path}: {exc}") from None
    found: dict[TriageKey, Triage] = {}
    for number, entry in enumerate(data.get("survivor", []), 1):
        where, change = entry.get("function"), entry.get("change")
        name = f"survivor {number} ({where})"
        if not isinstance(where, str) or not isinstance(change, str) or not change.strip():
            raise TriageError(f"{path}: {name}: needs function and change")
        status = entry.get("status")
        if status not in STATUSES:
            raise TriageError(f"{path}: {name}: status must be one of {', '.join(STATUSES)}")
        if status != "killed" and not str(entry.get("reason", "")).strip():
            raise TriageError(f"{path}: {name}: an {status} mutant needs a reason")
        if status == "killed" and not str(entry.get("case", "")).strip():
            raise TriageError(f"{path}: {name}: a killed mutant names the case that kills it")
        key = (where, change_of(change))
        if key in found:
            raise TriageError(f"{path}: {name}: the same change is triaged twice")
        found[key] = Triage(status, str(entry.get("reason", "")), str(entry.get("case", "")))
    return found


def summarize(
    mutants: Sequence[Mutant],
    outcomes: Sequence[Outcome],
    triage: Mapping[TriageKey, Triage],
    not_run: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The report's data: per module ``not_run`` (mutants not written: their lines never run in the suite),
    ``mutants`` (written), ``run``, ``killed``, ``survived``, ``equivalent``, ``unobservable``, ``untriaged``,
    ``lost`` (triaged killed, survived now), ``errors`` and ``score`` (``None`` when nothing was judged);
    per mutant its outcome, function, line, diff and triage; ``not_run``, the functions with mutants not
    written, by module."""
    by_name = {m.name: m for m in mutants}
    not_run = not_run or {}
    modules: dict[str, dict[str, Any]] = {
        path: {"not_run": sum(not_run.get(path, {}).values()), "mutants": 0}
        for path in sorted({m.path for m in mutants} | set(not_run))
    }
    for mutant in mutants:
        modules[mutant.path]["mutants"] += 1
    keys = ("run", "killed", "survived", "equivalent", "unobservable", "untriaged", "lost", "errors")
    for row in modules.values():
        row.update(dict.fromkeys(keys, 0))
    entries = {}
    for outcome in outcomes:
        if outcome.name is None or outcome.name not in by_name:
            continue
        mutant = by_name[outcome.name]
        row = modules[mutant.path]
        row["run"] += 1
        known = triage.get(triage_key(mutant))
        if outcome.killed:
            row["killed"] += 1
        elif outcome.status == "error":
            row["errors"] += 1
        else:
            row["survived"] += 1
            if known is None:
                row["untriaged"] += 1
            elif known.status in ("equivalent", "unobservable"):
                row[known.status] += 1
            else:
                row["lost"] += 1
        entries[mutant.name] = {
            "path": mutant.path,
            "function": mutant.function,
            "line": mutant.line,
            "status": outcome.status,
            "killed_by": list(outcome.killed_by),
            "seconds": round(outcome.seconds, 1),
            "diff": mutant.diff,
            "triage": None
            if known is None
            else {"status": known.status, "reason": known.reason, "case": known.case},
            "detail": outcome.detail[-1500:],
        }
    for row in modules.values():
        judged = row["run"] - row["equivalent"] - row["unobservable"] - row["errors"]
        row["score"] = round(row["killed"] / judged, 4) if judged else None
    return {"modules": modules, "mutants": entries, "not_run": {p: dict(f) for p, f in not_run.items()}}


_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; color: #101828; margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 64px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #eaecf0; vertical-align: top; }
th { font-size: 12px; text-transform: uppercase; color: #475467; }
td.num { text-align: right; } .meta { color: #475467; font-size: 13px; }
pre { background: #f9fafb; border: 1px solid #eaecf0; border-radius: 8px; padding: 8px 10px;
  font: 12px/1.45 ui-monospace, Menlo, monospace; overflow-x: auto; margin: 6px 0 0; }
.survived { color: #b42318; font-weight: 600; } .killed { color: #067647; } .equivalent { color: #475467; }
"""


COLUMNS = (
    "not_run",
    "mutants",
    "run",
    "killed",
    "survived",
    "equivalent",
    "unobservable",
    "untriaged",
    "lost",
    "errors",
)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html(report: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(path)}</td>"
        + "".join(f'<td class="num">{_e(row[k])}</td>' for k in COLUMNS)
        + f'<td class="num">{"-" if row["score"] is None else f"{row['score']:.0%}"}</td></tr>'
        for path, row in sorted(report["modules"].items())
    )
    heads = "".join(f"<th>{h}</th>" for h in ("module", *COLUMNS, "score"))
    survivors = []
    for name, entry in sorted(report["mutants"].items()):
        if entry["status"] in ("survived", "error"):
            triage = entry["triage"]
            label = "untriaged" if triage is None else triage["status"]
            note = "" if triage is None else f" ({_e(triage['reason'] or triage['case'])})"
            css = "equivalent" if label in ("equivalent", "unobservable") else "survived"
            survivors.append(
                f'<h3 class="{css}">{_e(name)}: {_e(entry["status"])}, {_e(label)}{note}</h3>'
                f'<p class="meta">{_e(entry["path"])}:{entry["line"]} {_e(entry["function"])}</p>'
                f"<pre>{_e(entry['diff'])}</pre>"
            )
    killed = sum(1 for e in report["mutants"].values() if e["status"] not in ("survived", "error"))
    body = (
        f"<h1>Mutation testing of the shipped server</h1><p class='meta'>{_e(report['tool'])}; "
        f"{_e(report['run'])} mutant(s) run of {_e(report['generated'])}"
        f"{'' if report['sample'] is None else f' (a sample, seed {report["seed"]})'}; {killed} killed; "
        f"{_e(report['seconds'])} s</p><table><tr>{heads}</tr>{rows}</table>"
        f"<h2>Survivors</h2>{''.join(survivors) or '<p>none</p>'}"
        "<h2>Not run by the suite</h2><p class='meta'>Functions with lines no case makes the server run "
        "(client-side code, or server paths no case reaches): their mutants were not written.</p>"
        + "".join(
            f"<h3>{_e(path)}</h3><p class='meta'>"
            + ", ".join(f"{_e(function)} ({n})" for function, n in functions.items())
            + "</p>"
            for path, functions in sorted(report.get("not_run", {}).items())
            if functions
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Mutation testing</title>'
        f"<style>{_CSS}</style></head><body><main>{body}</main></body></html>\n"
    )


def write(directory: Path, report: Mapping[str, Any]) -> Path:
    """Write ``index.json`` and ``index.html`` of ``report`` into ``directory``; the HTML's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "index.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    page = directory / "index.html"
    page.write_text(_html(report), encoding="utf-8")
    return page

"""The mutation report: the score per module, the survivors with their diffs, and their triage.

``survivors.toml`` (checked in beside this module) triages surviving mutants, one table each::

    [mutants."protocol.frames.x__detect__mutmut_2"]
    status = "equivalent"          # no spec sentence constrains what it changes
    reason = "the BOM check reads the same 4 bytes either way"

    [mutants."protocol.session.xǁServerSessionǁfail__mutmut_14"]
    status = "unobservable"        # a defect, but no client can make a conforming server take that path
    reason = "the error frame of a failed synthesis: no request makes the server fail"

    [mutants."protocol.session.xǁServerSessionǁcancel__mutmut_7"]
    status = "killed"              # a case added since kills it
    case = "4.2.9"

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

__all__ = ["Triage", "TriageError", "load_triage", "summarize", "write"]

STATUSES = ("equivalent", "unobservable", "killed")


class TriageError(ValueError):
    """``survivors.toml`` is not valid: the message names the entry."""


@dataclass(frozen=True, slots=True)
class Triage:
    """One survivor's triage: ``equivalent`` with its ``reason``, or ``killed`` by ``case``."""

    status: str
    reason: str = ""
    case: str = ""


def load_triage(path: Path = SURVIVORS) -> dict[str, Triage]:
    """The triage file (module docstring); a missing file is an empty triage.

    Raises:
        TriageError: not TOML, or an entry without a known ``status``, an ``equivalent`` or
            ``unobservable`` one without a ``reason`` or a ``killed`` one without a ``case``.
    """
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TriageError(f"{path}: {exc}") from None
    found = {}
    for name, entry in data.get("mutants", {}).items():
        status = entry.get("status") if isinstance(entry, dict) else None
        if status not in STATUSES:
            raise TriageError(f"{path}: mutant {name!r}: status must be one of {', '.join(STATUSES)}")
        if status != "killed" and not str(entry.get("reason", "")).strip():
            raise TriageError(f"{path}: mutant {name!r}: an {status} mutant needs a reason")
        if status == "killed" and not str(entry.get("case", "")).strip():
            raise TriageError(f"{path}: mutant {name!r}: a killed mutant names the case that kills it")
        found[name] = Triage(status, str(entry.get("reason", "")), str(entry.get("case", "")))
    return found


def summarize(
    mutants: Sequence[Mutant], outcomes: Sequence[Outcome], triage: Mapping[str, Triage]
) -> dict[str, Any]:
    """The report's data: per module ``mutants`` (generated), ``run``, ``killed``, ``survived``,
    ``equivalent``, ``unobservable``, ``untriaged``, ``lost`` (triaged killed, survived now), ``errors`` and
    ``score``
    (``None`` when nothing non-equivalent ran); per mutant its outcome, function, line, diff and triage."""
    by_name = {m.name: m for m in mutants}
    modules: dict[str, dict[str, Any]] = {}
    for mutant in mutants:
        modules.setdefault(mutant.path, {"mutants": 0})["mutants"] += 1
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
        known = triage.get(mutant.name)
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
    return {"modules": modules, "mutants": entries}


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
